"""What the hardware says an op should cost: roofline time, arithmetic intensity, GEMM shape, no-ops.

- Roofline time = max(FLOPs / peak, bytes / bandwidth), with the peak that applies (`op_peak`, the one
  place that decides it for physics, features, clock transfer and the cross-device model): under
  PyTorch's defaults cuDNN convolutions run on the tensor cores in TF32 (`torch.backends.cudnn.
  allow_tf32` is True) where the device has TF32 and the config allows it (`A30_no_tf32` does not);
  cuBLAS matmuls (linear layers, attention, matmul, bmm) do not (`torch.backends.cuda.matmul.
  allow_tf32` is False since torch 1.12), so they and everything else take the FP32 peak. The thesis
  A30 shows it: its Linear layers take the same time with and without TF32 (median ratio 1.00 in
  inference, 0.98 in training), its convolutions 2.0x / 1.5x longer without.
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
from typing import TYPE_CHECKING, Any, Sequence

from opcost.errors import OpcostError
from opcost.ops import kinds

if TYPE_CHECKING:
    from opcost.devices import Device, DeviceConfig

# Nominal figures for a device the table does not know (FLOP/s, B/s).
NOMINAL_PEAK, NOMINAL_BANDWIDTH = 1e12, 1e11
# Kind facts (matmul, dropout, no-op, category) live in one table, ops/kinds.py. This name stays
# for model/basis/features.py and model/prediction/predict.py, which import it from here.
MATMUL_KINDS = kinds.MATMUL_KINDS


def device_peaks(device: DeviceConfig | None) -> tuple[float, float, float]:
    """(convolution peak, FP32 peak, bandwidth) of a resolved device config (None: the table lacks it, nominal
    figures): the first is the FP32-input peak of the matrix units where the config allows TF32; which op takes
    which peak is `op_peak`'s call."""
    if device is None:
        return NOMINAL_PEAK, NOMINAL_PEAK, NOMINAL_BANDWIDTH
    dev, tf32 = device
    return dev.peak_flops("float32", tf32), dev.fp32_flops, dev.bandwidth


def uses_tf32(kind: str) -> bool:
    """Whether an op of `kind` runs its FP32 work on TF32 tensor cores under PyTorch's defaults:
    convolutions (cuDNN, `Conv2d`, `ConvTranspose1d`, `conv2d`, the cross-device kind `conv`) only."""
    return kind.lower().startswith("conv")


def peak_of(kind: str, dev: Device, tf32: bool, dtype: str = "float32") -> float:
    """THE peak an op of `kind` (a project kind or a cross-device kind) reaches on `dev` [FLOP/s].

    Half precision: the device's FP16 peak (tensor cores with FP32 accumulation where present). FP32:
    TF32 tensor cores for convolutions where the device has TF32 and the config (`tf32`) allows it;
    the FP32 units for matmuls (PyTorch leaves cuBLAS TF32 off) and everything else."""
    return dev.peak_flops(dtype, tf32 and uses_tf32(kind))


# Why: cuDNN runs a convolution's FP32 work on the TF32 tensor cores only where its channels per
# group are multiples of TF32_CHANNEL_MULTIPLE; otherwise it falls back to the FP32 units. The thesis
# A30 shows it: its stems (3 input channels: ResNet, DenseNet, AlexNet, EfficientNet, Inception,
# ConvNeXt, ViT) take the same time with TF32 on and off (median ratio 1.00 in inference, 1.09 in
# training), every other compute-bound convolution 2.6x / 2.2x longer without TF32. Charged at the
# TF32 peak, the stems ran at 5-9 % of it and their family-out error was -45 % (the trees had no
# unseen stem's shape to learn the fallback from); at the FP32 peak they sit where their siblings do.
TF32_CHANNEL_MULTIPLE = 4


