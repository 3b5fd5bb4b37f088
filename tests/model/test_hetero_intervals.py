"""Known answers for heteroscedastic (normalised) intervals (model/composition/intervals.py): the scale model recovered
exactly, coverage of about 90 % in each stratum of synthetic errors whose spread grows with the covariate
(where the unnormalised rule over-covers the easy stratum and under-covers the hard one), bundles that carry
covariates and older ones that do not, and the binomial interval netval reports beside a coverage figure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from builders import layer_scores
from opcost.model.composition import intervals
from opcost.model.composition.compose import Composition, ScoreSet
from opcost.model.training import netval


def test_the_scale_model_is_recovered_exactly_from_errors_on_it() -> None:
    """(e - m)^2 = a (1 + r c^2) exactly, in +- pairs (m = 0): least squares on [1, c^2] returns r."""
    a, r = 0.01, 25.0
    c = np.repeat([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], 2)
    e = np.sqrt(a * (1 + r * c**2)) * np.tile([1.0, -1.0], 6)
    assert intervals.scale_ratio(e, c) == pytest.approx(r, rel=1e-9)
    # each group weighing 1: duplicating one score's group members must not move r (same values, same group)
    g = [str(i) for i in range(12)] + ["0", "0"]
    assert intervals.scale_ratio(np.r_[e, e[0], e[0]], np.r_[c, c[0], c[0]], g) == pytest.approx(r, rel=1e-9)


def test_no_trend_or_too_few_groups_leaves_the_plain_rule() -> None:
    e = np.array([0.1, -0.1, 0.1, -0.1, 0.1, -0.1])
    c = np.array([0.0, 0.0, 0.2, 0.2, 0.4, 0.4])  # the same spread at every c: r = 0
    assert intervals.scale_ratio(e, c) == 0.0
    assert intervals.scale_ratio([0.1, -0.3], [0.0, 0.5]) == 0.0  # two groups: no residual degree of freedom
    plain = intervals.log_interval(e)
    normed = intervals.log_interval(e, covariates=c)
    assert (normed.lo, normed.hi, normed.ratio) == (plain.lo, plain.hi, 0.0)
    assert normed.scaled(0.4) == normed  # no scale model: every question gets the same interval


def test_a_question_is_scaled_by_its_own_covariate() -> None:
    a, r = 0.01, 25.0
    c = np.repeat([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], 2)
    e = np.sqrt(a * (1 + r * c**2)) * np.tile([1.0, -1.0], 6)
    iv = intervals.log_interval(e, covariates=c)
    assert iv.ratio == pytest.approx(r)
    # the normalised scores are +-sqrt(a) = +-0.1 each: the normal rule on them (one df spent on r), then x s(c)
    m, h = intervals.normal_interval(np.tile([0.1, -0.1], 6), extra_params=1)
    assert h == pytest.approx(intervals.t_quantile(0.95, 10) * 0.1 * math.sqrt(12 / 11) * math.sqrt(1 + 1 / 12))
    assert (iv.lo, iv.hi) == (pytest.approx(-m - h), pytest.approx(-m + h))
    hard = iv.scaled(0.5)
    assert hard.half_width == pytest.approx(h * math.sqrt(1 + r * 0.25))
    assert "normalised" in iv.note()


def test_the_scale_model_is_not_read_beyond_the_covariates_it_was_fitted_on() -> None:
    """Scores at |c| <= 0.5 (r = 25): a question at c = 3 is scaled as one at 0.5, s = sqrt(1 + 25 x 0.25), not
    sqrt(1 + 25 x 9) = 15 (a one-layer network on the A30 got 0.0015-92 ms around 0.28 ms that way), and it is
    flagged `outside` so the caller widens it as an extrapolation; inside the span nothing changes."""
    a, r = 0.01, 25.0
    c = np.repeat([0.0, -0.1, 0.2, -0.3, 0.4, 0.5], 2)
    e = np.sqrt(a * (1 + r * c**2)) * np.tile([1.0, -1.0], 6)
    iv = intervals.log_interval(e, covariates=c)
    h = intervals.t_quantile(0.95, 10) * 0.1 * math.sqrt(12 / 11) * math.sqrt(1 + 1 / 12)
    assert iv.span == 0.5
    for far in (3.0, -3.0, 0.5000001 * 1.01):
        assert iv.scaled(far).half_width == pytest.approx(h * math.sqrt(1 + r * 0.25))
        assert iv.outside(far)
    for near in (0.5, -0.5, 0.2, 0.0):
        assert not iv.outside(near)
    assert iv.scaled(0.2).half_width == pytest.approx(h * math.sqrt(1 + r * 0.04))
    plain = intervals.log_interval(e)  # no covariates: no scale model, nothing is outside
    assert plain.span == math.inf and not plain.outside(100.0)


def test_a_composition_warns_and_widens_a_question_beyond_its_networks_covariates() -> None:
    """The composition's answer 20x its op costs (c = 3) against measured networks at |c| <= 0.5: one warning
    naming both, and the interval a prediction takes is the edge's, doubled (EXTRAPOLATION_WIDENING)."""
    from opcost.model.composition.compose import EXTRAPOLATION_WIDENING

    c = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5] * 2
    res = [float(np.expm1(0.1 * math.sqrt(1 + 25 * x * x) * s)) for x, s in zip(c, [1] * 6 + [-1] * 6)]
    comp = Composition("inference", calibrated=True, n_networks=12, scores=layer_scores(res, res, cov_t=c, cov_e=c))
    assert comp.covariate_warning(None, 0.4, 1e-3, "A30-inference") is None
    w = comp.covariate_warning(None, 3.0, 1e-5, "A30-inference")
    assert w is not None and "20.1x the plain sum of op costs (0.01 ms" in w and "(|c| <= 0.50)" in w
    h = intervals.t_quantile(0.95, 10) * 0.1 * math.sqrt(12 / 11) * math.sqrt(1 + 1 / 12)
    got = comp.log_interval("time", extrapolating=True, covariate=3.0)
    assert got.half_width == pytest.approx(EXTRAPOLATION_WIDENING * h * math.sqrt(1 + 25 * 0.25))


