"""The MLflow pyfunc view of a bundle; imported only where MLflow is used (train, registry loads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np

from opcost.model.bundle import Bundle


class BundleModel(mlflow.pyfunc.PythonModel):
    """Rows of an operations table (spec_json, flops, ...) and an optional clock_mhz column in,
    per-op t_s, p_w and e_j out."""

    def load_context(self, context: Any) -> None:
        self.bundle = Bundle.load(Path(context.artifacts["bundle"]))

    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        # no type hints here: MLflow would try (and fail) to derive a schema from them
        import pandas as pd

        from opcost.model.features import record_of

        clocks = model_input["clock_mhz"] if "clock_mhz" in model_input else [None] * len(model_input)
        items = [(record_of(r), c) for (_, r), c in zip(model_input.iterrows(), clocks)]
        p = self.bundle.predict(items)
        out = pd.DataFrame({"t_s": p["time"]})
        out["p_w"] = p["power"] if p["power"] is not None else np.nan
        out["e_j"] = out["t_s"] * out["p_w"]
        return out
