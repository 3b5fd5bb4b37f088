"""Training (forward + backward) baselines of depthwise convolutions and Linear layers.

Why: a training op's time is its forward and its backward pass, and for these two kinds the backward pass
is not a multiple of the forward roofline the trees are anchored on, nor can trees extrapolate it over
kernel size or shapes they never saw.
- Depthwise convolution: its weight gradient is, per channel, one reduction over (N, H, W) for EACH kernel
  tap, memory-bound. Baseline: (2 + kh x kw) passes over the forward memory time at a fraction `e` of the
  bandwidth, e = sum((2 + taps) x memory) / sum(t - floor) over the depthwise fit rows (a ratio of sums, not
  a mean of ratios: floor-bound layers' ratios swing); none in the fit rows: no baseline.
- Linear layer: three GEMMs of its forward FLOPs (forward, input gradient, weight gradient). Baseline: GEMMS
  x the forward compute time at the fraction of the unit's peak the fit rows' compute-bound Linear layers
  attain (pooled as above).
Rows with a baseline are predicted by it alone, no tree residual added (Encoding.baseline_only). Training
rows only, both tree feature sets (improved, physical). Figures: docs/op-models.md, "Training baselines of
depthwise convolutions and Linear layers".
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from opcost.model.basis.gemm import COMPUTE_BOUND_RATIO, LINEAR_KIND, is_depthwise
from opcost.model.basis.physics import spatial_size

FORWARD_PASSES = 2  # the forward and the input-gradient pass over the op's tensors
TRAINING_MODE = "training"


def taps(kind: str, hp: dict[str, Any]) -> int:
    """kh x kw of a depthwise convolution (its weight gradient's passes); 0 for every other op."""
    if not is_depthwise(kind, hp):
        return 0
    return math.prod(spatial_size(hp.get("kernel_size", 1), 2))


def work_s(memory_s: ArrayLike, n_taps: ArrayLike) -> NDArray[np.float64]:
    """(FORWARD_PASSES + taps) x the forward memory time per op [s]; 0 where taps is 0 (not depthwise)."""
    m, k = np.asarray(memory_s, np.float64), np.asarray(n_taps, np.float64)
    return np.where(k > 0, (FORWARD_PASSES + k) * m, 0.0)


GEMMS = 3  # a Linear layer's forward, input-gradient and weight-gradient GEMMs: each the forward's FLOPs


def linear_work_s(kinds: Sequence[str], compute_s: ArrayLike, memory_s: ArrayLike) -> NDArray[np.float64]:
    """GEMMS x the forward compute time of compute-bound Linear layers (compute at least
    gemm.COMPUTE_BOUND_RATIO x memory time) [s]; 0 for every other op."""
    c, m = np.asarray(compute_s, np.float64), np.asarray(memory_s, np.float64)
    lin = np.array([k == LINEAR_KIND for k in kinds], bool).reshape(c.shape)
    return np.where(lin & (c > 0) & (c >= COMPUTE_BOUND_RATIO * m), GEMMS * c, 0.0)


def efficiency(work: np.ndarray, t_s: np.ndarray, floor_s: float = 0.0) -> float:
    """sum(work) / sum(t - floor) over the rows with work > 0 and t above the floor (a ratio of sums, not
    a mean of ratios: the module docstring says why): the fraction of the bandwidth (or peak) the passes
    attain; 0.0 (no baseline) where no such row is given."""
    w, t = np.asarray(work, float), np.asarray(t_s, float) - floor_s
    ok = np.isfinite(w) & np.isfinite(t) & (w > 0) & (t > 0)
    if not ok.any():
        return 0.0
    return float(w[ok].sum() / t[ok].sum())


def baseline_s(base_s: NDArray[np.float64], work: NDArray[np.float64], eff: float) -> NDArray[np.float64]:
    """Per op: `base_s`, raised to work / e where the op has work (a depthwise convolution in training)."""
    base = np.asarray(base_s, np.float64)
    if eff <= 0:
        return base
    w = np.asarray(work, np.float64)
    return np.where(w > 0, np.maximum(base, w / eff), base)


def raised_log_offset(
    log_offset: NDArray[np.float64],
    floor_s: "float | NDArray[np.float64]",
    works: Sequence[tuple[NDArray[np.float64], float]],
) -> NDArray[np.float64]:
    """log(baseline + floor) offsets (model/training/fit.py, Encoding.log_roofline) with `baseline_s` applied to
    the baseline inside them for each (work, efficiency): unchanged where every eff is 0 or an op has no work."""
    off = np.asarray(log_offset, np.float64)
    if all(e <= 0 for _, e in works):
        return off
    base = np.exp(off) - floor_s
    for work, eff in works:
        base = baseline_s(base, work, eff)
    return np.log(base + floor_s)


def baseline_only(works: Sequence[tuple[NDArray[np.float64], float]], n: int) -> NDArray[np.bool_]:
    """Per op: has work of a class with a learnt efficiency, so is predicted by its baseline alone."""
    out = np.zeros(n, bool)
    for work, eff in works:
        if eff > 0:
            out |= np.asarray(work, float) > 0
    return out