def tensor_core_eligible(kind: str, hp: dict[str, Any] | None) -> bool:
    """Whether a convolution can take the TF32 tensor cores: in and out channels per group multiples of
    TF32_CHANNEL_MULTIPLE. True for every other op and where the hyper-parameters are not known (the
    kind alone decides, as before: `peak_of`)."""
    if not hp or not kind.lower().startswith("conv") or "in_channels" not in hp or "out_channels" not in hp:
        return True
    groups = int(hp.get("groups", 1) or 1)
    per_group = (int(hp["in_channels"]) // groups, int(hp["out_channels"]) // groups)
    return all(c % TF32_CHANNEL_MULTIPLE == 0 for c in per_group)


def op_peak(kind: str, device: DeviceConfig | None, dtype: str = "float32") -> float:
    """`peak_of` for a resolved device config (the A30, TF32 on or off); NOMINAL_PEAK where the table lacks it
    (None). The name is resolved once at the edge (devices.find_device), never here: this runs per op."""
    if device is None:
        return NOMINAL_PEAK
    return peak_of(kind, device[0], device[1], dtype)


def compute_memory_s(
    kind: str, metrics: dict[str, Any], device: DeviceConfig | None, dtype: str = "float32"
) -> tuple[float, float]:
    """(FLOPs over the op's peak, bytes read and written over the bandwidth) of one call [s]."""
    compute = float(metrics["flops"]) / op_peak(kind, device, dtype)
    memory = (float(metrics["bytes_read"]) + float(metrics["bytes_written"])) / device_peaks(device)[2]
    return compute, memory


def roofline_s(kind: str, metrics: dict[str, Any], device: DeviceConfig | None, dtype: str = "float32") -> float:
    """max(compute time, memory time) of one call on the device; never zero (1 ns floor)."""
    return max(*compute_memory_s(kind, metrics, device, dtype), 1e-9)


def spatial_size(value: Any, rank: int = 2) -> tuple[int, ...]:
    """A convolution's kernel_size, stride, padding or dilation as `rank` integers, as PyTorch reads them:
    an int (or a one-element list) stands for the same size on every spatial axis (`Conv2d(.., 3)` is a
    3x3 kernel); a longer list keeps its first `rank`; an empty one is 1s; one of 2 values for 3 axes
    says no size, and is refused. The one reading of a size for the GEMM dimensions here and the kernel
    features (model/basis/gemm.kernel_features)."""
    if isinstance(value, (list, tuple)):
        vals = [int(v) for v in value] or [1]
        if len(vals) == 1:
            return (vals[0],) * rank
        if len(vals) < rank:
            raise OpcostError(f"convolution size {list(value)}: {len(vals)} values for {rank} spatial axes; "
                              f"give one value or {rank}")  # fmt: skip
        return tuple(vals[:rank])
    return (int(value),) * rank


def conv_rank(kind: str, input_shape: tuple[int, ...]) -> int:
    """Spatial axes of a convolution: its kind's `1d`/`2d`/`3d`, else its input's rank less batch and
    channels (2 where neither says)."""
    for r in (1, 2, 3):
        if kind.lower().endswith(f"{r}d"):
            return r
    return max(len(input_shape) - 2, 1) if input_shape else 2


def gemm_dims(
    kind: str, hp: dict[str, Any], input_shape: tuple[int, ...], output_shapes: Sequence[Sequence[int]]
) -> tuple[float, float, float]:
    """(M, N, K) of the GEMM a convolution or linear layer performs; zeros for other ops. K counts the
    whole kernel: an int kernel_size k of a 2-D convolution is k x k (`spatial_size`)."""
    out = [int(x) for x in output_shapes[0]] if output_shapes else []
    if kind.startswith("Conv") and out and "out_channels" in hp:
        groups = int(hp.get("groups", 1) or 1)
        ksize = math.prod(spatial_size(hp.get("kernel_size", 1), conv_rank(kind, input_shape)))
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
    if metrics.get("is_view") or kinds.is_noop_kind(kind):
        return True
    if kinds.drops_at_random(kind):
        p = hp.get("p", 0.0)
        return mode == "inference" or float(p or 0.0) == 0.0
    return False


def proxy_kind(kind: str, known: tuple[str, ...] | set[str]) -> str | None:
    """The kind the models know that stands in for `kind`: same category first, then its fallback.
    An op of a kind the device's models never saw is predicted as the first kind of its category
    (ops/kinds.CATEGORIES: same physics: bytes-bound elementwise, normalisation, pooling, data
    movement, GEMM-like) the models know; None: charged at its roofline time (model/composition/costing.py).
    A matrix product that is not a convolution (matmul, bmm, attention) is first a linear layer."""
    cat = kinds.category_of(kind)
    for c in (cat, kinds.FALLBACK.get(cat or "")):
        if c is None:
            continue
        order = kinds.CATEGORIES[c]
        if c == kinds.GEMM and not kind.lower().startswith("conv"):
            order = ("Linear", *order)
        for k in order:
            if k in known:
                return k
    return None
