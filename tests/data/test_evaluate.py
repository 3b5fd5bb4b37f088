"""The evaluate stage on the real thesis data plus a real (tiny) CPU campaign."""

import json

import numpy as np
import pandas as pd
import pytest

from opcost.data.evaluate import device_config, thesis_power_stats
from opcost.errors import SchemaError
from opcost.params.load import load_params
from opcost.schemas import EVALUATED_NETWORKS, EVALUATED_OPERATIONS, SWEEPS
from opcost.stages.evaluate import run as run_evaluate_stage


def test_thesis_power_stats_drop_outliers_by_value():
    samples = pd.DataFrame({"power_w": [100.0] * 20 + [1000.0]})
    assert thesis_power_stats(samples) == (100.0, 0.0)
    assert np.isnan(thesis_power_stats(pd.DataFrame({"power_w": []}))[0])


def test_device_config_names():
    assert device_config({"device_name": "NVIDIA A30", "tf32_cudnn": True}, "cuda:0") == "A30"  # the table key
    assert device_config({"device_name": "NVIDIA A30", "tf32_cudnn": False}, "cuda:0") == "A30_no_tf32"
    assert device_config({"device_name": None, "nvml_device_name": "Tesla T4"}, "cuda:1") == "T4"
    assert device_config({"device_name": "NVIDIA Titan Z", "tf32_cudnn": True}, "cuda:0") == "NVIDIA_Titan_Z"
    assert device_config({"device_name": "AMD EPYC", "tf32_cudnn": False}, "cpu") == "AMD_EPYC"


@pytest.fixture
def evaluated(pipeline_root):
    return pipeline_root, None


def test_evaluated_operations_combine_reruns(evaluated):
    paths, _ = evaluated
    ev = EVALUATED_OPERATIONS.validate(pd.read_parquet(paths.evaluated_operations))
    raw = pd.read_parquet(paths.ingested_dir("nicolai-thesis") / "op_measurements.parquet")
    keys = ["device_config", "mode", "phase", "op_id"]
    assert not ev.duplicated(keys + ["clock_mhz", "power_limit_w"]).any()
    # every key of the ingested rows is one evaluated row, with all its measurements counted
    counts = raw.groupby(keys).size()
    thesis = ev[ev["method"] == "thesis-log"].set_index(keys)
    assert len(thesis) == len(counts) and (thesis.loc[counts.index, "n_measurements"] == counts).all()
    # a re-run op: mean of its t, and the spread of its re-runs as the trial statistics
    rerun_key = counts[counts > 1].index[0]
    ts = raw.set_index(keys).loc[rerun_key, "t_s"]
    row = thesis.loc[rerun_key]
    assert row["t_s"] == pytest.approx(ts.mean(), rel=1e-12)
    assert row["trials_sigma_t_s"] == pytest.approx(ts.std(ddof=1), rel=1e-9)
    single = thesis[thesis["n_measurements"] == 1]
    assert single["trials_t_s"].isna().all() and (single["n_trials"] == 0).all()
    # phases: forward for inference; forward and forward_backward for training
    assert set(zip(ev["mode"], ev["phase"])) >= {
        ("inference", "forward"),
        ("training", "forward"),
        ("training", "forward_backward"),
    }


def test_campaign_rows_use_trial_statistics(evaluated):
    paths, _ = evaluated
    ev = pd.read_parquet(paths.evaluated_operations)
    ours = ev[ev["method"] == "trials"]
    assert len(ours) and (ours["n_trials"] == 2).all() and (ours["sources"] == "tiny").all()
    assert ours["e_j"].isna().all()  # the CPU campaign had no energy source
    t = pd.read_parquet(paths.raw_dir("tiny") / "timings.parquet")
    one = ours.iloc[0]
    assert one["t_s"] == pytest.approx(t[t["op_id"] == one["op_id"]]["mean_s"].mean(), rel=1e-12)
    nets = EVALUATED_NETWORKS.validate(pd.read_parquet(paths.evaluated_networks))
    assert set(nets["method"]) == {"trials", "thesis-log", "neusight-log"}


SWEEP_SOURCES = {  # evaluated sweep rows per source (ingested rows less default-setting rows)
    "zeus-power-limit": 1609,
    "dvfs-conv": 150,
    "perseus-stage-profiles": 784,
    "perseus-power-limit": 160,
    "nv-dvfs-kernels": 400,
    "gpu-frequency-dvfs": 2 * 1666,
}


def test_sweeps_and_reports(evaluated):
    paths, _ = evaluated
    sw = SWEEPS.validate(pd.read_parquet(paths.evaluated_sweeps))
    assert sw.groupby("source").size().to_dict() == SWEEP_SOURCES
    # the 65 gpu-frequency-dvfs `auto` rows (clock unknown) stay in the ingested table only
    ingested = pd.read_parquet(paths.ingested_dir("gpu-frequency-dvfs") / "sweeps.parquet")
    assert int(ingested["default_setting"].sum()) == 65 and not sw["default_setting"].any()
    assert sw["value"].notna().all()
    summary = json.loads(paths.ingest_summary.read_text())
    assert set(summary) == {"nicolai-thesis", "neusight", *SWEEP_SOURCES}
    assert all(s["rejected_lines"] == 0 for s in summary.values())
    cov = json.loads(paths.ingest_coverage.read_text())
    by = {(r["set_id"], r["device_config"], r["mode"]): r for r in cov["networks"]}
    r18 = by[("resnet18:32x3x32x32", "A30", "inference")]
    # every conv and linear of resnet18 was measured; residual adds and flatten were not (docs/pipeline.md)
    assert (
        r18["flops_share"] > 0.99
        and {"add", "flatten"} <= set(r18["missing_kinds"])
        and "Conv2d" not in r18["missing_kinds"]
    )
    assert 0 < r18["calls_share"] < 1
    assert by[("resnet50:32x3x224x224", "A30", "inference")]["extracted"] is False  # not in this test's extract sets


