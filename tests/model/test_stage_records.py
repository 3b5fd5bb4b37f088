"""The MLflow records of stages train-clock (model/clocks/runrecord.py: the clock model's run and the power
model's) and train-xdevice (model/crossdevice/runrecord.py), from hand-made scores: every name written out
here, so a name or a value wired to the wrong place fails, and the order run.json holds them in."""

from __future__ import annotations

import pandas as pd
import pytest

from opcost.model.clocks import runrecord as clockrecord
from opcost.model.clocks.clock import ClockModel
from opcost.model.clocks.xpower import PowerModel
from opcost.model.crossdevice import runrecord as xrecord
from opcost.model.crossdevice.xdevice import OpModel, XdeviceModel

RECORD_KEYS = ["name", "tags", "params", "metrics", "steps", "figures", "children"]
RUN_KEYS = RECORD_KEYS[:-1]


def test_the_clock_run_from_hand_made_scores():
    """Parent: the fitted form's parameters (not its blends), the pooled errors in per cent, the time figure of
    the off-reference points; a nested run per learner (sorted) with each GPU's four scores."""
    model = ClockModel(share_a=0.5, gamma=2.5, n_curves=3, n_points=30)
    model.logo_error = {"time": 0.125, "energy": 0.25}
    logo = pd.DataFrame(
        {"learner": ["trees", "physical", "physical"], "device": ["A30", "A30", "V100"],
         "time_mape": [9.0, 1.0, 5.0], "energy_mape": [10.0, 2.0, 6.0], "extra_energy_mean": [11.0, 3.0, 7.0],
         "extra_edp_mean": [12.0, 4.0, 8.0], "points": [1, 2, 3]}
    )  # fmt: skip
    pred = pd.DataFrame({"is_ref": [True, False, False], "t": [1.0, 2.0, 3.0], "t_hat": [1.0, 2.5, 2.75]})

    rec = clockrecord.clock_record(model, "logo-A30+V100-min4", logo, "chash", pred, "dv").as_dict()

    assert list(rec) == RECORD_KEYS
    assert rec["name"] == "train-clock"
    assert list(rec["tags"].items()) == [
        ("dvc_stage", "train-clock"), ("bundle_hash", "chash"), ("split", "logo-A30+V100-min4"), ("data_version", "dv")
    ]  # fmt: skip
    assert set(rec["params"]) == {"share_a", "share_b", "share_balance", "static_frac", "static_mem", "gamma",
                                  "cap_k", "volt_slope", "volt_min", "share_scale_bytes", "share_scale_dram",
                                  "knee_q", "n_curves", "n_points"}  # fmt: skip
    assert (rec["params"]["share_a"], rec["params"]["gamma"], rec["params"]["n_points"]) == (0.5, 2.5, 30)
    assert rec["metrics"] == {"logo_time_mape": 12.5, "logo_energy_mape": 25.0}
    assert rec["steps"] == {}
    assert rec["figures"] == [
        {"file": "logo_time.png", "title": "clock model: time at every clock, leave-one-GPU-out [s]", "unit": "s",
         "measured": [2.0, 3.0], "predicted": [2.5, 2.75]}
    ]  # fmt: skip
    assert [c["name"] for c in rec["children"]] == ["physical-logo", "trees-logo"]
    physical, trees = rec["children"]
    assert list(physical) == RUN_KEYS and physical["tags"] == {"learner": "physical"}
    assert list(physical["metrics"].items()) == [
        ("A30_time_mape", 1.0), ("A30_energy_mape", 2.0), ("A30_extra_energy_mean", 3.0), ("A30_extra_edp_mean", 4.0),
        ("V100_time_mape", 5.0), ("V100_energy_mape", 6.0), ("V100_extra_energy_mean", 7.0),
        ("V100_extra_edp_mean", 8.0),
    ]  # fmt: skip
    assert trees["metrics"]["A30_time_mape"] == 9.0 and trees["figures"] == [] and trees["params"] == {}


def _errors(mape: float) -> dict:
    return {"rows": 4, "power_mape": mape, "energy_mape": mape, "power_mdape": mape / 2,
            "energy_time_weighted": mape / 4}  # fmt: skip


def test_the_power_run_from_hand_made_scores():
    """The power model's run is logged by stage train-clock (its `dvc_stage`) under its own name; per card size
    each row kind's power MAPE (the GPU list left out); a nested run per held-out GPU with its row kinds'
    three errors (not the row count or the median)."""
    model = PowerModel(n_rows=12, rel_err90=0.3)
    metrics = {
        "pooled": _errors(8.0),
        "over_300w": {"absolute": _errors(30.0), "gpus": ["H200"]},
        "up_to_300w": {"sweep": _errors(6.0), "absolute": _errors(7.0), "gpus": ["A30"]},
        "per_gpu": {"A30": {"sweep": _errors(4.0)}, "H200": {"absolute": _errors(30.0), "sweep": _errors(2.0)}},
        "params": {"idle": 0.25, "a": 0.3},
    }

    rec = clockrecord.xpower_record(model, metrics, "phash", "logo-A30+H200", "dv").as_dict()

    assert list(rec) == RECORD_KEYS
    assert rec["name"] == "train-xpower"
    assert list(rec["tags"].items()) == [
        ("dvc_stage", "train-clock"), ("bundle_hash", "phash"), ("split", "logo-A30+H200"), ("data_version", "dv")
    ]  # fmt: skip
    assert rec["params"] == {"idle": 0.25, "a": 0.3, "n_rows": 12}
    assert list(rec["metrics"].items()) == [
        ("logo_power_mape", 8.0), ("logo_energy_mape", 8.0), ("rel_err90", 0.3),
        ("logo_over_300w_absolute_power_mape", 30.0), ("logo_up_to_300w_sweep_power_mape", 6.0),
        ("logo_up_to_300w_absolute_power_mape", 7.0),
    ]  # fmt: skip
    assert rec["figures"] == [] and rec["steps"] == {}
    assert [(c["name"], c["tags"]) for c in rec["children"]] == [
        ("logo-A30", {"held_out": "A30"}), ("logo-H200", {"held_out": "H200"})
    ]  # fmt: skip
    assert list(rec["children"][1]["metrics"].items()) == [
        ("absolute_power_mape", 30.0), ("absolute_energy_mape", 30.0), ("absolute_energy_time_weighted", 7.5),
        ("sweep_power_mape", 2.0), ("sweep_energy_mape", 2.0), ("sweep_energy_time_weighted", 0.5),
    ]  # fmt: skip


