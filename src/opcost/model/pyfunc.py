"""The MLflow pyfunc flavour of a bundle, by *loader module*: the registered model stores the bundle's
files (bundle.json, trees.npz) as data and names this installed module; `mlflow.pyfunc.load_model`
imports it and calls `_load_pyfunc(data_path)`. Nothing is unpickled and no code is read from the
artifact, so loading a model from a registry runs only the installed opcost.

Input: rows of an operations table (spec_json, flops, ...) and an optional clock_mhz column.
Output: per-op t_s, p_w and e_j.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from opcost.model.bundle import Bundle

LOADER_MODULE = __name__


class BundlePyfunc:
    """What `mlflow.pyfunc.load_model` wraps: a loaded bundle with a DataFrame predict."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd

        from opcost.model.features import record_of

        clocks = model_input["clock_mhz"] if "clock_mhz" in model_input else [None] * len(model_input)
        items = [(record_of(r), c) for (_, r), c in zip(model_input.iterrows(), clocks)]
        p = self.bundle.predict(items)
        out = pd.DataFrame({"t_s": p["time"]})
        out["p_w"] = p["power"] if p["power"] is not None else np.nan
        out["e_j"] = out["t_s"] * out["p_w"]
        return out


def _load_pyfunc(data_path: str) -> BundlePyfunc:
    return BundlePyfunc(Bundle.load(Path(data_path)))
