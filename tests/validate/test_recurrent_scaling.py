"""Known answers for the recurrent scaling check (src/opcost/validate/recurrent.py, bench/recurrent_scaling.py)."""

from __future__ import annotations

import math

import pytest

from opcost.validate.recurrent import (
    RecurrentRow,
    fit_step_cost,
    predicted_ratio,
    scaling_pairs,
    summarize,
    varied_factor,
)

# A per-kernel and a per-FLOP cost the synthetic "measurements" obey exactly.
A_KERNEL, B_FLOP = 3e-6, 2e-11


def row(kind: str, t: int, layers: int = 1, bidirectional: bool = False, mode: str = "inference", t_s=None):
    """A batch-first layer (batch 8, 32 features, 64 hidden) whose kernels and FLOPs follow its steps:
    per step `kpp` kernels; FLOPs per step of layer 1 and of every further layer (their inputs differ)."""
    kpp = {"LSTM": 12, "GRU": 13, "RNN": 6}[kind]
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    d = 2 if bidirectional else 1
    first = 2 * 8 * gates * 64 * (32 + 64)
    later = 2 * 8 * gates * 64 * (64 * d + 64)
    flops = float(t * d * (first + (layers - 1) * later))
    parts = [{"op": "step", "count": t * layers * d * kpp}, {"op": "zeros", "count": 2}]
    hp = {
        "input_size": 32,
        "hidden_size": 64,
        "num_layers": layers,
        "bidirectional": bidirectional,
        "batch_first": True,
    }
    r = RecurrentRow(f"{kind}-T{t}-L{layers}-D{d}", kind, mode, hp, (8, t, 32), flops, parts)
    exact = A_KERNEL * r.kernels + B_FLOP * r.flops
    return RecurrentRow(r.set_id, kind, mode, hp, r.input_shape, flops, parts, exact if t_s is None else t_s)


GRID = [
    row("LSTM", 16),
    row("LSTM", 64),
    row("LSTM", 256),
    row("LSTM", 64, layers=2),
    row("LSTM", 64, layers=4),
    row("LSTM", 64, bidirectional=True),
    row("GRU", 16),
    row("GRU", 64),
    row("RNN", 16),
]


def test_steps_and_factors_of_a_configuration():
    r = row("LSTM", 64, layers=4, bidirectional=True)
    assert (r.seq_len, r.layers, r.directions, r.steps) == (64, 4, 2, 64 * 4 * 2)
    assert r.kernels == 64 * 4 * 2 * 12 + 2


def test_pairs_are_those_differing_in_exactly_one_factor():
    pairs = scaling_pairs(GRID)
    by_factor = {
        f: sorted((p["from"], p["to"]) for p in pairs if p["factor"] == f) for f in ("seq_len", "layers", "directions")
    }
    assert by_factor["seq_len"] == sorted(
        [
            ("LSTM-T16-L1-D1", "LSTM-T64-L1-D1"),
            ("LSTM-T16-L1-D1", "LSTM-T256-L1-D1"),
            ("LSTM-T64-L1-D1", "LSTM-T256-L1-D1"),
            ("GRU-T16-L1-D1", "GRU-T64-L1-D1"),
        ]
    )
    assert by_factor["layers"] == sorted(
        [
            ("LSTM-T64-L1-D1", "LSTM-T64-L2-D1"),
            ("LSTM-T64-L1-D1", "LSTM-T64-L4-D1"),
            ("LSTM-T64-L2-D1", "LSTM-T64-L4-D1"),
        ]
    )
    assert by_factor["directions"] == [("LSTM-T64-L1-D1", "LSTM-T64-L1-D2")]
    # two factors at once, another cell, another mode: no pair
    assert varied_factor(row("LSTM", 16), row("LSTM", 64, layers=2)) is None
    assert varied_factor(row("LSTM", 16), row("GRU", 64)) is None
    assert varied_factor(row("LSTM", 16), row("LSTM", 64, mode="training")) is None


