"""Feature encodings of operations, one code path for training and for prediction.

`baseline` is the thesis encoding: one-hot op kind; a fixed list of hyper-parameters where a value
that does not apply is -1 with a 0 flag beside it; the input shape padded the same way; the core
clock. `improved` adds what the cost of an op follows more directly (PALEO, Sponner et al.): FLOPs,
bytes read and written, parameters, arithmetic intensity, input and output sizes, on a log scale,
and the physics of the device (model/basis/physics.py): roofline time and its compute and memory parts,
the GEMM dimensions of convolutions and linear layers. Its time target is log(t / roofline).
Both are built from an `OpRecord` (kind, named hyper-parameters, input shape, paper costs), made
from the op's spec by `op_record`, so a network extracted at prediction time is encoded exactly
like the training data. Records are plain data: encoding them needs no torch, which lets a
prediction from a cached extraction start in well under a second.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from opcost.data import floors
from opcost.devices import find_device
from opcost.memo import BoundedLRU
from opcost.model.basis import backward, gemm
from opcost.model.basis.physics import compute_memory_s, device_peaks, gemm_dims, op_peak, roofline_s
from opcost.ops.kinds import bias_first, is_gemm_part

if TYPE_CHECKING:  # torch stays out of the import path of predictions
    import pandas as pd

    from opcost.devices import DeviceConfig
    from opcost.ops.spec import OpSpec

FEATURE_SETS = ("baseline", "improved", "physical")  # physical: improved + model/basis/gemm.py's depthwise baseline

# The thesis' fixed hyper-parameter list; sizes contribute their first element.
BASELINE_ATTRS = (
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "groups",
    "bias",
    "in_features",
    "out_features",
    "num_features",
    "output_size",
    "normalized_shape",
    "p",
    "eps",
)
SHAPE_DIMS = 4
NOT_APPLICABLE = -1.0


def _scalar(value: Any) -> float | None:
    """A hyper-parameter as one number: sizes by their first element, bools as 0/1, text as None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if (
        isinstance(value, (list, tuple, np.ndarray))
        and len(value)
        and isinstance(value[0], (int, float, np.integer, np.floating))
    ):
        return float(value[0])
    return None


