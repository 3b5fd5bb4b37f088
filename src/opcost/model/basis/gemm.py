"""Physical baselines of GEMM-like ops for the `physical` feature set.

Three parts, each below with its why: depthwise convolutions at a fitted fraction of the FP32 peak;
GEMM-like ops against the peak their unit (TF32 tensor cores or FP32 units) attains; a Linear layer
shown to the trees as the 1x1 convolution it computes.

Why depthwise convolutions: a convolution with groups == in_channels does k x k multiply-adds per output
element and reuses nothing across channels, so cuDNN runs it on the FP32 units at a small, steady fraction
of the FP32 peak, while the plain roofline calls it memory-bound with a t / roofline ratio that swings with
kernel size, which trees cannot extrapolate over. The baseline is max(roofline, FLOPs / (FP32 peak x e)),
one efficiency `e` per model (the geometric mean over its depthwise rows, launch floor taken off); the trees
learn the residual, with the depthwise flag and the baseline's compute time as features.

The baseline is offered as its own feature set (`physical`), next to `improved`; the champion is
still chosen on the grouped split, so a target where it does not help (training, where the backward
pass of a depthwise convolution scales with its output, not its taps) keeps its old model.
Figures and what was tried: docs/op-models.md ("Depthwise convolutions", "The peak an op takes",
"Tried, not shipped: GEMM-like baselines").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from opcost.model.basis.physics import device_peaks, op_peak, spatial_size, tensor_core_eligible
from opcost.ops import kinds

if TYPE_CHECKING:
    from opcost.devices import DeviceConfig

CONV_PREFIX = "Conv"


def is_depthwise(kind: str, hp: dict[str, Any]) -> bool:
    """A convolution whose every group is one input channel (groups == in_channels > 1)."""
    if not kind.startswith(CONV_PREFIX):
        return False
    groups = int(hp.get("groups", 1) or 1)
    return groups > 1 and groups == int(hp.get("in_channels", 0) or 0)


def fp32_compute_s(flops: float, device: DeviceConfig | None) -> float:
    """FLOPs over the FP32 (non-tensor-core) peak of the resolved device config (None: nominal) [s]."""
    return float(flops) / device_peaks(device)[1]


def depthwise_efficiency(compute_s: np.ndarray, t_s: np.ndarray, floor_s: float = 0.0) -> float:
    """Geometric mean of compute_s / (t - floor) over the given depthwise rows: their fraction of the
    FP32 peak once the launch floor is taken off, as the model's offset log(baseline + floor) adds it
    back; 0.0 (no baseline) where no finite row is above the floor to learn it from."""
    c, t = np.asarray(compute_s, float), np.asarray(t_s, float) - floor_s
    ok = np.isfinite(c) & np.isfinite(t) & (c > 0) & (t > 0)
    if not ok.any():
        return 0.0
    return float(np.exp(np.mean(np.log(c[ok] / t[ok]))))


def features(kind: str, hp: dict[str, Any], flops: float, device: DeviceConfig | None) -> list[float]:
    """[depthwise flag, log(1 + FP32 compute time in ns) of a depthwise op, else 0]."""
    if not is_depthwise(kind, hp):
        return [0.0, 0.0]
    return [1.0, math.log1p(fp32_compute_s(flops, device) * 1e9)]


FEATURE_COLUMNS: Sequence[str] = ("depthwise", "log_dw_compute_s")

# -- a linear layer as the trees see it ---------------------------------------------------------
# Why: a linear layer is a 1x1 convolution over its leading dimensions (GEMM M = their product, N =
# out_features, K = in_features). Shown to the trees under its own kind, with `in_features` where a
# convolution has `in_channels` and its channels-last input (N, H, W, C) where a convolution's is (N,
# C, H, W), a large Linear layer shares no leaf with the large 1x1 convolutions every CNN family has,
# only with the few small classifier heads left when ConvNeXt and Swin are held out (ConvNeXt's
# Linear layers: +82 % family-out, the tree's splits on `bias`, `in_dim1` and `in_channels`).
# The `physical` set shows it as the 1x1 convolution it computes; its physics features (roofline,
# GEMM dimensions, unit peak) stay those of a linear layer. Its bias is shown as none: a GEMM's bias
# is a fused epilogue of no measurable cost, and with it the classifier heads (skinny GEMMs, slow for
# their FLOPs) taught the trees that a convolution with a bias is slow: ConvNeXt's biased depthwise
# convolutions went from +17 to +45 % family-out.
LINEAR_KIND, CONV_VIEW_KIND = "Linear", "Conv2d"


def tree_view(
    kind: str, hp: dict[str, Any], input_shape: tuple[int, ...]
) -> tuple[str, dict[str, Any], tuple[int, ...]]:
    """(kind, hyper-parameters, input shape) the `physical` trees see: a Linear layer as the 1x1
    convolution over (N, C, rest) it computes; every other op as it is."""
    if kind != LINEAR_KIND or "in_features" not in hp or not input_shape:
        return kind, hp, input_shape
    shape = tuple(int(x) for x in input_shape)
    lead, c = shape[:-1], shape[-1]
    spatial = lead[1:] if len(lead) > 1 else ()
    view_shape = (lead[0] if lead else 1, c, *spatial) if len(shape) > 1 else (1, c)
    view_hp = {"in_channels": hp["in_features"], "out_channels": hp["out_features"], "kernel_size": [1, 1],
               "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "bias": False}  # fmt: skip
    return CONV_VIEW_KIND, view_hp, view_shape


# -- the compute unit's attained peak -----------------------------------------------------------
# Why: a GEMM-like op's FP32 work runs on one of two units (physics.peak_of): a cuDNN convolution on
# the TF32 tensor cores where allowed, a cuBLAS matmul (Linear) on the FP32 units. The nominal peaks
# are not equally reachable: on the thesis A30 compute-bound convolutions attain 0.42-0.51 of the
# TF32 peak, ConvNeXt's large Linear layers 0.75-0.89 of the FP32 peak. Against the nominal rooflines
# the two sit a factor ~2 apart in log(t / roofline), and a tree that has no large Linear layer left
# to learn from (ConvNeXt and Swin held out) gives one the convolutions' ratio: -52 % against the
# TF32 roofline, +206 % against the FP32 one. Dividing each unit's peak by the fraction its own
# compute-bound GEMM-like rows attain (median, learnt from the fit rows only) puts both on one scale;
# the FP32 units without COMPUTE_BOUND_ROWS such rows keep their nominal peak. In training the fraction
# also absorbs the backward pass (FLOPs are the forward pass's). Only where the TF32 unit is in use and
# learnt: on a config with one unit (no TF32, or TF32 off) a common factor puts nothing on one scale,
# and rescaling every GEMM against the other ops made the family split worse (RTX 2080 Ti inference:
# 13.5 -> 14.7 % MAPE).
TF32_UNIT, FP32_UNIT = "tf32", "fp32"
UNITS = (TF32_UNIT, FP32_UNIT)
COMPUTE_BOUND_RATIO = 4.0  # compute time at least this multiple of memory time: the peak is what limits it
COMPUTE_BOUND_ROWS = 5


def gemm_unit(kind: str, hp: dict[str, Any], device: DeviceConfig | None) -> str:
    """The unit a GEMM-like op runs on under PyTorch's defaults: TF32_UNIT or FP32_UNIT; "" for an op
    that is not a matrix product, and for a depthwise convolution (its own baseline above)."""
    if kind not in kinds.MATMUL_KINDS or is_depthwise(kind, hp) or tf32_fallback(kind, hp, device):
        return ""
    return TF32_UNIT if op_peak(kind, device) > device_peaks(device)[1] else FP32_UNIT


def unit_efficiencies(
    unit: np.ndarray, compute_s: np.ndarray, memory_s: np.ndarray, t_s: np.ndarray, floor_s: float = 0.0
) -> dict[str, float]:
    """Per unit: the median of compute_s / (t - floor) over its compute-bound rows (at least
    COMPUTE_BOUND_ROWS of them), the fraction of the nominal peak it attains; units without: absent;
    nothing at all ({}: every peak nominal) where the TF32 unit has no such rows."""
    unit, c, m = np.asarray(unit), np.asarray(compute_s, float), np.asarray(memory_s, float)
    t = np.asarray(t_s, float) - floor_s
    ok = np.isfinite(c) & np.isfinite(t) & (c > 0) & (t > 0) & (c >= COMPUTE_BOUND_RATIO * m)
    out = {}
    for u in UNITS:
        sel = ok & (unit == u)
        if sel.sum() >= COMPUTE_BOUND_ROWS:
            out[u] = float(np.median(c[sel] / t[sel]))
    return out if TF32_UNIT in out else {}


# -- convolutions the TF32 tensor cores cannot take ---------------------------------------------
# Why: physics.tensor_core_eligible: a convolution whose channels per group are not multiples of 4
# (every stem: 3 input channels) runs on the FP32 units even where TF32 is on; the thesis A30's stems
# take the same time with TF32 on and off. Against the TF32 roofline they sat at 5-9 % of the peak,
# a ratio no other convolution has, so a held-out family's stem was predicted from its siblings'
# ratio (-45 % family-out: ResNet's, DenseNet's, AlexNet's, Inception's). The `physical` baseline
# charges them at the nominal FP32 peak, where they run at 37-80 % (the FP32 convolutions' range) and
# they take no part in the TF32 unit's attained fraction. Only on configs whose TF32 is on: elsewhere
# every convolution is on the FP32 units already.
def tf32_fallback(kind: str, hp: dict[str, Any], device: DeviceConfig | None) -> bool:
    """A (not depthwise) convolution on a TF32 config (a resolved one; None: the table lacks it) that the
    tensor cores cannot take."""
    if not kind.startswith(CONV_PREFIX) or is_depthwise(kind, hp) or tensor_core_eligible(kind, hp):
        return False
    return bool(device and device[1] and device[0].has_tf32)


# -- compute and memory overlap ------------------------------------------------------------------
# Why: the roofline max(compute, memory) assumes an op's loads hide entirely behind its arithmetic (or
# the reverse). Where the two are close they do not: a 1x1 convolution at the TF32 unit's attained peak
# moves about as many bytes as it has time for, and measured it takes up to ~1.4x the larger of the two.
# The trees learnt that hump from the large 1x1 convolutions of the training families and laid it on
# the held-out family's large GEMMs (ConvNeXt's 4-D Linear layers, compute-bound on the FP32 units:
# +15 to +65 % family-out on the A30, base within 15 % of the measured time). The `physical` baseline
# combines the two times as an L2 norm, (C^2 + M^2)^(1/2): the larger alone where one dominates, up to
# sqrt(2) x it where they balance; C is the compute time at the peak the op attains (the parts above).
# p = 2 is the one value tried besides 1 (the sum); figures: docs/op-models.md, "Tried, not shipped: GEMM-like
# baselines".
OVERLAP_NORM = 2.0


def compute_part_s(
    compute_s: np.ndarray,
    fp32_compute_s: np.ndarray,
    fallback: np.ndarray,
    unit: np.ndarray,
    unit_eff: dict[str, float],
    depthwise: np.ndarray,
    dw_efficiency: float,
) -> np.ndarray:
    """Per op: its compute time at the peak it attains [s]: FLOPs over the op's peak (`compute_s`); the
    FP32 peak for TF32 fallbacks; the unit's attained fraction (`unit_eff`) for GEMM-like ops; for
    depthwise convolutions the larger of that and FLOPs / (FP32 peak x dw_efficiency)."""
    c = np.array(compute_s, float)
    fb = np.asarray(fallback, bool)
    c[fb] = np.asarray(fp32_compute_s, float)[fb]
    unit = np.asarray(unit)
    for u, e in unit_eff.items():
        if e > 0:
            c[unit == u] = c[unit == u] / e
    if dw_efficiency > 0:
        dw = np.asarray(depthwise, bool)
        c[dw] = np.maximum(c[dw], np.asarray(fp32_compute_s, float)[dw] / dw_efficiency)
    return c


def overlap_s(compute_s: np.ndarray, memory_s: np.ndarray, norm: float = OVERLAP_NORM) -> np.ndarray:
    """(C^p + M^p)^(1/p) per op, never below 1 ns (physics.roofline_s's floor): the `physical` baseline."""
    c, m = np.asarray(compute_s, float), np.asarray(memory_s, float)
    return np.maximum((c**norm + m**norm) ** (1.0 / norm), 1e-9)


# -- a convolution's kernel as cuDNN sees it ------------------------------------------------------
# Why: the thesis encoding gives the trees the first element of a size only, so Inception's factorised
# 1x7 convolution looks like a 1x1 one and its 7x1 like a 7x7 one, and a stride-2 convolution like a
# stride-(2, 1) one. cuDNN chooses its algorithm on the whole kernel: on the FP32 units a 3x3, stride-1,
# undilated, ungrouped convolution runs Winograd at 1.2x the nominal peak (median, A30 without TF32),
# a 3x3 stride-2 one at 0.47x, a 1x1 one at 0.6x. Kernel height and width, the product of the strides
# and that Winograd eligibility, for every convolution; NOT_A_CONV for other ops. Figures: docs/op-models.md,
# "A convolution's whole kernel".
KERNEL_COLUMNS: Sequence[str] = ("kernel_h", "kernel_w", "stride_area", "winograd_3x3")
NOT_A_CONV = -1.0


def _pair(value: Any) -> tuple[int, int]:
    """A 2-D size from an int or a list (a 1-D size repeats its one element): physics.spatial_size."""
    h, w = spatial_size(value, 2)
    return h, w


def kernel_features(kind: str, hp: dict[str, Any]) -> list[float]:
    """[kernel height, kernel width, stride height x width, 1.0 if Winograd-eligible 3x3 else 0.0]."""
    if not kind.startswith(CONV_PREFIX) or "kernel_size" not in hp:
        return [NOT_A_CONV] * len(KERNEL_COLUMNS)
    kh, kw = _pair(hp["kernel_size"])
    sh, sw = _pair(hp.get("stride", 1) or 1)
    dilated = _pair(hp.get("dilation", 1) or 1) != (1, 1)
    winograd = kh == kw == 3 and sh == sw == 1 and not dilated and int(hp.get("groups", 1) or 1) == 1
    return [float(kh), float(kw), float(sh * sw), float(winograd)]
