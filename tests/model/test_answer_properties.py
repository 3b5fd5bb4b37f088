"""Properties of the answer path: the wiring that passes values between its components.

Each component (the op models, the composition's fit, the interval rule, the clock and power models) is
tested against known answers elsewhere. Here random networks, coefficients, families, clocks and scores go
through the code that joins them (compose.network_terms and Composition, answer.assemble, costing.cost_groups,
clocktransfer, xdevice_predict.at_clock and energy, xinterval), and each result is checked against a slow
reference written out in the test from the documented formulas (module docstrings of compose.py,
intervals.py, xdevice_predict.py, xpower.py, xinterval.py), not by calling the same code. A component may be
called for its own answer (an interval rule's bounds, the clock model's per-op costs): what is checked is
what the wiring does with it. The draws avoid the set-ups where a wrong value equals the right one
(covariate 0, one op, unit coefficients, the boost clock).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import layer_scores, transferred_ops
from opcost.devices import DEVICES, device_config, find_device
from opcost.model.basis.features import OpRecord
from opcost.model.basis.physics import NOMINAL_BANDWIDTH
from opcost.model.clocks.clock import ClockModel
from opcost.model.clocks.xpower import PowerModel
from opcost.model.composition.compose import Composition, Costs, ScoreSet, network_terms, transfer
from opcost.model.composition.intervals import LogInterval, log_errors, log_interval, scale_of
from opcost.model.composition.network import Network
from opcost.model.crossdevice.xinterval import halfwidth, other_share
from opcost.model.prediction.answer import assemble
from opcost.model.prediction.clocktransfer import ClockTransfer, widen
from opcost.model.prediction.predict import cost_groups
from opcost.model.prediction.xdevice_predict import TransferredEnergy, at_clock, energy

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# kind -> is a matrix product (ops/kinds.py's `matmul` fact, written out: the reference does not ask the code)
MATMUL = {"Linear": True, "Conv2d": True, "matmul": True, "ReLU": False, "BatchNorm2d": False, "LayerNorm": False}
CONFIGS = ("A30", "RTX2080Ti", "H100", "NOT_A_GPU")  # the last: no table entry (no L2, nominal bandwidth)
TIME_KEYS = ("sum", "memory_sum", "l2_sum", "calls_floor", "params_bw", "const")

log_uniform = st.floats(-1.0, 1.0).map(lambda x: 10.0**x)


@st.composite
def ops(draw, min_ops: int = 2, max_ops: int = 7):
    """A network's ops: (record, time per call, power, calls); times around the launch floor and far above it."""
    n = draw(st.integers(min_ops, max_ops))
    out = []
    for i in range(n):
        kind = draw(st.sampled_from(sorted(MATMUL)))
        t = draw(st.floats(-6.0, -2.0).map(lambda x: 10.0**x))
        p = draw(st.floats(20.0, 400.0))
        calls = draw(st.integers(1, 40))
        metrics = {"params": draw(st.integers(0, 10**7)), "bytes_read": draw(st.floats(0.0, 2e8))}
        out.append((OpRecord(f"op{i}", kind, {}, (1,), 1, metrics), t, p, calls))
    return out


def device_of(config: str) -> tuple[float, float]:
    """(L2 bytes, bandwidth) of a config from the device table (facts, not code under test)."""
    found = find_device(config)
    return (float(found[0].l2_bytes), float(found[0].bandwidth)) if found else (0.0, NOMINAL_BANDWIDTH)


def reference_terms(net: list, floor: float, config: str, mode: str) -> dict[str, float]:
    """The composition terms (compose.py's module docstring), op by op."""
    l2, bw = device_of(config)
    out = dict.fromkeys(("sum", "memory_sum", "l2_sum", "energy_sum", "raw_sum_s", "raw_sum_j", "n", "params"), 0.0)
    for r, t, p, c in net:
        excess = c * max(t - floor, 0.0)
        out["sum"] += excess
        out["energy_sum"] += excess * p
        out["raw_sum_s"] += c * t
        out["raw_sum_j"] += c * t * p
        out["n"] += c
        out["params"] += c * r.metrics["params"] * 4
        if not MATMUL[r.kind]:
            out["memory_sum"] += excess
            fits = 0.0 if l2 <= 0 else min(1.0, l2 / max(r.metrics["bytes_read"], 1.0))
            out["l2_sum"] += excess * fits
    out["calls_floor"] = out["n"] * floor
    out["params_bw"] = out["params"] / bw if mode == "training" else 0.0
    out["const"] = 1.0
    return out


def reference_time(coef: dict[str, float], ref: dict[str, float], f_time: float = 0.0) -> float:
    return sum(coef[k] * ref[k] for k in TIME_KEYS) * math.exp(f_time)


def reference_energy(a_e: float, k: float, ref: dict[str, float], time_s: float, cap: float, f_e: float) -> float:
    e = a_e * ref["energy_sum"] + k * time_s
    return (min(e, cap * time_s) if cap > 0 else e) * math.exp(f_e)


coefficients = st.fixed_dictionaries(
    {
        "sum": st.floats(0.3, 1.5),
        "memory_sum": st.floats(0.0, 0.5),
        "l2_sum": st.floats(0.0, 0.5),
        "calls_floor": st.floats(0.0, 2.0),
        "params_bw": st.floats(0.0, 2.0),
        "const": st.floats(1e-5, 5e-3),
    }
)


def _costs(net: list) -> Costs:
    return Costs(np.array([t for _, t, _, _ in net]), np.array([p for _, _, p, _ in net]), ["predicted"] * len(net),
                 [None] * len(net))  # fmt: skip


@FAST
@given(ops(), coefficients, st.sampled_from(CONFIGS), st.sampled_from(("inference", "training")),
       st.floats(1e-6, 2e-5), st.floats(-0.3, 0.3))  # fmt: skip
def test_composed_time_is_the_coefficients_on_the_reference_sums(net, coef, config, mode, floor, f_t) -> None:
    """network_terms + Composition.time: a network's time is a S + m S_m + l S_l2 + b N floor + o P + c, times
    exp(its family's term), every sum taken op by op in the reference."""
    calls = np.array([c for *_, c in net], float)
    terms = network_terms(_costs(net), calls, [r for r, *_ in net], floor, find_device(config), mode)
    ref = reference_terms(net, floor, config, mode)
    for k in (*TIME_KEYS, "energy_sum", "raw_sum_s", "raw_sum_j"):
        assert terms[k] == pytest.approx(ref[k], rel=1e-9, abs=1e-30), k
    comp = Composition(mode, dict(coef), calibrated=True, family_terms={"fam": {"time": f_t, "n": 2.0}})
    assert comp.time(terms, "fam") == pytest.approx(reference_time(coef, ref, f_t), rel=1e-9)
    assert comp.time(terms, "other") == pytest.approx(reference_time(coef, ref), rel=1e-9)
    assert comp.family_term("fam") == f_t and comp.family_term("other") == 0.0  # the time term unless asked
    # a family term without an energy entry: energy as for no family
    assert comp.energy(terms, 1e-3, "fam") == pytest.approx(comp.energy(terms, 1e-3, "other"), rel=1e-12)


