"""A trained predictor for one device config and mode: time and power models with their encodings.

Saved under models/<device>-<mode>/ (a DVC output) and registered in MLflow as `opcost-<device>-<mode>`.
Energy is predicted time x predicted power. A bundle knows which op kinds it was trained on, so a
prediction can say what it leaves out instead of extrapolating.

Format (`FORMAT`): `bundle.json` holds everything but the trees (names, encodings, scores, hashes)
and `trees.npz` the compiled tree arrays (model/basis/trees.py). A bundle arrives by `dvc pull` or from
the registry, so it is untrusted input: it is read as data only (JSON, and npz with
allow_pickle=False), checked for consistency, and any other file in the folder (an old
`bundle.joblib`, a planted pickle) is never opened. Loading a bundle runs no code from it.

Values are checked as well as shapes: `bundle.json` may hold no NaN or infinity (JSON has none; a
hand-edited file may), and times, powers, clocks and ratios must lie in physically possible ranges
(`LIMITS`), so a tampered bundle fails at load with one line instead of answering NaN or 1000 x.
`content_md5` is computed from the folder's files at load (model/records/integrity.py), never read from the
bundle; `Bundle.load(folder, expect_md5=...)` refuses a folder whose content differs from a record
it cannot forge (the md5 `dvc.lock` records, or the one a registered version was tagged with).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from opcost.data.floors import KindFloors
from opcost.devices import DeviceConfig, find_device
from opcost.errors import OpcostError
from opcost.io import MODEL_DIGITS, read_npz, write_json, write_npz
from opcost.model.basis.features import FEATURE_SETS, Encoding, OpRecord, back_transform
from opcost.model.basis.trees import TreeEnsemble
from opcost.model.composition.compose import Composition
from opcost.model.composition.costing import OpCoster
from opcost.model.composition.predcache import PredictionCache, freeze, model_stamp

FORMAT = "opcost-bundle/1"
BUNDLE_FILE = "bundle.json"
TREES_FILE = "trees.npz"
QUANTITIES = ("time", "power")  # predicted t_s [s] and p_w [W]
# Physically possible values (checked at load): one op never takes an hour, a GPU never draws 5 kW.
LIMITS = {
    "op_time_s": 3600.0,
    "floor_s": 1.0,
    "power_w": 5000.0,
    "clock_mhz": 10000.0,
    "charge_ratio": 100.0,
    "dw_efficiency": 10.0,
}
_ARRAYS = {"feature": np.int32, "threshold": np.float64, "left": np.int32, "right": np.int32, "value": np.float64}


TRANSFORMS = ("raw", "log", "log_roofline")


@dataclass
class QuantityModel:
    name: str  # e.g. "xgb-improved"
    ensemble: TreeEnsemble  # the fitted model compiled to arrays (see model/basis/trees.py)
    encoding: Encoding
    transform: str  # what the trees predict: the raw value, its log, or log(value / roofline time)
    # predicted values per (clock, record content), bound to this instance (model/composition/predcache.py)
    cache: PredictionCache = field(default_factory=PredictionCache, init=False, repr=False, compare=False)

    def predict_matrix(
        self, X: np.ndarray, log_roofline: np.ndarray | None = None, baseline_only: np.ndarray | None = None
    ) -> np.ndarray:
        """`baseline_only`: rows whose trees' output is not added (Encoding.baseline_only)."""
        if len(X) == 0:
            return np.zeros(0)
        return back_transform(self.ensemble.predict(X), self.transform, log_roofline, baseline_only)

    def predict(self, items: Sequence[tuple[OpRecord, float | None]], cached: bool = True) -> np.ndarray:
        """Values of (record, clock) pairs. `cached`: each op evaluated once per (clock, record content)
        by this model (model/composition/predcache.py), the same numbers as evaluating afresh."""
        if not cached:
            return self._evaluate(items)
        if not self.cache:
            freeze(self.ensemble)  # cached values must not go stale by an in-place edit of the trees
        return self.cache.values(self.ensemble, model_stamp(self.encoding, self.transform), items, self._evaluate)

    def _evaluate(self, items: Sequence[tuple[OpRecord, float | None]]) -> np.ndarray:
        records = [r for r, _ in items]
        offsets, only = self.encoding.log_offset(records) if self.transform == "log_roofline" else (None, None)
        return self.predict_matrix(self.encoding.matrix(items, cached=True), offsets, only)  # warm: rows memoised


