"""Parsing the thesis logs and the sweep files, on real lines and on the real files."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from opcost.data.thesis import Classifier, parse_network_log, parse_op_log
from opcost.ops.reprparse import spec_from_repr
from opcost.params.load import load_params
from opcost.paths import Paths
from opcost.schemas import NET_MEASUREMENTS, OP_MEASUREMENTS, OPERATIONS, REJECTS, SWEEPS
from opcost.stages.ingest import run as run_ingest_stage

# Real lines, copied from data/external/nicolai-thesis/ops/inference/A30.log and ops/training/A30.log
STEM = "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)"
INF_LINES = [
    "/csghome/kx225/.conda/envs/constabass/lib/python3.9/site-packages/torch/storage.py:414: FutureWarning: You are using `torch.load` with `weights_only=False` (the current default value)",
    "  return torch.load(io.BytesIO(b))",
    STEM,
    f"{STEM} (32, 3, 56, 56) 0.0003358443377730762 55.32621974426894 0.014987827531664388 1.1739236603653267 57950 19.462179373949766 164.7376880346628 3.4854224102891465 641.230886836077 13.605775223634136 0.0004030025884383089 2024-11-17_14-45-42 2024-11-17_14-46-06 5.391090115417475e-07",
    "Dataset saved to datasets_finalbench/dataset_history_A30/dataset_20241117_145357.pt",
    # bad lines: truncated values, a traceback, an out-of-memory note, noise
    f"{STEM} (32, 3, 56, 56) 0.0003358443377730762 55.32621974426894",
    "Traceback (most recent call last):",
    '  File "bench.py", line 10, in <module>',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "CUDA out of memory, skipping Conv2d",
    "!!! something else",
]
TRAIN_LINE = (
    f"{STEM} (32, 3, 56, 56) 0.0003358295821432062 55.2222621394347 0.012767792786677931 0.9307276559493012 70810 "
    "23.780092711560428 164.43537161621018 2.7563440539611306 782.0576764186742 13.180965063554003 "
    "0.0004066657251800593 2025-02-12_14-26-45 2025-02-12_14-27-50 5.897428001611441e-07 0.0006009062604491278 "
    "1.6076458088167443e-06 98.98474089086208 1.8705191960793581 24.904559964314103 164.7257607482391 "
    "3.0814759286294153 820.4845172443557 15.5047336163018"
)


def write(tmp_path, name, lines) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_inference_op_line_exact_values_and_skipped_kinds(tmp_path):
    res = parse_op_log(write(tmp_path, "A30.log", INF_LINES), "ops/inference/A30.log", "A30", "inference", {})
    assert res.parsed == 1 and len(res.rows) == 1
    r = res.rows[0]
    assert r["t_s"] == 0.0003358443377730762 and r["p_w"] == 164.7376880346628
    assert r["e_j"] == 55.32621974426894 / 1000 and r["sigma_e_j"] == 1.1739236603653267 / 1000
    assert r["iterations"] == 57950 and r["sigma_t_s"] == 5.391090115417475e-07
    assert (r["start_time"], r["stop_time"]) == ("2024-11-17T14:45:42", "2024-11-17T14:46:06")
    assert (r["line"], r["phase"], r["kind"], r["input_shape"]) == (4, "forward", "Conv2d", [32, 3, 56, 56])
    assert r["op_id"] == spec_from_repr(STEM, (32, 3, 56, 56)).op_id
    assert dict(res.skipped) == {"warning": 2, "progress": 2, "other": 1, "traceback": 2, "out_of_memory": 2}
    # the truncated data line is not skipped as noise: it is a reject, with its line and why
    assert [(x["line"], x["reason"]) for x in res.rejects] == [(6, "value_count")]
    assert res.rejects[0]["message"] == "2 values after the shape; a inference line has 14"


def test_training_line_gives_forward_and_forward_backward(tmp_path):
    res = parse_op_log(write(tmp_path, "A30.log", [TRAIN_LINE]), "ops/training/A30.log", "A30", "training", {})
    fwd, fb = res.rows
    assert res.parsed == 1 and (fwd["phase"], fb["phase"]) == ("forward", "forward_backward")
    assert fwd["t_s"] == 0.0003358295821432062 and fwd["p_w"] == 164.43537161621018
    assert fb["t_s"] == 0.0006009062604491278 and fb["sigma_t_s"] == 1.6076458088167443e-06
    assert fb["e_j"] == 98.98474089086208 / 1000 and fb["p_w"] == 164.7257607482391
    assert "iterations" not in fb  # not logged for forward+backward: stays null in the table
    assert fb["start_time"] is None and fb["op_id"] == fwd["op_id"]


def test_network_log_pairs_names_with_measurements(tmp_path):
    lines = [
        "resnet34 (32, 3, 56, 56)",
        "ResNet (32, 3, 56, 56) 0.003855626331182494 403.4538874622257 0.17777659309090635 4.9682615124581995 5064 19.52489174110815 104.6402977900841 1.037498410634341 681.0301620362369 8.38642543302944 0.004973933649289099 2024-11-18_13-19-23 2024-11-18_13-19-50 2.8158547297645037e-05",
        "inception_v3 (32, 3, 299, 299)",
        "skipping inception",
        # a measurement line whose shape does not match its header is not taken
        "alexnet (32, 3, 224, 224)",
        "AlexNet (32, 3, 299, 299) 0.0030584964373499323 503.2139048727258 0.14845985733471226 5.883248563260404 5835 17.846326711936854 164.52983195518806 1.9198523161000711 978.7510449774517 11.442918455541484 0.0040808911739503 2024-11-18_13-29-39 2024-11-18_13-30-03 2.223694656420619e-06",
    ]
    res = parse_network_log(write(tmp_path, "A30.log", lines), "models/training/A30.log", "A30", "training")
    assert [r["set_id"] for r in res.rows] == ["resnet34:32x3x56x56"]
    r = res.rows[0]
    assert r["t_s"] == 0.003855626331182494 and r["p_w"] == 104.6402977900841 and r["phase"] == "train_step"
    assert res.skipped["progress"] == 4 and res.skipped["other"] == 0
    assert [(x["line"], x["reason"]) for x in res.rejects] == [(6, "unpaired")]
    assert "differs from the model-name line's (32, 3, 224, 224)" in res.rejects[0]["message"]


def test_classifier_keeps_warning_continuations():
    c = Classifier()
    assert [c.kind(x) for x in INF_LINES[:2]] == ["warning", "warning"]


@pytest.fixture
def ingest_root(tmp_root, external_data):
    (tmp_root / "data").mkdir()
    os.symlink(external_data, tmp_root / "data" / "external")
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params.setdefault("extract", {})["sets"] = [
        {"model": "resnet18", "input_shape": [32, 3, 32, 32], "modes": ["inference"]}
    ]
    params["profile"] = {}
    (tmp_root / "params.yaml").write_text(yaml.safe_dump(params))
    return Paths(tmp_root)


def test_thesis_counts_equal_the_datasets_readme(ingest_root):
    s = run_ingest_stage(ingest_root, load_params(ingest_root.params), "nicolai-thesis")
    parsed = {f: v["parsed"] for f, v in s["files"].items()}
    # data/external/README.md: rows that parse
    assert parsed == {
        "ops/inference/A30.log": 835,
        "ops/inference/A30_no_tf32.log": 835,
        "ops/inference/RTX2080Ti.log": 835,
        "ops/training/A30.log": 1227,
        "ops/training/A30_no_tf32.log": 1227,
        "ops/training/RTX2080Ti.log": 128,
        "models/inference/A30.log": 18,
        "models/inference/A30_no_tf32.log": 18,
        "models/inference/RTX2080Ti.log": 18,
        "models/training/A30.log": 26,
    }
    d = ingest_root.ingested_dir("nicolai-thesis")
    ops = OP_MEASUREMENTS.validate(pd.read_parquet(d / "op_measurements.parquet"))
    NET_MEASUREMENTS.validate(pd.read_parquet(d / "networks.parquet"))
    cat = OPERATIONS.validate(pd.read_parquet(d / "operations.parquet"))
    # unique op + shape per file, as data/external/README.md counts them
    a30 = ops[(ops["source_file"] == "ops/inference/A30.log")]
    assert a30["op_id"].nunique() == 625
    assert ops[ops["source_file"] == "ops/training/A30.log"]["op_id"].nunique() == 929
    # re-runs stay separate measurements with their own timestamps and lines
    rerun = a30[a30.duplicated("op_id", keep=False)]
    assert len(rerun) and rerun.groupby("op_id")["line"].nunique().min() >= 2
    assert set(ops["op_id"]) == set(cat["op_id"])
    assert s["skipped_lines"]["other"] == 0 and s["skipped_lines"]["warning"] > 0
    saved = json.loads((d / "summary.json").read_text())
    assert saved["op_rows"] == 3 * 835 + 2 * (2 * 1227) + 2 * 128
    # the real logs hold no bad line: an empty rejects table, with its schema, and zero counts
    rejects = REJECTS.validate(pd.read_parquet(d / "rejects.parquet"))
    assert len(rejects) == 0 and list(rejects.columns) == REJECTS.names
    assert saved["rejected_lines"] == 0 and set(saved["rejected_by_reason"].values()) == {0}


def test_sweep_sources(ingest_root):
    params = load_params(ingest_root.params)
    z = run_ingest_stage(ingest_root, params, "zeus-power-limit")
    assert z["rows_per_file"] == {
        "summary_power_a40.csv": 453,
        "summary_power_p100.csv": 270,
        "summary_power_rtx6000.csv": 410,
        "summary_power_v100.csv": 476,
    }
    zt = SWEEPS.validate(pd.read_parquet(ingest_root.ingested_dir("zeus-power-limit") / "sweeps.parquet"))
    first = zt[
        (zt["device"] == "A40") & (zt["workload"] == "cifar100/shufflenetv2/bs1024/adadelta") & (zt["value"] == 100)
    ].iloc[0]
    assert first["time_s"] == 27.130000000000003 and first["power_w"] == 106.88881213499654
    assert first["energy_j"] == 27.130000000000003 * 106.88881213499654 and first["knob"] == "power_limit_w"
    d = run_ingest_stage(ingest_root, params, "dvfs-conv")
    assert d["sweep_rows"] == 2 * 75
    dt = pd.read_parquet(ingest_root.ingested_dir("dvfs-conv") / "sweeps.parquet")
    row = dt[(dt["workload"] == "conv-fft/input00@mem2100") & (dt["value"] == 1000)].iloc[0]
    assert row["knob"] == "core_clock_mhz" and row["time_s"] == 81650.0e-6 and row["power_w"] == 88.892300000000006
    assert set(dt["knob"]) == {"core_clock_mhz", "mem_clock_mhz"}
    for name in ("zeus-power-limit", "dvfs-conv"):
        assert len(REJECTS.validate(pd.read_parquet(ingest_root.ingested_dir(name) / "rejects.parquet"))) == 0


def test_unknown_source_is_named(ingest_root):
    from opcost.errors import OpcostError

    with pytest.raises(
        OpcostError,
        match="unknown ingest source 'zeus'; sources in params.yaml: dvfs-conv, gpu-frequency-dvfs, neusight, nicolai-thesis, ",
    ):
        run_ingest_stage(ingest_root, load_params(ingest_root.params), "zeus")
