"""A file's last line without a line end may be cut in its last value and still look whole: it is
taken only where the line's own arithmetic pins that value down, rejected otherwise, and counted in
rejects.parquet.

The lines are real: line 732 of data/external/nicolai-thesis/ops/training/A30.log (its last value
v23, the forward+backward total energy's sigma, is 11.374414850457741 J; the break-it test cut it to
`1`) and lines 1 and 3 of models/training/A30.log. The relation that checks them is the first-order
propagation sigma_E = E x hypot(sigma_P / P, sigma_t / t), which every line of the logs meets.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from opcost.data.textfile import read_lines
from opcost.data.thesis import parse_network_log, parse_op_log
from opcost.params.ingest import IngestParams, IngestSource
from opcost.stages.ingest import run as run_ingest_stage

TRAIN_CONV = (
    "Conv2d(64, 256, kernel_size=(1, 1), stride=(1, 1), bias=False) (32, 64, 56, 56) 0.00018906611366400382 "
    "31.116477795077998 0.007524827541694208 0.41208028141175235 118268 22.360471130814403 164.57987733527017 "
    "2.178614459856566 920.0208989670712 12.183977680501282 0.00023735076267460345 2025-02-12_20-37-20 "
    "2025-02-12_20-38-20 7.360871229082554e-08 0.0006551970914562464 8.264158968376122e-08 107.94226185953396 "
    "1.476813145995552 20.185311993584037 164.74777325341998 2.25390253438963 831.3713008421305 11.374414850457741"
)
NET_HEADER = "resnet34 (32, 3, 56, 56)"
NET_LINE = (
    "ResNet (32, 3, 56, 56) 0.012782720230507907 1229.206177354732 0.38169294846683355 36.07261140895908 2512 "
    "32.110193219035864 96.16154896522295 2.258435469081466 19.667298837675713 0.5771617825433453 "
    "0.01286186305732484 2025-02-12_13-17-45 2025-02-12_13-18-17 0.00022492441100340006"
)


def _file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "A30.log"
    f.write_bytes(text.encode())
    return f


def _ops(tmp_path: Path, text: str):
    return parse_op_log(_file(tmp_path, text), "A30.log", "A30", "training", {})


def test_only_a_last_line_without_a_line_end_is_marked(tmp_path):
    lines = read_lines(_file(tmp_path, "a\nb"), "thesis log")
    assert [(ln.number, ln.terminated) for ln in lines] == [(1, True), (2, False)]
    assert all(ln.terminated for ln in read_lines(_file(tmp_path, "a\r\nb\r\n"), "thesis log"))
    assert [ln.terminated for ln in read_lines(_file(tmp_path, "a\rb"), "thesis log")] == [True, False]


def test_the_issues_cut_is_rejected_and_the_whole_line_taken(tmp_path):
    cut = TRAIN_CONV[: -len("1.374414850457741")]
    assert cut.endswith(" 831.3713008421305 1")  # v23: 11.374414850457741 J read as 1 J
    res = _ops(tmp_path, f"{TRAIN_CONV}\n{cut}")
    assert [r["line"] for r in res.rows] == [1, 1]  # the forward and forward+backward rows of line 1
    assert [(r["line"], r["reason"]) for r in res.rejects] == [(2, "inconsistent")]
    msg = res.rejects[0]["message"]
    assert msg.startswith("forward+backward: the file's last line has no line end and its last value v23 = 1 ")
    # sigma_E / E = 1 / 831.3713 = 0.00120283; the propagation, hypot(2.253903 / 164.747773, 8.264e-8 / 6.552e-4)
    # = hypot(0.01368087, 0.00012613) = 0.0136815, is the uncut line's 11.374414850457741 / 831.3713008421305
    assert "sigma_E / E = 0.00120283" in msg and "the propagation gives 0.0136815" in msg

    # the same line whole, without a line end, is taken: its last value is what the relation says
    whole = _ops(tmp_path, TRAIN_CONV)
    assert len(whole.rows) == 2 and not whole.rejects
    assert whole.rows[1]["sigma_total_energy_j"] == 11.374414850457741


@pytest.mark.parametrize("digits", [2, 5, 10, 12])  # 11, 11.37, 11.3744148, 11.374414850
def test_a_last_value_cut_to_fewer_digits_is_rejected(tmp_path, digits):
    head, last = TRAIN_CONV.rsplit(" ", 1)
    res = _ops(tmp_path, f"{head} {last[:digits]}")
    assert not res.rows and res.rejects[0]["reason"] == "inconsistent"


def test_a_network_line_cut_to_a_value_the_relation_cannot_check_is_unterminated(tmp_path):
    """sigma_t cut to 0.0: the relation cannot pin a zero (it no longer moves sigma_E), so it is refused."""
    cut = NET_LINE[: -len("0022492441100340006")]
    assert cut.endswith(" 0.0")
    res = parse_network_log(_file(tmp_path, f"{NET_HEADER}\n{cut}"), "A30.log", "A30", "training")
    assert not res.rows and [(r["line"], r["reason"]) for r in res.rejects] == [(2, "unterminated")]
    assert "last value v14 = 0 cannot be checked" in res.rejects[0]["message"]
    cut4 = NET_LINE[: -len("2492441100340006")]  # 0.0002: sigma_t a tenth short, which the relation sees
    res = parse_network_log(_file(tmp_path, f"{NET_HEADER}\n{cut4}"), "A30.log", "A30", "training")
    assert not res.rows and res.rejects[0]["reason"] == "inconsistent"
    whole = parse_network_log(_file(tmp_path, f"{NET_HEADER}\n{NET_LINE}"), "A30.log", "A30", "training")
    assert len(whole.rows) == 1 and not whole.rejects


def test_the_ingest_stage_counts_the_cut_line_in_rejects_parquet(tmp_path, monkeypatch):
    from opcost.paths import Paths

    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    d = tmp_path / "data" / "external" / "thesis" / "ops" / "training"
    d.mkdir(parents=True)
    (d / "A30.log").write_text(f"{TRAIN_CONV}\n{TRAIN_CONV[:-16]}")  # cut mid-value, no line end
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")

    class P:  # the one part of Params the ingest stage reads
        ingest = IngestParams({"thesis": IngestSource("thesis", "data/external/thesis", "thesis-logs")})

    paths = Paths(tmp_path)
    summary = run_ingest_stage(paths, P(), "thesis")
    assert summary["op_rows"] == 2 and summary["rejected_lines"] == 1
    assert summary["rejected_by_reason"]["inconsistent"] == 1 and summary["rejected_by_reason"]["unterminated"] == 0
    rejects = pd.read_parquet(paths.ingested_dir("thesis") / "rejects.parquet")
    assert rejects[["source_file", "line", "reason"]].values.tolist() == [["ops/training/A30.log", 2, "inconsistent"]]