@FAST
@given(ops(), st.integers(2, 9), st.sampled_from(CONFIGS), st.sampled_from(("inference", "training")))
def test_scaling_the_calls_by_k_scales_every_summed_cost_by_k(net, k, config, mode) -> None:
    """A batch of k identical steps (calls x k): every sum of op costs x k, the constant term stays 1."""
    recs = [r for r, *_ in net]
    calls = np.array([c for *_, c in net], float)
    one = network_terms(_costs(net), calls, recs, 1e-5, find_device(config), mode)
    many = network_terms(_costs(net), k * calls, recs, 1e-5, find_device(config), mode)
    for key in ("sum", "memory_sum", "l2_sum", "calls_floor", "params_bw", "energy_sum", "raw_sum_s", "raw_sum_j"):
        assert many[key] == pytest.approx(k * one[key], rel=1e-9, abs=1e-30), key
    assert many["const"] == one["const"] == 1.0


# --------------------------------------------------------------------------------------------
# Score sets with a heteroscedastic trend: which set an answer's interval rests on, and its scale
# --------------------------------------------------------------------------------------------


def trend_scores(n: int, sigma: float, bias: float, spread: float, seed: int) -> tuple[list[float], list[float]]:
    """n relative errors whose log spread grows with |c| (sd sigma sqrt(1 + 9 c^2)), and their covariates."""
    rng = np.random.default_rng(seed)
    c = np.linspace(-spread, spread, n)
    e = bias + sigma * np.sqrt(1 + 9 * c**2) * rng.standard_normal(n)
    return [float(x) for x in np.expm1(e)], [float(x) for x in c]


def groups_of(n: int) -> list[str]:
    """Two scores per held-out group (a model's two input sizes)."""
    return [f"m{i // 2}" for i in range(n)]


def reference_bounds(
    value: float, scores, cov, covariate: float, widen_by: float, groups=None, time_span: float | None = None
) -> tuple[float, float]:
    """The bounds the interval rule (a component) gives the normalised scores, scaled to the question's covariate
    by s(c) = sqrt(1 + r min(|c|, span)^2) and widened about the centre (x `widen_by`, and x2 when the question
    extrapolates: |c| beyond the span of the time scores, `time_span`, these scores' own where not given)."""
    base = log_interval(log_errors(scores), groups=groups, covariates=cov)
    s = math.sqrt(1 + base.ratio * min(abs(covariate), base.span) ** 2)
    lo, hi = base.lo * s, base.hi * s
    span = base.span if time_span is None else time_span
    factor = widen_by * (2.0 if abs(covariate) > span * (1 + 1e-9) else 1.0)
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * factor
    return value * math.exp(mid - half), value * math.exp(mid + half)


score_sets = st.tuples(st.sampled_from((6, 12, 24)), st.floats(0.03, 0.2), st.floats(-0.1, 0.1),
                       st.floats(0.1, 0.6), st.integers(0, 10**6))  # fmt: skip


def _spy_bundle(comp: Composition, floor: float, config: str, with_power: bool, clocks_mhz=()) -> SimpleNamespace:
    """What assemble reads of a bundle; its costs come from the test (`costed`), so no op model is asked."""
    models = {"time": None, "power": None} if with_power else {"time": None}
    return SimpleNamespace(composition=comp, mode=comp.mode, floor_s=floor, device_config=config, unvouched="",
                           device=find_device(config), models=models, clocks_mhz=clocks_mhz,
                           target=f"{config}-{comp.mode}", ranges={})  # fmt: skip


@FAST
@given(ops(), coefficients, st.sampled_from(("A30", "RTX2080Ti", "H100")), st.sampled_from(("inference", "training")),
       st.floats(2e-6, 2e-5), st.sampled_from(("resnet50", "mlp", "vit_b_16")), st.floats(-0.3, 0.3),
       st.floats(-0.3, 0.3), st.floats(0.5, 1.5), st.floats(0.0, 80.0), st.sampled_from((0.0, 150.0, 1e5)),
       score_sets, score_sets, score_sets, st.booleans())  # fmt: skip
def test_the_assembled_answer_is_the_reference_composition_and_its_scaled_interval(
    net, coef, config, mode, floor, model, f_t, f_e, a_e, k, cap, known, new, pooled, with_power
) -> None:
    """answer.assemble: time, energy, average power, sum of ops, per-op energies and both 90 % intervals, each
    from the reference: the family term of a known family only, energy from the time without that term, the
    interval from the score set the question's family picks (known / new / pooled), scaled by the question's
    own covariate log(time / plain sum) and widened x2 beyond the scores' covariates."""
    fam = {"resnet50": "resnet", "mlp": "mlp", "vit_b_16": "vit"}[model]
    # time and energy scores apart (energy: another draw, 1.5x the spread), each set with its covariates and the
    # known-family set with group labels: a wire crossed between them gives another interval
    sets = {}
    for name, (n, sigma, bias, spread, seed) in (("known", known), ("new", new), ("pooled", pooled)):
        sets[name, "t"] = trend_scores(n, sigma, bias, spread, seed)
        sets[name, "e"] = trend_scores(n, 1.5 * sigma, -bias, 1.3 * spread, seed + 1)
    comp = Composition(mode, dict(coef), {"energy_sum": a_e, "time": k}, calibrated=True, power_cap_w=cap,
                       family_terms={"resnet": {"time": f_t, "energy": f_e, "n": 2.0},
                                     "vit": {"time": -f_t, "energy": 0.1, "n": 1.0}})  # fmt: skip
    for name in ("known", "new", "pooled"):
        for q, x in (("t", "time"), ("e", "energy")):
            labels = groups_of(len(sets[name, q][0])) if name == "known" else None
            comp.scores[name, x] = ScoreSet(sets[name, q][0], labels, sets[name, q][1])
    recs = {r.op_id: r for r, *_ in net}
    network = Network(recs, {r.op_id: c for r, _, _, c in net})
    proxies = [None if i % 2 else "ReLU" for i in range(len(net))]
    sources = ["predicted" if i % 3 else "measured" for i in range(len(net))]
    costed = {r.op_id: (t, p, sources[i], proxies[i]) for i, (r, t, p, _) in enumerate(net)}
    spec = SimpleNamespace(model=model, label=model)
    got = assemble(spec, _spy_bundle(comp, floor, config, with_power), None, network, costed)

    ref = reference_terms(net, floor, config, mode)
    fterm = comp.family_terms.get(fam, {})
    time_s = reference_time(coef, ref, fterm.get("time", 0.0))
    assert got.time_s == pytest.approx(time_s, rel=1e-9)
    assert got.sum_s == pytest.approx(ref["raw_sum_s"], rel=1e-9)
    assert list(got.calls) == [c for *_, c in net] and got.op_ids == [r.op_id for r, *_ in net]
    assert got.sources == sources and got.proxies == proxies and got.kinds == [r.kind for r, *_ in net]
    assert list(got.t_s) == [t for _, t, _, _ in net]  # each op's own cost per call, as costed
    assert (got.mode, got.device_config, got.clock_mhz, got.calibrated, got.composition) == (
        mode, config, None, True, "calibrated")  # fmt: skip
    unvouched = SimpleNamespace(**{**vars(_spy_bundle(comp, floor, config, with_power)), "unvouched": "models/x: none"})
    warned = assemble(spec, unvouched, None, network, costed)  # served by --trust-unrecorded: said first, same answer
    assert warned.warnings == ["models/x: none; served as it is because of --trust-unrecorded", *got.warnings]
    assert warned.time_interval_s == got.time_interval_s
    which = "known" if fam in comp.family_terms else "new"
    groups = groups_of(len(sets["known", "t"][0])) if which == "known" else None
    c = math.log(time_s / ref["raw_sum_s"])
    want = reference_bounds(time_s, *sets[which, "t"], c, 1.0, groups)
    assert got.time_interval_s == pytest.approx(want, rel=1e-9)
    # the words of the answer: a training step says so, a network beyond the scores' covariates is warned of
    assert ("a training step" in got.note) == (mode == "training")
    assert ("no power model for this device" in got.note) == (not with_power)
    span = log_interval(log_errors(sets[which, "t"][0]), groups=groups, covariates=sets[which, "t"][1]).span
    beyond = [w for w in got.warnings if f"the {config}-{mode} composition layer's answer is" in w]
    assert len(beyond) == (abs(c) > span * (1 + 1e-9)) and len(got.warnings) == len(beyond)
    n_sib = int(fterm.get("n", 0))
    assert got.summary == (f"based on {config}'s own measurements and {n_sib} measured {fam} network(s)"
                           if fam in comp.family_terms else
                           f"based on {config}'s own measurements; no {fam} network was measured")  # fmt: skip
    if not with_power:
        assert got.energy_j is None and got.energy_interval_j is None and got.e_j is None
        return
    e = reference_energy(a_e, k, ref, reference_time(coef, ref), cap, fterm.get("energy", 0.0))
    assert got.energy_j == pytest.approx(e, rel=1e-9)
    assert got.avg_power_w == pytest.approx(e / time_s, rel=1e-9)
    assert got.e_j == pytest.approx([t * p for _, t, p, _ in net], rel=1e-12)
    want_e = reference_bounds(e, *sets[which, "e"], c, 1.0, groups, time_span=span)
    assert got.energy_interval_j == pytest.approx(want_e, rel=1e-9)


