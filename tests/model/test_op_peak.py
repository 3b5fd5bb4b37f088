"""The peak an op reaches: one function (physics.peak_of / op_peak) for every model that needs it.

Known answers from the datasheets (devices.py): A30 FP32 10.3 TF, TF32 82 TF, FP16 165 TF; RTX 2080 Ti
FP32 13.4 TF, FP16 53.8 TF, no TF32. Under PyTorch's defaults cuDNN convolutions run in TF32
(`torch.backends.cudnn.allow_tf32` True) and cuBLAS matmuls do not (`torch.backends.cuda.matmul.
allow_tf32` False since 1.12): the thesis A30's Linear layers take the same time with TF32 on and off.
"""

from __future__ import annotations

import math

import pytest

from opcost.devices import device_config, find_device
from opcost.model.basis import features, physics
from opcost.model.crossdevice import xdevice
from opcost.model.prediction import clocktransfer

TF = 1e12


@pytest.mark.parametrize(
    ("kind", "config", "peak_tf"),
    [
        ("Linear", "A30", 10.3),  # a matmul: FP32 units although the A30 has TF32
        ("matmul", "A30", 10.3),
        ("bmm", "A30", 10.3),
        ("MultiheadAttention", "A30", 10.3),
        ("Conv2d", "A30", 82.0),  # a convolution: TF32 tensor cores
        ("ConvTranspose2d", "A30", 82.0),
        ("conv2d", "A30", 82.0),
        ("Linear", "A30_no_tf32", 10.3),
        ("Conv2d", "A30_no_tf32", 10.3),  # TF32 off: FP32 units for everything
        ("Linear", "RTX2080Ti", 13.4),
        ("Conv2d", "RTX2080Ti", 13.4),  # no TF32 on Turing
        ("ReLU", "A30", 10.3),
    ],
)
def test_fp32_peak_per_kind_and_config(kind: str, config: str, peak_tf: float) -> None:
    assert physics.op_peak(kind, find_device(config)) == pytest.approx(peak_tf * TF, rel=1e-12)


def test_half_precision_takes_the_fp16_peak() -> None:
    assert physics.op_peak("Linear", find_device("A30"), "float16") == pytest.approx(165 * TF, rel=1e-12)
    assert physics.op_peak("Conv2d", find_device("RTX2080Ti"), "bfloat16") == pytest.approx(53.8 * TF, rel=1e-12)


def test_the_cross_device_kinds_get_the_same_peak_as_the_project_kinds() -> None:
    for config in ("A30", "A30_no_tf32", "RTX2080Ti", "T4", "A100_PCIe_40GB_no_tf32"):
        dev, tf32 = device_config(config)
        assert xdevice.op_peak("conv", dev, tf32) == physics.op_peak("Conv2d", device_config(config))
        assert xdevice.op_peak("linear", dev, tf32) == physics.op_peak("Linear", device_config(config))
        assert xdevice.op_peak("bmm", dev, tf32) == physics.op_peak("bmm", device_config(config))


def test_a_device_the_table_lacks_gets_the_nominal_peak() -> None:
    assert physics.op_peak("Conv2d", find_device("cpu-host")) == physics.NOMINAL_PEAK


def test_every_model_asks_the_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace physics.peak_of: the roofline, the clock transfer's shares, the features' compute time and
    the cross-device model's peak all follow it (no second copy of the rule anywhere)."""
    fake = 1e9  # 1 GFLOP/s for every kind
    monkeypatch.setattr(physics, "peak_of", lambda kind, dev, tf32, dtype="float32": fake)
    metrics = {"flops": 2e9, "bytes_read": 1.0, "bytes_written": 1.0, "params": 0, "is_view": False,
               "output_shapes": [[8, 64]]}  # fmt: skip
    for kind in ("Linear", "Conv2d", "ReLU"):
        assert physics.roofline_s(kind, metrics, device_config("A30")) == pytest.approx(2.0)
        rec = features.OpRecord("op", kind, {}, (8, 32), 256, metrics)
        assert clocktransfer.roofline_shares([rec], device_config("A30"))[0] == pytest.approx(1.0, abs=1e-9)
        enc = features.Encoding("improved", (kind,), "A30")
        row = dict(zip(enc.columns, enc.row(rec, None)))
        assert row["log_compute_s"] == pytest.approx(math.log1p(2.0 * 1e9))
        assert row["log_roofline_s"] == pytest.approx(math.log(2.0))
    dev, tf32 = device_config("A30")
    assert xdevice.op_peak("conv", dev, tf32) == fake
