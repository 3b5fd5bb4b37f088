"""The Python API: the same questions the CLI answers.

    from opcost.api import predict, recommend
    p = predict("resnet50", (32, 3, 224, 224), device="A30", mode="inference")
    p.time_s, p.time_interval_s, p.energy_j, p.avg_power_w, p.breakdown, p.coverage()
    recommend("resnet50", (32, 3, 224, 224), mode="inference", max_slowdown=1.5)

A module-level `Predictor` keeps extracted networks and loaded models between calls. Parameters the
library takes from its caller (the clock grid `recommend` sweeps) are read here, from params.yaml.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from opcost.model.prediction.answer import NetworkPrediction
from opcost.model.prediction.predict import Predictor
from opcost.params.clock import ClockParams
from opcost.params.load import load_params
from opcost.paths import Paths, find_root

_default: Predictor | None = None


def clock_grid_points(paths: Paths | None = None) -> int:
    """params clock.grid_points of the project (the default where it has no params.yaml)."""
    paths = paths or Paths(find_root())
    return load_params(paths.params).clock.grid_points if paths.params.is_file() else ClockParams().grid_points


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
    pr = predictor()
    pr.clock_grid_points = clock_grid_points(pr.paths)
    return pr.recommend(model, input_shape, mode, max_slowdown)