def test_a_batch_outside_the_measured_ones_widens_the_interval_and_says_so_once() -> None:
    """assemble with a question whose batch lies outside the measured batches, and nothing else: the interval
    x2 about its centre (the extrapolation widening), no warning, and the one sentence in the note and the
    summary; inside the batches none of it."""
    from opcost.ops.netspec import InputSpec

    scores, cov = trend_scores(12, 0.1, 0.02, 0.3, 7)
    comp = Composition("inference", {"sum": 1.0, "const": 2e-5}, calibrated=True,
                       scores=layer_scores(scores, scores, cov_t=cov, cov_e=cov))  # fmt: skip
    recs = [OpRecord(f"op{i}", "Linear", {}, (1,), 1, {"params": 0, "bytes_read": 1e6}) for i in range(3)]
    costed = {r.op_id: (1e-4 * (i + 1), 100.0, "predicted", None) for i, r in enumerate(recs)}
    spec = SimpleNamespace(model="mlp", label="mlp")
    answers = {}
    for batch in (16, 256):
        net = Network({r.op_id: r for r in recs}, {r.op_id: 2 for r in recs}, inputs=(InputSpec((batch, 8)),))
        bundle = _spy_bundle(comp, 1e-5, "A30", True)
        bundle.ranges = {"batch": [8.0, 32.0]}
        answers[batch] = assemble(spec, bundle, None, net, costed)
    inside, outside = answers[16], answers[256]
    assert outside.time_s == pytest.approx(inside.time_s, rel=1e-12) and outside.warnings == inside.warnings == []
    for a, b in (
        (inside.time_interval_s, outside.time_interval_s),
        (inside.energy_interval_j, outside.energy_interval_j),
    ):
        lo, hi = np.log(a[0]), np.log(a[1])
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        assert np.log(b) == pytest.approx([mid - 2 * half, mid + 2 * half], rel=1e-9)
    assert "batch 256 lies outside the batches the A30-inference model was measured at (8..32)" in outside.note
    assert outside.summary.endswith("; interval widened: batch 256 lies outside the measured batch 8..32")
    assert "lies outside" not in inside.note + inside.summary
    # ops larger than any the model saw: a warning (not priced in), and the interval widened too
    net = Network({r.op_id: r for r in recs}, {r.op_id: 2 for r in recs}, inputs=(InputSpec((16, 8)),))
    bundle = _spy_bundle(comp, 1e-5, "A30", True)
    bundle.ranges = {"in_numel": [0.1, 0.1]}
    big = assemble(spec, bundle, None, net, costed)
    assert big.warnings == [w for w in big.warnings if "3 of 3 ops exceed by more than" in w] != []
    assert not any(w in big.note for w in big.warnings)  # a warning is not also a note: only a batch alone is
    assert np.log(big.time_interval_s) == pytest.approx(np.log(outside.time_interval_s), rel=1e-9)


def test_a_transferred_layer_widens_time_and_energy_each_by_its_own_measured_factor() -> None:
    """assemble with a transferred composition layer: the time interval's half-width x the layer's time
    widening, the energy interval's x its energy widening (not the other's, not 1)."""
    from opcost.ops.netspec import InputSpec

    t_scores, t_cov = trend_scores(12, 0.1, 0.02, 0.3, 3)
    e_scores, e_cov = trend_scores(12, 0.15, -0.01, 0.4, 4)
    comp = Composition("inference", {"sum": 1.0, "const": 2e-5}, {"energy_sum": 1.0, "time": 10.0},
                       calibrated=False, source="transferred", transferred_from=["S"],
                       scores=layer_scores(t_scores, e_scores, cov_t=t_cov, cov_e=e_cov),
                       transfer_widening={"time": 1.7, "energy": 2.3})  # fmt: skip
    recs = [OpRecord(f"op{i}", "Linear", {}, (1,), 1, {"params": 0, "bytes_read": 1e6}) for i in range(3)]
    costed = {r.op_id: (1e-4 * (i + 1), 100.0, "predicted", None) for i, r in enumerate(recs)}
    net = Network({r.op_id: r for r in recs}, {r.op_id: 2 for r in recs}, inputs=(InputSpec((16, 8)),))
    got = assemble(SimpleNamespace(model="mlp", label="mlp"), _spy_bundle(comp, 1e-5, "A30", True), None, net,
                   costed)  # fmt: skip
    c = math.log(got.time_s / got.sum_s)
    assert got.time_interval_s == pytest.approx(reference_bounds(got.time_s, t_scores, t_cov, c, 1.7), rel=1e-9)
    span = log_interval(log_errors(t_scores), covariates=t_cov).span
    want = reference_bounds(got.energy_j, e_scores, e_cov, c, 2.3, time_span=span)
    assert got.energy_interval_j == pytest.approx(want, rel=1e-9)


@FAST
@given(st.floats(0.03, 0.3), st.floats(-0.2, 0.2), st.integers(0, 10**6), st.floats(1.0, 3.0),
       st.floats(-1.5, 1.5), st.sampled_from((3, 8, 24)))  # fmt: skip
def test_intervals_contain_their_unwidened_selves_and_widen_about_the_centre(
    sigma, bias, seed, w, covariate, n
) -> None:
    """Composition.log_interval: a transferred layer's half-width x its measured widening, an extrapolating
    question's x2 more, both about the same centre; bounds positive, and a wider interval holds the narrower."""
    scores, cov = trend_scores(n, sigma, bias, 0.4, seed)
    comp = Composition("inference", calibrated=False, scores=layer_scores(scores, cov_t=cov), source="transferred",
                       transfer_widening={"time": w, "energy": 1.0})  # fmt: skip
    plain = Composition("inference", calibrated=True, scores=layer_scores(scores, cov_t=cov))
    base = plain.log_interval("time", covariate=covariate)
    assert base.half_width >= 0 and base.lo <= base.hi
    for extrapolating, factor in ((False, w), (True, 2 * w)):
        iv = comp.log_interval("time", extrapolating, covariate=covariate)
        assert iv.centre == pytest.approx(base.centre, abs=1e-12)
        assert iv.half_width == pytest.approx(factor * base.half_width, rel=1e-9)
        assert iv.lo <= base.lo + 1e-12 and base.hi <= iv.hi + 1e-12
        lo, hi = comp.interval(2.0, "time", extrapolating, covariate=covariate)
        assert 0 < lo <= hi and (lo, hi) == pytest.approx((2 * math.exp(iv.lo), 2 * math.exp(iv.hi)), rel=1e-12)
    at0 = plain.log_interval("time", covariate=0.0)
    assert plain.interval(1.0, "time") == pytest.approx((math.exp(at0.lo), math.exp(at0.hi)), rel=1e-12)
    nan = plain.log_interval("time", covariate=float("nan"))  # no covariate known: the scale at c = 0
    assert (nan.lo, nan.hi) == pytest.approx((at0.lo, at0.hi), rel=1e-12)
    if base.rule != "normal":  # symmetric rules: the point itself lies inside
        assert base.lo <= 0 <= base.hi


