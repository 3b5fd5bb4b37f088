"""A trained predictor for one device config and mode: time and power models with their encodings.

Saved under models/<device>-<mode>/ (a DVC output) and registered in MLflow as `opcost-<device>-<mode>`.
Energy is predicted time x predicted power. A bundle knows which op kinds it was trained on, so a
prediction can say what it leaves out instead of extrapolating.

Format (`FORMAT`): `bundle.json` holds everything but the trees (names, encodings, scores, hashes)
and `trees.npz` the compiled tree arrays (model/trees.py). A bundle arrives by `dvc pull` or from
the registry, so it is untrusted input: it is read as data only (JSON, and npz with
allow_pickle=False), checked for consistency, and any other file in the folder (an old
`bundle.joblib`, a planted pickle) is never opened. Loading a bundle runs no code from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from opcost.errors import OpcostError
from opcost.io import read_npz, write_json, write_npz
from opcost.model.features import FEATURE_SETS, Encoding, OpRecord
from opcost.model.trees import TreeEnsemble

FORMAT = "opcost-bundle/1"
BUNDLE_FILE = "bundle.json"
TREES_FILE = "trees.npz"
QUANTITIES = ("time", "power")  # predicted t_s [s] and p_w [W]
_ARRAYS = {"feature": np.int32, "threshold": np.float64, "left": np.int32, "right": np.int32, "value": np.float64}


@dataclass
class QuantityModel:
    name: str  # e.g. "xgb-improved"
    ensemble: TreeEnsemble  # the fitted model compiled to arrays (see model/trees.py)
    encoding: Encoding
    log_target: bool

    def predict_matrix(self, X: np.ndarray) -> np.ndarray:
        if len(X) == 0:
            return np.zeros(0)
        y = self.ensemble.predict(X)
        return np.exp(y) if self.log_target else np.asarray(y, float)

    def predict(self, items: Sequence[tuple[OpRecord, float | None]]) -> np.ndarray:
        return self.predict_matrix(self.encoding.matrix(items))


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
    # image inputs, the input size and the FLOPs of one op (see model/fit.training_ranges)
    ranges: dict[str, list[float]] = field(default_factory=dict)

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
                    "log_target": m.log_target,
                    "encoding": {"feature_set": m.encoding.feature_set, "kinds": list(m.encoding.kinds)},
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
        }

    def save(self, folder: Path) -> None:
        """trees.npz first, bundle.json last: a folder with a bundle.json is complete."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {f"{q}/{a}": getattr(m.ensemble, a) for q, m in self.models.items() for a in _ARRAYS}
        write_npz(arrays, folder / TREES_FILE)
        write_json(self.summary(), folder / BUNDLE_FILE, digits=None)

    @staticmethod
    def load(folder: Path) -> "Bundle":
        folder = Path(folder)
        meta_path = folder / BUNDLE_FILE
        if not meta_path.is_file():
            others = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
            hint = f" (found {', '.join(others)}; other files are never loaded)" if others else ""
            raise OpcostError(f"{folder} holds no {BUNDLE_FILE}{hint}: run `dvc pull` or `dvc repro train@<target>`")
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("format") != FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
            arrays = read_npz(folder / TREES_FILE)
            models = {q: _quantity_model(q, m, arrays) for q, m in meta["models"].items()}
            return Bundle(
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
            )
        except OpcostError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OpcostError(f"{folder} is not a valid opcost bundle ({text}); refused") from None


def _quantity_model(q: str, m: dict[str, Any], arrays: dict[str, np.ndarray]) -> QuantityModel:
    """One quantity's model from its JSON entry and arrays, checked so that evaluating it can only
    read inside its own arrays."""
    if q not in QUANTITIES:
        raise ValueError(f"unknown quantity {q!r}")
    enc = m["encoding"]
    if enc["feature_set"] not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {enc['feature_set']!r}")
    encoding = Encoding(str(enc["feature_set"]), tuple(str(k) for k in enc["kinds"]))
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
    return QuantityModel(str(m["name"]), ensemble, encoding, bool(m["log_target"]))