@dataclass(frozen=True)
class OpRecord:
    """What the encodings need to know about one op."""

    op_id: str
    kind: str
    hp: dict[str, Any] = field(default_factory=dict)
    input_shape: tuple[int, ...] = ()
    in_numel: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    # Everything but the kind as canonical JSON, memoised by `record_key` ("" where it is not JSON): with
    # the kind, the row cache's key. Not part of the record's identity; `with_kind` hands it on.
    _content_key: str | None = field(default=None, init=False, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "op_id": self.op_id,
            "kind": self.kind,
            "hp": self.hp,
            "input_shape": list(self.input_shape),
            "in_numel": self.in_numel,
            "metrics": self.metrics,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "OpRecord":
        return cls(d["op_id"], d["kind"], d["hp"], tuple(d["input_shape"]), int(d["in_numel"]), d["metrics"])


def op_record(spec: "OpSpec", metrics: dict[str, Any]) -> OpRecord:
    from opcost.ops.hparams import hyperparameters

    return OpRecord(
        op_id=spec.op_id,
        kind=spec.kind,
        hp=hyperparameters(spec),
        input_shape=tuple(spec.inputs[0].shape) if spec.inputs else (),
        in_numel=sum(math.prod(i.shape) for i in spec.inputs),
        metrics=metrics,
    )


@dataclass(frozen=True)
class Encoding:
    """The feature columns of one trained model: the kinds it knows, the feature set, and the device
    config whose table figures (peaks, bandwidth) the physics features use. `device_config` is the name
    (bundle.json's, and the encoding's identity); it is resolved once, when the encoding is made (`device`),
    and the physics below is handed that, never the name."""

    feature_set: str
    kinds: tuple[str, ...]
    device_config: str = ""
    floor_s: float = 0.0  # the device's launch floor: anchors log(t / (roofline + floor)) targets
    dw_efficiency: float = 0.0  # `physical`: depthwise convolutions' fraction of the FP32 peak (model/basis/gemm.py)
    # `physical`: the fraction of the TF32 / FP32 peak GEMM-like ops attain (model/basis/gemm.py); 0: nominal peak
    tf32_efficiency: float = 0.0
    fp32_efficiency: float = 0.0
    # training: depthwise convolutions' passes at this fraction (model/basis/backward.py)
    dw_train_efficiency: float = 0.0
    mm_train_efficiency: float = 0.0  # training: compute-bound Linear layers' 3 GEMMs at this fraction (likewise)
    kind_floors: floors.KindFloors = ()  # inference: per-kind floors in the offset, else floor_s (data/floors.py)
    # `device_config` resolved in the device table when the encoding is made; not part of its identity (the
    # row and prediction caches key on (encoding, device) instead: a patched table is another layout)
    _device: DeviceConfig | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_device", find_device(self.device_config))

    @property
    def device(self) -> DeviceConfig | None:
        """The device config's GPU and numerics, None where the table lacks it (nominal figures)."""
        return self._device

    @property
    def columns(self) -> list[str]:
        cols = [f"kind={k}" for k in self.kinds]
        for a in BASELINE_ATTRS:
            cols += [a, f"{a}_flag"]
        for d in range(SHAPE_DIMS):
            cols += [f"in_dim{d}", f"in_dim{d}_flag"]
        cols.append("clock_mhz")
        if self.feature_set in ("improved", "physical"):
            cols += [
                "log_flops",
                "log_bytes_read",
                "log_bytes_written",
                "log_params",
                "log_intensity",
                "log_in_numel",
                "log_out_numel",
                "in_rank",
                "is_view",
                "log_roofline_s",
                "log_compute_s",
                "log_memory_s",
                "compute_bound",
                "log_gemm_m",
                "log_gemm_n",
                "log_gemm_k",
                *gemm.KERNEL_COLUMNS,
            ]
        if self.feature_set == "physical":
            cols += list(gemm.FEATURE_COLUMNS)
        return cols

    def row(self, rec: OpRecord, clock_mhz: float | None) -> list[float]:
        hp, metrics = rec.hp, rec.metrics
        kind, view_hp, view_shape = rec.kind, hp, rec.input_shape
        if self.feature_set == "physical":  # a Linear layer as its 1x1 convolution (model/basis/gemm.py)
            kind, view_hp, view_shape = gemm.tree_view(rec.kind, hp, rec.input_shape)
        out: list[float] = [1.0 if kind == k else 0.0 for k in self.kinds]
        for a in BASELINE_ATTRS:
            v = _scalar(view_hp.get(a))
            out += [NOT_APPLICABLE, 0.0] if v is None else [v, 1.0]
        shape = list(view_shape)
        for d in range(SHAPE_DIMS):
            out += [float(shape[d]), 1.0] if d < len(shape) else [NOT_APPLICABLE, 0.0]
        out.append(float(clock_mhz) if clock_mhz is not None else NOT_APPLICABLE)
        if self.feature_set in ("improved", "physical"):
            flops = float(metrics["flops"])
            read, written = float(metrics["bytes_read"]), float(metrics["bytes_written"])
            in_numel = rec.in_numel
            out_numel = sum(math.prod(s) for s in metrics["output_shapes"])
            out += [
                math.log1p(flops),
                math.log1p(read),
                math.log1p(written),
                math.log1p(float(metrics["params"])),
                math.log1p(flops / (read + written)) if read + written else 0.0,
                math.log1p(in_numel),
                math.log1p(out_numel),
                float(len(shape)),
                float(bool(metrics["is_view"])),
            ]
            compute = flops / op_peak(rec.kind, self._device)
            memory = (read + written) / device_peaks(self._device)[2]
            m, n, k = gemm_dims(rec.kind, hp, rec.input_shape, metrics["output_shapes"])
            out += [
                math.log(roofline_s(rec.kind, metrics, self._device)),
                math.log1p(compute * 1e9),
                math.log1p(memory * 1e9),
                float(compute >= memory),
                math.log1p(m),
                math.log1p(n),
                math.log1p(k),
                *gemm.kernel_features(kind, view_hp),  # as the trees see it: a Linear layer as its 1x1 convolution
            ]
        if self.feature_set == "physical":
            out += gemm.features(rec.kind, hp, float(metrics["flops"]), self._device)
        return out

    def matrix(self, items: Iterable[tuple[OpRecord, float | None]], cached: bool = False) -> np.ndarray:
        """The rows of (record, clock) pairs. `cached`: rows come from the process's row cache
        (`ROW_CACHE`), the same numbers, encoded once per (layout, clock, record content): what a warm
        prediction asks again and again. Training encodes each row once and leaves the cache alone."""
        if cached:
            return ROW_CACHE.matrix(self, items)
        rows = [self.row(r, c) for r, c in items]
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(self.columns))

    def log_roofline(self, records: Iterable[OpRecord]) -> np.ndarray:
        """log(roofline time + launch floor) per op: the offset of a log(t / (roofline + floor)) target.
        With the floor in it, an op too small to leave the launch floor is anchored there, not at a
        vanishing roofline time. The `physical` set uses model/basis/gemm.py's baseline: each op's compute time
        at the peak it attains (TF32 fallbacks, unit fractions, depthwise), overlapped with its memory time."""
        return self.log_offset(records)[0]

    def baseline_only(self, records: Iterable[OpRecord]) -> np.ndarray:
        """Per op: predicted by model/basis/backward.py's training baseline alone, the trees' residual not added
        (a depthwise convolution or compute-bound Linear layer of a training model with its efficiency > 0)."""
        return self.log_offset(records)[1]

    def log_offset(self, records: Iterable[OpRecord]) -> tuple[np.ndarray, np.ndarray]:
        """(`log_roofline`, `baseline_only`) of `records` at once: what a log(t / roofline) model's raw output
        is back-transformed with (`back_transform`), each op's compute and memory time computed once."""
        records = list(records)
        cfg = self._device
        cm = np.array([compute_memory_s(r.kind, r.metrics, cfg) for r in records], float).reshape(-1, 2)
        works = self._works(records, cm)
        fl = floors.per_op([r.kind for r in records], self.floor_s, self.kind_floors)
        if self.feature_set == "physical":  # model/basis/gemm.py: compute at the attained peak, overlapped with memory
            fp32 = np.array([gemm.fp32_compute_s(r.metrics["flops"], cfg) for r in records], float)
            fb = np.array([gemm.tf32_fallback(r.kind, r.hp, cfg) for r in records], bool)
            unit = np.array([gemm.gemm_unit(r.kind, r.hp, cfg) for r in records], dtype=object)
            dw = np.array([gemm.is_depthwise(r.kind, r.hp) for r in records], bool)
            units = ((gemm.TF32_UNIT, self.tf32_efficiency), (gemm.FP32_UNIT, self.fp32_efficiency))
            eff = {u: e for u, e in units if e > 0}
            c = gemm.compute_part_s(cm[:, 0], fp32, fb, unit, eff, dw, self.dw_efficiency)
            off = np.log(gemm.overlap_s(c, cm[:, 1]) + fl)
        else:
            off = np.log(np.maximum(cm.max(axis=1), 1e-9) + fl)  # physics.roofline_s
        return backward.raised_log_offset(off, fl, works), backward.baseline_only(works, len(records))

    def _works(self, records: list[OpRecord], cm: np.ndarray) -> list[tuple[np.ndarray, float]]:
        """(work, efficiency) of model/basis/backward.py's training baselines (none where no efficiency is learnt),
        from each op's (compute, memory) time `cm`."""
        if self.dw_train_efficiency <= 0 and self.mm_train_efficiency <= 0:
            return []
        dw = backward.work_s(cm[:, 1], [backward.taps(r.kind, r.hp) for r in records])
        mm = backward.linear_work_s([r.kind for r in records], cm[:, 0], cm[:, 1])
        return [(dw, self.dw_train_efficiency), (mm, self.mm_train_efficiency)]