@FAST
@given(st.floats(-4.0, 4.0), st.floats(0.0, 5.0), st.floats(0.05, 2.0), st.floats(0.01, 0.5))
def test_a_normalised_interval_scales_by_sqrt_1_plus_r_c2_held_at_its_span(c, ratio, span, q) -> None:
    """LogInterval.scaled / outside: bounds x sqrt(1 + r min(|c|, span)^2); beyond the span the question is
    outside, inside it is not."""
    iv = LogInterval(-q, 1.5 * q, 20, 20, "conformal", ratio, span).scaled(c)
    s = math.sqrt(1 + ratio * min(abs(c), span) ** 2)
    assert (iv.lo, iv.hi) == pytest.approx((-q * s, 1.5 * q * s), rel=1e-12)
    assert LogInterval(-q, q, 20, 20, "conformal", ratio, span).outside(c) == (abs(c) > span * (1 + 1e-9))


def test_scaling_and_log_errors_at_their_edges() -> None:
    """Known answers where a wrong branch would give the same value elsewhere: a scale of exactly 2 scales,
    a covariate exactly at the span's edge is not outside, a relative error of -1 (a predicted zero) is clipped
    at log(0.001), not minus infinity."""
    iv = LogInterval(-0.1, 0.2, 20, 20, "conformal", 3.0, 5.0).scaled(1.0)  # s = sqrt(1 + 3) = 2
    assert (iv.lo, iv.hi) == pytest.approx((-0.2, 0.4), rel=1e-12)
    assert not LogInterval(-0.1, 0.1, 20, 20, "conformal", 1.0, 1.0).outside(1.0 * (1 + 1e-9))
    assert log_errors([-1.0, -2.0]) == pytest.approx([math.log(0.001)] * 2, rel=1e-12)
    # no covariate effect (ratio 0): a scale of 1 per covariate, shaped as they are
    assert scale_of(0.3, 0.0) == 1.0 and np.array_equal(scale_of(np.array([0.1, -0.2, 0.3]), 0.0), np.ones(3))


def test_ops_without_power_add_time_but_no_energy_and_a_zero_time_network_no_energy() -> None:
    """network_terms: an op whose power is unknown (NaN) counts in the time sums and adds nothing to the energy
    sums; a transferred layer asked about a network of zero-time ops answers zero energy, not NaN."""
    recs = [_record(0, True), _record(1, False)]
    costs = Costs(np.array([2e-5, 3e-5]), np.array([100.0, np.nan]), ["predicted"] * 2, [None] * 2)
    terms = network_terms(costs, np.array([2.0, 1.0]), recs, 1e-6, find_device("A30"), "inference")
    assert terms["raw_sum_s"] == pytest.approx(2 * 2e-5 + 3e-5, rel=1e-12)
    assert terms["energy_sum"] == pytest.approx(2 * (2e-5 - 1e-6) * 100.0, rel=1e-12)
    assert terms["raw_sum_j"] == pytest.approx(2 * 2e-5 * 100.0, rel=1e-12)
    layer = Composition("inference", {"sum": 1.0}, {"energy_sum": 1.0, "time": 20.0, "power_ratio": 1.05},
                        source="transferred")  # fmt: skip
    zero = {**terms, "raw_sum_s": 0.0, "raw_sum_j": 0.0, "energy_sum": 0.0}
    assert layer.energy(zero, 0.0) == 0.0


# --------------------------------------------------------------------------------------------
# A transferred composition layer
# --------------------------------------------------------------------------------------------


@FAST
@given(st.lists(st.tuples(coefficients, st.floats(2e-6, 2e-5), st.floats(0.5, 1.5), st.floats(0.0, 60.0),
                          st.floats(50.0, 300.0), st.floats(0.9, 1.2)), min_size=1, max_size=3),
       ops(), st.floats(2e-6, 2e-5), st.floats(50.0, 300.0), st.sampled_from((0.0, 120.0, 1e5)))  # fmt: skip
def test_a_transferred_layer_is_its_sources_mean_in_this_devices_units(sources, net, floor, power, cap) -> None:
    """compose.transfer + Composition.time / energy: dimensionless coefficients averaged, the constant time in
    launch floors converted with this device's floor; energy the time x the network's time-weighted op power x
    the sources' geometric-mean power ratio, at most cap x time."""
    comps = [
        (f"S{i}", Composition("inference", dict(cf), {"energy_sum": a_e, "time": k, "power_ratio": ratio},
                              calibrated=True, scores=layer_scores([0.01 * i, -0.02], [0.03 * i],
                                                                 cov_t=[0.1, -0.2 * i], cov_e=[0.3 + i])), f, p)
        for i, (cf, f, a_e, k, p, ratio) in enumerate(sources)
    ]  # fmt: skip
    layer = transfer(comps, "inference", floor, power, cap) if cap else transfer(comps, "inference", floor, power)
    for q in ("time", "energy"):
        got = layer.score_set("pooled", q)
        assert got.scores == [r for _, c, _, _ in comps for r in c.score_set("pooled", q).scores]
        assert got.covariates == [x for _, c, _, _ in comps for x in c.score_set("pooled", q).covariates or []]
    none = transfer([("U", Composition("inference"), floor, power)], "inference", floor, power)
    assert (none.mode, none.source, none.calibrated) == ("inference", "uncalibrated", False)
    calls = np.array([c for *_, c in net], float)
    terms = network_terms(_costs(net), calls, [r for r, *_ in net], floor, find_device("A30"), "inference")
    ref = reference_terms(net, floor, "A30", "inference")
    coef = {k: sum(s[0][k] for s in sources) / len(sources) for k in TIME_KEYS}
    coef["const"] = sum(cf["const"] / f for cf, f, *_ in sources) / len(sources) * floor
    t = reference_time(coef, ref)
    assert layer.time(terms) == pytest.approx(t, rel=1e-9)
    ratio = math.exp(sum(math.log(s[5]) for s in sources) / len(sources))
    e = ratio * ref["raw_sum_j"] / ref["raw_sum_s"] * t
    assert layer.energy(terms, t) == pytest.approx(min(e, cap * t) if cap > 0 else e, rel=1e-9)
    layer.family_terms = {"fam": {"time": 0.1, "energy": 0.2, "n": 1.0}}  # as a bundle's JSON may carry
    assert layer.energy(terms, t, "fam") == pytest.approx((min(e, cap * t) if cap > 0 else e) * math.exp(0.2))
    assert layer.transferred_from == [n for n, *_ in comps]
    assert (layer.mode, layer.n_networks, layer.calibrated) == ("inference", 0, False)  # bundle.json records them


