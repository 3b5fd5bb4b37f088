"""Every op kind the project knows, with its facts: one table, asked by every module that treats kinds apart.

A kind is what an op is recorded as (a module class name, a normalised function name or a kernel
name of a composite's parts). Each kind has one row, so a kind cannot be costed one way and
extracted another; the modules ask the query functions below. Facts: `category` (what an unseen
kind is predicted as, in preference order), `matmul`, `composite`, `drops`, `noop`, `recurrent`,
`gemm_part` / `bias_first` and `init_getters`.
Nothing here imports torch: costing a cached extraction asks the same table without loading it.
Design: docs/architecture.md#op-kinds-one-table-opskindspy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# Op categories, in the order their fallback is tried (see FALLBACK).
GEMM, NORM, ELEMENTWISE, POOL, DATA = "gemm", "norm", "elementwise", "pool", "data"
SEQUENCE, CELL = "sequence", "cell"


def _child_in_features(child: str) -> Callable[[Any], Any]:
    return lambda m: getattr(m, child).in_features


def _child_has_bias(child: str) -> Callable[[Any], Any]:
    return lambda m: getattr(m, child).bias is not None


_MHA_GETTERS: Mapping[str, Callable[[Any], Any]] = {
    "bias": lambda m: m.in_proj_bias is not None,
    "add_bias_kv": lambda m: m.bias_k is not None,
}
_SWIN_GETTERS: Mapping[str, Callable[[Any], Any]] = {
    "dim": _child_in_features("qkv"),
    "qkv_bias": _child_has_bias("qkv"),
    "proj_bias": _child_has_bias("proj"),
}


@dataclass(frozen=True)
class Kind:
    """One op kind and its facts (see module docstring)."""

    name: str
    category: str | None = None
    matmul: bool = False
    composite: bool = False
    drops: bool = False
    noop: bool = False
    recurrent: str | None = None
    gemm_part: bool = False
    bias_first: bool = False
    init_getters: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict, compare=False)


def _plain(category: str, names: str) -> tuple[Kind, ...]:
    """Kinds whose only fact is their category, in preference order."""
    return tuple(Kind(n, category) for n in names.split())


_TABLE: tuple[Kind, ...] = (
    # gemm: matrix products, on the matmul peak. Convolutions first (a convolution's proxy); a
    # product that is not a convolution tries Linear first (physics.proxy_kind).
    Kind("Conv2d", GEMM, matmul=True),
    Kind("Linear", GEMM, matmul=True),
    Kind("Conv1d", GEMM, matmul=True),
    Kind("Conv3d", GEMM, matmul=True),
    Kind("MultiheadAttention", GEMM, matmul=True, composite=True, init_getters=_MHA_GETTERS),
    Kind("ShiftedWindowAttention", GEMM, matmul=True, composite=True, init_getters=_SWIN_GETTERS),
    Kind("ShiftedWindowAttentionV2", GEMM, matmul=True, composite=True, init_getters=_SWIN_GETTERS),
    Kind("matmul", GEMM, matmul=True),
    Kind("bmm", GEMM, matmul=True, gemm_part=True),
    Kind("linear", GEMM, matmul=True),
    Kind("scaled_dot_product_attention", GEMM, matmul=True, composite=True),
    Kind("einsum", GEMM, matmul=True),
    Kind("ConvTranspose2d", GEMM, matmul=True),
    Kind("baddbmm", GEMM, matmul=True, gemm_part=True, bias_first=True),
    Kind("addmm", GEMM, matmul=True, gemm_part=True, bias_first=True),
    Kind("mm", GEMM, matmul=True, gemm_part=True),
    Kind("conv2d", GEMM, matmul=True),
    # matrix products no category lists (costed from their parts)
    Kind("ConvTranspose1d", matmul=True),
    Kind("ConvTranspose3d", matmul=True),
    # norm
    *_plain(NORM, "BatchNorm2d LayerNorm LayerNorm2d GroupNorm BatchNorm1d BatchNorm3d layer_norm InstanceNorm2d"),
    *_plain(NORM, "batch_norm group_norm LocalResponseNorm"),
    # elementwise: bytes-bound, one read and one write per element
    *_plain(ELEMENTWISE, "ReLU add mul GELU SiLU ReLU6 Hardswish Hardsigmoid Sigmoid Tanh"),
    Kind("StochasticDepth", ELEMENTWISE, drops=True),
    Kind("Dropout", ELEMENTWISE, drops=True),
    *_plain(ELEMENTWISE, "sub div add_ mul_ iadd imul gelu relu silu sigmoid softmax Softmax log_softmax neg pow"),
    *_plain(ELEMENTWISE, "sqrt rsqrt exp tanh clamp where masked_fill LeakyReLU ELU Mish hardswish hardsigmoid"),
    *_plain(ELEMENTWISE, "eq ne lt gt le ge logical_not logical_and log maximum minimum"),
    # random drops no category lists
    *(Kind(n, drops=True) for n in ("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "dropout")),
    # pool (and reductions)
    *_plain(POOL, "AdaptiveAvgPool2d AvgPool2d MaxPool2d adaptive_avg_pool2d avg_pool2d max_pool2d"),
    *_plain(POOL, "AdaptiveMaxPool2d AdaptiveAvgPool1d mean sum amax"),
    # data movement
    *_plain(DATA, "cat permute transpose flatten Flatten reshape view contiguous getitem stack roll pad chunk"),
    *_plain(DATA, "split unbind expand repeat narrow select Permute ChannelShuffle channel_shuffle interpolate"),
    *_plain(DATA, "Upsample clone fill index scalar_tensor embedding Embedding"),
    # no work at all
    Kind("Identity", noop=True),
    # recurrent layers: sequential steps, costed from their parts (ops/recurrent.py)
    *(Kind(n, recurrent=SEQUENCE) for n in ("LSTM", "GRU", "RNN")),
    *(Kind(n, recurrent=CELL) for n in ("LSTMCell", "GRUCell", "RNNCell")),
)

KINDS: dict[str, Kind] = {k.name: k for k in _TABLE}
if len(KINDS) != len(_TABLE):  # pragma: no cover - a row listed twice would silently lose its facts
    raise AssertionError("ops/kinds.py: a kind is listed twice")

CATEGORIES: dict[str, tuple[str, ...]] = {
    c: tuple(k.name for k in _TABLE if k.category == c) for c in (GEMM, NORM, ELEMENTWISE, POOL, DATA)
}
# Where a category has no kind the models know, the next one to try (data movement is bytes-bound
# like elementwise ops; pooling and normalisation read and write each element about once).
FALLBACK: dict[str, str] = {DATA: ELEMENTWISE, POOL: ELEMENTWISE, NORM: ELEMENTWISE, ELEMENTWISE: NORM}

_UNKNOWN = Kind("")


def _where(**facts: Any) -> frozenset[str]:
    return frozenset(k.name for k in _TABLE if all(getattr(k, f) == v for f, v in facts.items()))


# Sets of kinds, for vectorised tests (`rows["kind"].isin(...)`) and for readers who want the list.
MATMUL_KINDS = _where(matmul=True)
COMPOSITE_KINDS = _where(composite=True)
DROP_KINDS = _where(drops=True)
NOOP_KINDS = _where(noop=True)
SEQUENCE_KINDS = _where(recurrent=SEQUENCE)
CELL_KINDS = _where(recurrent=CELL)
RECURRENT_KINDS = SEQUENCE_KINDS | CELL_KINDS
GEMM_PART_KINDS = _where(gemm_part=True)


def facts(kind: str) -> Kind:
    """The row of `kind`; a kind the table does not list has no facts (no category, not a matmul, ...)."""
    return KINDS.get(kind, _UNKNOWN)


def category_of(kind: str) -> str | None:
    return facts(kind).category


def is_composite(kind: str) -> bool:
    return facts(kind).composite


def has_parts(kind: str) -> bool:
    """Costed from the kernels it runs where nothing measured it: composites, and kinds no category knows."""
    return is_composite(kind) or category_of(kind) is None


def drops_at_random(kind: str) -> bool:
    return facts(kind).drops


def is_noop_kind(kind: str) -> bool:
    return facts(kind).noop


def is_recurrent(kind: str) -> bool:
    return facts(kind).recurrent is not None


def is_sequence(kind: str) -> bool:
    return facts(kind).recurrent == SEQUENCE


def init_getters(kind: str) -> Mapping[str, Callable[[Any], Any]]:
    return facts(kind).init_getters


# Constructor arguments that a newer torch added to a layer, with the value that does what the layer did
# before: a spec recorded under the pinned torch builds under an older one (a GPU machine's) without them
# when they hold that value, and an op measured under the older torch is matched to its id (ops/spec.py).
ADDED_ARGS: Mapping[str, Mapping[str, Any]] = {
    "BatchNorm1d": {"bias": True},  # torch 2.14
    "BatchNorm2d": {"bias": True},
    "BatchNorm3d": {"bias": True},
    "SyncBatchNorm": {"bias": True},
}


def added_args(kind: str) -> Mapping[str, Any]:
    return ADDED_ARGS.get(kind, {})


# --------------------------------------------------------------------------------------------
# ATen calls among a composite's parts (ops/parts.py)
# --------------------------------------------------------------------------------------------

# ATen calls that launch nothing worth a part: views and aliases (no data moves), allocations
# without a fill (empty*), metadata. The `unsafe_` splits return views that autograd does not track
# as views (so the dispatcher's `is_view` misses them): an LSTM or GRU cell splits its gates with them.
NO_WORK_ATEN = frozenset({"_unsafe_view", "alias", "detach", "lift_fresh", "empty", "empty_like", "empty_strided",
                          "new_empty", "new_empty_strided", "sym_size", "sym_stride", "sym_numel", "is_same_size",
                          "_local_scalar_dense", "set_", "unsafe_split", "unsafe_split_with_sizes",
                          "unsafe_chunk"})  # fmt: skip
# ATen names (leading and trailing underscores stripped) as the kinds the table knows.
ATEN_KIND: dict[str, str] = {
    "native_layer_norm": "layer_norm",
    "constant_pad_nd": "pad",
    "to_copy": "contiguous",
    "clone": "contiguous",
    "copy": "contiguous",
    "index": "getitem",
    "index_select": "getitem",
    "safe_softmax": "softmax",
    "linalg_vector_norm": "sum",
    "zero": "fill",
    "zeros": "fill",
    "new_zeros": "fill",
    "zeros_like": "fill",
    "full": "fill",
    "new_full": "fill",
    "masked_fill": "masked_fill",
    "clamp_min": "clamp",
    "clamp_max": "clamp",
}


def launches_work(aten_name: str) -> bool:
    """False for an ATen call that launches nothing worth a part (see NO_WORK_ATEN)."""
    return aten_name not in NO_WORK_ATEN


def part_kind(aten_name: str) -> str:
    """`_softmax` -> softmax, `add_` -> add, `native_layer_norm` -> layer_norm, `bmm` -> bmm."""
    name = aten_name.strip("_")
    return ATEN_KIND.get(name, name)


def is_gemm_part(aten_name: str) -> bool:
    """A matrix-product kernel: costed as the linear layer of the same GEMM."""
    return facts(aten_name).gemm_part


def bias_first(aten_name: str) -> bool:
    """A matrix-product kernel whose first argument is the bias (`addmm(bias, a, b)`)."""
    return facts(aten_name).bias_first


# --------------------------------------------------------------------------------------------
# The cross-device model's coarser kinds (model/crossdevice/xdevice.py)
# --------------------------------------------------------------------------------------------


def xkind_of(kind: str) -> str:
    """The cross-device model's kind (model/crossdevice/xdevice.XKINDS, NeuSight's vocabulary) of a project op kind.

    Matched case-insensitively, by name and then by pattern, so kinds the table does not list (a
    Hugging Face `RMSNorm`, `NewGELUActivation`, an in-place `relu_`) still find their group."""
    low = kind.lower()
    if low.startswith("conv"):
        return "conv"
    if kind in ("Linear", "linear", "addmm", "mm", "MultiheadAttention"):
        return "linear"
    if low in ("bmm", "matmul", "baddbmm", "einsum", "scaled_dot_product_attention") or "attention" in low:
        return "bmm"
    if low in ("layernorm", "layer_norm", "layernorm2d", "groupnorm", "group_norm", "rmsnorm"):
        return "layernorm"
    if "batchnorm" in low or low in ("batch_norm", "instancenorm2d", "localresponsenorm"):
        return "batchnorm"
    if low in ("softmax", "log_softmax", "logsoftmax"):
        return "softmax"
    if low in ("gelu", "newgeluactivation", "silu", "mish"):
        return "gelu"
    if low in ("add", "add_", "iadd", "sub", "stochasticdepth"):
        return "add"
    if low in ("mul", "mul_", "imul", "div", "truediv"):
        return "mul"
    if low in ("relu", "relu_", "relu6", "leakyrelu", "hardswish", "hardsigmoid", "sigmoid", "tanh"):
        return "relu"
    if category_of(kind) == "pool" or "pool" in low:
        return "pool"
    return "elementwise"
