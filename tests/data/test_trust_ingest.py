"""Issue 24.4 and 23's thesis-line arithmetic: impossible measurements are refused where they enter.

The lines are the real first lines of data/external/nicolai-thesis/ops/inference/A30.log (thesis
logs, see data/external/README.md), then damaged the ways the break-it test found: cut short, a
time of 1e300 s, CR-only line endings, a whole source of bad lines, a symbolic link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders import A30_CONV_LINE, A30_RELU_LINE
from opcost.data.textfile import read_lines
from opcost.data.thesis import parse_op_log
from opcost.errors import OpcostError
from opcost.params.ingest import IngestParams, IngestSource
from opcost.stages.ingest import run as run_ingest_stage


def _log(tmp_path: Path, lines: list[str], sep: str = "\n") -> Path:
    f = tmp_path / "A30.log"
    f.write_bytes((sep.join(lines) + sep).encode())
    return f


def test_a_line_cut_7_characters_short_is_rejected_as_inconsistent(tmp_path):
    cut = A30_CONV_LINE[:-7]
    assert cut.endswith(" 5.391090115417")  # sigma_t now reads 5.39 s for t = 0.336 ms
    res = parse_op_log(_log(tmp_path, [A30_CONV_LINE, cut, A30_RELU_LINE]), "A30.log", "A30", "inference", {})
    assert [r["line"] for r in res.rows] == [1, 3]
    assert [(r["line"], r["reason"]) for r in res.rejects] == [(2, "inconsistent")]
    assert "sigma_t = 5.39109 s exceeds t x sqrt(iterations)" in res.rejects[0]["message"]


@pytest.mark.parametrize(
    "old, new, what",
    [
        (" 57950 ", " 5795 ", "total runtime = 19.4622 disagrees with iterations x t"),  # a digit lost
        (" 55.32621974426894 ", " 5.532621974426894 ", "e = 0.00553262 disagrees with P x t"),
    ],
)
def test_a_line_that_disagrees_with_its_own_arithmetic_is_rejected(tmp_path, old, new, what):
    res = parse_op_log(_log(tmp_path, [A30_CONV_LINE.replace(old, new)]), "A30.log", "A30", "inference", {})
    assert not res.rows and res.rejects[0]["reason"] == "inconsistent"
    assert what in res.rejects[0]["message"]


def test_an_impossible_time_is_refused_at_ingest(tmp_path):
    """1e300 s per iteration is finite and positive; it used to pass ingest and evaluate and crash
    XGBoost in train."""
    huge = A30_CONV_LINE.replace("0.0003358443377730762", "1e300").replace("19.462179373949766", "5.795e304")
    res = parse_op_log(_log(tmp_path, [huge, A30_RELU_LINE]), "A30.log", "A30", "inference", {})
    assert [r["line"] for r in res.rows] == [2]
    assert res.rejects[0]["reason"] == "out_of_range" and "t_s = 1e+300, above its maximum" in res.rejects[0]["message"]


def test_cr_only_line_endings_are_lines(tmp_path):
    f = _log(tmp_path, [A30_CONV_LINE, A30_RELU_LINE], sep="\r")
    assert [ln.number for ln in read_lines(f, "thesis log")] == [1, 2]
    res = parse_op_log(f, "A30.log", "A30", "inference", {})
    assert len(res.rows) == 2 and not res.rejects


def _project(tmp_path: Path, lines: list[str]) -> tuple:
    from opcost.paths import Paths

    d = tmp_path / "data" / "external" / "thesis" / "ops" / "inference"
    d.mkdir(parents=True)
    (d / "A30.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")

    class P:  # the one part of Params the ingest stage reads
        ingest = IngestParams({"thesis": IngestSource("thesis", "data/external/thesis", "thesis-logs")})

    return Paths(tmp_path), P()


def test_a_source_whose_every_line_is_rejected_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    paths, params = _project(tmp_path, [A30_CONV_LINE[:-7], A30_RELU_LINE.replace(" 1558640 ", " 155864 ")])
    with pytest.raises(OpcostError) as e:
        run_ingest_stage(paths, params, "thesis")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("data/external/thesis: every one of its 2 data lines was rejected (inconsistent 2;")
    assert msg.endswith("nothing written")
    assert not paths.ingested_dir("thesis").exists()


def test_a_symlink_inside_data_external_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    paths, params = _project(tmp_path, [A30_CONV_LINE])
    secret = tmp_path / "elsewhere.log"
    secret.write_text(A30_RELU_LINE + "\n")
    log = tmp_path / "data" / "external" / "thesis" / "ops" / "inference" / "RTX2080Ti.log"
    os.symlink(secret, log)
    with pytest.raises(OpcostError, match=r"RTX2080Ti.log is a symbolic link; .* refused"):
        run_ingest_stage(paths, params, "thesis")
    assert not paths.ingested_dir("thesis").exists()


@pytest.mark.parametrize("col, value", [("mean_s", 1e300), ("median_s", 1e-300), ("window_energy_j", 1e300)])
def test_campaign_tables_refuse_impossible_values(col, value):
    """A campaign's raw tables (read by evaluate through TIMINGS.validate) hold the same bounds: a
    1e300 s time or a 1e300 J energy is a corrupted number, refused before it reaches train."""
    import pandas as pd

    from opcost.schemas import TIMINGS, SchemaError, _check_column

    assert TIMINGS.row_problem({col: value})[0] == "out_of_range"
    column = next(c for c in TIMINGS.columns if c.name == col)
    with pytest.raises(SchemaError, match=col):
        _check_column("timings", column, pd.Series([value]))


def _real_campaign(root: Path, trials: int) -> Path:
    """A real (tiny) CPU campaign against a fake NVML card drawing a steady known power (as in
    test_known_measurements), written where the evaluate stage reads campaigns (data/raw/<name>/)."""
    from builders import CONV as CONV_SPEC
    from builders import WATTS, steady_trace
    from fake_nvml import FakeNvml
    from opcost.measure.campaign import Campaign, Unit, make_plan
    from opcost.params.profile import CampaignParams

    c = CampaignParams(name="k", device="cpu", modes=("inference",), sets=("x",), networks=False, trials=trials,
                       min_time_s=0.01, window_s=0.2, energy_source="nvml", sample_interval_s=0.01,
                       max_instances=4, instance_budget_mb=8)  # fmt: skip
    plan = make_plan(c, [Unit("op", CONV_SPEC.op_id, "inference", CONV_SPEC.kind, spec=CONV_SPEC)])
    out = root / "data" / "raw" / "k"
    Campaign(plan, out, root / "parts", state_dir=root / "state", nvml_lib=FakeNvml(trace=steady_trace(WATTS))).run(
        show_progress=False
    )
    return out


def test_impossible_campaign_rows_are_refused_counted_and_the_rest_evaluated(tmp_path):
    """A campaign's timings.parquet with one negative time and one infinite energy (a corrupted file):
    evaluate refuses those two rows, counts them by reason, and evaluates the trial that is left; with
    every row corrupted, the campaign is one line naming it."""
    import pandas as pd

    from opcost.data.evaluate import campaign_frames, reject_summary
    from opcost.paths import Paths
    from opcost.stages.evaluate import summary

    out = _real_campaign(tmp_path, trials=3)
    t = pd.read_parquet(out / "timings.parquet")
    assert len(t) == 3 and (t["status"] == "ok").all()
    t.loc[0, "mean_s"] = -t.loc[0, "mean_s"]
    t.loc[1, "window_energy_j"] = float("inf")
    t.to_parquet(out / "timings.parquet")

    refused: dict = {}
    ops, _, _ = campaign_frames(Paths(tmp_path), refused)
    assert len(ops) == 1 and ops.iloc[0]["n_trials"] == 1  # the one sound trial
    assert ops.iloc[0]["t_s"] == pytest.approx(t.loc[2, "mean_s"], rel=1e-12)
    assert [(r["row"], r["reason"]) for r in refused["k"]] == [(0, "out_of_range"), (1, "bad_number")]
    counted = reject_summary(refused)["k"]
    assert counted["rejected_rows"] == 2
    assert counted["rejected_by_reason"]["out_of_range"] == 1 and counted["rejected_by_reason"]["bad_number"] == 1
    line = summary({"operation_rows": 1, "network_rows": 0, "sweep_rows": 0, "target_rows": {},
                    "mean_flops_share": None, "campaign_rejects": reject_summary(refused)})  # fmt: skip
    assert "\n" not in line and "campaign k: 2 row(s) refused (bad_number 1, out_of_range 1" in line

    t.loc[2, "mean_s"] = 1e300  # beyond TIME_RANGE_S
    t.to_parquet(out / "timings.parquet")
    with pytest.raises(OpcostError, match=r"campaign k: all 3 rows of .* refused .*mean_s = -"):
        campaign_frames(Paths(tmp_path))