def test_a_transferred_layer_skips_sources_without_op_power_and_labels_each_sources_groups() -> None:
    """compose.transfer at its edges, by hand: a source whose median op power is 0 or NaN says nothing of the
    constant power (k / p over the others, x this device's power; none left, or no power here: 0); a coefficient
    a source's layer lacks (an older bundle) counts 0; pooled scores keep their group labels, prefixed by their
    source, and a source without labels gives each score its own group."""
    coef = {"sum": 1.0, "memory_sum": -0.2, "calls_floor": 1.1, "params_bw": 0.0, "const": 4e-6}  # no l2_sum
    a = Composition(
        "inference",
        dict(coef),
        {"energy_sum": 1.0, "time": 20.0},
        calibrated=True,
        scores=layer_scores([0.1, -0.1], [0.2], groups_t=["m1", "m2"], groups_e=["m1"]),
    )
    b = Composition(
        "inference",
        {**coef, "l2_sum": 0.3},
        {"energy_sum": 1.0, "time": 30.0},
        calibrated=True,
        scores=layer_scores([0.05], [0.3]),
    )
    c = Composition("inference", dict(coef), {"energy_sum": 1.0, "time": 90.0}, calibrated=True)
    src = [("A", a, 2e-6, 0.5), ("B", b, 2e-6, 60.0), ("Z", c, 2e-6, 0.0), ("N", c, 2e-6, float("nan"))]
    layer = transfer(src, "inference", 3e-6, 100.0)
    assert layer.energy_coef["time"] == pytest.approx((20.0 / 0.5 + 30.0 / 60.0) / 2 * 100.0, rel=1e-12)
    assert layer.time_coef["l2_sum"] == pytest.approx(0.3 / 4, rel=1e-12)
    assert layer.score_set("pooled", "time").groups == ["A:m1", "A:m2", "B:0"]
    assert layer.score_set("pooled", "energy").groups == ["A:m1", "B:0"]
    assert transfer(src[2:], "inference", 3e-6, 100.0).energy_coef["time"] == 0.0
    assert transfer(src, "inference", 3e-6, float("nan")).energy_coef["time"] == 0.0
    assert layer.calibrated is False and layer.to_json()["calibrated"] is False  # an answer's JSON says false


def test_a_transferred_layer_without_a_power_ratio_takes_the_ops_own_time_weighted_power() -> None:
    """A transferred layer saved before it carried `power_ratio` (an older bundle): energy = the time x the ops'
    time-weighted power, the ratio taken as 1."""
    from opcost.model.composition.compose import TRANSFERRED

    layer = Composition("inference", {"sum": 1.0}, {"energy_sum": 0.0, "time": 50.0}, source=TRANSFERRED)
    terms = {"raw_sum_s": 2e-3, "raw_sum_j": 0.3, "energy_sum": 0.3}
    assert layer.energy(terms, 4e-3) == pytest.approx(0.3 / 2e-3 * 4e-3, rel=1e-12)


def test_a_host_outside_the_device_table_has_no_l2_term() -> None:
    """network_terms on a device the table lacks (None: a CPU host): nominal bandwidth and no L2, so the L2 share
    of the memory-bound time is exactly 0 (a cache of any size would give some)."""
    recs = [OpRecord(f"op{i}", "ReLU", {}, (1,), 1, {"params": 0, "bytes_read": 10.0**i}) for i in range(1, 6)]
    costs = Costs(np.full(5, 1e-4), np.full(5, 50.0), ["predicted"] * 5, [None] * 5)
    host = network_terms(costs, np.ones(5), recs, 1e-6, None, "inference")
    gpu = network_terms(costs, np.ones(5), recs, 1e-6, find_device("A30"), "inference")
    assert host["l2_sum"] == 0.0 and gpu["l2_sum"] > 0.0


# --------------------------------------------------------------------------------------------
# Clocks: an own bundle at a transferred clock, and a transferred GPU at another clock
# --------------------------------------------------------------------------------------------

BINS = [[0.4, 0.21, 0.25], [0.7, 0.11, 0.13], [0.95, 0.05, 0.07], [1.0, 0.02, 0.03]]


def reference_errors(ratio: float) -> tuple[float, float]:
    """The clock model's (time, energy) error at f / f_boost: the first bin whose upper ratio reaches it."""
    if ratio == 1.0:
        return 0.0, 0.0
    r = 1 / ratio if ratio > 1 else ratio
    for hi, et, ee in BINS:
        if r <= hi:
            return et, ee
    return BINS[-1][1], BINS[-1][2]


@FAST
@given(ops(), coefficients, st.floats(2e-6, 2e-5), st.floats(210.0, 1430.0), score_sets, st.floats(0.5, 1.5),
       st.floats(0.0, 60.0))  # fmt: skip
def test_an_own_answer_at_a_transferred_clock_widens_by_the_clock_models_error_there(
    net, coef, floor, f, scores, a_e, k
) -> None:
    """assemble at a clock the bundle has no sweep for: the composition's interval divided / multiplied by
    (1 + the clock model's error at f / f_boost), time and energy each by their own error; the clock's source
    says transferred. At the boost clock nothing widens (the default clock's answer)."""
    res, cov = trend_scores(*scores)
    comp = Composition("inference", dict(coef), {"energy_sum": a_e, "time": k}, calibrated=True,
                       scores=layer_scores(res, res, cov_t=cov, cov_e=cov))  # fmt: skip
    network = Network({r.op_id: r for r, *_ in net}, {r.op_id: c for r, _, _, c in net})
    costed = {r.op_id: (t, p, "predicted", None) for r, t, p, _ in net}
    spec = SimpleNamespace(model="mlp", label="mlp")
    clocks = ClockTransfer(Path("."), _model=ClockModel(logo_error_bins=BINS))
    bundle = _spy_bundle(comp, floor, "A30", True)
    plain = assemble(spec, bundle, None, network, costed)
    got = assemble(spec, bundle, f, network, costed, clocks=clocks)
    et, ee = reference_errors(f / 1440.0)
    assert got.clock_source == "transferred" and got.time_s == pytest.approx(plain.time_s, rel=1e-12)
    assert got.clock_mhz == f
    lo, hi = plain.time_interval_s
    assert got.time_interval_s == pytest.approx((lo / (1 + et), hi * (1 + et)), rel=1e-12)
    elo, ehi = plain.energy_interval_j
    assert got.energy_interval_j == pytest.approx((elo / (1 + ee), ehi * (1 + ee)), rel=1e-12)
    boost = assemble(spec, bundle, 1440.0, network, costed)  # no clock model needed at the boost clock
    assert boost.clock_source == "measured" and boost.time_interval_s == pytest.approx(plain.time_interval_s)
    assert got.summary.endswith(f"; at {f:g} MHz through the cross-clock model") and "cross-clock" not in plain.summary
    assert "not measured on A30" in got.note
    assert (
        "the A30's boost clock, which its measurements' default clock is taken as: the answer of its own models, "
        "as at the default clock (no cross-clock model)" in boost.note
    )


def _record(i: int, compute_bound: bool) -> OpRecord:
    """An op whose roofline share is exactly 1 (FLOPs, no bytes) or 0 (bytes, no FLOPs) on any device."""
    m = {"flops": 1e9, "bytes_read": 0.0, "bytes_written": 0.0} if compute_bound else {
        "flops": 0.0, "bytes_read": 4e6, "bytes_written": 4e6}  # fmt: skip
    return OpRecord(f"op{i}", "Linear", {}, (1,), 1, {**m, "params": 10})


