"""Known answers for the composition layer's conformal intervals, per-family terms and transfer
(model/compose.py), and for interval coverage as netval reports it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcost.model import compose, netval
from opcost.model.compose import Composition, conformal_q


def test_conformal_quantile_is_the_ceil_n_plus_1_level_th_smallest_score() -> None:
    scores = np.arange(1, 20) / 100.0  # 19 scores: ceil(20 x 0.9) = 18 -> the 18th smallest
    assert conformal_q(scores) == pytest.approx(0.18)
    assert conformal_q(-scores) == pytest.approx(0.18)  # absolute scores
    assert conformal_q(np.arange(1, 10) / 10.0) == pytest.approx(0.9)  # 9 scores: the largest
    assert conformal_q(np.arange(1, 9) / 10.0) is None  # 8 scores cannot give a 90 % quantile


def test_interval_is_multiplicative_from_the_log_scores_and_never_reaches_zero() -> None:
    # relative errors r = predicted / measured - 1; scores |log(1 + r)|
    r = np.expm1(np.linspace(-0.5, 0.5, 19))  # scores 0.5, 0.444, ...: 18th smallest of |x| is 0.5
    comp = Composition("inference", calibrated=True, residuals_t=list(r), residuals_e=list(r))
    s = np.sort(np.abs(np.linspace(-0.5, 0.5, 19)))
    lo, hi = comp.interval(2.0, "time")
    assert (lo, hi) == pytest.approx((2.0 * np.exp(-s[17]), 2.0 * np.exp(s[17])))
    huge = Composition("inference", calibrated=True, residuals_t=[-0.95] * 19)  # predicted 20x too low
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
        comp = Composition("inference", calibrated=True, residuals_t=list(np.expm1(-log_ratio)))
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
    # A's two networks are not covered (the other groups' q is 0.19 in relative terms); the 19 others
    # are: for them the 2 large scores of A are among the n = 20 others (18th smallest of 20 is small)
    assert cov["n"] == 21
    assert cov["coverage_pct"] == pytest.approx(100 * 19 / 21)


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
                    residuals_t=[0.1], residuals_e=[0.2])  # fmt: skip
    b = Composition("training", {"sum": 0.8, "calls_floor": 0.4, "params_bw": 4.0, "const": 3e-3},
                    {"energy_sum": 0.7, "time": 80.0}, calibrated=True,
                    residuals_t=[-0.1], residuals_e=[0.3])  # fmt: skip
    inf = Composition("inference", calibrated=True)
    c = compose.transfer([("A", a, 1e-5, 100.0), ("B", b, 2e-5, 200.0), ("I", inf, 1.0, 1.0)], "training",
                         floor_s=4e-5, power_w=50.0)  # fmt: skip
    assert c.source == "transferred" and c.transferred_from == ["A", "B"] and not c.calibrated
    assert c.time_coef["sum"] == pytest.approx(0.9) and c.time_coef["params_bw"] == pytest.approx(3.0)
    assert c.time_coef["const"] == pytest.approx(125 * 4e-5)  # 100 and 150 floors: 125 of this floor
    assert c.energy_coef["time"] == pytest.approx(0.4 * 50.0)  # 0.4 median powers in both
    assert c.residuals_t == [0.1, -0.1]
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
                          "t_error": [2.0, 2.0] + [0.01] * 18, "e_error": np.nan})  # fmt: skip
    fam = calib.assign(split="family", held_out=calib["family"])
    cov = netval.coverage(fam, calib)["time"]
    # "big" networks see only the 18 small scores (q = log 1.01): not covered; "small" ones see 2 big
    # ones among 2 scores (their own family dropped): too few for a quantile, skipped
    assert cov["n"] == 2 and cov["coverage_pct"] == 0.0
