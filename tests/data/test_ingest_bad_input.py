"""Bad input to ingest: a bad line is a counted reject with file, line and reason, and the rest of the
file is taken; a bad file (empty, binary, a directory, a missing column) is a one-line error naming it.

Every bad line here is a real line of the thesis logs or of a sweep CSV with one thing broken.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from opcost.data import sweeps
from opcost.data.textfile import read_lines
from opcost.data.thesis import parse_network_log, parse_op_log
from opcost.errors import OpcostError
from opcost.params.load import load_params
from opcost.paths import Paths
from opcost.schemas import OP_MEASUREMENTS, REJECTS, SWEEPS
from opcost.stages.ingest import run as run_ingest_stage

STEM = "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)"
SHAPE = "(32, 3, 56, 56)"
# v1..v14 of a real line of ops/inference/A30.log (line 4 of tests/test_ingest.py's excerpt)
VALUES = (
    "0.0003358443377730762 55.32621974426894 0.014987827531664388 1.1739236603653267 57950 19.462179373949766 "
    "164.7376880346628 3.4854224102891465 641.230886836077 13.605775223634136 0.0004030025884383089 "
    "2024-11-17_14-45-42 2024-11-17_14-46-06 5.391090115417475e-07"
).split()
GOOD = f"{STEM} {SHAPE} {' '.join(VALUES)}"


def with_value(i: int, v: str) -> str:
    """The real line with value v{i} replaced."""
    vals = list(VALUES)
    vals[i - 1] = v
    return f"{STEM} {SHAPE} {' '.join(vals)}"


# (line, reason, part of the message) -- one broken thing per line
BAD_OP_LINES = [
    (GOOD.replace("bias=False)", "bias=False, frobnicate=1)"), "bad_repr", "cannot build"),
    (GOOD.replace("Conv2d(", "Conv2e("), "bad_repr", "unknown module class 'Conv2e'"),
    (GOOD.replace("kernel_size=(7, 7)", "kernel_size=(7, 7"), "bad_repr", "not a module repr"),
    (GOOD.replace("(3, 64,", "(0, 64,"), "bad_repr", "Invalid channel dimensions"),  # zero input channels
    (GOOD.replace(SHAPE, "(32, 0, 56, 56)"), "bad_shape", "a dimension <= 0"),
    (GOOD.replace(SHAPE, "(32, -3, 56, 56)"), "bad_shape", "not 1 to 8 comma-separated integers"),
    (GOOD.replace(SHAPE, "(32, 3, 56, 5.6)"), "bad_shape", "not 1 to 8 comma-separated integers"),
    (GOOD.replace(SHAPE, "(99999999999, 3, 56, 56)"), "bad_shape", "more than 2^40 elements"),
    (with_value(1, "0"), "out_of_range", "t_s = 0.0, must be > 0 s"),
    (with_value(1, "0.0"), "out_of_range", "t_s = 0.0, must be > 0 s"),
    (with_value(1, "-0.0003358443377730762"), "out_of_range", "t_s = -0.0003358443377730762, must be > 0 s"),
    (with_value(1, "nan"), "bad_number", "v1 = 'nan' is not a number"),
    (with_value(1, "inf"), "bad_number", "v1 = 'inf' is not a number"),
    (with_value(1, "1e999"), "bad_number", "v1 = '1e999' is not a finite number"),
    (with_value(1, "0.000x3"), "bad_number", "v1 = '0.000x3' is not a number"),
    (with_value(2, "0"), "out_of_range", "e_j = 0.0, must be > 0 J"),
    (with_value(7, "-164.7"), "out_of_range", "p_w = -164.7, must be > 0 W"),
    (with_value(7, "164737.7"), "out_of_range", "p_w = 164737.7, above its maximum 2000 W"),
    (with_value(7, "NaN"), "bad_number", "v7 = 'NaN' is not a number"),
    (with_value(8, "-3.48"), "out_of_range", "sigma_p_w = -3.48, below its minimum 0 W"),
    (with_value(5, "57950.5"), "bad_number", "v5 = '57950.5' is not a whole number"),
    (with_value(5, "0"), "out_of_range", "iterations = 0, below its minimum 1"),
    (with_value(6, "0"), "out_of_range", "total_time_s = 0.0, must be > 0 s"),
    (with_value(11, "-1"), "out_of_range", "wall_time_per_iter_s = -1.0, must be > 0 s"),
    (with_value(12, "2024-13-17_14-45-42"), "bad_timestamp", "is not YYYY-MM-DD_HH-MM-SS"),
    (f"{STEM} {SHAPE} {' '.join(VALUES[:13])}", "value_count", "13 values after the shape"),
    (f"{STEM} {SHAPE} {' '.join(VALUES)} 7", "value_count", "15 values after the shape"),
]


def write_bytes(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_each_bad_op_line_is_rejected_with_line_and_reason_and_the_rest_is_taken(tmp_path):
    lines = [GOOD]
    for bad, _, _ in BAD_OP_LINES:
        lines += [bad, GOOD]
    f = write_bytes(tmp_path / "A30.log", [x.encode() for x in lines])
    res = parse_op_log(f, "ops/inference/A30.log", "A30", "inference", {})
    assert res.parsed == len(BAD_OP_LINES) + 1 and len(res.rows) == len(BAD_OP_LINES) + 1
    got = [(r["line"], r["reason"], r["message"]) for r in res.rejects]
    assert [(line, reason) for line, reason, _ in got] == [(2 * i + 2, b[1]) for i, b in enumerate(BAD_OP_LINES)]
    for (_, _, message), (bad, _, part) in zip(got, BAD_OP_LINES):
        assert part in message, (bad, message)
    assert all(r["source_file"] == "ops/inference/A30.log" for r in res.rejects)
    assert [r["text"] for r in res.rejects] == [b[0][:297] + "..." if len(b[0]) > 300 else b[0] for b in BAD_OP_LINES]
    # every accepted row meets the schema
    df = pd.DataFrame(res.rows).assign(source="s")
    from opcost.schemas import conform

    assert len(conform(df, OP_MEASUREMENTS)) == len(BAD_OP_LINES) + 1
    assert REJECTS.validate(conform(pd.DataFrame(res.rejects).assign(source="s"), REJECTS)).shape[0] == len(got)


def test_undecodable_bytes_and_nul_are_rejected_per_line(tmp_path):
    good = GOOD.encode()
    lines = [good, good.replace(b"Conv2d", b"Conv\xff\xfe2d"), good, good.replace(b" 57950 ", b" 57\x0050 "), good]
    res = parse_op_log(write_bytes(tmp_path / "x.log", lines), "x.log", "A30", "inference", {})
    assert [(r["line"], r["reason"]) for r in res.rejects] == [(2, "undecodable"), (4, "nul_byte")]
    assert "\\xff\\xfe" in res.rejects[0]["text"]  # kept readable, as escapes
    assert res.parsed == 3


def test_crlf_lines_parse_like_lf_lines(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes((GOOD + "\r\n" + GOOD + "\r\n").encode())
    res = parse_op_log(f, "x.log", "A30", "inference", {})
    assert res.parsed == 2 and not res.rejects and res.rows[0]["sigma_t_s"] == 5.391090115417475e-07


NET_HEAD = "resnet34 (32, 3, 56, 56)"
NET_LINE = (
    "ResNet (32, 3, 56, 56) 0.003855626331182494 403.4538874622257 0.17777659309090635 4.9682615124581995 5064 "
    "19.52489174110815 104.6402977900841 1.037498410634341 681.0301620362369 8.38642543302944 "
    "0.004973933649289099 2024-11-18_13-19-23 2024-11-18_13-19-50 2.8158547297645037e-05"
)


def test_bad_network_lines_are_rejected(tmp_path):
    lines = [
        NET_LINE,  # 1: no model-name line before it
        NET_HEAD,
        NET_LINE.replace(" 0.003855626331182494 ", " 0 "),  # 3: zero time
        NET_HEAD,
        NET_LINE.replace(" 5064 ", " "),  # 5: 13 values
        NET_HEAD,
        NET_LINE,  # 7: taken
        "resnet34 (32, 0, 56, 56)",  # 8: header with a zero dimension
        NET_LINE,  # 9: then no model-name line for this one
    ]
    res = parse_network_log(write_bytes(tmp_path / "A30.log", [x.encode() for x in lines]), "m.log", "A30", "inference")
    assert [r["line"] for r in res.rows] == [7] and res.rows[0]["t_s"] == 0.003855626331182494
    assert [(r["line"], r["reason"]) for r in res.rejects] == [
        (1, "unpaired"),
        (3, "out_of_range"),
        (5, "value_count"),
        (8, "bad_shape"),
        (9, "unpaired"),
    ]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty; expected a thesis log file"),
        (b"  \n\n \t\n", "is empty; expected a thesis log file"),
        (bytes(range(256)) * 40, "is not a text file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + bytes(500), "is not a text file"),
        (b"\xff\xfe" + "Conv2d(3, 64) (1, 3, 8, 8) 1\n".encode("utf-16-le"), "is not a text file"),
    ],
)
def test_whole_file_problems_are_one_line_errors_naming_the_file(tmp_path, content, message):
    f = tmp_path / "ops" / "inference" / "A30.log"
    f.parent.mkdir(parents=True)
    f.write_bytes(content)
    with pytest.raises(OpcostError) as exc:
        parse_op_log(f, "ops/inference/A30.log", "A30", "inference", {})
    text = str(exc.value)
    assert message in text and str(f) in text and "\n" not in text


def test_a_directory_where_a_file_belongs_is_a_one_line_error(tmp_path):
    d = tmp_path / "A30.log"
    d.mkdir()
    with pytest.raises(OpcostError, match=r"A30\.log is a directory; expected a thesis log file$"):
        parse_op_log(d, "A30.log", "A30", "inference", {})
    with pytest.raises(OpcostError, match="is a directory; expected a CSV file"):
        read_lines(d, "CSV")


@pytest.fixture
def corrupt_root(tmp_root, external_data):
    """A project whose thesis source is a copy of three real logs, with bad lines planted."""
    src = tmp_root / "data" / "external" / "thesis-copy"
    shutil.copytree(external_data / "nicolai-thesis" / "models", src / "models")
    (src / "ops" / "inference").mkdir(parents=True)
    real = (external_data / "nicolai-thesis" / "ops" / "inference" / "A30.log").read_bytes().split(b"\n")
    conv = [i for i, ln in enumerate(real) if ln.startswith(b"Conv2d(") and len(ln.split()) > 20][:40]
    keep = real[: conv[-1] + 1]
    # data lines of the excerpt: a repr, a shape, 14 values (every op kind, not only the convolutions)
    data = [i for i, ln in enumerate(keep) if re.match(rb"[A-Z]\w*\(.*\) \([0-9, ]+\) (\S+ ){13}\S+$", ln)]
    assert set(conv) <= set(data) and len(data) > len(conv)
    planted = {
        conv[3]: keep[conv[3]].replace(b"Conv2d(", b"Conv9d("),  # unknown class
        conv[7]: keep[conv[7]].rsplit(b") (", 1)[0] + b") (32, 0, 56, 56) " + b" ".join(keep[conv[7]].split()[-14:]),
        conv[11]: b" ".join(keep[conv[11]].split()[:-14] + [b"nan"] + keep[conv[11]].split()[-13:]),
        conv[15]: keep[conv[15]][:40] + b"\xc3\x28" + keep[conv[15]][40:],
        conv[19]: b" ".join(keep[conv[19]].split()[:-14] + [b"0"] + keep[conv[19]].split()[-13:]),
        conv[23]: keep[conv[23]][:30] + b"\x00" + keep[conv[23]][30:],
    }
    for i, v in planted.items():
        keep[i] = v
    (src / "ops" / "inference" / "A30.log").write_bytes(b"\n".join(keep) + b"\n")
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params.setdefault("extract", {})["sets"] = [{"model": "resnet18", "input_shape": [32, 3, 32, 32]}]
    params["profile"] = {}
    params["ingest"]["sources"] = {"thesis-copy": {"path": "data/external/thesis-copy", "kind": "thesis-logs"}}
    (tmp_root / "params.yaml").write_text(yaml.safe_dump(params))
    return Paths(tmp_root), {i + 1: v for i, v in planted.items()}, len(data)


def test_ingest_stage_goes_on_past_bad_lines_and_reports_them(corrupt_root):
    paths, planted, n_data = corrupt_root
    summary = run_ingest_stage(paths, load_params(paths.params), "thesis-copy")
    d = paths.ingested_dir("thesis-copy")
    rejects = REJECTS.validate(pd.read_parquet(d / "rejects.parquet"))
    assert list(zip(rejects["line"], rejects["reason"])) == list(
        zip(sorted(planted), ["bad_repr", "bad_shape", "bad_number", "undecodable", "out_of_range", "nul_byte"])
    )
    assert set(rejects["source_file"]) == {"ops/inference/A30.log"} and set(rejects["source"]) == {"thesis-copy"}
    f = summary["files"]["ops/inference/A30.log"]
    assert f["parsed"] == n_data - 6 and f["rejected"] == 6
    assert summary["rejected_lines"] == 6
    assert summary["rejected_by_reason"] == {
        **{k: 0 for k in summary["rejected_by_reason"]},
        "bad_repr": 1,
        "bad_shape": 1,
        "bad_number": 1,
        "undecodable": 1,
        "out_of_range": 1,
        "nul_byte": 1,
    }
    ops = OP_MEASUREMENTS.validate(pd.read_parquet(d / "op_measurements.parquet"))
    assert len(ops) == n_data - 6 and not set(ops["line"]) & set(planted)
    assert json.loads((d / "summary.json").read_text())["rejected_lines"] == 6
    assert "\x00" in rejects["text"].iloc[-1]  # kept as read
    assert summary["network_rows"] == 3 * 18 + 26  # the untouched model logs


def test_a_missing_or_unfit_source_is_a_one_line_error(corrupt_root):
    paths, _, _ = corrupt_root
    params = load_params(paths.params)
    log = paths.root / "data" / "external" / "thesis-copy" / "ops" / "inference" / "A30.log"
    log.write_bytes(b"")
    with pytest.raises(OpcostError, match=r"A30\.log is empty; expected a thesis log file"):
        run_ingest_stage(paths, params, "thesis-copy")
    assert not paths.ingested_dir("thesis-copy").exists()  # nothing half-written
    log.unlink()
    log.mkdir()
    with pytest.raises(OpcostError, match=r"A30\.log is a directory"):
        run_ingest_stage(paths, params, "thesis-copy")
    shutil.rmtree(paths.root / "data" / "external" / "thesis-copy")
    with pytest.raises(OpcostError, match=r"data/external/thesis-copy not found: run `dvc pull`"):
        run_ingest_stage(paths, params, "thesis-copy")


# --- sweep CSVs ---------------------------------------------------------------------------------

ZEUS_HEAD = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power"
ZEUS_ROWS = [  # summary_power_a40.csv lines 2-3
    "cifar100,shufflenetv2,1024,adadelta,100,27.130000000000003,106.88881213499654",
    "cifar100,shufflenetv2,1024,adadelta,125,16.85,118.98703190840182",
]


def zeus_dir(tmp_path: Path, lines: list[str]) -> Path:
    d = tmp_path / "zeus"
    d.mkdir(exist_ok=True)
    (d / "summary_power_a40.csv").write_text("\n".join(lines) + "\n")
    return d


def test_bad_sweep_rows_are_rejected_with_file_and_line(tmp_path):
    r1, r2 = ZEUS_ROWS
    lines = [
        ZEUS_HEAD,
        r1,
        r2.replace(",16.85,", ",0,"),  # 3: zero time
        r2.replace(",16.85,", ",nan,"),  # 4: NaN time
        r2.replace(",118.98703190840182", ",-118.9"),  # 5: negative power
        r2.replace(",118.98703190840182", ""),  # 6: a field short
        r2.replace("1024", "1024.5"),  # 7: half a batch
        r2.replace(",125,", ",1e400,"),  # 8: an infinite power limit
        "",  # 9: blank: skipped, not rejected
        r2.replace("adadelta", "ada/delta"),  # 10: a slash would split the workload name
        r2,  # 11: taken
        r1,  # 12: the same setting of the same sweep again
        r2.replace(",16.85,", ",1e308,").replace(",118.98703190840182", ",1000"),  # 13: an impossible time
    ]
    out = sweeps.zeus(zeus_dir(tmp_path, lines), "zeus")
    assert [(r["line"], r["reason"]) for r in out.rejects] == [
        (3, "out_of_range"),
        (4, "bad_number"),
        (5, "out_of_range"),
        (6, "value_count"),
        (7, "bad_number"),
        (8, "bad_number"),
        (10, "bad_value"),
        (12, "duplicate"),
        (13, "out_of_range"),  # 1e308 s is beyond schemas.TIME_RANGE_S (its energy would overflow to inf)
    ]
    assert out.rejects[0]["message"] == "time_s = 0.0, must be > 0 s"
    assert out.rejects[3]["message"] == "6 fields; the header has 7"
    assert out.rejects[7]["message"] == (
        "cifar100/shufflenetv2/bs1024/adadelta at power_limit_w = 100.0 already given by summary_power_a40.csv line 2"
    )
    assert out.rejects[8]["message"] == "time_s = 1e+308, above its maximum 10000000.0 s"
    assert {r["source_file"] for r in out.rejects} == {"summary_power_a40.csv"}
    assert [r["value"] for r in out.rows] == [100.0, 125.0] and out.skipped == {"blank": 1}
    assert out.rows_per_file == {"summary_power_a40.csv": 2}
    from opcost.schemas import conform

    assert len(conform(pd.DataFrame(out.rows), SWEEPS)) == 2


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "summary_power_a40.csv is empty; expected a CSV file"),
        ([ZEUS_HEAD], "summary_power_a40.csv has a header but no data lines"),
        (
            [ZEUS_HEAD.replace(",average_power", ""), ZEUS_ROWS[0][:-19]],
            "summary_power_a40.csv: missing column(s) average_power; expected dataset, network",
        ),
        ([ZEUS_HEAD + ",dataset", ZEUS_ROWS[0] + ",x"], "column(s) dataset named more than once"),
    ],
)
def test_sweep_file_problems_are_one_line_errors(tmp_path, lines, message):
    d = zeus_dir(tmp_path, lines) if lines else tmp_path / "zeus"
    if not lines:
        d.mkdir()
        (d / "summary_power_a40.csv").write_bytes(b"")
    with pytest.raises(OpcostError) as exc:
        sweeps.zeus(d, "zeus")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_sweep_source_folder_problems(tmp_path):
    d = tmp_path / "zeus"
    d.mkdir()
    with pytest.raises(OpcostError, match=r"no summary_power_\*\.csv under .*zeus"):
        sweeps.zeus(d, "zeus")
    (d / "summary_power_a40.csv").mkdir()
    with pytest.raises(OpcostError, match=r"summary_power_a40\.csv is a directory; expected a CSV file"):
        sweeps.zeus(d, "zeus")
    f = tmp_path / "dvfs"
    f.write_text("not a folder")
    with pytest.raises(OpcostError, match="dvfs-conv.csv not found"):
        sweeps.dvfs(f, "dvfs")


def test_sweep_stage_writes_rejects_and_counts(tmp_root):
    (tmp_root / "data" / "external").mkdir(parents=True)
    zeus_dir(tmp_root / "data" / "external", [ZEUS_HEAD, ZEUS_ROWS[0], ZEUS_ROWS[1].replace(",16.85,", ",-1,")])
    (tmp_root / "params.yaml").write_text(
        yaml.safe_dump({"ingest": {"sources": {"z": {"path": "data/external/zeus", "kind": "zeus-power-limit"}}}})
    )
    paths = Paths(tmp_root)
    s = run_ingest_stage(paths, load_params(paths.params), "z")
    assert s["sweep_rows"] == 1 and s["rejected_lines"] == 1 and s["rejected_by_reason"]["out_of_range"] == 1
    r = REJECTS.validate(pd.read_parquet(paths.ingested_dir("z") / "rejects.parquet"))
    assert r.iloc[0][["source", "source_file", "line", "reason"]].tolist() == [
        "z",
        "summary_power_a40.csv",
        3,
        "out_of_range",
    ]
    assert os.path.getsize(paths.ingested_dir("z") / "sweeps.parquet") > 0
