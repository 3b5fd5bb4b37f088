"""Per-kind launch floors: the fixed cost of one call of an op kind, in the op time models' offset.

Why: a log(t / (baseline + floor)) target (model/training/fit.py `offsets`, features.Encoding.log_offset) makes the
trees learn a ratio, and a ratio learnt on small ops of a kind is applied to that kind's large ops. The
device's floor (the 2nd percentile of every measured time) is the cheapest call of any kind, but calls of
some kinds never come near it (on the RTX 2080 Ti every Linear layer takes at least 73 us, the device floor
is 23 us). Each kind's floor here is what its cheapest memory-bound calls cost beyond moving their bytes at
the peak bandwidth: the FLOOR_PERCENTILE-th percentile of (t - bytes / bandwidth) over the kind's fit rows
whose memory time is at least their compute time at the nominal peak, never below the device floor, for
kinds with at least KIND_FLOOR_ROWS such rows; other kinds (and a kind the model never saw) keep the device
floor. Memory-bound rows only: over a compute-bound row t - bytes / bandwidth is mostly compute.
Inference only: a training row times a whole forward and backward pass, whose floor the device floor
already is. The launch floor the composition layer charges per call (model/composition/compose.py) stays
the device's. Figures and the estimators compared: docs/op-models.md, "Per-kind launch floors".
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt

FLOOR_PERCENTILE = 2  # the device floor's percentile (model/training/fit.py launch_floor), per kind here
KIND_FLOOR_ROWS = 5
KIND_FLOOR_MODES = ("inference",)

KindFloors = tuple[tuple[str, float], ...]  # (kind, floor [s]) sorted by kind: hashable, for Encoding


def device_floor(t_s: np.ndarray) -> float:
    """The device's launch floor: the FLOOR_PERCENTILE-th percentile of measured times [s]."""
    return float(np.percentile(np.asarray(t_s, float), FLOOR_PERCENTILE))


def kind_floors(
    kinds: Sequence[str] | np.ndarray,
    t_s: np.ndarray,
    memory_s: np.ndarray,
    compute_s: np.ndarray,
    floor_s: float,
    mode: str,
) -> KindFloors:
    """Per kind with at least KIND_FLOOR_ROWS finite memory-bound rows (memory time >= compute time at the
    nominal peak): max(floor_s, FLOOR_PERCENTILE-th percentile of t - memory time over them); () in modes
    other than KIND_FLOOR_MODES (module docstring)."""
    if mode not in KIND_FLOOR_MODES:
        return ()
    k = np.asarray(kinds, dtype=object).astype(str)
    m = np.asarray(memory_s, float)
    excess = np.asarray(t_s, float) - m
    ok = np.isfinite(excess) & (m >= np.asarray(compute_s, float))
    out = []
    for kind in np.unique(k[ok]):
        sel = ok & (k == kind)
        if sel.sum() >= KIND_FLOOR_ROWS:
            out.append((str(kind), max(float(floor_s), float(np.percentile(excess[sel], FLOOR_PERCENTILE)))))
    return tuple(out)


def per_op(kinds: Sequence[str] | np.ndarray, floor_s: float, floors: KindFloors) -> npt.NDArray[np.float64]:
    """Each op's floor [s]: its kind's where `floors` has one, else the device's `floor_s`."""
    table = dict(floors)
    return np.array([table.get(str(k), floor_s) for k in kinds], float)
