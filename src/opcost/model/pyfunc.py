"""The MLflow pyfunc flavour of a bundle, by *loader module*: the registered model stores the bundle's
files (bundle.json, trees.npz) as data and names this installed module; `mlflow.pyfunc.load_model`
imports it and calls `_load_pyfunc(data_path)`. Nothing is unpickled and no code is read from the
artifact, so loading a model from a registry runs only the installed opcost.

Input: rows of an operations table (spec_json, flops, ...) and an optional clock_mhz column.
Output: per-op t_s, p_w and e_j for one call, and where each cost came from (`source`: measured,
estimated, floor, predicted, decomposed, proxy or charged; model/costing.py), exactly as predictions cost ops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opcost.model.bundle import Bundle

LOADER_MODULE = __name__


class BundlePyfunc:
    """What `mlflow.pyfunc.load_model` wraps: a loaded bundle with a DataFrame predict."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd

        from opcost.model.features import record_of

        clock = None
        if "clock_mhz" in model_input and model_input["clock_mhz"].notna().any():
            clocks = set(model_input["clock_mhz"].dropna())
            if len(clocks) > 1:
                raise ValueError("one clock per call: split the rows by clock_mhz")
            clock = float(clocks.pop())
        costs = self.bundle.coster().cost([record_of(r) for _, r in model_input.iterrows()], clock)
        out = pd.DataFrame({"t_s": costs.t_s, "p_w": costs.p_w})
        out["e_j"] = out["t_s"] * out["p_w"]
        out["source"] = costs.source
        return out


def _load_pyfunc(data_path: str) -> BundlePyfunc:
    return BundlePyfunc(Bundle.load(Path(data_path)))