@dataclass
class Bundle:
    target: str  # "A30-inference"
    device_config: str
    mode: str
    phase: str
    models: dict[str, QuantityModel] = field(default_factory=dict)  # "time", "power" (if measured)
    kinds: tuple[str, ...] = ()
    clocks_mhz: tuple[float, ...] = ()  # clocks seen in training; empty: device default only
    scores: dict[str, Any] = field(default_factory=dict)
    data_version: str = ""
    bundle_hash: str = ""  # data version, parameters and code it was trained with (registry identity)
    # [min, max] over the training rows of what a question can fall outside of: the batch size of
    # image inputs, the input size and the FLOPs of one op, the per-sample input size of the calibration
    # networks (model/composition/extrapolation.py)
    ranges: dict[str, list[float]] = field(default_factory=dict)
    # how ops without a model prediction are costed (model/composition/costing.py)
    floor_s: float = 0.0
    noop_s: float | None = None  # a no-op's measured time; None: the floor
    noop_power_w: float = float("nan")
    charge_ratio: float = 1.0
    median_power_w: float = float("nan")
    lookup: dict[str, tuple[float, float, bool]] = field(default_factory=dict)  # op_id -> measured (t, p, estimated)
    composition: Composition | None = None
    content_md5: str = ""  # md5 of the folder's files, computed at load (model/records/integrity.py); "" if not loaded
    # why nothing vouches for the content, when it was loaded anyway (trust_unrecorded); "" when something does
    unvouched: str = ""
    # `device_config` resolved in the device table (`device`), and the name it was resolved from
    _device: DeviceConfig | None = field(default=None, init=False, repr=False, compare=False)
    _device_of: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Resolve the device once, when the bundle is built or loaded."""
        self._device, self._device_of = find_device(self.device_config), self.device_config

    @property
    def device(self) -> DeviceConfig | None:
        """The bundle's GPU and numerics from the device table, None where the table lacks it (a CPU host):
        resolved once and passed down the answer path, which never resolves `device_config` again. A
        reassigned `device_config` is resolved anew."""
        if self._device_of != self.device_config:
            self._device, self._device_of = find_device(self.device_config), self.device_config
        return self._device

    def coster(self) -> OpCoster:
        return OpCoster(
            mode=self.mode,
            device=self.device,
            models=self.models,
            kinds=self.kinds,
            floor_s=self.floor_s,
            noop_s=self.noop_s,
            noop_power_w=self.noop_power_w,
            charge_ratio=self.charge_ratio,
            median_power_w=self.median_power_w,
            lookup=self.lookup,
        )

    def predict(self, items: Sequence[tuple[OpRecord, float | None]]) -> dict[str, np.ndarray | None]:
        return {q: (self.models[q].predict(items) if q in self.models else None) for q in QUANTITIES}

    def summary(self) -> dict[str, Any]:
        """Everything but the tree arrays: what bundle.json holds."""
        return {
            "format": FORMAT,
            "target": self.target,
            "device_config": self.device_config,
            "mode": self.mode,
            "phase": self.phase,
            "chosen": {q: m.name for q, m in self.models.items()},
            "models": {
                q: {
                    "name": m.name,
                    "transform": m.transform,
                    "encoding": {
                        "feature_set": m.encoding.feature_set,
                        "kinds": list(m.encoding.kinds),
                        "device_config": m.encoding.device_config,
                        "floor_s": m.encoding.floor_s,
                        "dw_efficiency": m.encoding.dw_efficiency,
                        "tf32_efficiency": m.encoding.tf32_efficiency,
                        "fp32_efficiency": m.encoding.fp32_efficiency,
                        "dw_train_efficiency": m.encoding.dw_train_efficiency,
                        "mm_train_efficiency": m.encoding.mm_train_efficiency,
                        "kind_floors": dict(m.encoding.kind_floors),
                        "columns": m.encoding.columns,
                    },
                    "ensemble": {
                        "depth": m.ensemble.depth,
                        "strict_less": m.ensemble.strict_less,
                        "base": m.ensemble.base,
                        "average": m.ensemble.average,
                    },
                }
                for q, m in self.models.items()
            },
            "kinds": list(self.kinds),
            "clocks_mhz": list(self.clocks_mhz),
            "scores": self.scores,
            "data_version": self.data_version,
            "bundle_hash": self.bundle_hash,
            "ranges": self.ranges,
            "costing": {
                "floor_s": self.floor_s,
                "noop_s": self.noop_s,
                "noop_power_w": _num(self.noop_power_w),
                "charge_ratio": self.charge_ratio,
                "median_power_w": _num(self.median_power_w),
                "measured_ops": len(self.lookup),
            },
            "composition": None if self.composition is None else self.composition.to_json(),
        }

    def save(self, folder: Path) -> None:
        """trees.npz first, bundle.json last: a folder with a bundle.json is complete."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {f"{q}/{a}": getattr(m.ensemble, a) for q, m in self.models.items() for a in _ARRAYS}
        ids = sorted(self.lookup)
        arrays["lookup/op_id"] = np.array(ids, dtype="<U64")
        arrays["lookup/t_s"] = np.array([self.lookup[i][0] for i in ids], float)
        arrays["lookup/p_w"] = np.array([self.lookup[i][1] for i in ids], float)
        arrays["lookup/estimated"] = np.array([self.lookup[i][2] for i in ids], bool)
        write_npz(arrays, folder / TREES_FILE)
        write_json(self.summary(), folder / BUNDLE_FILE, digits=MODEL_DIGITS)  # figures predictions read back

    @staticmethod
    def load(folder: Path, expect_md5: str | None = None, expected_from: str = "dvc.lock") -> "Bundle":
        """Load `folder` as data, checked (module docstring); with `expect_md5`, refuse a folder whose
        content md5 differs (`expected_from` names where the expected value comes from)."""
        from opcost.model.records.integrity import dir_md5

        folder = Path(folder)
        meta_path = folder / BUNDLE_FILE
        if not meta_path.is_file():
            others = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
            hint = f" (found {', '.join(others)}; other files are never loaded)" if others else ""
            raise OpcostError(f"{folder} holds no {BUNDLE_FILE}{hint}: run `dvc pull` or `dvc repro train@<target>`")
        content = dir_md5(folder)
        if expect_md5 is not None and content != expect_md5:
            raise OpcostError(
                f"{folder} was modified: its content md5 is {content}, {expected_from} records {expect_md5}; refused"
            )
        try:
            meta = json.loads(meta_path.read_text(), parse_constant=_no_constant)
            if meta.get("format") != FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
            arrays = read_npz(folder / TREES_FILE)
            models = {q: _quantity_model(q, m, arrays) for q, m in meta["models"].items()}
            if "time" not in models:
                raise ValueError("no time model")
            bundle = Bundle(
                target=str(meta["target"]),
                device_config=str(meta["device_config"]),
                mode=str(meta["mode"]),
                phase=str(meta["phase"]),
                models=models,
                kinds=tuple(str(k) for k in meta["kinds"]),
                clocks_mhz=tuple(float(c) for c in meta["clocks_mhz"]),
                scores=dict(meta["scores"]),
                data_version=str(meta["data_version"]),
                bundle_hash=str(meta["bundle_hash"]),
                ranges={str(k): [float(v[0]), float(v[1])] for k, v in meta.get("ranges", {}).items()},
                floor_s=float(meta["costing"]["floor_s"]),
                noop_s=None if meta["costing"].get("noop_s") is None else float(meta["costing"]["noop_s"]),
                noop_power_w=_nan(meta["costing"]["noop_power_w"]),
                charge_ratio=float(meta["costing"]["charge_ratio"]),
                median_power_w=_nan(meta["costing"]["median_power_w"]),
                lookup=_lookup(arrays),
                composition=None if meta["composition"] is None else Composition.from_json(meta["composition"]),
                content_md5=content,
            )
            _check_values(bundle)
            return bundle
        except OpcostError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OpcostError(f"{folder} is not a valid opcost bundle ({text}); refused") from None