def test_schema_failure_names_the_column(evaluated):
    paths, _ = evaluated
    f = paths.ingested_dir("nicolai-thesis") / "op_measurements.parquet"
    keep = f.read_bytes()
    try:
        df = pd.read_parquet(f)
        df.loc[0, "t_s"] = -1.0
        df.to_parquet(f, index=False)
        with pytest.raises(SchemaError, match="table op_measurements: column t_s holds -1.0, must be > 0 s"):
            run_evaluate_stage(paths, load_params(paths.params))
        df.drop(columns=["p_w"]).to_parquet(f, index=False)
        with pytest.raises(SchemaError, match=r"table op_measurements: missing column\(s\) p_w"):
            run_evaluate_stage(paths, load_params(paths.params))
    finally:
        f.write_bytes(keep)


def test_validate_sweep_reports_take_the_new_sources(evaluated):
    """The validate stage's sweep reports (validate/sweeps.py) on the evaluated sweeps: every
    cross-clock workload gets its optimum, at settings the source measured."""
    from opcost.validate import sweeps as vs

    paths, _ = evaluated
    sw = SWEEPS.validate(pd.read_parquet(paths.evaluated_sweeps))
    opt = vs.optima(vs.normalised(sw)).set_index(["source", "device", "workload", "knob"])
    stage = opt.loc[("perseus-stage-profiles", "A40", "gpt3-175b/stage0/forward", "core_clock_mhz")]
    assert stage["settings"] == 60 and (stage["min_value"], stage["reference_value"]) == (855.0, 1740.0)
    kernel = opt.loc[("nv-dvfs-kernels", "V100", "matrixMul/matrixMulCUDA", "core_clock_mhz")]
    assert kernel["settings"] == 10 and kernel["reference_value"] == 1380.0
    gemm = opt.loc[("gpu-frequency-dvfs", "RTX3080Ti", "gemm/gemm_kernel@mem9501", "core_clock_mhz")]
    assert gemm["settings"] == 6 and gemm["min_value"] == 210.0
    pl = opt.loc[
        ("perseus-power-limit", "A40", "gpt3-2.7b/bs1024/dp1-tp1-pp8/uniform_transformer/zeus_global", "power_limit_w")
    ]
    assert pl["settings"] == 8 and pl["energy_optimal_value"] in set(range(125, 301, 25))
    n = opt.reset_index().groupby("source").size()
    assert n["perseus-stage-profiles"] == 16 and n["nv-dvfs-kernels"] == 40
    grid = vs.grid_optima(sw).set_index(["source", "device", "workload"])
    assert set(grid.index.get_level_values("source")) == {"dvfs-conv", "gpu-frequency-dvfs"}  # nv-dvfs: one mem clock
    g = grid.loc[("gpu-frequency-dvfs", "RTX3080Ti", "gemm/gemm_kernel")]
    # the grid is not rectangular: the reference is the fastest core clock at the fastest memory clock
    assert g["reference_mem_mhz"] == 9501.0 and g["reference_core_mhz"] in {1905.0, 1920.0, 1935.0, 1950.0, 1965.0}
    assert g["grid_points"] == len(sw[(sw["workload"].str.startswith("gemm/gemm_kernel@mem"))])


def test_inference_targets_leave_out_dropout_timed_in_train_mode(evaluated):
    """The thesis timed efficientnet's stochastic depths (p > 0) in train mode, where they draw a mask
    and multiply: tens of microseconds growing with the tensor. In an eval-mode network they are the
    identity, so those rows are left out of the inference targets and counted; the p = 0 ones stay."""
    paths, _ = evaluated
    ev = pd.read_parquet(paths.evaluated_operations)
    from opcost.tables import known_operations

    catalog = known_operations(paths, load_params(paths.params))["spec_json"]
    sd = ev[(ev["kind"] == "StochasticDepth") & (ev["device_config"] == "A30") & (ev["mode"] == "inference")]
    p = sd["op_id"].map(lambda i: json.loads(catalog[i])["attrs"]["p"])
    assert (p > 0).sum() > 0 and (p == 0).sum() > 0  # the real data holds both
    # train-mode work: every p > 0 row took longer than every p = 0 identity
    assert sd["t_s"][p > 0].min() > 5 * sd["t_s"][p == 0].max()
    target = pd.read_parquet(paths.target_operations("A30-inference"))
    kept = target[target["kind"] == "StochasticDepth"]
    assert set(kept["op_id"]) == set(sd["op_id"][p == 0])
    summary = json.loads(paths.evaluate_summary.read_text())
    assert summary["excluded_rows"]["A30-inference"] == int((p > 0).sum())
    # training targets keep theirs: stochastic depth does work in a training step
    train = pd.read_parquet(paths.target_operations("A30-training"))
    train_p = train.loc[train["kind"] == "StochasticDepth", "op_id"].map(lambda i: json.loads(catalog[i])["attrs"]["p"])
    assert (train_p > 0).any() and "A30-training" not in summary["excluded_rows"]
