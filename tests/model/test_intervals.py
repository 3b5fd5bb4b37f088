"""Known answers for the interval rules of model/composition/intervals.py: exact small cases with hand-computed Student
t quantiles, and coverage of fresh draws on synthetic normal log errors, by group count, against the old fallback and
planted bugs (z for t, no sqrt(1 + 1/G), groups ignored)."""

from __future__ import annotations

import numpy as np
import pytest

from builders import layer_scores
from opcost.model.composition import intervals
from opcost.model.composition.compose import Composition

# t_{0.95, df} from a table (not from the code under test)
T95 = {
    1: 6.313752,
    2: 2.919986,
    3: 2.353363,
    4: 2.131847,
    5: 2.015048,
    6: 1.943180,
    7: 1.894579,
    8: 1.859548,
    9: 1.833113,
    10: 1.812461,
    12: 1.782288,
    15: 1.753050,
    17: 1.739607,
    18: 1.734064,
    30: 1.697261,
}
T975 = {1: 12.706205, 2: 4.302653, 5: 2.570582, 10: 2.228139, 30: 2.042272}
Z95 = 1.644854


@pytest.mark.parametrize("df", sorted(T95))
def test_t_quantile_matches_the_table(df: int) -> None:
    assert intervals.t_quantile(0.95, df) == pytest.approx(T95[df], abs=1e-6)


@pytest.mark.parametrize("df", sorted(T975))
def test_t_quantile_at_another_level_matches_the_table(df: int) -> None:
    """Odd and even df take different series (intervals._t_central): both are checked at a second level."""
    assert intervals.t_quantile(0.975, df) == pytest.approx(T975[df], abs=1e-6)


@pytest.mark.parametrize("p, df", [(0.95, 2.5), (0.95, 0), (0.5, 3), (1.0, 3)])
def test_t_quantile_refuses_what_its_series_cannot_answer(p: float, df: float) -> None:
    with pytest.raises(ValueError, match="whole df"):
        intervals.t_quantile(p, df)


def test_normal_interval_by_hand_with_groups_of_unequal_size() -> None:
    """Errors 0 (a), 0.2 (b), 0.1 and 0.3 (c). Group means 0, 0.2, 0.2: m = 0.133333, s_b^2 = 0.013333;
    within c: deviations +-0.1, s_w^2 = 0.02 / (4 - 3) = 0.02; mean(1/n_g) = 5/6.
    v = 0.013333 x 4/3 + 0.02 x 1/6 = 0.021111; h = 2.919986 x 0.145297 = 0.424264."""
    m, h = intervals.normal_interval([0.0, 0.2, 0.1, 0.3], groups=["a", "b", "c", "c"])
    assert (m, h) == pytest.approx((0.133333, 0.424264), abs=1e-6)
    iv = intervals.log_interval([0.0, 0.2, 0.1, 0.3], groups=["a", "b", "c", "c"])
    # bounds on log(measured / predicted): the errors are log(predicted / measured), so the centre is -m
    assert (iv.lo, iv.hi, iv.n, iv.groups, iv.rule) == (pytest.approx(-0.557597, abs=1e-6),
                                                         pytest.approx(0.290931, abs=1e-6), 4, 3, "normal")  # fmt: skip


def test_one_score_per_group_is_the_textbook_prediction_interval() -> None:
    e = np.array([0.05, -0.02, 0.11, 0.07, 0.01])  # 5 groups of one: xbar +- t_{0.95, 4} s sqrt(1 + 1/5)
    m, h = intervals.normal_interval(e)
    assert m == pytest.approx(0.044) and h == pytest.approx(T95[4] * np.std(e, ddof=1) * np.sqrt(1.2))


