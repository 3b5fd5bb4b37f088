"""bench/family_cells.py: the op classes, attained peak fractions and per-cell figures are the known ones,
and the cells add up to the target's MAPE and time-weighted error (issue 21, section 4 cause analysis)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bench_modules import load_bench
from opcost.model.training import fit

FLOOR = 1e-6


def _bench():
    return load_bench("family_cells")


def _conv(k: int, stride: int = 1, cin: int = 64, groups: int = 1) -> dict:
    return {"in_channels": cin, "out_channels": cin, "kernel_size": [k, k], "stride": [stride, stride],
            "groups": groups}  # fmt: skip


def test_op_classes_follow_the_kernel_cudnn_would_pick():
    op_class = _bench().op_class
    assert op_class("Linear", {"in_features": 8, "out_features": 8}, "A30") == "Linear"
    assert op_class("Conv2d", _conv(1), "A30") == "conv 1x1"
    assert op_class("Conv2d", _conv(3), "A30_no_tf32") == "conv 3x3 s1"
    assert op_class("Conv2d", _conv(3, stride=2), "A30_no_tf32") == "conv other"
    assert op_class("Conv2d", _conv(7, groups=64), "A30") == "depthwise 7x7"
    stem = {**_conv(7, stride=2), "in_channels": 3}
    assert op_class("Conv2d", stem, "A30") == "conv stem (TF32 fallback)"
    assert op_class("Conv2d", stem, "A30_no_tf32") == "conv other"  # no TF32: nothing to fall back from
    assert op_class("BatchNorm2d", {}, "A30") == "BatchNorm2d"


def _data(unit, compute, fp32, memory, t, depthwise) -> fit.TargetData:
    n = len(t)
    return fit.TargetData(
        df=pd.DataFrame({fit.TARGET_COLUMN["time"]: FLOOR + np.asarray(t, float)}),
        mode="inference",
        device_config="A30",
        records=[SimpleNamespace(kind="Conv2d", hp={})] * n,  # type: ignore[list-item]
        encs={},
        X={},
        roofline=np.ones(n),
        noop=np.zeros(n, bool),
        layers=np.arange(n),
        families=[["a"]] * n,
        estimated=np.zeros(n, bool),
        depthwise=np.asarray(depthwise, bool),
        dw_compute=np.asarray(fp32, float),
        unit=np.asarray(unit, dtype=object),
        compute_s=np.asarray(compute, float),
        memory_s=np.asarray(memory, float),
        fallback=np.zeros(n, bool),
    )


def test_attained_is_the_median_peak_fraction_of_compute_bound_rows_floor_off():
    """TF32 rows against the TF32 peak (compute_s), FP32 rows against the FP32 peak; a memory-bound row
    left out; depthwise rows all counted (none passes the compute-bound test)."""
    data = _data(
        unit=["tf32", "tf32", "fp32", "fp32", "", ""],
        compute=[1e-5, 2e-5, 3e-5, 1e-6, 1e-6, 1e-6],
        fp32=[8e-5, 16e-5, 3e-5, 1e-6, 2e-6, 3e-6],
        memory=[1e-6, 1e-6, 1e-6, 1e-6, 5e-6, 5e-6],
        t=[2e-5, 5e-5, 4e-5, 1e-6, 2e-5, 6e-5],
        depthwise=[False, False, False, False, True, True],
    )
    attained = _bench().attained
    assert attained(data, np.array([0, 1]), FLOOR) == (pytest.approx(0.45), 2)  # 0.5 and 0.4
    assert attained(data, np.array([2, 3]), FLOOR) == (pytest.approx(0.75), 1)  # the memory-bound row out
    assert attained(data, np.array([4, 5]), FLOOR) == (pytest.approx(0.075), 2)  # 0.1 and 0.05
    assert attained(data, np.array([3]), FLOOR) == (None, 0)


def test_cell_figures_split_the_bias_into_baseline_and_trees():
    """Measured 1 and 4, baseline half of each, prediction 2x and 0.5x: baseline -50 %, trees (4x and 1x the
    baseline: geometric mean 2) +100 %, together the live rows' bias (2 and 0.5: 0 %); the no-op row (exact,
    its baseline 9x off) counts in the bias, MAPE and twe only."""
    y, base, p = np.array([1.0, 4.0, 1.0]), np.array([0.5, 2.0, 9.0]), np.array([2.0, 2.0, 1.0])
    got = _bench().cell_figures(y, p, base, np.array([False, False, True]))
    assert got["bias_pct"] == pytest.approx(0.0)
    assert got["baseline_bias_pct"] == pytest.approx(-50.0)
    assert got["tree_residual_pct"] == pytest.approx(100.0)
    assert got["mape"] == pytest.approx(100 * (1.0 + 0.5 + 0.0) / 3, abs=0.05)
    assert got["twe"] == pytest.approx(100 * 3.0 / 6.0)


def test_cells_add_up_to_the_targets_mape_and_twe():
    b = _bench()
    y = np.array([1.0, 2.0, 3.0, 10.0])
    p = np.array([1.5, 2.0, 2.0, 12.0])
    noop = np.zeros(4, bool)
    cells = [{"family": "a", "class": "x", **b.cell_figures(y[:2], p[:2], y[:2], noop[:2])},
             {"family": "b", "class": "y", **b.cell_figures(y[2:], p[2:], y[2:], noop[2:])}]  # fmt: skip
    mape, twe, top = b.summarise(cells, 1)
    want = fit.scores(y, p)
    assert mape == pytest.approx(100 * want["mape"], abs=0.01)
    assert twe == pytest.approx(100 * want["twe"], abs=0.01)
    assert [c["class"] for c in top] == ["y"]  # 3 of the 3.5 s of absolute error
    assert top[0]["time_share_pct"] == pytest.approx(100 * 13 / 16)
