"""Known answers and a spy for the interval of a transferred composition layer (model/composition/compose.py,
`transfer_calibrated`): held-out evidence of transfer, not a hand factor."""

from __future__ import annotations

import numpy as np
import pytest

from builders import layer_scores
from opcost.model.composition import compose
from opcost.model.composition.compose import Composition, ScoreSet, SourceNetworks

SUMS = (1.0, 2.0, 3.0)  # the networks' term "sum"


def _terms(s: float) -> dict[str, float]:
    return {"sum": s, "calls_floor": 0.0, "params_bw": 0.0, "const": 1.0, "energy_sum": s}


def _source(name: str, mode: str, a: float, floor: float, residuals: list[float]) -> SourceNetworks:
    """A calibrated config whose networks take exactly a x sum (time) and a x sum (energy)."""
    comp = Composition(mode, {"sum": a, "calls_floor": 0.0, "params_bw": 0.0, "const": 0.0},
                       {"energy_sum": a, "time": 0.0}, calibrated=True, n_networks=len(SUMS),
                       scores=layer_scores(residuals, residuals))  # fmt: skip
    t = np.array([a * s for s in SUMS])
    return SourceNetworks(name, comp, floor, 100.0, [_terms(s) for s in SUMS], t, t.copy())


def _inference() -> list[SourceNetworks]:
    return [_source("A-inference", "inference", 1.0, 1e-5, [0.4, -0.2]),
            _source("B-inference", "inference", 2.0, 2e-5, [0.1]),
            _source("C-inference", "inference", 3.0, 3e-5, [-0.1])]  # fmt: skip


def test_leave_one_config_out_predicts_each_config_from_the_others_only() -> None:
    """A is predicted with (2 + 3) / 2 = 2.5 x its own coefficient, B with 2 (exact), C with 1.5 / 3."""
    rt, re, held = compose.leave_one_config_out(_inference(), "inference")
    assert held == ["A-inference", "B-inference", "C-inference"]
    assert rt == pytest.approx([1.5] * 3 + [0.0] * 3 + [-0.5] * 3)
    assert re == pytest.approx(rt)
    assert compose.leave_one_config_out(_inference()[:1], "inference") == ([], [], [])