def test_the_xdevice_run_from_hand_made_scores():
    """Parent: the op model's GPUs and floor, the composition's terms (hosts sorted); op, network, few-shot and
    interval figures under their names, in the order run.json holds them (a few-shot variant without a ratio
    left out). Nested: a run per held-out GPU (not the pooled `all` rows) with its op groups' scores, and its
    networks' scores and figure only where it has networks."""
    op = OpModel(ensemble=None, floor_s=5e-6, trained_on=("A30", "V100"))  # the record reads no trees
    comp = {"host_floor_s": 2e-6, "bw_host_factor": 1.5, "hosts": {"zen": {}, "epyc": {}}, "scale": 1.1}
    model = XdeviceModel(op, comp, content_hash="xhash")
    metrics = {
        "host_plateau_factor": 1.2,
        "ops": {"conv": {"mape": 12.0}, "gemm": {"mape": 6.0}},
        "networks": {"neusight": {"mape": 9.0}, "all": {"mape": 10.0}},
        "fewshot": {"ops": {"ratio": 0.5}, "per_gpu": {"A30": {"ops": {"mape": 5.0}, "network": {"mape": 4.0},
                                                              "mape_without": 8.0}}},
        "interval": {"per_gpu": {"A30": {"coverage_90": 0.9, "median_width_pct": 30.0},
                                 "V100": {"coverage_90": 0.8, "median_width_pct": 40.0}},
                     "coverage_90": 0.85, "median_width_pct": 35.0, "median_halfwidth_pct": 17.5,
                     "coverage_90_in_sample": 0.95},
    }  # fmt: skip
    ops = pd.DataFrame(
        {"gpu": ["A30", "A30", "V100", "all"], "group": ["conv", "gemm", "conv", "conv"],
         "mape": [11.0, 6.0, 13.0, 12.0], "mdape": [10.0, 5.0, 12.0, 11.0], "twe": [9.0, 4.0, 11.0, 10.0]}
    )  # fmt: skip
    nets = pd.DataFrame({"gpu": ["A30", "A30"], "measured_s": [1.0, 2.0], "predicted_s": [1.1, 1.6]})

    rec = xrecord.build(model, metrics, ops, nets, "logo-A30+V100", "dv").as_dict()

    assert list(rec) == RECORD_KEYS
    assert rec["name"] == "train-xdevice"
    assert list(rec["tags"].items()) == [
        ("dvc_stage", "train-xdevice"), ("bundle_hash", "xhash"), ("split", "logo-A30+V100"), ("data_version", "dv")
    ]  # fmt: skip
    assert rec["params"] == {
        "trained_on": "A30,V100", "floor_s": 5e-6, "host_plateau_factor": 1.2, "host_floor_s": 2e-6,
        "bw_host_factor": 1.5, "hosts": "epyc,zen", "scale": 1.1,
    }  # fmt: skip
    assert list(rec["metrics"].items()) == [
        ("op_conv_mape", 12.0), ("op_gemm_mape", 6.0), ("net_neusight_mape", 9.0), ("net_all_mape", 10.0),
        ("fewshot_ops_ratio", 0.5), ("fewshot_A30_ops_mape", 5.0), ("fewshot_A30_network_mape", 4.0),
        ("fewshot_A30_without_mape", 8.0), ("interval_A30_coverage_90", 0.9), ("interval_V100_coverage_90", 0.8),
        ("interval_A30_median_width_pct", 30.0), ("interval_V100_median_width_pct", 40.0),
        ("interval_coverage_90", 0.85), ("interval_median_width_pct", 35.0), ("interval_median_halfwidth_pct", 17.5),
        ("interval_coverage_90_in_sample", 0.95),
    ]  # fmt: skip
    assert rec["figures"] == [] and rec["steps"] == {}
    a30, v100 = rec["children"]
    assert (a30["name"], a30["tags"], v100["name"], v100["tags"]) == (
        "logo-A30", {"held_out": "A30"}, "logo-V100", {"held_out": "V100"}
    )  # fmt: skip
    # the networks: APE 10 % and 20 %; time-weighted |0.1| + |0.4| over 3 s
    assert a30["metrics"] == pytest.approx(
        {"conv_mape": 11.0, "conv_mdape": 10.0, "conv_twe": 9.0, "gemm_mape": 6.0, "gemm_mdape": 5.0, "gemm_twe": 4.0,
         "network_mape": 15.0, "network_mdape": 15.0, "network_twe": 50 / 3, "network_max_ape": 20.0}
    )  # fmt: skip
    assert a30["figures"] == [
        {"file": "logo_networks_A30.png", "title": "A30: networks predicted by models that never saw A30 [s]",
         "unit": "s", "measured": [1.0, 2.0], "predicted": [1.1, 1.6]}
    ]  # fmt: skip
    assert v100["metrics"] == {"conv_mape": 13.0, "conv_mdape": 12.0, "conv_twe": 11.0} and v100["figures"] == []
