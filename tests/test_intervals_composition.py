"""Known answers for the composition layer's conformal intervals, per-family terms and transfer
(model/composition/compose.py), and for interval coverage as netval reports it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from builders import layer_scores
from opcost.model.composition import compose
from opcost.model.composition.compose import Composition, ScoreSet
from opcost.model.composition.intervals import conformal_q
from opcost.model.training import netval


def test_conformal_quantile_is_the_ceil_n_plus_1_level_th_smallest_score() -> None:
    scores = np.arange(1, 20) / 100.0  # 19 scores: ceil(20 x 0.9) = 18 -> the 18th smallest
    assert conformal_q(scores) == pytest.approx(0.18)
    assert conformal_q(-scores) == pytest.approx(0.18)  # absolute scores
    assert conformal_q(np.arange(1, 10) / 10.0) == pytest.approx(0.9)  # 9 scores: the largest
    assert conformal_q(np.arange(1, 9) / 10.0) is None  # 8 scores cannot give a 90 % quantile


def test_grouped_conformal_quantile_counts_each_group_once() -> None:
    """Pooled empirical CDFs: each group weighs 1, q where the cumulative weight reaches level x (G + 1)."""
    scores = np.arange(1, 19) / 100.0  # 18 scores
    assert conformal_q(scores) == pytest.approx(0.18)  # ceil(19 x 0.9) = 18th smallest
    pairs = [f"m{i // 2}" for i in range(18)]  # 9 models of two input sizes each
    assert conformal_q(scores, groups=pairs) == pytest.approx(0.18)  # G = 9: weight 9 = 0.9 x 10 at the last
    quads = [f"m{i // 4}" for i in range(16)] + ["m4", "m5"]  # 6 groups: 0.9 x 7 > 6, too few
    assert conformal_q(scores, groups=quads) is None
    iv = compose.log_interval(scores, groups=quads)
    # model/composition/intervals.py: the normal rule below 9 groups
    assert (iv.rule, iv.n, iv.groups) == ("normal", 18, 6)
    # 19 singletons and one group of 10 tiny scores: G = 20, weight 0.9 x 21 = 18.9: 1 + 18 at the 18th single
    s = np.r_[np.full(10, 1e-3), np.arange(1, 20) / 100.0]
    g = ["big"] * 10 + [f"s{i}" for i in range(19)]
    assert conformal_q(s, groups=g) == pytest.approx(0.18)
    assert conformal_q(s) == pytest.approx(0.17)  # as 29 independent scores: the 27th smallest
    with pytest.raises(ValueError):
        conformal_q(scores, groups=["a"])


def test_interval_is_multiplicative_from_the_log_scores_and_never_reaches_zero() -> None:
    # relative errors r = predicted / measured - 1; scores |log(1 + r)|
    r = np.expm1(np.linspace(-0.5, 0.5, 19))  # scores 0.5, 0.444, ...: 18th smallest of |x| is 0.5
    comp = Composition("inference", calibrated=True, scores=layer_scores(r, r))
    s = np.sort(np.abs(np.linspace(-0.5, 0.5, 19)))
    lo, hi = comp.interval(2.0, "time")
    assert (lo, hi) == pytest.approx((2.0 * np.exp(-s[17]), 2.0 * np.exp(s[17])))
    huge = Composition("inference", calibrated=True, scores=layer_scores([-0.95] * 19))  # predicted 20x too low
    lo, hi = huge.interval(1.0, "time")
    assert lo > 0 and hi == pytest.approx(20.0, rel=1e-6)
    lo2, hi2 = huge.interval(1.0, "time", extrapolating=True)
    assert lo2 > 0 and np.log(hi2) == pytest.approx(compose.EXTRAPOLATION_WIDENING * np.log(20.0), rel=1e-6)


@pytest.mark.parametrize("sigma", [0.05, 0.3])
def test_held_out_coverage_is_about_the_level(sigma: float) -> None:
    """Synthetic held-out networks: log(measured / predicted) ~ N(0.05, sigma). Intervals from 40
    calibration residuals contain about 90 % of 4000 new networks (conformal: at least 90 % on
    average, little above with 40 scores)."""
    rng = np.random.default_rng(1)
    cover = []
    for _ in range(100):
        log_ratio = rng.normal(0.05, sigma, 40)  # log(measured / predicted)
        comp = Composition("inference", calibrated=True, scores=layer_scores(np.expm1(-log_ratio)))
        pred = rng.uniform(0.01, 1.0, 40)
        measured = pred * np.exp(rng.normal(0.05, sigma, 40))
        lo, hi = np.array([comp.interval(p) for p in pred]).T
        cover.append(np.mean((measured >= lo) & (measured <= hi)))
    assert 0.88 <= np.mean(cover) <= 0.95


def test_coverage_never_uses_the_scores_of_a_networks_own_group() -> None:
    """Group A's errors are huge, the others' small: A's own scores would cover A, the others' cannot."""
    df = pd.DataFrame(
        {
            "held_out": ["A"] * 2 + [f"g{i}" for i in range(19)],
            "model": ["A"] * 2 + [f"g{i}" for i in range(19)],
            "family": "f",
            "split": "model",
            "t_error": [3.0, 3.0] + [0.01 * (i + 1) for i in range(19)],
            "e_error": np.nan,
        }  # fmt: skip
    )
    cov = netval.coverage(df)["time"]
    # A's two networks are not covered (the other groups' q is at most 0.19 in relative terms). For a g
    # network the others are 18 g groups and A, whose two scores weigh 1/2 each (one group): G = 19, so q is
    # the score where the cumulative weight reaches 0.9 x 20 = 18, the largest of the 18 other g: every g is
    # covered but the largest, g18 (counting A's two scores as two would have let A's 3.0 cover it)
    assert cov["n"] == 21
    assert cov["coverage_pct"] == pytest.approx(100 * 18 / 21)


def test_family_term_is_the_siblings_mean_log_residual_shrunk_by_one() -> None:
    terms = [{"sum": s, "calls_floor": 0.0, "params_bw": 0.0, "const": 1.0, "energy_sum": s}
             for s in (1.0, 2.0, 3.0, 4.0)]  # fmt: skip
    comp = Composition("inference", {"sum": 1.0, "calls_floor": 0.0, "params_bw": 0.0, "const": 0.0},
                       {"energy_sum": 1.0, "time": 0.0}, calibrated=True)  # fmt: skip
    fams = ["a", "a", "b", "c"]
    t = np.array([1.2, 2.4, 3.0, 4.0])  # family a runs 20 % slower than composed
    e = np.array([1.0, 2.0, 3.3, 4.0])
    ft = compose.fit_family_terms(comp, terms, fams, t, e)
    assert ft["a"]["time"] == pytest.approx(2 * np.log(1.2) / 3)
    assert ft["a"]["energy"] == pytest.approx(0.0)
    assert ft["b"]["energy"] == pytest.approx(np.log(1.1) / 2)
    comp.family_terms = ft
    assert comp.time(terms[0], "a") == pytest.approx(1.0 * 1.2 ** (2 / 3))
    assert comp.time(terms[0], "new-family") == pytest.approx(1.0)  # a new family: no term


def test_transfer_converts_constants_with_the_floor_and_power_of_the_device() -> None:
    a = Composition("training", {"sum": 1.0, "calls_floor": 0.2, "params_bw": 2.0, "const": 1e-3},
                    {"energy_sum": 0.9, "time": 40.0}, calibrated=True,
                    scores=layer_scores([0.1], [0.2]))  # fmt: skip
    b = Composition("training", {"sum": 0.8, "calls_floor": 0.4, "params_bw": 4.0, "const": 3e-3},
                    {"energy_sum": 0.7, "time": 80.0}, calibrated=True,
                    scores=layer_scores([-0.1], [0.3]))  # fmt: skip
    inf = Composition("inference", calibrated=True)
    c = compose.transfer([("A", a, 1e-5, 100.0), ("B", b, 2e-5, 200.0), ("I", inf, 1.0, 1.0)], "training",
                         floor_s=4e-5, power_w=50.0)  # fmt: skip
    assert c.source == "transferred" and c.transferred_from == ["A", "B"] and not c.calibrated
    assert c.time_coef["sum"] == pytest.approx(0.9) and c.time_coef["params_bw"] == pytest.approx(3.0)
    assert c.time_coef["const"] == pytest.approx(125 * 4e-5)  # 100 and 150 floors: 125 of this floor
    assert c.energy_coef["time"] == pytest.approx(0.4 * 50.0)  # 0.4 median powers in both
    assert c.score_set("pooled", "time").scores == [0.1, -0.1]
    back = Composition.from_json(c.to_json())
    assert back.source == "transferred" and back.half_width() == pytest.approx(c.half_width())


def test_a_fitted_layer_says_it_is_calibrated() -> None:
    terms = [{"sum": s, "calls_floor": 1.0, "params_bw": 0.0, "const": 1.0, "energy_sum": s} for s in (1, 2, 3, 4, 5)]
    comp = compose.fit("inference", terms, np.array([1.1, 2.1, 3.2, 4.1, 5.0]), None)
    assert comp.calibrated and comp.source == "calibrated"
    assert Composition.from_json(comp.to_json()).source == "calibrated"
    assert compose.fit("inference", terms[:2], np.array([1.0, 2.0]), None).source == "uncalibrated"


def test_family_split_coverage_leaves_out_the_whole_family_of_the_calibration_scores() -> None:
    """Calibrated on model-split scores: a family-split network's siblings (same family, other
    models) are not among its calibration scores."""
    calib = pd.DataFrame({"held_out": [f"m{i}" for i in range(20)], "model": [f"m{i}" for i in range(20)],
                          "family": ["big"] * 2 + ["small"] * 18, "split": "model",
                          "t_error": [2.0, 1.0] + [0.01] * 18, "e_error": np.nan})  # fmt: skip
    fam = calib.assign(split="family", held_out=calib["family"])
    cov = netval.coverage(fam, calib)["time"]
    # "big" networks see only the 18 small scores (all log 1.01, 18 groups: the normal rule, no spread): not
    # covered; "small" ones see the 2 big ones only (their own family dropped): 2 groups, the normal rule (log
    # errors log 3, log 2; t_{0.95, 1} = 6.313752) covers them; no interval is skipped (a skipped one hid a
    # whole family's misses)
    assert cov["n"] == 20 and cov["coverage_pct"] == pytest.approx(90.0)
    assert cov["too_few_scores"] == 20 and cov["normal_rule"] == 20 and cov["median_scores"] == 2
    m, h = np.log(6) / 2, 6.313752 * np.std(np.log([3.0, 2.0]), ddof=1) * np.sqrt(1.5)
    assert cov["median_width_pct"] == pytest.approx(100 * (np.exp(-m + h) - np.exp(-m - h)), rel=1e-6)


# --------------------------------------------------------------------------------------------
# The constant power follows the clock (issue 21 section 6)
# --------------------------------------------------------------------------------------------

SIGMA, GAMMA = 0.3, 2.5  # the clock model's static share and dynamic-power exponent (synthetic)


def _clocked_network_energy(f: float, k_follows: bool = False) -> tuple[float, dict, tuple]:
    """A synthetic training step on the A30 (boost 1440 MHz) at core clock f, from the physics written out
    here (not the code's): op time t (1 + s (f_ref / f - 1)), op power p (SIGMA + (1 - SIGMA) x^GAMMA),
    x = f / f_ref; energy 0.5 x sum calls (t - floor) p + k x time, time = sum calls (t - floor) + N x
    floor, k = 80 W of static board power at every clock (`k_follows`: 80 W x (SIGMA + (1 - SIGMA) x^GAMMA),
    the round-37 reading that scaled it like dynamic power)."""
    from opcost.model.basis.features import OpRecord

    floor, k = 1e-5, 80.0
    t_ref = np.array([4e-4, 1.5e-4, 3e-5])
    p_ref = np.array([150.0, 110.0, 70.0])
    share = np.array([0.9, 0.4, 0.1])  # compute-bound share of each op's time
    calls = np.array([3.0, 5.0, 20.0])
    x = f / 1440.0
    t = t_ref * (1 + share * (1 / x - 1))
    p = p_ref * (SIGMA + (1 - SIGMA) * x**GAMMA)
    time_s = float((calls * (t - floor)).sum() + calls.sum() * floor)
    k_f = k * (SIGMA + (1 - SIGMA) * x**GAMMA) if k_follows else k
    energy = float(0.5 * (calls * (t - floor) * p).sum() + k_f * time_s)
    records = [OpRecord(f"op{i}", "Linear", {}, (1,), 1, {"params": 0}) for i in range(3)]
    costed = {r.op_id: (float(t[i]), float(p[i]), "predicted", None) for i, r in enumerate(records)}
    return energy, costed, (records, calls, floor, k)


def test_the_constant_power_is_static_and_the_energy_optimum_stays_up(tmp_path) -> None:
    """answer.assemble at a transferred clock: the composition's constant power k is the board's static draw,
    the same at every clock, while the ops' powers follow it; the predicted energy equals that physics at every
    clock, and its optimum sits above the one a k scaled like dynamic power gives (round 37: ~600 MHz on the
    A30 for every thesis network)."""
    from types import SimpleNamespace

    from opcost.devices import find_device
    from opcost.model.clocks.clock import ClockModel
    from opcost.model.composition.network import Network
    from opcost.model.prediction.answer import assemble
    from opcost.model.prediction.clocktransfer import ClockTransfer
    from opcost.paths import Paths

    comp = Composition("training", {"sum": 1.0, "calls_floor": 1.0, "params_bw": 0.0, "const": 0.0},
                       {"energy_sum": 0.5, "time": 80.0}, calibrated=True)  # fmt: skip
    _, _, (records, calls, floor, k) = _clocked_network_energy(1440.0)
    bundle = SimpleNamespace(composition=comp, mode="training", floor_s=floor, device_config="A30", unvouched="",
                             device=find_device("A30"), models={"time": None, "power": None}, clocks_mhz=(),
                             target="A30-training", ranges={})  # fmt: skip
    transfer = ClockTransfer(Paths(tmp_path).root, _model=ClockModel(static_frac=SIGMA, gamma=GAMMA))  # preloaded
    net = Network({r.op_id: r for r in records}, {r.op_id: int(c) for r, c in zip(records, calls)})
    spec = SimpleNamespace(model="mlp", label="mlp")
    clocks = np.arange(210.0, 1441.0, 30.0)
    predicted, physics, scaled = [], [], []
    for f in clocks:
        e, costed, _ = _clocked_network_energy(float(f))
        got = assemble(spec, bundle, float(f), net, costed, clocks=transfer)
        predicted.append(got.energy_j)
        physics.append(e)
        scaled.append(_clocked_network_energy(float(f), k_follows=True)[0])
    assert predicted == pytest.approx(physics, rel=1e-9)
    best, best_scaled = clocks[int(np.argmin(physics))], clocks[int(np.argmin(scaled))]
    assert clocks[int(np.argmin(predicted))] == best
    assert best > best_scaled  # a k scaled with the clock made low clocks look cheap: the optimum sank


def test_a_prediction_gets_the_scores_of_its_question_and_says_how_many() -> None:
    """Known family: the model-split scores of known-family networks; new family (or a family nobody named):
    the family-split scores; no family asked, or an older bundle without the sets: every model-split score."""
    known = list(np.expm1(np.linspace(-0.1, 0.1, 19)))  # 19 scores: the 18th smallest of |log| is 0.1 - 1/90
    new = list(np.expm1(np.linspace(-0.6, 0.6, 9)))  # 9 groups: the normal rule, mean 0, t_{0.95, 8} = 1.859548
    h_new = 1.859548 * np.std(np.linspace(-0.6, 0.6, 9), ddof=1) * np.sqrt(1 + 1 / 9)
    pooled = [0.01] * 20
    comp = Composition("inference", calibrated=True, family_terms={"resnet": {"time": 0.0, "energy": 0.0, "n": 3.0}},
                       scores=layer_scores(pooled, pooled) | layer_scores(known, known, "known")
                       | layer_scores(new, new, "new"))  # fmt: skip
    s_known = np.sort(np.abs(np.log1p(known)))[17]
    assert comp.half_width("time", family="resnet") == pytest.approx(s_known)
    assert comp.half_width("energy", family="convnext") == pytest.approx(h_new)
    assert comp.half_width("time", family=None) == pytest.approx(h_new)  # nobody named its family: a new one
    assert comp.half_width("time") == pytest.approx(np.log1p(0.01))  # no family asked: pooled
    assert comp.interval(1.0, "time", family="convnext") == pytest.approx((np.exp(-h_new), np.exp(h_new)))
    assert "90 % interval from 19 model-left-out scores of networks whose family had measured siblings" in comp.note(
        "A30-inference", "resnet")  # fmt: skip
    note = comp.note("A30-inference", "convnext")
    assert "a new family" in note and "90 % interval from 9 family-left-out scores" in note
    back = Composition.from_json(comp.to_json())
    assert back.half_width("time", family="resnet") == pytest.approx(s_known)
    assert back.half_width("time", family="convnext") == pytest.approx(h_new)
    old = comp.to_json()
    for k in ("residuals_known_t", "residuals_known_e", "residuals_new_t", "residuals_new_e"):
        del old[k]  # a bundle written before the score sets by question
    assert Composition.from_json(old).half_width("time", family="convnext") == pytest.approx(np.log1p(0.01))
    five = [0.01, 0.02, 0.03, 0.04, 0.05]
    few = Composition("inference", calibrated=True, family_terms={"a": {"time": 0.0}},
                      scores=layer_scores(five) | layer_scores(five, question="new"))  # fmt: skip
    e = np.log1p(five)  # 5 groups of one: the normal prediction interval, t_{0.95, 4} = 2.131847
    h = 2.131847 * np.std(e, ddof=1) * np.sqrt(1.2)
    assert few.interval(1.0, "time", family="b") == pytest.approx((np.exp(-e.mean() - h), np.exp(-e.mean() + h)))
    assert few.half_width("time", family="b") == pytest.approx(h)
    assert "split-conformal quantile below the largest score: a normal prediction interval" in few.note(
        "A30-inference", "b")  # fmt: skip
    one = Composition("inference", calibrated=True, family_terms={"a": {"time": 0.0}},
                      scores=layer_scores([0.05]) | layer_scores([0.05], question="new"))  # fmt: skip
    assert one.half_width("time", family="b") == pytest.approx(np.log1p(compose.UNCALIBRATED_HALF_WIDTH))
    assert "too few groups for any spread" in one.note("A30-inference", "b")


def test_the_bundles_score_sets_come_from_the_split_of_their_question() -> None:
    net_pred = pd.DataFrame({
        "split": ["model", "model", "family", "family", "network"],
        "family_known": [True, False, False, False, True],
        "t_error": [0.1, 0.2, 0.3, 0.4, 0.5], "e_error": [0.1, np.nan, 0.3, 0.4, 0.5],
    })  # fmt: skip
    t, e = netval.score_sets(net_pred, "t_error"), netval.score_sets(net_pred, "e_error")
    assert t == {"known": [0.1], "new": [0.3, 0.4], "pooled": [0.1, 0.2]}
    assert e == {"known": [0.1], "new": [0.3, 0.4], "pooled": [0.1]}


def test_new_family_coverage_uses_family_split_scores_and_without_them_the_pooled_ones() -> None:
    """A new-family network's interval rests on family-split scores; where a target has none (no family
    could be held out), on every model-split score, as its bundle's predictions do; never skipped."""
    fams = [f"f{i // 2}" for i in range(20)] + [f"s{i}" for i in range(10)]  # 10 pairs, then 10 singletons
    model = pd.DataFrame({"set_id": [f"m{i}" for i in range(30)], "model": [f"m{i}" for i in range(30)],
                          "held_out": [f"m{i}" for i in range(30)], "family": fams, "split": "model",
                          "family_known": [f.startswith("f") for f in fams],
                          "t_error": 0.01 * np.arange(1, 31), "e_error": np.nan})  # fmt: skip
    family = model.assign(split="family", held_out=model["family"], family_known=False, t_error=model["t_error"] * 2)
    single = model[~model["family_known"]]  # errors 0.21 ... 0.30, the largest of the model split
    # family-split scores of the other 29 rows: the 27th smallest is at least 2 x 0.27, covering all ten
    both = netval.coverage(single, pd.concat([model, family]))["time"]
    assert (both["n"], both["coverage_pct"], both["median_scores"]) == (10, 100.0, 29)
    # no family-split rows: the other 29 model-split scores, whose 27th smallest is 0.27 (0.28 for the rows
    # below it): 0.28, 0.29 and 0.30 are not covered
    alone = netval.coverage(single, model)["time"]
    assert (alone["n"], alone["coverage_pct"], alone["median_scores"]) == (10, 70.0, 29)


