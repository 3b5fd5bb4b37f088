"""Does cost by sequential steps get recurrent layers' measured scaling right? (bench/recurrent_scaling.py)

The costing (model/costing.py) charges an LSTM, GRU or RNN layer its steps: one launch floor per
sequential step (ops/recurrent.recurrent_steps: T x layers x directions) plus every repetition of
each kernel of a step (ops/parts.compact_steps: a kernel listed once with its `count`). Whatever the
device's kernel costs, that structure fixes how time scales between two configurations that differ in
one factor: the sequence length, the layers or the directions. Measured pairs (the cpu-rnn campaign)
check it, beside the alternatives it replaced:
- `steps`: time in proportion to sequential steps (the floor term alone: a launch-bound device);
- `kernels`: in proportion to the kernels launched (sum of the parts' counts);
- `flops`: in proportion to the work (what one fused op scaled by its FLOPs would say);
- `one_op`: no scaling at all (the layer charged as one op, as before recurrent specs: 0.41 ms for a
  6-layer LSTM over 512 steps);
- `by_steps`: the costing's own form, t = a x kernels + b x FLOPs per call, with the per-kernel cost a
  and the per-FLOP cost b fitted (non-negative least squares) on the sequence-length configurations
  only (one layer, one direction) and judged on the layer and direction pairs it never saw.

Only pure functions of (configuration, measured time) rows: a test gives them known answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from opcost.ops.recurrent import SEQUENCE_KINDS, recurrent_steps

SCHEMES = ("steps", "kernels", "flops", "one_op", "by_steps")
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


def fit_step_cost(rows: Sequence[RecurrentRow]) -> tuple[float, float]:
    """(a, b) of t = a x kernels + b x FLOPs, non-negative, least squares in relative error (each row
    weighted by 1/t, so a 16-step layer counts as much as a 256-step one)."""
    x = np.array([[r.kernels, r.flops] for r in rows], float)
    t = np.array([r.t_s for r in rows], float)
    if len(rows) < 2 or not np.isfinite(t).all() or (t <= 0).any():
        raise ValueError("fit_step_cost needs at least two rows with positive measured times")
    w = x / t[:, None]
    best: tuple[float, float] | None = None
    best_err = math.inf
    # two unknowns: the unconstrained solution if both are >= 0, else the better one-term fit
    candidates = []
    sol, *_ = np.linalg.lstsq(w, np.ones(len(rows)), rcond=None)
    if (sol >= 0).all():
        candidates.append((float(sol[0]), float(sol[1])))
    for j in range(2):
        col = w[:, j]
        coef = float(col @ np.ones(len(rows)) / (col @ col)) if (col @ col) > 0 else 0.0
        candidates.append((coef, 0.0) if j == 0 else (0.0, coef))
    for a, b in candidates:
        err = float(np.sum((w @ np.array([a, b]) - 1.0) ** 2))
        if err < best_err - 1e-15:
            best, best_err = (a, b), err
    assert best is not None
    return best


def predicted_ratio(scheme: str, a: RecurrentRow, b: RecurrentRow, cost: tuple[float, float] | None = None) -> float:
    """t(b) / t(a) as `scheme` predicts it (see module docstring)."""
    if scheme == "steps":
        return b.steps / a.steps
    if scheme == "kernels":
        return b.kernels / a.kernels
    if scheme == "flops":
        return b.flops / a.flops
    if scheme == "one_op":
        return 1.0
    if scheme == "by_steps":
        if cost is None:
            raise ValueError("by_steps needs the fitted (per-kernel, per-FLOP) cost")
        ka, fa = cost
        return (ka * b.kernels + fa * b.flops) / (ka * a.kernels + fa * a.flops)
    raise ValueError(f"unknown scheme {scheme!r}; one of {', '.join(SCHEMES)}")


def scaling_pairs(rows: Sequence[RecurrentRow], cost: tuple[float, float] | None = None) -> list[dict[str, Any]]:
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
        for s in SCHEMES:
            if s == "by_steps" and cost is None:
                continue
            p = predicted_ratio(s, a, b, cost)
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
