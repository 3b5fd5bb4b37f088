"""reports/index.md's first table: the model-left-out split is the headline row, each split's own figures."""

from __future__ import annotations

from pathlib import Path

from opcost.paths import Paths
from opcost.validate.report import write_index


def _err(mape: float) -> dict:
    return {"networks": 18, "time": {"mape_pct": mape, "mdape_pct": mape - 1, "weighted_pct": mape + 1},
            "energy": {"mape_pct": mape + 2}}  # fmt: skip


def test_index_lists_model_then_family_then_network_with_their_figures(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    metrics = {
        "out_of_sample": {"T/network": _err(7.0), "T/model": _err(5.0), "T/family": _err(11.0)},
        "summed_vs_measured": {},
        "predicted_in_sample": {},
    }
    write_index(Paths(tmp_path), [], metrics)
    rows = [r for r in (tmp_path / "reports" / "index.md").read_text().splitlines() if r.startswith("| predicted")]
    assert [r.split("|")[1].strip().split(" (")[0] for r in rows] == [
        "predicted, model left out", "predicted, family left out", "predicted, network left out",
    ]  # fmt: skip
    assert rows[0].split("|")[4:8] == [" 5.0 ", " 4.0 ", " 6.0 ", " 7.0 "]
    assert rows[1].split("|")[4].strip() == "11.0" and rows[2].split("|")[4].strip() == "7.0"
