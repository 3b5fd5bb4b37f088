"""The compute-bound share each op's time is moved by at another clock (`clocktransfer.roofline_shares`,
used for own bundles without a measured sweep and for transferred GPUs): t_c / (t_c + t_m) with the
peak that applies, known answers from the A30's datasheet figures (devices.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from opcost.devices import find_device
from opcost.model.prediction.clocktransfer import roofline_shares

A30_TF32, A30_FP32, A30_BW = 82e12, 10.3e12, 933e9


def _op(kind: str, flops: float, nbytes: float) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, metrics={"flops": flops, "bytes_read": nbytes / 2, "bytes_written": nbytes / 2})


def _share(flops: float, nbytes: float, peak: float) -> float:
    tc, tm = flops / peak, nbytes / A30_BW
    return tc / (tc + tm)


def test_convolutions_use_the_tf32_peak_where_allowed_and_the_rest_fp32():
    """PyTorch's defaults: cuDNN convolutions in TF32, cuBLAS matmuls (a linear layer) on the FP32 units."""
    ops = [_op("Linear", 4e9, 8e6), _op("ReLU", 1e6, 8e6), _op("Conv2d", 2e9, 1e6)]
    got = roofline_shares(ops, find_device("A30"))
    assert got == pytest.approx([_share(4e9, 8e6, A30_FP32), _share(1e6, 8e6, A30_FP32), _share(2e9, 1e6, A30_TF32)])
    # without TF32 the convolution falls back to the FP32 units too: a larger compute share
    off = roofline_shares(ops, find_device("A30_no_tf32"))
    assert off == pytest.approx([_share(4e9, 8e6, A30_FP32), _share(1e6, 8e6, A30_FP32), _share(2e9, 1e6, A30_FP32)])
    assert off[2] > got[2] and off[0] == got[0]


def test_an_op_without_work_has_no_compute_share():
    assert roofline_shares([_op("Identity", 0.0, 0.0)], find_device("A30")).tolist() == [0.0]
