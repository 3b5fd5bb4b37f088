"""The evaluate stage on the real thesis data plus a real (tiny) CPU campaign."""

import json

import numpy as np
import pandas as pd
import pytest

from opcost.config import load_params
from opcost.data.evaluate import device_config, thesis_power_stats
from opcost.errors import SchemaError
from opcost.schemas import EVALUATED_NETWORKS, EVALUATED_OPERATIONS, SWEEPS
from opcost.stages.evaluate import run as run_evaluate_stage


def test_thesis_power_stats_drop_outliers_by_value():
    samples = pd.DataFrame({"power_w": [100.0] * 20 + [1000.0]})
    assert thesis_power_stats(samples) == (100.0, 0.0)
    assert np.isnan(thesis_power_stats(pd.DataFrame({"power_w": []}))[0])


def test_device_config_names():
    assert device_config({"device_name": "NVIDIA A30", "tf32_cudnn": True}, "cuda:0") == "NVIDIA_A30"
    assert device_config({"device_name": "NVIDIA A30", "tf32_cudnn": False}, "cuda:0") == "NVIDIA_A30_no_tf32"
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
    assert set(nets["method"]) == {"trials", "thesis-log"}


def test_sweeps_and_reports(evaluated):
    paths, _ = evaluated
    sw = SWEEPS.validate(pd.read_parquet(paths.evaluated_sweeps))
    assert set(sw["source"]) == {"zeus-power-limit", "dvfs-conv"} and len(sw) == 1609 + 150
    summary = json.loads(paths.ingest_summary.read_text())
    assert set(summary) == {"nicolai-thesis", "zeus-power-limit", "dvfs-conv"}
    cov = json.loads(paths.ingest_coverage.read_text())
    by = {(r["set_id"], r["device_config"], r["mode"]): r for r in cov["networks"]}
    r18 = by[("resnet18:32x3x32x32", "A30", "inference")]
    # every conv and linear of resnet18 was measured; residual adds and flatten were not (README)
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
        with pytest.raises(SchemaError, match="table op_measurements: column t_s holds -1.0, below its minimum 0"):
            run_evaluate_stage(paths, load_params(paths.params))
        df.drop(columns=["p_w"]).to_parquet(f, index=False)
        with pytest.raises(SchemaError, match=r"table op_measurements: missing column\(s\) p_w"):
            run_evaluate_stage(paths, load_params(paths.params))
    finally:
        f.write_bytes(keep)
