"""Issue 21's goals table: known-answer reports in, the right figures and verdicts out."""

from __future__ import annotations

import json
from pathlib import Path

from opcost.validate import goals


def _scores(mape: float, twe: float, n: int = 10) -> dict[str, float]:
    return {"mape": mape, "twe": twe, "mdape": mape / 2, "r2": 0.9, "n": n}


def _target(chosen: str, family: tuple[float, float], grouped: tuple[float, float], networks: dict | None = None):
    learner, _, fs = chosen.partition("-")
    other = {"family": _scores(0.99, 0.99), "grouped": _scores(0.99, 0.99)}  # a learner not chosen: never read
    ops = {learner: {fs: {"family": _scores(*family), "grouped": _scores(*grouped, n=128)}, "decoy": other},
           "decoy": {fs: other}}  # fmt: skip
    return {"chosen": {"time": chosen, "power": "rf-improved"}, "ops": {"time": ops},
            "networks": networks or {"model": {"networks": 0}}}  # fmt: skip


def _nets(t: float, e: float, cov: tuple[float, float], fam_cov: tuple[float, float]) -> dict:
    def iv(c: tuple[float, float]) -> dict:
        return {"time": {"coverage_pct": c[0], "median_width_pct": 30.0},
                "energy": {"coverage_pct": c[1], "median_width_pct": 40.0}}  # fmt: skip

    return {"model": {"networks": 18, "time": {"mape_pct": t}, "energy": {"mape_pct": e}, "interval": iv(cov)},
            "family": {"networks": 18, "time": {"mape_pct": 20.0}, "energy": {"mape_pct": 20.0},
                       "interval": iv(fam_cov)}}  # fmt: skip


def test_op_rows_read_the_chosen_learner_and_judge_both_measures() -> None:
    targets = {
        "A30-inference": _target("xgb-physical", (0.12, 0.16), (0.05, 0.05)),  # twe misses
        "RTX2080Ti-inference": _target("rf-improved", (0.139, 0.135), (0.05, 0.05)),  # both met
        "RTX2080Ti-training": _target("xgb-improved", (0.1504, 0.10), (0.093, 0.09)),  # MAPE misses by 0.04
    }
    rows = {(r["figure"][:7], r["scope"]): r for r in goals.op_rows(targets)}
    a30 = rows[("op time", "A30-inference")]
    assert (a30["now"], a30["met"]) == ("12.0 / 16.0", False)
    assert a30["at_filing"].startswith("21.1 / ")
    assert rows[("op time", "RTX2080Ti-inference")]["met"] is True
    rtx_op = rows[("op time", "RTX2080Ti-training")]
    assert (rtx_op["now"], rtx_op["met"]) == ("15.04 / 10.0", False)  # a miss is never printed as the bound
    rtx = rows[("RTX 208", "RTX2080Ti-training")]
    assert (rtx["now"], rtx["at_filing"], rtx["met"]) == ("9.3 (n = 128)", "50.2", True)


def test_network_rows_skip_targets_without_networks_and_use_the_mode_goal() -> None:
    targets = {
        "A30-inference": _target("xgb-physical", (0.1, 0.1), (0.1, 0.1), _nets(7.9, 8.1, (90, 90), (100, 89))),
        "A30-training": _target("xgb-physical", (0.1, 0.1), (0.1, 0.1), _nets(11.9, 9.0, (85, 95), (84.9, 90))),
        "RTX2080Ti-training": _target("xgb-improved", (0.1, 0.1), (0.1, 0.1)),  # no measured networks
    }
    rows = goals.network_rows(targets)
    assert {r["scope"] for r in rows} == {"A30-inference", "A30-training"}
    inf = rows[0]  # per target: the error row, then coverage on the model and the family split
    # inference goal 8 % on both: energy 8.1 misses; training goal 12 %: both met
    assert [r["met"] for r in rows if r["scope"] == "A30-inference"] == [False, True, False]
    assert inf["now"] == "7.9 / 8.1"
    assert [r["met"] for r in rows if r["scope"] == "A30-training"] == [True, True, False]
    assert "(30.0 / 40.0)" in rows[1]["now"]


def test_clock_rows_need_both_bounds_and_every_guess_beaten() -> None:
    def gpu(t: float, tg: float, e: float, eg: float) -> dict:
        return {"time_mape": {"model": t, "best_guess": tg, "beats": t < tg},
                "energy_mape": {"model": e, "best_guess": eg, "beats": e < eg}}  # fmt: skip

    clock = {"vs_guesses": {"A": gpu(2.0, 5.0, 3.0, 6.0), "B": gpu(11.0, 12.0, 3.0, 4.0), "C": gpu(9.0, 8.0, 3.0, 4.0)}}
    rows = goals.clock_rows(clock)
    assert [(r["scope"], r["met"]) for r in rows] == [("A", True), ("B", False), ("C", False)]
    assert rows[2]["now"].endswith("a guess wins") and not rows[1]["now"].endswith("a guess wins")


def test_table_counts_and_markdown_from_files(tmp_path: Path) -> None:
    folder = tmp_path / "targets"
    folder.mkdir()
    t = _target("xgb-physical", (0.1, 0.1), (0.1, 0.1), _nets(5.0, 5.0, (90, 90), (90, 90)))
    (folder / "A30-inference.json").write_text(json.dumps({"A30-inference": t}))
    table = goals.goals(goals.read_targets(folder), {"vs_guesses": {}})
    assert (table["met"], table["rows_total"]) == (4, 4)
    md = goals.markdown(table)
    assert "Met: 4 of 4 rows." in md and md.count("| yes |") == 4