def back_transform(
    y: npt.NDArray[np.float64],
    transform: str,
    log_offset: npt.NDArray[np.float64] | None = None,
    baseline_only: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.float64]:
    """The value a model's raw output `y` stands for: exp(y) for a log target; for a log(t / roofline)
    target exp(y + log_offset), with `baseline_only` rows' y taken as 0 (model/basis/backward.py: the training
    baseline alone); y itself otherwise. One rule for the bundle's compiled trees, the library models of
    validation and the scoring of folds, so all three predict the same number."""
    if transform == "log":
        return np.exp(y)
    if transform == "log_roofline":
        if log_offset is None:
            raise ValueError("a log(t / roofline) model needs the ops' log roofline offsets")
        if baseline_only is not None:
            y = np.where(baseline_only, 0.0, y)
        return np.exp(y + log_offset)
    return np.asarray(y, np.float64)


# -- encoded rows, memoised -------------------------------------------------------------------------
# Why: a warm prediction costs the same few hundred ops of every network again at each question, and
# encoding them (`Encoding.row`, pure Python) was a third of a warm `predict_many`. A row is a pure
# function of the encoding's layout (its fields and the device table entry its physics features
# read), the clock and the record's content, so it is cached under exactly those: the content as
# canonical JSON, not the op_id (a proxy keeps its op's id under another kind; a hand-made record
# may reuse an id), so two records share a row only where they would encode to the same row.
ROW_CACHE_SIZE = 16384  # rows (about 1 kB each), least recently used dropped first
_LAYOUTS_MAX = 256


def _rest_key(rec: OpRecord) -> str:
    """Everything but the kind as canonical JSON, memoised on the record (frozen data); "" where it
    holds something JSON cannot say exactly."""
    key = rec._content_key
    if key is None:
        d = rec.to_json()
        del d["kind"]
        try:
            key = json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=True)
        except (TypeError, ValueError):
            key = ""
        object.__setattr__(rec, "_content_key", key)
    return key


def record_key(rec: OpRecord) -> tuple[str, str] | None:
    """The record's content: (kind, the rest as canonical JSON); None where JSON cannot say it exactly
    (then its rows are encoded every time)."""
    rest = _rest_key(rec)
    return (rec.kind, rest) if rest else None