def test_the_rule_follows_the_number_of_groups() -> None:
    """Conformal where its 90 % quantile is not the largest score (19 groups and more), the normal rule from 2
    groups up to there, the fallback below."""
    assert intervals.min_conformal_groups(0.9) == 19 and intervals.min_conformal_groups(0.8) == 9
    e = np.linspace(-0.1, 0.5, 18)
    assert intervals.log_interval(np.append(e, 0.3)).rule == "conformal"  # 19 groups of one
    assert intervals.log_interval(e).rule == "normal"  # 18 groups of one: the conformal quantile is the largest
    assert intervals.log_interval(e, groups=[f"m{i // 2}" for i in range(18)]).rule == "normal"  # 9 groups
    assert intervals.log_interval(e, groups=[f"m{i // 3}" for i in range(18)]).rule == "normal"  # 6 groups
    one = intervals.log_interval(e, groups=["m"] * 18)  # one group: no spread between groups to estimate
    assert one.rule == "fallback" and one.hi == pytest.approx(0.5) and one.lo == pytest.approx(-0.5)
    floor = intervals.log_interval([0.01])
    assert floor.rule == "fallback" and floor.hi == pytest.approx(np.log1p(intervals.UNCALIBRATED_HALF_WIDTH))
    empty = intervals.log_interval([np.nan])
    assert empty.n == 0 and empty.rule == "fallback"


def test_a_biased_layer_gets_an_asymmetric_interval_that_survives_the_bundle() -> None:
    """A layer that over-predicts by ~10 % (errors log 1.1 +- a little): the interval of measured / predicted
    is centred near 1 / 1.1, below the prediction, and reads back the same from the bundle's JSON."""
    r = list(np.expm1(np.log(1.1) + np.array([-0.02, 0.01, 0.02, -0.01, 0.0])))  # predicted / measured - 1
    comp = Composition("inference", calibrated=True, scores=layer_scores(r, r))
    lo, hi = comp.interval(1.0, "time")
    assert hi < 1.0 and np.sqrt(lo * hi) == pytest.approx(1 / 1.1, rel=1e-3)
    assert Composition.from_json(comp.to_json()).interval(1.0, "time") == pytest.approx((lo, hi))
    wide = comp.interval(1.0, "time", extrapolating=True)  # widened about the same centre
    assert np.sqrt(wide[0] * wide[1]) == pytest.approx(np.sqrt(lo * hi)) and wide[0] < lo and wide[1] > hi


def _simulate(
    n_groups: int, rule, reps: int = 4000, sd_between: float = 0.1, sd_within: float = 0.04, bias: float = 0.05,
    sizes: tuple[int, ...] = (1, 2, 3), seed: int = 7,
) -> tuple[float, float]:  # fmt: skip
    """Coverage of a fresh network of a new group and median full width, of intervals from `n_groups` groups of
    held-out errors log(predicted / measured) = bias + group effect + own deviation, all normal."""
    rng = np.random.default_rng(seed)
    hit, width = np.zeros(reps, bool), np.zeros(reps)
    for k in range(reps):
        n = rng.choice(sizes, n_groups)
        b = rng.normal(bias, sd_between, n_groups)
        e = np.repeat(b, n) + rng.normal(0, sd_within, n.sum())
        g = np.repeat(np.arange(n_groups), n).astype(str)
        fresh = -(rng.normal(bias, sd_between) + rng.normal(0, sd_within))  # log(measured / predicted)
        lo, hi = rule(e, g)
        hit[k], width[k] = lo <= fresh <= hi, np.exp(hi) - np.exp(lo)
    return float(hit.mean()), float(np.median(width))


