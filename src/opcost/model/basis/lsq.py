"""Bounded nonlinear least squares run to the optimum: the solver of the clock model's and the power
model's fits (model/clocks/clock.py, model/clocks/xpower.py).

Why not scipy's defaults: their forward-difference Jacobian is good to ~1e-8, so the solver stopped ~1e-7
short of the optimum, and one start left the clock model's voltage floor in a poor local minimum; a one-ulp
change of the inputs (another CPU's summation order) then moved a report's digits. Here: every start
solved, the best polished with a central-difference Jacobian and tolerances near machine precision, which
settles every parameter to ~2e-8 (tests/model/test_clock_model.py, the one-ulp test; docs/architecture.md).
scipy.optimize is imported inside the call: predictions load the models' modules, only fits need scipy.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

LSQ_OPTIONS: dict[str, Any] = {"jac": "3-point", "xtol": 1e-14, "ftol": 1e-14, "gtol": 1e-14}


def least_squares(
    res: Callable[[np.ndarray], np.ndarray],
    starts: Sequence[Sequence[float]],
    bounds: tuple[Sequence[float], Sequence[float]],
) -> np.ndarray:
    """The parameters minimising the sum of squares of `res` within `bounds`: scipy's least squares from each
    of `starts` (several where the problem is not convex), then the best polished with LSQ_OPTIONS (polishing
    every start tripled the clock stage's time and did not settle the folds that still move: docs/architecture.md)."""
    from scipy.optimize import least_squares as scipy_least_squares

    fits = [scipy_least_squares(res, x0=np.asarray(x0, float), bounds=bounds) for x0 in starts]
    best = min(fits, key=lambda r: r.cost)
    return np.asarray(scipy_least_squares(res, x0=best.x, bounds=bounds, **LSQ_OPTIONS).x, float)