def _no_constant(name: str) -> float:
    raise ValueError(f"bundle.json holds {name}, which is not a number JSON allows")


def _in(value: float | None, lo: float, hi: float, what: str, lo_open: bool = False) -> None:
    """`value` finite and within [lo, hi] ((lo, hi] with `lo_open`); None passes."""
    if value is None:
        return
    if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
        bound = f"({lo:g}, {hi:g}]" if lo_open else f"[{lo:g}, {hi:g}]"
        raise ValueError(f"{what} = {value!r} is outside the possible range {bound}")


def _check_values(b: "Bundle") -> None:
    """Refuse values no trained bundle can hold (LIMITS): non-finite, negative or absurdly large."""
    _in(b.floor_s, 0.0, LIMITS["floor_s"], "costing.floor_s")
    _in(b.noop_s, 0.0, LIMITS["floor_s"], "costing.noop_s", lo_open=True)
    _in(b.charge_ratio, 0.0, LIMITS["charge_ratio"], "costing.charge_ratio", lo_open=True)
    for what, v in (("noop_power_w", b.noop_power_w), ("median_power_w", b.median_power_w)):
        _in(None if v != v else v, 0.0, LIMITS["power_w"], f"costing.{what}")  # NaN: JSON null, not measured
    for c in b.clocks_mhz:
        _in(c, 0.0, LIMITS["clock_mhz"], "clocks_mhz", lo_open=True)
    for q, m in b.models.items():
        _in(m.encoding.floor_s, 0.0, LIMITS["floor_s"], f"models.{q}.encoding.floor_s")
        for kind, v in m.encoding.kind_floors:
            _in(v, 0.0, LIMITS["floor_s"], f"models.{q}.encoding.kind_floors.{kind}")
        for e in ("dw_efficiency", "tf32_efficiency", "fp32_efficiency", "dw_train_efficiency", "mm_train_efficiency"):
            _in(getattr(m.encoding, e), 0.0, LIMITS["dw_efficiency"], f"models.{q}.encoding.{e}")
        _in(m.ensemble.base, -1e6, 1e6, f"models.{q}.ensemble.base")
        if np.isnan(m.ensemble.threshold).any():
            raise ValueError(f"{q} tree thresholds hold NaN")
    for k, (lo, hi) in b.ranges.items():
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"ranges.{k} = [{lo!r}, {hi!r}] is not a finite interval")
    for op, (t, p, _) in b.lookup.items():
        _in(t, 0.0, LIMITS["op_time_s"], f"measured time of op {op}", lo_open=True)
        _in(None if p != p else p, 0.0, LIMITS["power_w"], f"measured power of op {op}")
    for q, s in b.scores.items():
        for k, v in s.items() if isinstance(s, dict) else ():
            if isinstance(v, (int, float)) and not math.isfinite(v):
                raise ValueError(f"scores.{q}.{k} is not finite")