def with_kind(rec: OpRecord, kind: str) -> OpRecord:
    """The record under another kind (a proxy, model/composition/costing.py), its content key handed on: a proxy
    made afresh at every costing still finds its cached rows."""
    new = dataclasses.replace(rec, kind=kind)
    object.__setattr__(new, "_content_key", _rest_key(rec))
    return new


class RowCache:
    """A bounded LRU of encoded rows keyed by (layout, clock, record content); thread-safe."""

    def __init__(self, size: int = ROW_CACHE_SIZE) -> None:
        self._rows: BoundedLRU[tuple[int, Any, str, str], np.ndarray] = BoundedLRU(size)
        self._layouts: dict[Any, int] = {}
        self._next_layout = 0  # never reused: a row keyed under a dropped layout is never found again
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._layouts.clear()

    def __len__(self) -> int:
        return len(self._rows)

    def _layout(self, enc: Encoding) -> int:
        layout = (enc, enc.device)  # an encoding made under a patched device table is another layout
        with self._lock:
            if layout not in self._layouts:
                if len(self._layouts) >= _LAYOUTS_MAX:
                    self._rows.clear()
                    self._layouts.clear()
                self._layouts[layout] = self._next_layout
                self._next_layout += 1
            return self._layouts[layout]

    def matrix(self, enc: Encoding, items: Iterable[tuple[OpRecord, float | None]]) -> np.ndarray:
        lid = self._layout(enc)
        rows: list[np.ndarray] = []
        for rec, clock in items:
            content = record_key(rec)
            key = (lid, clock, *content) if content is not None else None
            row = self._rows.get(key) if key is not None else None
            if row is None:
                row = np.asarray(enc.row(rec, clock), dtype=np.float64)
                row.setflags(write=False)
                if key is not None:
                    self._rows.put(key, row)
            rows.append(row)
        ncols = len(enc.columns)
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), ncols) if rows else np.zeros((0, ncols))


ROW_CACHE = RowCache()


def metrics_of(catalog_row: "pd.Series | dict[str, Any]") -> dict[str, Any]:
    """Paper costs of an op from a row of an operations table, and the kernels of a composite
    (`parts`, ops/parts.py: what costing sums where nothing covers the composite)."""
    r = catalog_row
    parts = r.get("parts_json") if hasattr(r, "get") else None
    return {
        "flops": int(r["flops"]),
        "bytes_read": int(r["bytes_read"]),
        "bytes_written": int(r["bytes_written"]),
        "params": int(r["params"]),
        "is_view": bool(r["is_view"]),
        "output_shapes": [list(s) for s in r["output_shapes"]],
        "parts": json.loads(parts) if isinstance(parts, str) and parts else [],
    }


def spec_of(catalog_row: "pd.Series | dict[str, Any]") -> "OpSpec":
    from opcost.ops.spec import OpSpec

    return OpSpec.from_json(json.loads(catalog_row["spec_json"]))


def record_of(catalog_row: "pd.Series | dict[str, Any]") -> OpRecord:
    """The record of a row of an operations table (schemas.OPERATIONS)."""
    return op_record(spec_of(catalog_row), metrics_of(catalog_row))


def encodings(kinds: Sequence[str], device_config: str = "", floor_s: float = 0.0) -> dict[str, Encoding]:
    k = tuple(sorted(set(kinds)))
    return {fs: Encoding(fs, k, device_config, floor_s) for fs in FEATURE_SETS}


def part_record(owner: OpRecord, index: int, part: dict[str, Any]) -> OpRecord:
    """A kernel of a composite as a record the models can cost. A matrix product [.., M, K] x [K, N]
    is the linear layer of that GEMM (in_features K, out_features N, on an [.., M, K] input): the
    measured kind that does the same work; any other kernel keeps its kind (softmax, add, contiguous,
    ...), which the op categories map to a measured one."""
    out = [list(s) for s in part["output_shapes"]]
    metrics = {
        "flops": int(part["flops"]),
        "bytes_read": int(part["bytes_read"]),
        "bytes_written": int(part["bytes_written"]),
        "params": 0,
        "is_view": False,
        "output_shapes": out,
    }
    shapes = [tuple(int(d) for d in s) for s in part["input_shapes"]]
    op_id = f"{owner.op_id}/{index}"
    if is_gemm_part(part["op"]) and out:
        bias = bias_first(part["op"])
        a = shapes[1] if bias else shapes[0]
        k, n = int(a[-1]), int(out[0][-1])
        hp = {"in_features": k, "out_features": n, "bias": bias}
        x = (*out[0][:-1], k)
        return OpRecord(op_id, "Linear", hp, x, math.prod(x), {**metrics, "params": k * n})
    first = shapes[0] if shapes else tuple(out[0]) if out else ()
    return OpRecord(op_id, str(part["kind"]), {}, first, sum(math.prod(s) for s in shapes), metrics)
