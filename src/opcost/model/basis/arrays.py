"""The array types the model rooms compute in (for type hints: mypy keeps numpy's dtype through them)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
# One value or one per point: the clock and power curves are evaluated on a scalar or vectorised over points alike.
Floats = FloatArray | float