def _num(x: float) -> float | None:
    return None if x != x else float(x)


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _lookup(arrays: dict[str, np.ndarray]) -> dict[str, tuple[float, float, bool]]:
    ids, t, p, e = (arrays.get(f"lookup/{k}") for k in ("op_id", "t_s", "p_w", "estimated"))
    if ids is None:
        return {}
    if t is None or p is None or e is None:
        raise ValueError("lookup arrays are incomplete (op_id, t_s, p_w and estimated go together)")
    if ids.dtype.kind != "U" or t.dtype != np.float64 or p.dtype != np.float64 or e.dtype != bool:
        raise ValueError("lookup arrays have the wrong dtypes")
    if not len(ids) == len(t) == len(p) == len(e) or not (np.isfinite(t).all() and np.all(t > 0)):
        raise ValueError("lookup arrays disagree in length or hold non-positive times")
    return {str(i): (float(a), float(b), bool(c)) for i, a, b, c in zip(ids, t, p, e)}


def _kind_floors(value: Any, q: str) -> KindFloors:
    """models.<q>.encoding.kind_floors: a JSON object of kind -> floor [s], as the sorted pairs Encoding holds."""
    if not isinstance(value, dict):
        raise ValueError(
            f"models.{q}.encoding.kind_floors must be an object of kind -> seconds, got {type(value).__name__}"
        )
    return tuple(sorted((str(k), float(v)) for k, v in value.items()))


