"""bench/unit_premise.py: the attained fractions it reports are the known ones, and a family fold's training
figures never see a held-out row (issue 21, section 4: the premise of pooling a unit's efficiency)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bench_modules import load_bench
from opcost.model.training import fit

FLOOR = 1e-6


def _bench():
    return load_bench("unit_premise")


def _conv(k: int) -> dict:
    return {"in_channels": 64, "out_channels": 64, "kernel_size": [k, k], "stride": [1, 1], "groups": 1}


# (kind, hp, unit, fallback, compute_s, fp32 compute_s, memory_s, time above the floor, noop, estimated, families)
ROWS = [
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["a"]),
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["a"]),
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["a"]),
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["a"]),
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["b"]),
    ("ReLU", {}, "", False, 1e-9, 1e-9, 1e-9, 0.0, True, False, ["b"]),
    ("Linear", {}, "fp32", False, 3e-5, 3e-5, 1e-6, 4e-5, False, False, ["a"]),  # 0.75
    ("Linear", {}, "fp32", False, 3e-5, 3e-5, 1e-6, 5e-5, False, False, ["b"]),  # 0.60
    ("Conv2d", _conv(1), "fp32", False, 2e-5, 2e-5, 1e-6, 4e-5, False, False, ["b"]),  # 0.50
    ("Conv2d", _conv(3), "", True, 1e-6, 2e-5, 1e-6, 1e-5, False, False, ["b"]),  # fallback: 2e-5 / 1e-5 = 2.0
    ("Conv2d", _conv(3), "tf32", False, 1e-5, 4e-5, 1e-6, 2e-5, False, False, ["b"]),  # 0.50 of the TF32 peak
    ("Linear", {}, "fp32", False, 3e-6, 3e-6, 1e-6, 3e-6, False, False, ["b"]),  # memory-bound: out
    ("Linear", {}, "fp32", False, 3e-5, 3e-5, 1e-6, 1e-5, False, True, ["b"]),  # estimated: out
]


def _data() -> fit.TargetData:
    cols = list(zip(*ROWS))
    n = len(ROWS)
    return fit.TargetData(
        df=pd.DataFrame({fit.TARGET_COLUMN["time"]: FLOOR + np.array(cols[7])}),
        mode="inference",
        device_config="A30",
        records=[SimpleNamespace(kind=k, hp=hp) for k, hp in zip(cols[0], cols[1])],  # type: ignore[misc]
        encs={},
        X={},
        roofline=np.ones(n),
        noop=np.array(cols[8], bool),
        layers=np.arange(n),
        families=list(cols[10]),
        estimated=np.array(cols[9], bool),
        depthwise=np.zeros(n, bool),
        dw_compute=np.array(cols[5], float),
        unit=np.array(cols[2], dtype=object),
        compute_s=np.array(cols[4], float),
        memory_s=np.array(cols[6], float),
        fallback=np.array(cols[3], bool),
    )


def test_fractions_per_unit_and_class_are_the_known_ones():
    """Floor (the 2nd percentile: no-ops at it, at least two in every fold's training rows) taken off;
    memory-bound, estimated and no-op rows left out; a TF32 fallback counted on the FP32 units at the FP32
    peak."""
    data = _data()
    assert fit.launch_floor(data, np.arange(data.n)) == pytest.approx(FLOOR, rel=1e-12)
    got = _bench().premise(data)["compute_bound_by_unit_class"]
    assert set(got) == {"tf32 / conv other", "fp32 / matmul", "fp32 / conv 1x1", "fp32 / conv TF32 fallback"}
    assert got["fp32 / matmul"]["n"] == 2 and got["fp32 / matmul"]["median"] == pytest.approx(0.675)
    assert got["fp32 / conv 1x1"]["median"] == pytest.approx(0.5)
    assert got["fp32 / conv TF32 fallback"]["median"] == pytest.approx(2.0)
    assert got["tf32 / conv other"]["median"] == pytest.approx(0.5)


def test_fold_training_figures_see_no_held_out_row():
    """Family `a` held out: its Linear row (0.75) is only on the held-out side; the training matmul is the
    other Linear (0.60) alone, the pool that with the 1x1 convolution and the fallback (FP32 units)."""
    data = _data()
    for _, tr, _ in fit.family_folds(data.families):
        assert fit.launch_floor(data, tr) == pytest.approx(FLOOR, rel=1e-12)
    folds = {f["held_out"]: f for f in _bench().premise(data)["family_folds_with_held_out_matmul"]}
    a = folds["a"]
    assert a["train_fp32_matmul"]["n"] == 1 and a["train_fp32_matmul"]["median"] == pytest.approx(0.6)
    assert a["train_fp32_pooled"]["n"] == 3 and a["train_fp32_pooled"]["median"] == pytest.approx(0.6)
    assert a["held_out_fp32_matmul (reported only)"]["median"] == pytest.approx(0.75)
    b = folds["b"]  # the other way round: training has family a's Linear only
    assert b["train_fp32_matmul"]["median"] == pytest.approx(0.75)
    assert b["train_fp32_conv_1x1"] == {"n": 0}