@FAST
@given(st.lists(st.tuples(st.booleans(), st.floats(1e-5, 1e-2), st.integers(1, 30), st.floats(0.5, 2.0)),
                min_size=2, max_size=6),
       st.floats(1e-5, 1e-2), st.floats(0.0, 1e-3), st.floats(0.2, 0.5), st.floats(1.5, 3.0),
       st.floats(0.3, 0.99), st.floats(100.0, 400.0), st.booleans(), st.booleans(),
       st.sampled_from((("A30", 0.0), ("V100", 12.0))))  # fmt: skip
def test_a_transferred_gpu_at_another_clock_moves_as_its_ops_do(ops_, time_s, opt, static, gamma, x, power,
                                                               with_energy, with_factor, gpu) -> None:  # fmt: skip
    """xdevice_predict.at_clock: per-op times and powers from the clock model (a component) at f; the network's
    time x k = sum t(f) w / sum t_ref w over its ops (w = calls x factor) and the bytes-bound optimizer step
    (weight 1, share 0); its interval x k, widened by the clock model's time error there; energy = time x the
    time-weighted power at f, its interval x energy / energy at boost, widened by the energy error. On a
    pre-Ampere GPU (the V100) below its memory knee the memory-bound optimizer step grows too."""
    config, knee_q = gpu
    dev = find_device(config)[0]
    f = max(dev.clock_range_mhz[0], x * dev.boost_clock_mhz)
    model = ClockModel(static_frac=static, gamma=gamma, logo_error_bins=BINS, knee_q=knee_q)
    recs = [_record(i, cb) for i, (cb, *_) in enumerate(ops_)]
    t_ref = np.array([t for _, t, _, _ in ops_])
    calls = np.array([float(c) for _, _, c, _ in ops_])
    # an answer without measured ops: every op weighs its calls (factor 1)
    factor = np.array([fa for *_, fa in ops_]) if with_factor else np.ones(len(ops_))
    r = transferred_ops(recs, calls, time_s, (0.8 * time_s, 1.3 * time_s), t_s=t_ref, factor=factor, optimizer_s=opt)
    en = TransferredEnergy(power * time_s, power, (0.7 * power * time_s, 1.4 * power * time_s))
    out, en_out, note = at_clock(r, en if with_energy else None, device_config(config), f, model)

    share = np.array([1.0 if cb else 0.0 for cb, *_ in ops_] + [0.0])
    tr = np.append(t_ref, opt)
    w = np.append(calls * factor, 1.0)
    if with_energy:
        t, p = model.at_clock(dev, f, tr, np.full(len(tr), power), share)
    else:
        t = tr * (1 + share * (dev.boost_clock_mhz / f - 1))  # no power: time by the roofline law alone
    kk = float((t * w).sum() / (tr * w).sum())
    et, ee = reference_errors(f / dev.boost_clock_mhz)
    assert out.time_s == pytest.approx(kk * time_s, rel=1e-9)
    assert out.t_s == pytest.approx(t[:-1], rel=1e-12) and out.optimizer_s == pytest.approx(t[-1], rel=1e-12)
    assert out.sum_s == pytest.approx(float((t[:-1] * w[:-1]).sum()), rel=1e-9)
    assert out.interval == pytest.approx((kk * 0.8 * time_s / (1 + et), kk * 1.3 * time_s * (1 + et)), rel=1e-9)
    assert f"{100 * et:.0f} %" in note and note.endswith(f"not measured on {config}")
    if not with_energy:
        assert en_out is None
        return
    e = kk * time_s * float((t * p * w).sum() / (t * w).sum())
    ke = e / (power * time_s)
    assert en_out is not None
    assert en_out.energy_j == pytest.approx(e, rel=1e-9)
    assert en_out.power_w == pytest.approx(e / (kk * time_s), rel=1e-9)
    lo, hi = en.interval
    assert en_out.interval == pytest.approx((ke * lo / (1 + ee), ke * hi * (1 + ee)), rel=1e-9)


def test_a_gpu_outside_the_table_and_a_zero_time_answer() -> None:
    """A config the device table lacks is refused in one line naming it where the request is resolved
    (transfer_config), before any transferred answer; a zero-time answer has no power (NaN), and its busy share
    is 0, not a division by zero."""
    from opcost.errors import OpcostError
    from opcost.model.prediction.xdevice_predict import busy_share, transfer_config

    r = transferred_ops([_record(0, True)], [1.0], 0.0, (0.0, 0.0), t_s=[0.0])
    with pytest.raises(OpcostError, match="^unknown device 'NOT_A_GPU'; "):
        transfer_config("NOT_A_GPU", "inference", [])
    _, en, _ = at_clock(r, TransferredEnergy(0.0, 100.0, (0.0, 0.0)), device_config("A30"), 1000.0, ClockModel())
    assert en is not None and math.isnan(en.power_w)
    assert busy_share(r, device_config("A30")) == 0.0
    # a step none of whose ops takes time (the host's, say): nothing of it moves with the clock
    idle = transferred_ops([_record(0, True)], [1.0], 0.5, (0.4, 0.6), t_s=[0.0])
    moved, _, _ = at_clock(idle, None, device_config("A30"), 1000.0, ClockModel())
    assert moved.time_s == 0.5


def test_a_transferred_answer_at_a_clock_leaves_the_default_clock_answer_as_it_was() -> None:
    """at_clock returns the moved answer and energy as new values: the answer at the default clock it was given,
    every field and array of it, and its energy read the same afterwards (one answer's two clocks never share a
    moved array)."""
    import copy
    import dataclasses

    recs = [_record(0, True), _record(1, False), _record(2, True)]
    r = transferred_ops(recs, [2.0, 5.0, 1.0], 4e-3, (3e-3, 6e-3), t_s=[1e-3, 2e-4, 5e-4], factor=[1.0, 1.3, 1.0],
                        optimizer_s=1e-4, sum_s=3.5e-3)  # fmt: skip
    en = TransferredEnergy(1.2, 300.0, (0.9, 1.6))
    before, en_before = copy.deepcopy(r), copy.deepcopy(en)
    f = 0.6 * find_device("A30")[0].boost_clock_mhz
    out, en_out, _ = at_clock(r, en, device_config("A30"), f, ClockModel(logo_error_bins=BINS))

    assert out.time_s != r.time_s and en_out is not None and en_out.energy_j != en.energy_j  # it did move
    for fld in dataclasses.fields(r):
        now, then = getattr(r, fld.name), getattr(before, fld.name)
        if isinstance(then, np.ndarray):
            assert np.array_equal(now, then), fld.name
            assert not np.shares_memory(getattr(out, fld.name), now) or fld.name in ("calls", "factor"), fld.name
        else:
            assert now == then, fld.name
    assert en == en_before


@FAST
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 30)), min_size=1, max_size=5), st.floats(1e-4, 1e-1),
       st.floats(0.05, 0.4), st.floats(0.0, 0.5), st.floats(0.2, 1.0), st.floats(0.3, 1.0),
       st.floats(0.0, 0.3), st.sampled_from(("inference", "training")),
       st.sampled_from(("A30", "H100", "T4", "A30_no_tf32")), st.sampled_from((None, 0.8, 1.3)))  # fmt: skip