def test_predicted_ratios_have_known_values():
    a, b = row("LSTM", 16), row("LSTM", 64)
    assert predicted_ratio("steps", a, b) == 4.0
    assert predicted_ratio("kernels", a, b) == (64 * 12 + 2) / (16 * 12 + 2)
    assert predicted_ratio("flops", a, b) == 4.0
    assert predicted_ratio("one_op", a, b) == 1.0
    l1, l2 = row("LSTM", 64), row("LSTM", 64, layers=2)
    assert predicted_ratio("steps", l1, l2) == 2.0
    # the second layer reads 64 hidden units, not 32 features: more than twice the work
    assert predicted_ratio("flops", l1, l2) == pytest.approx(1 + (64 + 64) / (32 + 64))
    with pytest.raises(ValueError, match="fitted"):
        predicted_ratio("by_steps", a, b)


def test_fit_recovers_the_per_kernel_and_per_flop_cost_from_one_layer_rows():
    base = [r for r in GRID if r.layers == 1 and r.directions == 1]
    a, b = fit_step_cost(base)
    assert a == pytest.approx(A_KERNEL, rel=1e-9) and b == pytest.approx(B_FLOP, rel=1e-9)
    pairs = scaling_pairs(GRID, (a, b))
    # the synthetic measurements obey the costing's form exactly: every by_steps ratio is exact,
    # held-out layer and direction pairs included
    assert max(abs(p["by_steps_error"]) for p in pairs) < 1e-9
    # one op (no scaling) misses a 16 -> 256 step ratio by far more than 90 %
    long = next(p for p in pairs if p["from"] == "LSTM-T16-L1-D1" and p["to"] == "LSTM-T256-L1-D1")
    assert long["one_op_error"] < -0.9


def test_fit_clips_a_negative_term_to_zero():
    """Times that fall with the kernel count at fixed FLOPs would give a negative per-kernel cost:
    the fit keeps it at zero (a negative cost would predict negative times for short sequences)."""
    base = [r for r in GRID if r.layers == 1 and r.directions == 1]
    planted = [
        RecurrentRow(
            r.set_id, r.kind, r.mode, r.hp, r.input_shape, r.flops, r.parts, 1e-10 * r.flops - 2e-8 * r.kernels
        )
        for r in base
    ]
    assert all(r.t_s > 0 for r in planted)
    a, b = fit_step_cost(planted)
    assert a == 0.0 and b > 0
    with pytest.raises(ValueError, match="positive measured times"):
        fit_step_cost([base[0]])


def test_ratio_errors_and_summary_are_exact_on_planted_measurements():
    """Measured 16 -> 64 steps: x2 (planted); steps predicts x4, an error of +100 %."""
    a = row("RNN", 16, t_s=1.0)
    b = row("RNN", 64, t_s=2.0)
    (p,) = scaling_pairs([a, b])
    assert p["measured_ratio"] == 2.0 and p["steps_error"] == pytest.approx(1.0) and p["one_op_error"] == -0.5
    s = summarize([p])
    assert s["seq_len"]["pairs"] == 1
    assert s["seq_len"]["steps"] == {"median_abs_pct": pytest.approx(100.0), "max_abs_pct": pytest.approx(100.0)}
    assert "layers" not in s and math.isclose(s["seq_len"]["one_op"]["median_abs_pct"], 50.0)


def test_a_cost_once_per_call_is_recovered_and_explains_sub_linear_sequence_scaling():
    """Planted: every call also costs 50 us once (no step repeats it). Cost by steps alone then
    overstates the 16 -> 256 step ratio; with the per-call term fitted, every ratio is exact."""
    c = 5e-5
    grid = [RecurrentRow(r.set_id, r.kind, r.mode, r.hp, r.input_shape, r.flops, r.parts, r.t_s + c) for r in GRID]
    base = [r for r in grid if r.layers == 1 and r.directions == 1]
    a, b, c_fit = fit_step_cost(base, per_call=True)
    assert (a, b, c_fit) == (
        pytest.approx(A_KERNEL, rel=1e-6),
        pytest.approx(B_FLOP, rel=1e-6),
        pytest.approx(c, rel=1e-6),
    )
    pairs = scaling_pairs(grid, fit_step_cost(base), (a, b, c_fit))
    assert max(abs(p["by_steps_call_error"]) for p in pairs) < 1e-6
    long = next(p for p in pairs if p["from"] == "LSTM-T16-L1-D1" and p["to"] == "LSTM-T256-L1-D1")
    assert long["steps_error"] > 0.05 and long["by_steps_error"] > 0.0
    with pytest.raises(ValueError, match="at least 3 rows"):
        fit_step_cost(base[:2], per_call=True)
