"""A trained predictor for one device config and mode: time and power models with their encodings.

Saved under models/<device>-<mode>/ (a DVC output) and registered in MLflow as one pyfunc model
`opcost-<device>-<mode>`. Energy is predicted time x predicted power. A bundle knows which op
kinds it was trained on, so a prediction can say what it leaves out instead of extrapolating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import joblib
import numpy as np

from opcost.io import atomic_path, write_json
from opcost.model.features import Encoding, OpRecord
from opcost.model.trees import TreeEnsemble

BUNDLE_FILE = "bundle.joblib"
SUMMARY_FILE = "model.json"
QUANTITIES = ("time", "power")  # predicted t_s [s] and p_w [W]


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

    def predict(self, items: Sequence[tuple[OpRecord, float | None]]) -> dict[str, np.ndarray | None]:
        return {q: (self.models[q].predict(items) if q in self.models else None) for q in QUANTITIES}

    def summary(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "device_config": self.device_config,
            "mode": self.mode,
            "phase": self.phase,
            "chosen": {q: m.name for q, m in self.models.items()},
            "kinds": list(self.kinds),
            "clocks_mhz": list(self.clocks_mhz),
            "scores": self.scores,
            "data_version": self.data_version,
            "bundle_hash": self.bundle_hash,
        }

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / BUNDLE_FILE) as tmp:
            joblib.dump(self, tmp)
        write_json(self.summary(), folder / SUMMARY_FILE)

    @staticmethod
    def load(folder: Path) -> "Bundle":
        return joblib.load(Path(folder) / BUNDLE_FILE)