def test_transferred_energy_is_time_times_the_power_models_power(ops_, time_s, idle, a, b, c, rel, mode,
                                                                 config, level) -> None:  # fmt: skip
    """xdevice_predict.energy: energy = power x time, power = min(TDP, TDP (idle + (1 - idle) clip(a + b u^c, 0, 1)))
    at the busy share u = work x sum of roofline times x calls / time (a training step's work x3); its interval
    the time interval x power x (1 - rel, 1 + rel)."""
    from opcost.model.basis.physics import roofline_s

    recs = [_record(i, cb) for i, (cb, _) in enumerate(ops_)]
    calls = [float(n) for _, n in ops_]
    r = transferred_ops(recs, calls, time_s, (0.9 * time_s, 1.2 * time_s))
    pm = PowerModel(idle=idle, a=a, b=b, c=c, gamma=2.0, rel_err90=rel, trained_on=["A30"] if level else [])
    if level:  # the power level our networks measured on this GPU (xpower.device_levels)
        pm.levels = {find_device(config)[0].name: {"factor": level, "networks": 7.0}}
    with tempfile.TemporaryDirectory() as root:
        pm.save(Path(root) / "models" / "xpower")
        got, note = energy(Path(root), r, device_config(config), mode)
    tdp = find_device(config)[0].tdp_w
    work = 3.0 if mode == "training" else 1.0
    u = work * sum(roofline_s(x.kind, x.metrics, find_device(config)) * n for x, n in zip(recs, calls)) / time_s
    level_ = min(max(a + b * min(max(u, 0.0), 1.0) ** c, 0.0), 1.0)
    p = min(tdp * (idle + (1 - idle) * level_) * (level or 1.0), tdp)
    assert got is not None
    assert got.power_w == pytest.approx(p, rel=1e-9)
    assert got.energy_j == pytest.approx(p * time_s, rel=1e-9)
    want = (0.9 * time_s * p * max(1 - rel, 0), 1.2 * time_s * p * (1 + rel))
    assert got.interval == pytest.approx(want, rel=1e-9)
    assert f"{100 * rel:.0f} %" in note
    if level:
        assert f"min(TDP, {level:.2f}, the power level 7 networks measured on this GPU show" in note
        assert "over its predicted time)), fitted on 1 GPUs (A30)" in note
    else:
        assert "over its predicted time), fitted on 0 GPUs (none named)" in note
        assert f" W = TDP {tdp:.0f} W x (idle " in note  # no level: the formula starts at the TDP
    with tempfile.TemporaryDirectory() as root:  # no power model: no energy, and the note says why
        assert energy(Path(root), r, device_config(config), mode) == (
            None,
            "energy: models/xpower not found (`dvc pull` or its stage), so energy is left out",
        )


@FAST
@given(st.lists(st.tuples(st.sampled_from(("linear", "bmm", "conv", "add", "softmax")), st.floats(1e-6, 1e-2),
                          st.integers(1, 20)), min_size=1, max_size=8),
       st.floats(-0.1, 0.3), st.floats(0.0, 0.2), st.floats(0.0, 0.5), st.floats(0.0, 3.0))  # fmt: skip
def test_a_transferred_interval_widens_with_distance_and_non_matrix_time(rows, a, b, c, dist) -> None:
    """xinterval.other_share / halfwidth: the share of kernel time outside matrix products, summed row by row;
    half-width max(a + b d + c share, 0.02), never narrower farther away or with more non-matrix time."""
    xk, t, n = zip(*rows)
    total = sum(ti * ni for ti, ni in zip(t, n))
    other = sum(ti * ni for k, ti, ni in zip(xk, t, n) if k not in ("linear", "bmm"))
    share = other_share(xk, t, n)
    assert share == pytest.approx(other / total, rel=1e-9, abs=1e-15)
    law = {"a": a, "b": b, "c": c}
    h = halfwidth(law, dist, share)
    assert h == pytest.approx(max(a + b * dist + c * share, 0.02), rel=1e-12)
    assert halfwidth(law, dist + 0.5, share) >= h and halfwidth(law, dist, min(1.0, share + 0.2)) >= h
    assert halfwidth(law, dist) == halfwidth(law, dist, 1.0)  # no share given: all of it outside matrix products


@FAST
@given(st.tuples(st.floats(0.5, 2.0), st.floats(0.5, 2.0)), st.floats(0.0, 0.5))
def test_widen_divides_the_lower_and_multiplies_the_upper_bound(iv, err) -> None:
    """clocktransfer.widen: (lo / (1 + e), hi x (1 + e)), never through zero."""
    lo, hi = sorted(iv)
    assert widen((lo, hi), err) == pytest.approx((lo / (1 + err), hi * (1 + err)), rel=1e-15)


# --------------------------------------------------------------------------------------------
# Costing at clocks: which costs each (target, clock) gets
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def a30_bundle():
    """A small real bundle on the A30 (its forest over Conv2d and ReLU), no clock sweep."""
    from builders import small_bundle

    b = small_bundle()
    b.device_config, b.target = "A30", "A30-inference"
    return b


def test_the_reference_clock_is_the_boost_clock_and_none_for_a_device_the_table_lacks() -> None:
    """A CPU campaign's host has no boost clock: its answers stand for no clock (None), not a crash."""
    from opcost.model.composition.costing import reference_clock_mhz

    assert reference_clock_mhz(find_device("A30_no_tf32")) == DEVICES["A30"].boost_clock_mhz
    assert reference_clock_mhz(find_device("cpu")) is None


def test_cost_groups_moves_only_clocks_off_the_boost_and_shares_their_reference_costs(a30_bundle) -> None:
    """costing.cost_groups: the boost clock takes the default clock's costs; every other clock of a bundle
    without a sweep is the reference costs moved by `at_clock`, the reference costed once per op set."""
    from torch import nn

    from builders import module_record

    pair = (module_record(nn.Conv2d(3, 8, 3), (2, 3, 16, 16)), module_record(nn.ReLU(), (2, 8, 9, 9)))
    recs = {r.op_id: r for r in pair}
    seen: list[tuple[float, np.ndarray]] = []
    handed: list[list[str]] = []

    def at_clock_(b, records, base, clock):
        assert b is a30_bundle
        handed.append([r.op_id for r in records])  # the group's own records, in id order
        seen.append((clock, np.array(base.t_s)))
        return Costs(base.t_s * 1440.0 / clock, base.p_w, list(base.source), list(base.proxy))

    groups = {("A30-inference", None): recs, ("A30-inference", 1440.0): recs, ("A30-inference", 720.0): recs,
              ("A30-inference", 960.0): recs}  # fmt: skip
    got = cost_groups(groups, {"A30-inference": a30_bundle}, at_clock_)
    ids = sorted(recs)
    ref = a30_bundle.coster().cost([recs[i] for i in ids], None)
    default = [got[("A30-inference", None)][i][0] for i in ids]
    assert default == pytest.approx(list(ref.t_s), rel=1e-12)
    assert [got[("A30-inference", 1440.0)][i][0] for i in ids] == pytest.approx(default, rel=1e-12)
    for f in (720.0, 960.0):
        assert [got[("A30-inference", f)][i][0] for i in ids] == pytest.approx(list(ref.t_s * 1440.0 / f), rel=1e-12)
    assert [c for c, _ in seen] == [720.0, 960.0] and all(np.allclose(b, ref.t_s) for _, b in seen)
    assert handed == [ids, ids]
    # another op set at another clock: its own reference costs, not the first set's
    one = {max(recs): recs[max(recs)]}  # the op sorted last: a shared reference would cost it as the first
    got1 = cost_groups({("A30-inference", 720.0): recs, ("A30-inference", 600.0): one}, {"A30-inference": a30_bundle},
                       at_clock_)  # fmt: skip
    (i1,) = one
    want = a30_bundle.coster().cost([one[i1]], None).t_s[0] * 1440.0 / 600.0
    assert got1[("A30-inference", 600.0)][i1][0] == pytest.approx(want, rel=1e-12)
    # a bundle trained on a clock sweep costs each clock itself (the clock is a feature of its op models): a spy on
    # its costing proves the asked clock reaches it and at_clock is never called
    asked: list[float | None] = []
    real = a30_bundle.coster()

    def spy_cost(records, clock):
        asked.append(clock)
        return real.cost(records, None)

    costing = SimpleNamespace(cost=spy_cost)
    swept = SimpleNamespace(clocks_mhz=(720.0, 1440.0), device_config="A30", coster=lambda: costing)
    seen.clear()
    cost_groups({("A30-sweep", 720.0): recs, ("A30-sweep", None): recs}, {"A30-sweep": swept}, at_clock_)
    assert asked == [720.0, None] and seen == []