def test_no_config_is_among_the_sources_of_its_own_transfer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spy on `transfer`: the config held out (known by its floor) never lends its coefficients."""
    calls: list[tuple[list[str], float]] = []
    real = compose.transfer

    def spy(sources, mode, floor_s, power_w, cap_w=0.0):  # type: ignore[no-untyped-def]
        calls.append(([n for n, *_ in sources], floor_s))
        return real(sources, mode, floor_s, power_w, cap_w)

    monkeypatch.setattr(compose, "transfer", spy)
    compose.leave_one_config_out(_inference(), "inference")
    by_floor = {1e-5: "A-inference", 2e-5: "B-inference", 3e-5: "C-inference"}
    assert len(calls) == 3
    for names, floor in calls:
        assert by_floor[floor] not in names and len(names) == 2


def test_a_mode_with_several_configs_takes_its_leave_one_config_out_scores_unwidened() -> None:
    layer = compose.transfer_calibrated(_inference(), "inference", 4e-5, 50.0)
    assert layer.source == "transferred" and layer.transfer_widening == {"time": 1.0, "energy": 1.0}
    assert layer.score_set("pooled", "time").scores == pytest.approx([1.5] * 3 + [0.0] * 3 + [-0.5] * 3)
    # the question is a new config, and configs are the unit: 3 groups, too few for a 90 % conformal quantile:
    # the normal rule on the configs' mean log errors log 2.5, 0, log 0.5 (no spread within a config),
    # t_{0.95, 2} = 2.919986
    assert layer.groups_for("time") == ["A-inference"] * 3 + ["B-inference"] * 3 + ["C-inference"] * 3
    means = np.log([2.5, 1.0, 0.5])
    h = 2.919986 * np.sqrt(np.var(means, ddof=1) * (1 + 1 / 3))
    iv = layer.log_interval("time")
    assert iv.rule == "normal" and (iv.lo, iv.hi) == pytest.approx((-means.mean() - h, -means.mean() + h))
    assert layer.half_width("time") == pytest.approx(h)
    assert "leave-one-config-out" in layer.note("X-inference", None)
    assert "a normal prediction interval on the group means" in layer.note("X-inference", None)  # names the rule


def test_a_mode_with_one_config_is_widened_by_the_ratio_measured_in_another_mode() -> None:
    """Inference: leave-one-config-out log errors log 2.5, 0, log 0.5, three each (9 groups config:model, too
    few for a conformal quantile under the largest): h_loco = t_{0.95, 8} s sqrt(1 + 1/9); own scores 0.4, -0.2,
    0.1, -0.1 (4 groups): h_own = t_{0.95, 3} s sqrt(1 + 1/4). Training's one source has own scores [0.1], one
    group: q = log 1.3 (the floor), widened by h_loco / h_own."""
    train = _source("A-training", "training", 1.0, 1e-5, [0.1])
    layer = compose.transfer_calibrated([train, *_inference()], "training", 4e-5, 50.0)
    own = np.log([1.4, 0.8, 1.1, 0.9])
    loco = np.repeat(np.log([2.5, 1.0, 0.5]), 3)
    w = 1.859548 * np.std(loco, ddof=1) * np.sqrt(1 + 1 / 9) / (2.353363 * np.std(own, ddof=1) * np.sqrt(1.25))
    assert layer.transferred_from == ["A-training"]
    assert layer.transfer_widening["time"] == pytest.approx(w)
    assert layer.transfer_widening["energy"] == pytest.approx(w)
    assert layer.score_set("pooled", "time").scores == [0.1]
    # leave-one-config-out scores grouped by config:model, 9 groups of one; the own scores 4 groups: both the
    # normal rule, w as above
    assert layer.half_width("time") == pytest.approx(np.log(1.3) * w)
    assert "one calibrated config" in layer.transfer_evidence and "inference" in layer.transfer_evidence
    back = Composition.from_json(layer.to_json())
    assert back.half_width("energy") == pytest.approx(layer.half_width("energy"))


def test_without_any_held_out_config_the_transfer_says_it_is_not_validated() -> None:
    train = _source("A-training", "training", 1.0, 1e-5, [0.1])
    layer = compose.transfer_calibrated([train], "training", 4e-5, 50.0)
    assert layer.transfer_widening == {"time": 1.0, "energy": 1.0}
    assert "not validated" in layer.note("X-training", None)


def test_an_older_transferred_bundle_keeps_its_widening() -> None:
    d = compose.transfer([("A", _inference()[0].comp, 1e-5, 100.0)], "inference", 1e-5, 100.0).to_json()
    del d["transfer_widening"], d["transfer_evidence"]
    old = Composition.from_json(d)
    q = 6.313752 * np.std(np.log([1.4, 0.8]), ddof=1) * np.sqrt(1.5)  # 2 groups: normal rule, t_{0.95, 1}
    assert old.half_width("time") == pytest.approx(compose.LEGACY_TRANSFER_WIDENING * q)


def test_transferred_scores_carry_their_covariates_so_the_normalised_rule_applies_there_too() -> None:
    """Leave-one-config-out: each score's covariate is log(transferred prediction / the network's plain op sum)
    (raw_sum_s = sum / 2 here: A predicted 2.5 x sum -> log 5, B 2 x -> log 4, C 1.5 x -> log 3). Pooled
    own scores keep their sources' covariates, and none where a source recorded none."""
    srcs = _inference()
    for s in srcs:
        s.terms = [{**t, "raw_sum_s": t["sum"] / 2} for t in s.terms]
    layer = compose.transfer_calibrated(srcs, "inference", 4e-5, 50.0)
    want = list(np.log([5.0] * 3 + [4.0] * 3 + [3.0] * 3))
    assert layer.score_set("pooled", "time").covariates == pytest.approx(want)
    assert layer.score_set("pooled", "energy").covariates == pytest.approx(want)
    assert layer.covariates_for("time") == pytest.approx(want)
    srcs[0].comp.scores["pooled", "time"] = ScoreSet([0.4, -0.2], covariates=[0.1, 0.2])
    srcs[1].comp.scores["pooled", "time"] = ScoreSet([0.1], covariates=[0.3])
    pooled = compose.transfer([s.as_source() for s in srcs[:2]], "inference", 4e-5, 50.0)
    assert pooled.score_set("pooled", "time").covariates == pytest.approx([0.1, 0.2, 0.3])
    assert pooled.score_set("pooled", "energy").covariates is None  # energy: none recorded
    pooled = compose.transfer([s.as_source() for s in srcs], "inference", 4e-5, 50.0)  # C recorded none
    assert pooled.score_set("pooled", "time").covariates is None
