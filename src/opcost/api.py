"""The Python API: the same questions the CLI answers.

    from opcost.api import predict, recommend
    p = predict("resnet50", (32, 3, 224, 224), device="A30", mode="inference")
    p.time_s, p.time_interval_s, p.energy_j, p.avg_power_w, p.breakdown, p.coverage()
    recommend("resnet50", (32, 3, 224, 224), mode="inference", max_slowdown=1.5)

A module-level `Predictor` keeps extracted networks and loaded models between calls.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from opcost.model.predict import NetworkPrediction, Predictor

_default: Predictor | None = None


def predictor() -> Predictor:
    global _default
    if _default is None:
        _default = Predictor()
    return _default


def predict(
    model: str, input_shape: Any, device: str, mode: str = "inference", clock_mhz: float | None = None
) -> NetworkPrediction:
    return predictor().predict(model, input_shape, device, mode, clock_mhz)


def recommend(model: str, input_shape: Any, mode: str = "inference", max_slowdown: float | None = None) -> pd.DataFrame:
    return predictor().recommend(model, input_shape, mode, max_slowdown)