def _strata_coverage(normalise: bool, n_groups: int, reps: int = 600, seed: int = 3) -> dict[float, float]:
    """Coverage of fresh networks per stratum c in {0, 0.5}: log errors normal with sd 0.05 sqrt(1 + 36 c^2)
    (0.05 easy, 0.158 hard), calibration scores half from each stratum, one per group."""
    rng = np.random.default_rng(seed)
    sd = {0.0: 0.05, 0.5: 0.05 * math.sqrt(1 + 36 * 0.25)}
    hits: dict[float, list[bool]] = {0.0: [], 0.5: []}
    for _ in range(reps):
        c = np.resize([0.0, 0.5], n_groups)
        e = rng.normal(0.0, [sd[x] for x in c])
        iv = intervals.log_interval(e, covariates=c if normalise else None)
        for x in hits:
            q = iv.scaled(x)
            hits[x].append(q.contains(-rng.normal(0.0, sd[x])))
    return {x: float(np.mean(v)) for x, v in hits.items()}


@pytest.mark.parametrize("n_groups", [10, 30])  # the normal rule; split conformal
def test_normalised_scores_cover_about_ninety_percent_in_each_stratum(n_groups: int) -> None:
    """About the level in each stratum; the hard one a few points short at G = 10, where r itself rests on 10
    scores (2000 draws: 91 / 86 %; at G = 30: 91 / 88 %), against 99 / 79 % for one half-width for all."""
    got = _strata_coverage(True, n_groups)
    plain = _strata_coverage(False, n_groups)
    for x, cov in got.items():
        assert 0.83 <= cov <= 0.95, (x, cov)  # 600 draws: Monte Carlo sd 1.2-1.4 points
    assert abs(got[0.5] - 0.9) < abs(plain[0.5] - 0.9) and abs(got[0.0] - 0.9) < abs(plain[0.0] - 0.9)


@pytest.mark.parametrize("n_groups", [10, 30])
def test_one_half_width_for_every_network_misses_the_level_in_a_stratum(n_groups: int) -> None:
    """The unnormalised rule: the easy stratum over-covered, the hard one under-covered."""
    got = _strata_coverage(False, n_groups)
    assert got[0.0] > 0.97 and got[0.5] < 0.85, got


