"""Training (forward + backward) baselines of depthwise convolutions and Linear layers (issue 21, section 4).

Why: a training op's time is its forward and its backward pass, and for a depthwise convolution the
backward pass is not a multiple of the forward roofline. Its input gradient is another depthwise
convolution (one pass over the op's tensors, like the forward pass), but its weight gradient is, per
channel, one reduction over the whole (N, H, W) extent for EACH kernel tap: kh x kw passes over the
input and the output gradient, memory-bound, not a matmul. On the thesis A30 (training, launch floor
taken off) the measured time over the forward memory time is ~15 for every 3x3 depthwise layer of
EfficientNet, ~32 for its 5x5 ones and ~60 for ConvNeXt's 7x7 ones: proportional to (2 + taps) at
1.2-1.5x, and to nothing the roofline (memory time, taps-blind) or the FLOPs baseline of inference
(model/basis/gemm.py: FLOPs over the FP32 peak, 52-190x with no order) shows. A tree on log(t / roofline)
cannot extrapolate over kernel size: with ConvNeXt held out it gave its 7x7 layers EfficientNet's
ratio (-47 % family-out, xgb-improved, A30 training; bench/training_family.py).

The baseline here: (2 + kh x kw) passes over the forward memory time at a fraction `e` of the
bandwidth, e = sum((2 + taps) x memory) / sum(t - floor) over the depthwise rows a model trains on (its
fit rows only; none: no baseline). The ratio of the sums, not a geometric mean: ShuffleNet's depthwise
layers sit at the launch floor and their ratios swing 4-18x; with EfficientNet held out a mean ratio
put its layers -24 %, the pooled one -10 %.

Why Linear layers: in training a Linear layer is three FP32 GEMMs of its forward FLOPs (the forward,
the input gradient M x K <- M x N . N x K, the weight gradient K x N <- K x M . M x N), each compute-
bound where the forward is. On the thesis A30 every compute-bound Linear layer (ConvNeXt's 4-D ones,
Swin's 3-D ones) takes 3.6-4.3x its forward roofline, yet with ConvNeXt held out the trees put its
layers +20 % (twe 26 %; the largest M they never saw fell into leaves of other ops). The baseline:
GEMMS x the forward compute time at the fraction of the unit's peak the fit rows' compute-bound Linear
layers attain (pooled as above; 0.79 on the A30).

Rows with a baseline are predicted by it alone, the trees' output not added (Encoding.baseline_only):
with the trees' residual on top, ConvNeXt's 7x7 depthwise layers went from +3 % (the baseline alone)
to +30 % family-out, the trees sending them to the leaves of the 7x7 stems. Training rows only, both
tree feature sets (improved, physical). bench/training_family.py: family split, per held-out family.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike

from opcost.model.basis.gemm import COMPUTE_BOUND_RATIO, LINEAR_KIND, is_depthwise
from opcost.model.basis.physics import spatial_size

FORWARD_PASSES = 2  # the forward and the input-gradient pass over the op's tensors
TRAINING_MODE = "training"


def taps(kind: str, hp: dict[str, Any]) -> int:
    """kh x kw of a depthwise convolution (its weight gradient's passes); 0 for every other op."""
    if not is_depthwise(kind, hp):
        return 0
    return math.prod(spatial_size(hp.get("kernel_size", 1), 2))


def work_s(memory_s: ArrayLike, n_taps: ArrayLike) -> np.ndarray:
    """(FORWARD_PASSES + taps) x the forward memory time per op [s]; 0 where taps is 0 (not depthwise)."""
    m, k = np.asarray(memory_s, float), np.asarray(n_taps, float)
    return np.where(k > 0, (FORWARD_PASSES + k) * m, 0.0)


GEMMS = 3  # a Linear layer's forward, input-gradient and weight-gradient GEMMs: each the forward's FLOPs


def linear_work_s(kinds: Sequence[str], compute_s: ArrayLike, memory_s: ArrayLike) -> np.ndarray:
    """GEMMS x the forward compute time of compute-bound Linear layers (compute at least
    gemm.COMPUTE_BOUND_RATIO x memory time) [s]; 0 for every other op."""
    c, m = np.asarray(compute_s, float), np.asarray(memory_s, float)
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


def baseline_s(base_s: np.ndarray, work: np.ndarray, eff: float) -> np.ndarray:
    """Per op: `base_s`, raised to work / e where the op has work (a depthwise convolution in training)."""
    base = np.asarray(base_s, float)
    if eff <= 0:
        return base
    w = np.asarray(work, float)
    return np.where(w > 0, np.maximum(base, w / eff), base)


def raised_log_offset(
    log_offset: np.ndarray, floor_s: "float | np.ndarray", works: Sequence[tuple[np.ndarray, float]]
) -> np.ndarray:
    """log(baseline + floor) offsets (model/training/fit.py, Encoding.log_roofline) with `baseline_s` applied to
    the baseline inside them for each (work, efficiency): unchanged where every eff is 0 or an op has no work."""
    off = np.asarray(log_offset, float)
    if all(e <= 0 for _, e in works):
        return off
    base = np.exp(off) - floor_s
    for work, eff in works:
        base = baseline_s(base, work, eff)
    return np.log(base + floor_s)


def baseline_only(works: Sequence[tuple[np.ndarray, float]], n: int) -> np.ndarray:
    """Per op: has work of a class with a learnt efficiency, so is predicted by its baseline alone."""
    out = np.zeros(n, bool)
    for work, eff in works:
        if eff > 0:
            out |= np.asarray(work, float) > 0
    return out
