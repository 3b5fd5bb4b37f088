"""What the hardware says an op should cost: roofline time, arithmetic intensity, GEMM shape, no-ops.

- Roofline time = max(FLOPs / peak, bytes / bandwidth), with the peak that applies: matmul-like ops
  (convolutions, linear layers, attention, matmul) run on tensor cores in TF32 only where the device
  has TF32 and the config allows it (`A30_no_tf32` does not); everything else on the FP32 units.
  The trees then learn log(t / roofline): how far from the hardware's bound an op runs, a quantity
  that varies over one or two orders of magnitude instead of five.
- GEMM dimensions (M, N, K) of convolutions (implicit GEMM: M = batch x output pixels,
  N = out channels per group, K = in channels per group x kernel size) and linear layers.
- No-ops: a view, an identity, dropout in eval mode or with p = 0, stochastic depth likewise. They
  cost the device's launch floor, measured from its own data, not a tree's guess.
Devices missing from the table (a CPU host) use nominal figures: the features stay defined and
consistent, only their absolute scale is arbitrary.
"""

from __future__ import annotations

import math
from typing import Any

from opcost.devices import find_device

# Nominal figures for a device the table does not know (FLOP/s, B/s).
NOMINAL_PEAK, NOMINAL_BANDWIDTH = 1e12, 1e11
MATMUL_KINDS = frozenset(
    {
        "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Linear",
        "MultiheadAttention", "ShiftedWindowAttention", "ShiftedWindowAttentionV2", "matmul", "bmm", "mm",
        "linear", "conv2d", "scaled_dot_product_attention", "einsum", "baddbmm", "addmm",
    }
)  # fmt: skip
DROPOUT_KINDS = frozenset({"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "dropout"})
NOOP_KINDS = frozenset({"Identity"})  # views (flatten of a contiguous tensor, reshape, ...) by their is_view metric


def device_peaks(device_config: str) -> tuple[float, float, float]:
    """(matmul peak, FP32 peak, bandwidth) of a device config."""
    found = find_device(device_config)
    if found is None:
        return NOMINAL_PEAK, NOMINAL_PEAK, NOMINAL_BANDWIDTH
    dev, tf32 = found
    return dev.peak_flops("float32", tf32), dev.fp32_flops, dev.bandwidth


def roofline_s(kind: str, metrics: dict[str, Any], device_config: str, dtype: str = "float32") -> float:
    """max(compute time, memory time) of one call on the device; never zero (1 ns floor)."""
    mm_peak, fp32_peak, bw = device_peaks(device_config)
    peak = mm_peak if kind in MATMUL_KINDS else fp32_peak
    if dtype in ("float16", "bfloat16"):
        found = find_device(device_config)
        peak = found[0].fp16_flops if found else peak
    compute = float(metrics["flops"]) / peak
    memory = (float(metrics["bytes_read"]) + float(metrics["bytes_written"])) / bw
    return max(compute, memory, 1e-9)


def gemm_dims(
    kind: str, hp: dict[str, Any], input_shape: tuple[int, ...], output_shapes: list
) -> tuple[float, float, float]:
    """(M, N, K) of the GEMM a convolution or linear layer performs; zeros for other ops."""
    out = [int(x) for x in output_shapes[0]] if output_shapes else []
    if kind.startswith("Conv") and out and "out_channels" in hp:
        groups = int(hp.get("groups", 1) or 1)
        kernel = hp.get("kernel_size", [1])
        ksize = math.prod(int(k) for k in (kernel if isinstance(kernel, (list, tuple)) else [kernel]))
        m = out[0] * math.prod(out[2:]) if len(out) > 2 else out[0]
        return float(m), float(int(hp["out_channels"]) // groups), float(int(hp["in_channels"]) // groups * ksize)
    if kind == "Linear" and input_shape and "in_features" in hp:
        return float(math.prod(input_shape[:-1])), float(hp["out_features"]), float(hp["in_features"])
    if kind == "MultiheadAttention" and len(input_shape) == 3:
        e = input_shape[-1]
        return float(input_shape[0] * input_shape[1]), float(e), float(e)
    return 0.0, 0.0, 0.0


def is_noop(kind: str, hp: dict[str, Any], metrics: dict[str, Any], mode: str) -> bool:
    """An op that does no work worth modelling: its cost is the launch floor."""
    if metrics.get("is_view") or kind in NOOP_KINDS:
        return True
    if kind in DROPOUT_KINDS or kind == "StochasticDepth":
        p = hp.get("p", 0.0)
        return mode == "inference" or float(p or 0.0) == 0.0
    return False


# Op categories: an op of a kind the device's models never saw is predicted as the first kind of
# its category the models know (same physics: bytes-bound elementwise, normalisation, pooling,
# data movement, GEMM-like), else charged at its roofline time.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "gemm": ("Conv2d", "Linear", "Conv1d", "Conv3d", "MultiheadAttention", "ShiftedWindowAttention",
             "ShiftedWindowAttentionV2", "matmul", "bmm", "linear", "scaled_dot_product_attention", "einsum",
             "ConvTranspose2d", "baddbmm", "addmm", "mm", "conv2d"),
    "norm": ("BatchNorm2d", "LayerNorm", "LayerNorm2d", "GroupNorm", "BatchNorm1d", "BatchNorm3d", "layer_norm",
             "InstanceNorm2d", "batch_norm", "group_norm", "LocalResponseNorm"),
    "elementwise": ("ReLU", "add", "mul", "GELU", "SiLU", "ReLU6", "Hardswish", "Hardsigmoid", "Sigmoid", "Tanh",
                    "StochasticDepth", "Dropout", "sub", "div", "add_", "mul_", "iadd", "imul", "gelu", "relu",
                    "silu", "sigmoid", "softmax", "Softmax", "log_softmax", "neg", "pow", "sqrt", "rsqrt", "exp",
                    "tanh", "clamp", "where", "masked_fill", "LeakyReLU", "ELU", "Mish", "hardswish", "hardsigmoid",
                    "eq", "ne", "lt", "gt", "le", "ge", "logical_not", "logical_and", "log", "maximum", "minimum"),
    "pool": ("AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d", "adaptive_avg_pool2d", "avg_pool2d", "max_pool2d",
             "AdaptiveMaxPool2d", "AdaptiveAvgPool1d", "mean", "sum", "amax"),
    "data": ("cat", "permute", "transpose", "flatten", "Flatten", "reshape", "view", "contiguous", "getitem",
             "stack", "roll", "pad", "chunk", "split", "unbind", "expand", "repeat", "narrow", "select",
             "Permute", "ChannelShuffle", "channel_shuffle", "interpolate", "Upsample", "clone", "fill", "index",
             "scalar_tensor", "embedding", "Embedding"),
}  # fmt: skip
_CATEGORY_OF = {k: c for c, kinds in CATEGORIES.items() for k in kinds}
# Where a category has no kind the models know, the next one to try (data movement is bytes-bound
# like elementwise ops; pooling and normalisation read and write each element about once).
_FALLBACK = {"data": "elementwise", "pool": "elementwise", "norm": "elementwise", "elementwise": "norm"}


def category_of(kind: str) -> str | None:
    return _CATEGORY_OF.get(kind)


def proxy_kind(kind: str, known: tuple[str, ...] | set[str]) -> str | None:
    """The kind the models know that stands in for `kind`: same category first, then its fallback.
    A matrix product that is not a convolution (matmul, bmm, attention) is first a linear layer."""
    cat = category_of(kind)
    for c in (cat, _FALLBACK.get(cat or "")):
        if c is None:
            continue
        order = CATEGORIES[c]
        if c == "gemm" and not kind.lower().startswith("conv"):
            order = ("Linear", *order)
        for k in order:
            if k in known:
                return k
    return None
