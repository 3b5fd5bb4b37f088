"""A physical baseline for depthwise convolutions, the GEMM-like op that is not a GEMM (issue 21, section 4).

Why depthwise convolutions, and only they: a convolution with groups == in_channels does k x k
multiply-adds per output element and reuses nothing across channels, so cuDNN runs it on the FP32
units (never the tensor cores) at a small, steady fraction of the FP32 peak. On the thesis A30 that
fraction is 6-10 % for every depthwise shape in inference (3x3, 5x5 and 7x7, stride 1 or 2), while
the plain roofline calls the op memory-bound and its t / roofline ratio swings from 3 (3x3) to 12
(7x7). A tree that learnt that ratio from ConvNeXt's 7x7 layers put EfficientNet's 3x3 and 5x5
layers 41 % too high with EfficientNet held out (and the reverse): it cannot extrapolate over
kernel size. The baseline here is max(roofline, FLOPs / (FP32 peak x e)), with one efficiency `e`
per model, the geometric mean over the depthwise rows it trains on (launch floor taken off); the trees then learn the
residual, with the depthwise flag and the baseline's compute time as features.

What was tried and is NOT here (bench/family_split.py reproduces each, family left out):
- TF32 only for convolutions in the roofline (PyTorch's default: cuBLAS matmuls run on the FP32
  units unless `torch.backends.cuda.matmul.allow_tf32`; the thesis A30's Linear layers take the same
  time with and without TF32). Physically right, and better on the grouped split, but with ConvNeXt
  held out the A30 has no large FP32 GEMM left to learn from, and its 4-D Linear layers went from
  -58 % to +157 %: nothing inside one target tells an FP32 GEMM's efficiency from a TF32
  convolution's.
- One efficiency curve for all GEMM-like ops (ridge regression of log(t / roofline) on waves, wave
  quantisation, K, intensity over ridge), trees on the residual: worse everywhere (the linear curve
  extrapolates over shapes no held-out family shares).
- GEMM-shape features only (waves, wave efficiency, tensor-core unit, Winograd-eligible 3x3): no gain.
The baseline is offered as its own feature set (`physical`), next to `improved`; the champion is
still chosen on the grouped split, so a target where it does not help (training, where the backward
pass of a depthwise convolution scales with its output, not its taps) keeps its old model.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from opcost.model.physics import device_peaks

CONV_PREFIX = "Conv"


def is_depthwise(kind: str, hp: dict[str, Any]) -> bool:
    """A convolution whose every group is one input channel (groups == in_channels > 1)."""
    if not kind.startswith(CONV_PREFIX):
        return False
    groups = int(hp.get("groups", 1) or 1)
    return groups > 1 and groups == int(hp.get("in_channels", 0) or 0)


def fp32_compute_s(flops: float, device_config: str) -> float:
    """FLOPs over the FP32 (non-tensor-core) peak of the device config [s]."""
    return float(flops) / device_peaks(device_config)[1]


def depthwise_efficiency(compute_s: np.ndarray, t_s: np.ndarray, floor_s: float = 0.0) -> float:
    """Geometric mean of compute_s / (t - floor) over the given depthwise rows: their fraction of the
    FP32 peak once the launch floor is taken off, as the model's offset log(baseline + floor) adds it
    back; 0.0 (no baseline) where no finite row is above the floor to learn it from."""
    c, t = np.asarray(compute_s, float), np.asarray(t_s, float) - floor_s
    ok = np.isfinite(c) & np.isfinite(t) & (c > 0) & (t > 0)
    if not ok.any():
        return 0.0
    return float(np.exp(np.mean(np.log(c[ok] / t[ok]))))


def baseline_s(roofline_s: np.ndarray, depthwise: np.ndarray, compute_s: np.ndarray, efficiency: float) -> np.ndarray:
    """Per op: the roofline time, raised for depthwise convolutions to FLOPs / (FP32 peak x e)."""
    roof = np.asarray(roofline_s, float)
    if efficiency <= 0:
        return roof
    return np.where(np.asarray(depthwise, bool), np.maximum(roof, np.asarray(compute_s, float) / efficiency), roof)


def features(kind: str, hp: dict[str, Any], flops: float, device_config: str) -> list[float]:
    """[depthwise flag, log(1 + FP32 compute time in ns) of a depthwise op, else 0]."""
    if not is_depthwise(kind, hp):
        return [0.0, 0.0]
    return [1.0, math.log1p(fp32_compute_s(flops, device_config) * 1e9)]


FEATURE_COLUMNS: Sequence[str] = ("depthwise", "log_dw_compute_s")
