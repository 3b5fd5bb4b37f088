"""The cross-device rows' Winograd feature: a 3x3, stride-1, undilated, ungrouped convolution on the FP32
units (cuDNN's Winograd, faster than its direct FLOPs), from the thesis' records and NeuSight's tables alike."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from opcost.model.crossdevice import xdevice

COL = xdevice.COLUMNS.index("winograd_fp32")


def _conv(kernel: object, stride: object = 1, groups: int = 1, dilation: object = 1) -> dict:
    hp = {"in_channels": 64, "out_channels": 64, "kernel_size": kernel, "stride": stride, "groups": groups,
          "dilation": dilation, "padding": 1}  # fmt: skip
    metrics = {"output_shapes": [[8, 64, 28, 28]], "bytes_read": 1e6, "bytes_written": 1e6, "flops": 1e9}
    return xdevice.record_row("Conv2d", metrics, hp, (8, 64, 28, 28))


@pytest.mark.parametrize(("row", "eligible"), [
    (_conv(3), 1.0), (_conv((3, 3)), 1.0), (_conv(3, stride=2), 0.0), (_conv(1), 0.0), (_conv((1, 7)), 0.0),
    (_conv(3, groups=64), 0.0), (_conv(3, dilation=2), 0.0),
])  # fmt: skip
def test_record_row_flags_winograd_eligible_convolutions(row, eligible):
    assert row["winograd"] == eligible


def test_a_linear_layer_is_never_winograd():
    row = xdevice.record_row("Linear", {"output_shapes": [[8, 10]], "bytes_read": 1.0, "bytes_written": 1.0,
                                        "flops": 1.0}, {"in_features": 3, "out_features": 10}, (8, 3))  # fmt: skip
    assert row["winograd"] == 0.0


@pytest.mark.parametrize(("config", "on"), [("A30", 0.0), ("A30_no_tf32", 1.0), ("RTX2080Ti", 1.0), ("V100", 1.0)])
def test_the_feature_is_on_only_where_the_convolution_runs_on_the_fp32_units(config, on):
    rows = pd.DataFrame([{**_conv(3), "device_config": config, "wall_clock": 0.0}])
    X, _ = xdevice.design(rows, 1e-6)
    assert X[0, COL] == on


def test_rows_without_the_column_read_as_not_eligible():
    row = {k: v for k, v in _conv(3).items() if k != "winograd"}
    X, _ = xdevice.design(pd.DataFrame([{**row, "device_config": "V100", "wall_clock": 0.0}]), 1e-6)
    assert X[0, COL] == 0.0


def test_neusight_convolutions_are_flagged_by_kernel_and_stride(tmp_path):
    d = tmp_path / "ops" / "conv"
    d.mkdir(parents=True)
    with gzip.open(d / "Tesla_V100.csv.gz", "wt") as fh:
        fh.write("OPName,Latency,Device,B,Input_Channel,Output_Channel,Kernel_Szie,Input_Size,Stride,Padding\n"
                 "conv,0.5,Tesla V100-PCIE-32GB,8,64,64,3,28,1,1\n"
                 "conv,0.5,Tesla V100-PCIE-32GB,8,64,64,3,28,2,1\n"
                 "conv,0.5,Tesla V100-PCIE-32GB,8,64,64,5,28,1,2\n")  # fmt: skip
    rows = xdevice.neusight_ops(Path(tmp_path))
    assert rows["winograd"].tolist() == [1.0, 0.0, 0.0]
