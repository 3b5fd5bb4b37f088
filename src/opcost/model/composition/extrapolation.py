"""What a model learned from (its ranges) and whether a question lies outside them.

Why a module of its own: a prediction (model/prediction/answer.py) and the validation of its intervals
(model/training/netval.py) must flag the same questions as extrapolating, since a flagged question's interval
is widened (compose.EXTRAPOLATION_WIDENING). netval asks it of each fold's own ranges, predictions of
the bundle's; one function for both keeps coverage a measure of the intervals predictions give.

Ranges (stored in the bundle as `ranges`, key -> [min, max]):
- `batch`: the batch size of the 4-D (image) inputs of the op rows;
- `in_numel`, `flops`: one op's input size and FLOPs over the op rows;
- `net_sample_numel`: the input size of one sample (C x H x W) of the measured image networks the
  composition layer was calibrated on. The composition's terms (constant power x time, the family
  terms) and the op models' power at the small ops of a small input were learned at those sizes: the
  ResNets at 32x32 and 56x56, with their family held out and every fold network at 224 px or more, were
  predicted at 140 W against 91-96 W measured, and the op ranges alone (which flag only ops larger than
  the data) did not flag them.
A question is flagged when a figure lies outside [min / EXTRAPOLATION_FACTOR, max x EXTRAPOLATION_FACTOR]
(op size and FLOPs: above only; an op smaller than every op row is floor-bound, and the launch floor is
measured).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from opcost.model.basis.features import OpRecord

# How far outside the training range a figure may lie before a prediction says it extrapolates.
EXTRAPOLATION_FACTOR = 2.0
NET_SAMPLE_NUMEL = "net_sample_numel"


def op_ranges(records: Sequence[OpRecord]) -> dict[str, list[float]]:
    """[min, max] of the batch size of 4-D (image) inputs, of an op's input size and of its FLOPs over
    the rows a model learns from (`records`): predictions far outside them are extrapolations and say so."""
    if not records:
        return {}
    batches = [r.input_shape[0] for r in records if len(r.input_shape) == 4]
    out = {
        "in_numel": [float(min(r.in_numel for r in records)), float(max(r.in_numel for r in records))],
        "flops": [float(min(r.metrics["flops"] for r in records)), float(max(r.metrics["flops"] for r in records))],
    }
    if batches:
        out["batch"] = [float(min(batches)), float(max(batches))]
    return out


def sample_numel(shape: Sequence[int]) -> int | None:
    """Values in one sample of a 4-D (image) network input (C x H x W); None for any other rank."""
    return math.prod(int(x) for x in shape[1:]) if len(shape) == 4 else None


def network_ranges(shapes: Iterable[Sequence[Any]]) -> dict[str, list[float]]:
    """`net_sample_numel`'s [min, max] over the input shapes of the networks a composition layer was
    calibrated on (image networks only; none: no range, nothing to flag)."""
    sizes = [n for n in (sample_numel([int(x) for x in s]) for s in shapes) if n is not None]
    return {NET_SAMPLE_NUMEL: [float(min(sizes)), float(max(sizes))]} if sizes else {}


def _outside(value: float, lo: float, hi: float) -> bool:
    return not lo / EXTRAPOLATION_FACTOR <= value <= hi * EXTRAPOLATION_FACTOR


def batch_outside(ranges: Mapping[str, Sequence[float]], shape: Sequence[int]) -> tuple[float, float] | None:
    """The batch range of the op rows (min, max) where the question's batch lies outside it, else None."""
    batch = ranges.get("batch")
    if batch is not None and shape and _outside(shape[0], batch[0], batch[1]):
        return float(batch[0]), float(batch[1])
    return None


def batch_range(batch: tuple[float, float]) -> str:
    """`32` for a single measured batch, `8..32` for a range."""
    return f"{batch[0]:g}" if batch[0] == batch[1] else f"{batch[0]:g}..{batch[1]:g}"


def extrapolation_warnings(
    ranges: Mapping[str, Sequence[float]], target: str, shape: tuple[int, ...], records: Sequence[OpRecord]
) -> list[str]:
    """What about this question (a network of input `shape` calling the ops `records`) lies outside the
    data the `target` model learned from (`ranges`, module docstring); one line per reason."""
    out = []
    batch = batch_outside(ranges, shape)
    if batch is not None:
        out.append(
            f"batch {shape[0]} lies outside the batches the {target} model was measured at ({batch_range(batch)}), "
            "so its 90 % interval is widened; for a closer answer, measure the network at this batch (opcost profile)"
        )
    net = ranges.get(NET_SAMPLE_NUMEL)
    size = sample_numel(shape) if shape else None
    if net is not None and size is not None and _outside(size, net[0], net[1]):
        out.append(
            f"an input of {size} values per sample ({'x'.join(str(x) for x in shape[1:])}) lies outside the "
            f"input sizes of the networks the {target} composition layer was calibrated on "
            f"({net[0]:.0f}..{net[1]:.0f} per sample): extrapolating"
        )
    for key, what in (("in_numel", "input size"), ("flops", "FLOPs")):
        seen = ranges.get(key)
        if seen is None or not records:
            continue
        hi = seen[1]
        values = np.array([float(r.in_numel if key == "in_numel" else r.metrics["flops"]) for r in records])
        far = values[values > hi * EXTRAPOLATION_FACTOR]
        if len(far):
            out.append(
                f"{len(far)} of {len(values)} ops exceed by more than {EXTRAPOLATION_FACTOR:g}x the largest {what} "
                f"the {target} model was trained on ({hi:.3g}; up to {far.max() / hi:.3g}x): extrapolating"
            )
    return out