@FAST
@given(st.lists(st.tuples(st.floats(0.0, 1e10), st.floats(0.0, 1e8), st.floats(0.0, 1e8),
                          st.sampled_from(("full", "flops", "read")), st.sampled_from(("Linear", "Conv2d"))),
                min_size=1, max_size=5),
       st.sampled_from(("A30", "A30_no_tf32", "H100", "T4")), st.floats(0.3, 0.99))  # fmt: skip
def test_the_clock_transfer_moves_each_op_by_its_roofline_share(ops_, config, x) -> None:
    """clocktransfer.roofline_shares / ClockTransfer.costs: each op's compute-bound share t_c / (t_c + t_m)
    from its FLOPs over its kind's peak (a convolution's TF32 one where the config allows it) and its bytes
    read + written over the bandwidth (a metric missing counts 0); the costs at f are the clock model's (a
    component) on those shares, sources and proxies kept."""
    from opcost.model.basis.physics import device_peaks, op_peak
    from opcost.model.prediction.clocktransfer import roofline_shares

    recs = []
    for i, (fl, rd, wr, which, kind) in enumerate(ops_):
        m = {"full": {"flops": fl, "bytes_read": rd, "bytes_written": wr}, "flops": {"flops": fl},
             "read": {"bytes_read": rd}}[which]  # fmt: skip
        recs.append(OpRecord(f"op{i}", kind, {}, (1,), 1, {**m, "params": 0}))
    bw = device_peaks(find_device(config))[2]
    want = []
    for fl, rd, wr, which, kind in ops_:
        fl, rd, wr = fl * (which != "read"), rd * (which != "flops"), wr * (which == "full")
        tc, tm = fl / op_peak(kind, find_device(config)), (rd + wr) / bw
        want.append(tc / (tc + tm) if tc + tm > 0 else 0.0)
    share = roofline_shares(recs, find_device(config))
    assert share == pytest.approx(want, rel=1e-12, abs=1e-15)
    dev = find_device(config)[0]
    f = max(dev.clock_range_mhz[0], x * dev.boost_clock_mhz)
    model = ClockModel(static_frac=0.3, gamma=2.2)
    ref = Costs(np.linspace(1e-4, 1e-3, len(recs)), np.linspace(50, 200, len(recs)), ["predicted"] * len(recs),
                ["ReLU"] * len(recs))  # fmt: skip
    got = ClockTransfer(Path("."), _model=model).costs(find_device(config), recs, ref, f)
    t, p = model.at_clock(dev, f, ref.t_s, ref.p_w, np.array(want))
    assert got.t_s == pytest.approx(t, rel=1e-12) and got.p_w == pytest.approx(p, rel=1e-12)
    assert got.source == ref.source and got.proxy == ref.proxy


def test_a_known_familys_answer_reads_its_own_note_warning_and_the_modes_memory() -> None:
    """assemble for a family with measured siblings, wired to the question's family and mode: the note names the
    family's term; the covariate warning judges the known-family scores (their covariates narrow: the question
    lies beyond them, not beyond the new-family ones); the memory is the footprint of the bundle's mode (an
    inference answer, not the training step's)."""
    from builders import layer_scores
    from opcost.ops.footprint import Footprint

    scores = [0.05, -0.04, 0.03, -0.02, 0.01, 0.0, -0.01, 0.02]
    narrow = [0.01, -0.01, 0.02, -0.02, 0.0, 0.015, -0.015, 0.005]
    wide = [3.0 * x / 0.02 for x in narrow]  # the same spread of covariates, out to |c| = 3
    comp = Composition("inference", {"sum": 3.0}, {"energy_sum": 1.0, "time": 0.0}, calibrated=True,
                       family_terms={"resnet": {"time": 0.1, "energy": 0.0, "n": 2.0}},
                       scores=layer_scores(scores, scores, "known", cov_t=narrow, cov_e=narrow)
                       | layer_scores(scores, scores, "new", cov_t=wide, cov_e=wide))  # fmt: skip
    recs = [OpRecord(f"op{i}", "Linear", {}, (1,), 1, {"params": 0, "bytes_read": 1e6}) for i in range(3)]
    costed = {r.op_id: (1e-4 * (i + 1), 100.0, "predicted", None) for i, r in enumerate(recs)}
    fp = {k: Footprint(m, o, 1, 0, 0, 0, 0, 0, 0, b, b, b, "forward") for k, m, o, b in
          (("inference", "inference", None, 1 << 20), ("sgd", "training", "sgd", 5 << 20))}  # fmt: skip
    net = Network({r.op_id: r for r in recs}, {r.op_id: 2 for r in recs}, memory=fp)
    got = assemble(SimpleNamespace(model="resnet50", label="resnet50"), _spy_bundle(comp, 1e-6, "A30", True), None,
                   net, costed)  # fmt: skip
    assert "family term for resnet from 2 measured sibling network(s): time x1.105" in got.note
    c = math.log(got.time_s / got.sum_s)
    assert 1.0 < c < 3.0  # beyond the known scores' |c| <= 0.02, inside the new ones' 3
    beyond = [w for w in got.warnings if "composition layer's answer is" in w]
    assert len(beyond) == 1 and "(|c| <= 0.02)" in beyond[0]
    assert got.memory is not None and got.memory["peak_bytes"] == 1 << 20 and got.memory["mode"] == "inference"


def test_the_power_level_is_clipped_to_its_range_at_both_ends() -> None:
    """PowerModel.level by hand: the busy share held to [0, 1] before the power law, the level to [0, 1] after
    it (a + b u^c with a < 0 and a + b > 1 leaves the range at both ends)."""
    pm = PowerModel(a=-0.2, b=1.5, c=2.0)
    assert pm.level([-1.0, 0.0, 0.5, 1.0, 2.0]).tolist() == pytest.approx([0.0, 0.0, 0.175, 1.0, 1.0], abs=1e-15)


def test_an_interval_asked_without_a_covariate_and_a_transferred_layer_without_a_factor() -> None:
    """Composition.log_interval: no covariate is the scale of a network the layer did not move (0, not 1); a
    transferred layer widens a quantity by its own measured factor, and one it has no factor for not at all."""
    scores, cov = trend_scores(30, 0.1, 0.0, 2.0, 5)  # a spread that grows with the covariate (ratio > 0)

    def layer(**kw: object) -> Composition:
        return Composition("inference", {"sum": 1.0}, calibrated=True,
                           scores=layer_scores(scores, scores, cov_t=cov, cov_e=cov), **kw)  # fmt: skip

    own = layer()
    assert own.log_interval("time") == own.log_interval("time", covariate=0.0)
    assert own.log_interval("time", covariate=1.0) != own.log_interval("time", covariate=0.0)  # the check can fail
    moved = layer(source="transferred", transfer_widening={"time": 1.5})
    assert moved.log_interval("time") == own.log_interval("time").widened(1.5)
    assert moved.log_interval("energy") == own.log_interval("energy")
