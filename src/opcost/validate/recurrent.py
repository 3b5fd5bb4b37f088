"""Does cost by sequential steps get recurrent layers' measured scaling right?

The costing (model/composition/costing.py) charges an LSTM, GRU or RNN layer its steps: one launch floor per
sequential step (ops/recurrent.recurrent_steps: T x layers x directions) plus every repetition of
each kernel of a step (ops/parts.compact_steps: a kernel listed once with its `count`). Whatever the
device's kernel costs, that structure fixes how time scales between two configurations that differ in
one factor: the sequence length, the layers or the directions. Measured pairs (the cpu-rnn campaign)
check it, beside the alternatives it replaced:
- `steps`: time in proportion to sequential steps (the floor term alone: a launch-bound device);
- `kernels`: in proportion to the kernels launched (sum of the parts' counts);
- `flops`: in proportion to the work (what one fused op scaled by its FLOPs would say);
- `one_op`: no scaling at all (the layer charged as one op);
- `by_steps`: the costing's own form, t = a x kernels + b x FLOPs per call, with the per-kernel cost a
  and the per-FLOP cost b fitted (non-negative least squares) on the sequence-length configurations
  only (one layer, one direction) and judged on the layer and direction pairs it never saw;
- `by_steps_call`: the same with a cost once per call beside them (t = a x kernels + b x FLOPs + c),
  fitted the same way: what the costing would gain from a per-call term.

Only pure functions of (configuration, measured time) rows: a test gives them known answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from opcost.ops.kinds import SEQUENCE_KINDS
from opcost.ops.recurrent import recurrent_steps

SCHEMES = ("steps", "kernels", "flops", "one_op", "by_steps", "by_steps_call")
FACTORS = ("seq_len", "layers", "directions")


@dataclass(frozen=True)
class RecurrentRow:
    """One measured recurrent layer (an op of kind LSTM, GRU or RNN) in one mode."""

    set_id: str
    kind: str
    mode: str
    hp: dict[str, Any]  # constructor arguments: input_size, hidden_size, num_layers, bidirectional, batch_first
    input_shape: tuple[int, ...]
    flops: float  # forward FLOPs of one call
    parts: list[dict[str, Any]] = field(default_factory=list)  # kernels of one call, each with its count
    t_s: float = math.nan  # measured time of one call

    @property
    def steps(self) -> int:
        return recurrent_steps(self.kind, self.hp, self.input_shape)

    @property
    def kernels(self) -> float:
        """Kernels one call launches (every repetition of every step's kernels)."""
        return float(sum(int(p.get("count", 1)) for p in self.parts))

    @property
    def seq_len(self) -> int:
        return int(self.input_shape[1 if self.hp.get("batch_first") and len(self.input_shape) == 3 else 0])

    @property
    def layers(self) -> int:
        return int(self.hp.get("num_layers") or 1)

    @property
    def directions(self) -> int:
        return 2 if self.hp.get("bidirectional") else 1

    def family(self) -> tuple[Any, ...]:
        """What must match for two rows to be a scaling pair: cell, mode, batch, widths."""
        batch = self.input_shape[0 if self.hp.get("batch_first") else 1] if len(self.input_shape) == 3 else 1
        return (self.kind, self.mode, batch, self.hp.get("input_size"), self.hp.get("hidden_size"))


def varied_factor(a: RecurrentRow, b: RecurrentRow) -> str | None:
    """The one factor two rows of one family differ in (seq_len, layers, directions), else None."""
    if a.family() != b.family():
        return None
    diff = [f for f in FACTORS if getattr(a, f) != getattr(b, f)]
    return diff[0] if len(diff) == 1 else None


def fit_step_cost(rows: Sequence[RecurrentRow], per_call: bool = False) -> tuple[float, ...]:
    """(a, b) of t = a x kernels + b x FLOPs, or with `per_call` (a, b, c) of t = a x kernels + b x FLOPs
    + c: non-negative least squares in relative error (each row weighted by 1/t, so a 16-step layer
    counts as much as a 256-step one). `c` is a cost once per call that no step repeats (setting up
    the sequence, one GEMM of the input over every step), which cost by steps does not have."""
    from scipy.optimize import nnls

    t = np.array([r.t_s for r in rows], float)
    need = 3 if per_call else 2
    if len(rows) < need or not np.isfinite(t).all() or (t <= 0).any():
        raise ValueError(f"fit_step_cost needs at least {need} rows with positive measured times")
    x = np.array([[r.kernels, r.flops] + ([1.0] if per_call else []) for r in rows], float)
    scale = x.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls((x / scale) / t[:, None], np.ones(len(rows)))
    return tuple(float(c) for c in coef / scale)


def predicted_ratio(scheme: str, a: RecurrentRow, b: RecurrentRow, cost: tuple[float, ...] | None = None) -> float:
    """t(b) / t(a) as `scheme` predicts it (see module docstring)."""
    if scheme == "steps":
        return b.steps / a.steps
    if scheme == "kernels":
        return b.kernels / a.kernels
    if scheme == "flops":
        return b.flops / a.flops
    if scheme == "one_op":
        return 1.0
    if scheme in ("by_steps", "by_steps_call"):
        if cost is None:
            raise ValueError(f"{scheme} needs the fitted (per-kernel, per-FLOP[, per-call]) cost")
        k, f, c = (*cost, 0.0)[:3]
        return (k * b.kernels + f * b.flops + c) / (k * a.kernels + f * a.flops + c)
    raise ValueError(f"unknown scheme {scheme!r}; one of {', '.join(SCHEMES)}")


def scaling_pairs(
    rows: Sequence[RecurrentRow], cost: tuple[float, ...] | None = None, call_cost: tuple[float, ...] | None = None
) -> list[dict[str, Any]]:
    """Every pair of rows that differ in one factor, the smaller first: measured and predicted ratios and
    each scheme's ratio error (predicted / measured - 1)."""
    out = []
    for a, b in combinations(rows, 2):
        factor = varied_factor(a, b)
        if factor is None:
            continue
        if getattr(a, factor) > getattr(b, factor):
            a, b = b, a
        measured = b.t_s / a.t_s
        row: dict[str, Any] = {
            "kind": a.kind,
            "mode": a.mode,
            "factor": factor,
            "from": a.set_id,
            "to": b.set_id,
            "measured_ratio": measured,
        }
        fitted = {"by_steps": cost, "by_steps_call": call_cost}
        for s in SCHEMES:
            if s in fitted and fitted[s] is None:
                continue
            p = predicted_ratio(s, a, b, fitted.get(s))
            row[f"{s}_ratio"] = p
            row[f"{s}_error"] = p / measured - 1.0
        out.append(row)
    return out


def summarize(pairs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per factor and scheme: pairs, median and largest |ratio error| in percent."""
    out: dict[str, Any] = {}
    for factor in FACTORS:
        these = [p for p in pairs if p["factor"] == factor]
        if not these:
            continue
        out[factor] = {"pairs": len(these)}
        for s in SCHEMES:
            errs = [abs(p[f"{s}_error"]) * 100 for p in these if f"{s}_error" in p]
            if errs:
                out[factor][s] = {"median_abs_pct": float(np.median(errs)), "max_abs_pct": float(np.max(errs))}
    return out


def is_recurrent(kind: str) -> bool:
    return kind in SEQUENCE_KINDS