def _new(e: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    iv = intervals.log_interval(e, groups=g)
    return iv.lo, iv.hi


def _old(e: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """The rule before: conformal where it exists, else the largest score, at least +-30 %."""
    q = intervals.conformal_q(e, groups=g)
    q = max(np.abs(e).max(), np.log1p(0.3)) if q is None else q
    return -q, q


def _planted(kind: str):  # type: ignore[no-untyped-def]
    """The normal rule with one planted bug, written out here, to show the coverage check tells them apart."""

    def rule(e: np.ndarray, g: np.ndarray) -> tuple[float, float]:
        if kind == "groups ignored":
            g = np.arange(len(e)).astype(str)
            if len(e) >= 9:  # every score its own group: the conformal rule would take over
                q = intervals.conformal_q(e, groups=g)
                return -q, q
        labels, inv, count = np.unique(g, return_inverse=True, return_counts=True)
        G = len(labels)
        means = np.bincount(inv, weights=e) / count
        s_w2 = ((e - means[inv]) ** 2).sum() / (len(e) - G) if len(e) > G else 0.0
        sb2 = np.var(means, ddof=1)
        inflate = 1.0 if kind == "no sqrt(1 + 1/G)" else 1 + 1 / G
        quant = Z95 if kind == "z for t" else intervals.t_quantile(0.95, G - 1)
        h = quant * np.sqrt(sb2 * inflate + s_w2 * (1 - np.mean(1 / count)))
        return -means.mean() - h, -means.mean() + h

    return rule


@pytest.mark.parametrize("n_groups", [4, 5, 6, 7, 8, 12, 18])
def test_normal_rule_covers_ninety_percent_of_a_new_groups_network(n_groups: int) -> None:
    """4000 repetitions: the Monte Carlo standard error of a 90 % coverage is 0.5 %; the band is 3 of them."""
    cover, _ = _simulate(n_groups, _new)
    assert 0.885 <= cover <= 0.915, cover


def test_the_old_fallback_over_covers_where_errors_are_small() -> None:
    """Errors of a few %: the old rule's +-30 % floor covers nearly every network; the normal rule 90 %, at a
    fraction of the width."""
    old, w_old = _simulate(5, _old, reps=1500, sd_between=0.04, sd_within=0.02, bias=0.03)
    new, w_new = _simulate(5, _new, reps=1500, sd_between=0.04, sd_within=0.02, bias=0.03)
    assert old > 0.98 and 0.87 <= new <= 0.93 and w_new < 0.6 * w_old, (old, new, w_old, w_new)


@pytest.mark.parametrize(
    ("kind", "n_groups"), [("z for t", 4), ("no sqrt(1 + 1/G)", 4), ("groups ignored", 5)]
)  # fmt: skip
def test_planted_bugs_leave_the_coverage_band(kind: str, n_groups: int) -> None:
    """Each bug under-covers by more than the band of the test above allows (groups ignored: three sizes per
    model, strong model effects, so the rows are far from independent; the others: one score per group, the
    textbook case, where the within-group term's conservative degrees of freedom cannot mask them)."""
    sizes = (3,) if kind == "groups ignored" else (1,)
    sd_w = 0.02 if kind == "groups ignored" else 0.0
    bug, _ = _simulate(n_groups, _planted(kind), sizes=sizes, sd_within=sd_w)
    right, _ = _simulate(n_groups, _new, sizes=sizes, sd_within=sd_w)
    assert 0.885 <= right <= 0.915 and bug < 0.875, (kind, right, bug)


def test_from_nine_to_eighteen_groups_the_normal_rule_is_narrower_than_the_largest_score() -> None:
    """At 9 <= G < 19 a 90 % conformal quantile exists but is the largest score: it covers G / (G + 1) or more
    (conservative with several scores per group) at the width of the worst group; the normal rule covers 90 %
    at a narrower width."""
    conformal = lambda e, g: (lambda q: (-q, q))(intervals.conformal_q(e, groups=g))  # noqa: E731
    c_cov, c_width = _simulate(12, conformal, reps=2000)
    n_cov, n_width = _simulate(12, _new, reps=2000)
    assert 0.925 <= c_cov and 0.88 <= n_cov <= 0.92 and n_width < 0.85 * c_width, (c_cov, n_cov, c_width, n_width)


def test_conformal_from_nineteen_groups_covers_about_the_level() -> None:
    cover, _ = _simulate(19, _new, reps=2000)
    assert intervals.log_interval(np.arange(19.0)).rule == "conformal"
    assert 0.89 <= cover <= 0.96, cover