def _quantity_model(q: str, m: dict[str, Any], arrays: dict[str, np.ndarray]) -> QuantityModel:
    """One quantity's model from its JSON entry and arrays, checked so that evaluating it can only
    read inside its own arrays."""
    if q not in QUANTITIES:
        raise ValueError(f"unknown quantity {q!r}")
    enc = m["encoding"]
    if enc["feature_set"] not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {enc['feature_set']!r}")
    encoding = Encoding(
        str(enc["feature_set"]),
        tuple(str(k) for k in enc["kinds"]),
        str(enc["device_config"]),
        float(enc["floor_s"]),
        float(enc.get("dw_efficiency", 0.0)),
        float(enc.get("tf32_efficiency", 0.0)),
        float(enc.get("fp32_efficiency", 0.0)),
        float(enc.get("dw_train_efficiency", 0.0)),
        float(enc.get("mm_train_efficiency", 0.0)),
        _kind_floors(enc.get("kind_floors", {}), q),  # older bundles: none, every op at floor_s
    )
    if m["transform"] not in TRANSFORMS:
        raise ValueError(f"unknown target transform {m['transform']!r}")
    a = {}
    for name, dtype in _ARRAYS.items():
        arr = arrays.get(f"{q}/{name}")
        if arr is None or arr.ndim != 2 or arr.dtype != dtype:
            raise ValueError(f"{q}/{name} missing or not a 2-D {np.dtype(dtype).name} array")
        a[name] = arr
    shape = a["feature"].shape
    if any(arr.shape != shape for arr in a.values()) or shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"{q} tree arrays disagree in shape")
    ncols = len(encoding.columns)
    written = enc.get("columns")  # the trees index columns by position: a layout change must refuse, not misread
    if not isinstance(written, list) or [str(c) for c in written] != encoding.columns:
        told = f"{len(written)} other" if isinstance(written, list) else "unrecorded"
        raise ValueError(
            f"{q} was trained on {told} feature columns, this code encodes {ncols}; retrain it (dvc repro train)"
        )
    if a["feature"].min() < 0 or a["feature"].max() >= ncols:
        raise ValueError(f"{q} trees split on a feature outside the encoding's {ncols} columns")
    for side in ("left", "right"):
        if a[side].min() < 0 or a[side].max() >= shape[1]:
            raise ValueError(f"{q} trees point outside their nodes")
    if not np.isfinite(a["value"]).all():
        raise ValueError(f"{q} tree values are not finite")
    e = m["ensemble"]
    depth = int(e["depth"])
    if not 0 <= depth <= shape[1]:
        raise ValueError(f"{q} tree depth {depth} impossible for {shape[1]} nodes")
    ensemble = TreeEnsemble(
        a["feature"],
        a["threshold"],
        a["left"],
        a["right"],
        a["value"],
        depth,
        bool(e["strict_less"]),
        float(e["base"]),
        bool(e["average"]),
    )
    return QuantityModel(str(m["name"]), ensemble, encoding, str(m["transform"]))