def test_a_bundles_interval_counts_each_held_out_model_once() -> None:
    """18 scores of 6 models (three input sizes each): too few groups for a 90 % quantile (0.9 x 7 > 6), so
    the normal rule on the 6 model means (t_{0.95, 5} = 2.015048) with the within-model spread added back; read
    back from JSON the same. Without groups (an older bundle) the 18 scores are 18 groups of one: still below the
    19 a conformal quantile under the largest score needs, so the textbook normal interval (t_{0.95, 17})."""
    res = list(np.arange(1, 19) / 100.0)
    comp = Composition("inference", calibrated=True, scores=layer_scores(res))
    h18 = 1.739607 * np.std(np.log1p(res), ddof=1) * np.sqrt(1 + 1 / 18)
    assert comp.half_width("time") == pytest.approx(h18)
    comp.scores["pooled", "time"] = ScoreSet(res, [f"m{i // 3}" for i in range(18)])
    e = np.log1p(res).reshape(6, 3)  # model i's three sizes in row i
    s_b2, s_w2 = np.var(e.mean(1), ddof=1), ((e - e.mean(1, keepdims=True)) ** 2).sum() / (18 - 6)
    h = 2.015048 * np.sqrt(s_b2 * (1 + 1 / 6) + s_w2 * (1 - 1 / 3))
    assert comp.half_width("time") == pytest.approx(h)
    assert comp.log_interval("time").lo == pytest.approx(-e.mean() - h)
    assert comp.groups_for("time") == [f"m{i // 3}" for i in range(18)]
    back = Composition.from_json(comp.to_json())
    assert back.half_width("time") == pytest.approx(comp.half_width("time"))