def test_a_bundle_carries_its_covariates_and_an_older_one_keeps_the_plain_rule() -> None:
    c = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5] * 2
    res = [float(np.expm1(0.1 * math.sqrt(1 + 25 * x * x) * s)) for x, s in zip(c, [1] * 6 + [-1] * 6)]
    comp = Composition("inference", calibrated=True, n_networks=12, scores=layer_scores(res, res, cov_t=c, cov_e=c))
    back = Composition.from_json(comp.to_json())
    assert back.scores == comp.scores
    assert back.interval(1.0, covariate=0.5) == pytest.approx(comp.interval(1.0, covariate=0.5))
    assert back.log_interval(covariate=0.5).half_width > back.log_interval(covariate=0.0).half_width
    old = comp.to_json()
    del old["residual_covariates"]  # a bundle written before covariates were recorded
    plain = Composition.from_json(old)
    want = intervals.log_interval(intervals.log_errors(res))
    assert plain.log_interval(covariate=0.5).half_width == pytest.approx(want.half_width)
    # covariates that do not match the scores one to one are not used (written apart)
    comp.scores["pooled", "time"] = ScoreSet(res, covariates=c[:5])
    assert comp.covariates_for("time") is None


def test_the_question_covariate_is_the_log_of_the_composition_correction() -> None:
    assert intervals.question_covariate(0.8, 1.0) == pytest.approx(math.log(0.8))
    assert intervals.question_covariate(1.0, 0.0) == 0.0 and intervals.question_covariate(float("nan"), 1.0) == 0.0
    assert netval.covariate(0.8, 1.0) == pytest.approx(math.log(0.8))


@pytest.mark.parametrize("k, n", [(9, 10), (16, 18), (22, 26), (3, 7)])
def test_binomial_interval_is_clopper_pearson(k: int, n: int) -> None:
    lo, hi = netval.binomial_ci(k, n)
    assert lo == pytest.approx(stats.beta.ppf(0.05, k, n - k + 1), abs=1e-9)
    assert hi == pytest.approx(stats.beta.ppf(0.95, k + 1, n - k), abs=1e-9)


def test_binomial_interval_at_the_edges_is_closed_form() -> None:
    assert netval.binomial_ci(18, 18) == (pytest.approx(0.05 ** (1 / 18)), 1.0)
    assert netval.binomial_ci(0, 18) == (0.0, pytest.approx(1 - 0.05 ** (1 / 18)))
    with pytest.raises(ValueError, match="0 <= k <= n"):
        netval.binomial_ci(3, 2)


def test_the_coverage_note_says_how_likely_the_band_is_by_chance() -> None:
    """n = 18: only 16 or 17 covered lie in 85-95 %; P = binom.pmf(16) + binom.pmf(17) at p = 0.9."""
    p = stats.binom.pmf(16, 18, 0.9) + stats.binom.pmf(17, 18, 0.9)
    note = netval.coverage_note(17, 18)
    assert f"probability {p:.0%}" in note and "17 of 18" in note


def test_coverage_reports_its_binomial_interval_and_each_family_weighing_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule stubbed to +-0.1 (log) for every network (its own known answers are above): family a's three
    networks are off by 0, 0 and +0.5 (2 of 3 inside), family b's one by 0 (inside). Coverage 3 / 4 = 75 %,
    each family weighing 1: (2/3 + 1) / 2 = 83.3 %, and the Clopper-Pearson interval of 3 of 4."""
    import pandas as pd

    from opcost.model.composition import compose

    monkeypatch.setattr(compose, "log_interval",
                        lambda e, level=0.9, groups=None, covariates=None: intervals.LogInterval(-0.1, 0.1, 1, 1,
                                                                                                 "normal"))  # fmt: skip
    err = [0.0, 0.0, float(np.expm1(0.5)), 0.0]
    df = pd.DataFrame({"set_id": ["a1", "a2", "a3", "b1"], "model": ["a1", "a2", "a3", "b1"],
                       "family": ["a", "a", "a", "b"], "split": "model", "held_out": ["a1", "a2", "a3", "b1"],
                       "family_known": [True, True, True, False], "t_error": err, "e_error": err,
                       "predicted_t_s": 1.0, "summed_t_s": 1.0})  # fmt: skip
    got = netval.coverage(df)["time"]
    assert got["coverage_pct"] == 75.0 and got["family_weighted_coverage_pct"] == pytest.approx(250 / 3)
    lo, hi = stats.beta.ppf(0.05, 3, 2), stats.beta.ppf(0.95, 4, 1)
    assert (got["coverage_ci_lo_pct"], got["coverage_ci_hi_pct"]) == (pytest.approx(100 * lo), pytest.approx(100 * hi))
    assert got["n_families"] == 2 and "3 of 4 networks covered" in netval.coverage(df)["coverage_note"]["time"]
