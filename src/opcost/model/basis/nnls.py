"""Non-negative least squares on relative error: the fit of the composition layer's time terms
(model/composition/compose.py) and of its unlimited energy layer (model/clocks/powerlimit.py).

Why a module of its own: both need it, and powerlimit cannot import compose (compose imports powerlimit).
scipy.optimize is imported inside the call, never at import: the prediction path loads both modules and
only fits need scipy (importing scipy.optimize costs about a quarter of a second).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def nnls_relative(A: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """x >= 0 minimising sum ((A x - y) / y)^2."""
    from scipy.optimize import nnls

    w = 1.0 / y
    x: npt.NDArray[np.float64]  # scipy has no type information: its solution is a float64 array
    x, _ = nnls(A * w[:, None], np.ones_like(y))
    return x
