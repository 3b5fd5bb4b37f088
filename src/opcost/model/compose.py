"""The composition layer: from the costs of a network's ops to the network's time and energy.

Isolated op measurements each carry the launch and synchronisation cost of a call (the device's
launch floor), ops no model covers still take time, and a training step adds a loss and an
optimizer step that no op measurement holds. Per device config and mode, fitted on its measured
networks by non-negative least squares on relative error:

    time   = a * S + b * N x floor + o * P + c
    energy = a_e * S_e + k * time

S = sum over all ops of calls x (t - floor)+, N = calls, P = parameter bytes / memory bandwidth
(training: the optimizer reads and writes every parameter; zero in inference), S_e = the same sum as
S weighted by each op's power. All terms but c are in seconds of the device's own scale, so the
coefficients are dimensionless and mean the same on every device. Charged ops (costing.py) are in S
like every op: a coefficient of their own was fitted to zero by non-negative least squares on
networks that charge almost nothing, which then dropped 95 % of GPT-2's estimated time from its
time but not from its energy (18 ms at 5 kW). A total is never a partial sum.

Where a target has fewer than MIN_NETWORKS measured networks the layer is
*uncalibrated* (a = a_e = 1, the rest 0: the floor-corrected sum) and says so.

Intervals come from out-of-sample residuals (leave-one-network-out relative errors, model/netval.py):
the 5th and 95th percentiles give a 90 % interval, widened when a question extrapolates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from opcost.devices import find_device
from opcost.model.costing import Costs
from opcost.model.features import OpRecord
from opcost.model.physics import NOMINAL_BANDWIDTH

TIME_TERMS = ("sum", "calls_floor", "params_bw", "const")
ENERGY_TERMS = ("energy_sum", "time")
MIN_NETWORKS = 4
DEFAULT_TIME = {"sum": 1.0, "calls_floor": 0.0, "params_bw": 0.0, "const": 0.0}
DEFAULT_ENERGY = {"energy_sum": 1.0, "time": 0.0}
UNCALIBRATED_HALF_WIDTH = 0.3  # +-30 % where no measured network says better
EXTRAPOLATION_WIDENING = 2.0  # interval half-widths (in log space) doubled when extrapolating


def network_terms(costs: Costs, calls: np.ndarray, records: Sequence[OpRecord], floor_s: float, device_config: str,
                  mode: str) -> dict[str, float]:  # fmt: skip
    """The composition terms of one network from its ops' costs and call counts."""
    calls = np.asarray(calls, float)
    excess = np.clip(costs.t_s - floor_s, 0.0, None)
    p = np.nan_to_num(costs.p_w, nan=0.0)
    found = find_device(device_config)
    bw = found[0].bandwidth if found else NOMINAL_BANDWIDTH
    param_bytes = sum(c * r.metrics["params"] * 4 for c, r in zip(calls, records))
    return {
        "sum": float((calls * excess).sum()),
        "calls_floor": float(calls.sum() * floor_s),
        "params_bw": float(param_bytes / bw) if mode == "training" else 0.0,
        "const": 1.0,
        "energy_sum": float((calls * excess * p).sum()),
        "raw_sum_s": float((calls * costs.t_s).sum()),
        "raw_sum_j": float((calls * costs.t_s * p).sum()),
    }


def _nnls_relative(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares on relative error: minimise sum ((A x - y) / y)^2, x >= 0."""
    from scipy.optimize import nnls

    w = 1.0 / y
    x, _ = nnls(A * w[:, None], np.ones_like(y))
    return x


@dataclass
class Composition:
    mode: str
    time_coef: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TIME))
    energy_coef: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ENERGY))
    calibrated: bool = False
    n_networks: int = 0
    residuals_t: list[float] = field(default_factory=list)  # out-of-sample relative errors, time
    residuals_e: list[float] = field(default_factory=list)  # the same for energy

    def time(self, terms: dict[str, float]) -> float:
        return float(sum(self.time_coef[k] * terms[k] for k in TIME_TERMS))

    def energy(self, terms: dict[str, float], time_s: float) -> float:
        return float(self.energy_coef["energy_sum"] * terms["energy_sum"] + self.energy_coef["time"] * time_s)

    def interval(self, value: float, which: str = "time", extrapolating: bool = False) -> tuple[float, float]:
        """90 % interval of the measured value given the predicted one: the 5th/95th percentiles of
        the out-of-sample relative errors r = predicted / measured - 1."""
        res = self.residuals_t if which == "time" else self.residuals_e
        if len(res) >= MIN_NETWORKS:
            # measured = predicted / (1 + r): log(measured / predicted) = -log(1 + r)
            lo_r, hi_r = np.percentile(res, [5, 95])
            lo_f, hi_f = -np.log1p(max(hi_r, -0.99)), -np.log1p(max(lo_r, -0.99))
            lo_f, hi_f = min(lo_f, 0.0), max(hi_f, 0.0)
        else:
            lo_f, hi_f = np.log1p(-UNCALIBRATED_HALF_WIDTH), np.log1p(UNCALIBRATED_HALF_WIDTH)
        if extrapolating:
            lo_f, hi_f = lo_f * EXTRAPOLATION_WIDENING, hi_f * EXTRAPOLATION_WIDENING
        return float(value * np.exp(lo_f)), float(value * np.exp(hi_f))

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "time_coef": self.time_coef,
            "energy_coef": self.energy_coef,
            "calibrated": self.calibrated,
            "n_networks": self.n_networks,
            "residuals_t": self.residuals_t,
            "residuals_e": self.residuals_e,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Composition":
        tc = {k: float(d["time_coef"][k]) for k in TIME_TERMS}
        ec = {k: float(d["energy_coef"][k]) for k in ENERGY_TERMS}
        return cls(
            str(d["mode"]),
            tc,
            ec,
            bool(d["calibrated"]),
            int(d["n_networks"]),
            [float(x) for x in d["residuals_t"]],
            [float(x) for x in d["residuals_e"]],
        )


def fit(mode: str, terms: list[dict[str, float]], time_s: np.ndarray, energy_j: np.ndarray | None) -> Composition:
    """The composition layer of one device config and mode from its measured networks."""
    comp = Composition(mode, n_networks=len(terms))
    if len(terms) < MIN_NETWORKS:
        return comp
    names = [k for k in TIME_TERMS if not (k == "params_bw" and mode == "inference")]
    A = np.array([[t[k] for k in names] for t in terms])
    x = _nnls_relative(A, np.asarray(time_s, float))
    comp.time_coef = {k: 0.0 for k in TIME_TERMS} | dict(zip(names, map(float, x)))
    comp.calibrated = True
    if energy_j is not None and np.isfinite(energy_j).all():
        Ae = np.array([[t["energy_sum"], ts] for t, ts in zip(terms, time_s)])
        xe = _nnls_relative(Ae, np.asarray(energy_j, float))
        comp.energy_coef = dict(zip(ENERGY_TERMS, map(float, xe)))
    return comp
