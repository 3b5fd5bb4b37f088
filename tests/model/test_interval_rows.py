"""Known answers for netval.interval_rows: each held-out network's own interval (the one netval.coverage
counts), so a report can name the networks outside their interval and say whether the interval was narrow or
centred away from them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from opcost.model.training import netval


def _family_split() -> pd.DataFrame:
    """Family split, time only: families a, b, c with one network each (errors 0, +10 %, -5 %), family x with
    two (+5 %, +50 %)."""
    fam = ["a", "b", "c", "x", "x"]
    return pd.DataFrame({"set_id": ["a1", "b1", "c1", "x1", "x2"], "model": ["a1", "b1", "c1", "x1", "x2"],
                         "family": fam, "split": "family", "held_out": fam, "family_known": False,
                         "t_error": [0.0, 0.1, -0.05, 0.05, 0.5], "e_error": np.nan})  # fmt: skip


def test_a_new_familys_interval_is_the_normal_rule_on_the_other_families_scores_by_hand() -> None:
    """x's networks rest on a, b, c only (never on x's own +50 %): three groups of one score, the textbook normal
    prediction interval of log(measured / predicted): centre -mean, half-width t(0.95, 2) sd sqrt(1 + 1/3)."""
    df = _family_split()
    rows = netval.interval_rows(df).set_index("set_id")
    e = np.log1p([0.0, 0.1, -0.05])  # log(predicted / measured) of a, b, c
    h = stats.t.ppf(0.95, 2) * np.std(e, ddof=1) * np.sqrt(1 + 1 / 3)
    lo, hi = -e.mean() - h, -e.mean() + h
    for s in ("x1", "x2"):
        r = rows.loc[s]
        assert (r["rule"], r["n_scores"], r["n_groups"], r["quantity"]) == ("normal", 3, 3, "time")
        assert r["low_pct"] == pytest.approx(100 * np.expm1(lo), rel=1e-9)
        assert r["high_pct"] == pytest.approx(100 * np.expm1(hi), rel=1e-9)
        assert r["width_pct"] == pytest.approx(100 * (np.exp(hi) - np.exp(lo)), rel=1e-9)
    # x2 predicted 50 % high: measured 1 / 1.5 - 1 = -33.3 % off the prediction, under the low bound (-23.3 %)
    assert rows.loc["x2", "measured_pct"] == pytest.approx(100 * (1 / 1.5 - 1))
    assert rows.loc["x2", "error_pct"] == pytest.approx(50.0)
    assert bool(rows.loc["x1", "covered"]) and not bool(rows.loc["x2", "covered"])


def test_coverage_is_the_summary_of_the_rows_and_names_the_networks_it_missed() -> None:
    df = _family_split()
    rows = netval.interval_rows(df)
    cov = netval.coverage(df)
    assert cov["time"]["n"] == len(rows) == 5
    assert cov["time"]["coverage_pct"] == pytest.approx(100 * rows["covered"].mean())
    assert cov["time"]["median_width_pct"] == pytest.approx(rows["width_pct"].median())
    missed = set(rows.loc[~rows["covered"], "set_id"])
    assert missed == {"x2"} and set(cov["missed"]["time"]) == missed
    assert "measured -33.3 % off the prediction" in cov["missed"]["time"]["x2"]
    assert "prediction error +50.0 %" in cov["missed"]["time"]["x2"]
    assert "energy" not in cov and "energy" not in cov["missed"]  # no energy measured: no energy interval


def test_every_network_covered_leaves_no_missed_list() -> None:
    df = _family_split().assign(t_error=[0.0, 0.1, -0.05, 0.05, 0.0])
    assert "missed" not in netval.coverage(df)
    assert netval.interval_rows(df.iloc[:0]).empty


def test_an_extrapolating_network_gets_the_widening_a_prediction_gets() -> None:
    """x2 flagged (`extrapolating`): its interval is the same normal interval with the half-width doubled
    about the same centre (compose.EXTRAPOLATION_WIDENING = 2, as Composition.log_interval widens a
    prediction's), which now holds its -33.3 %; x1 keeps the plain interval, and coverage counts the flag."""
    df = _family_split().assign(extrapolating=[False, False, False, False, True])
    rows = netval.interval_rows(df).set_index("set_id")
    e = np.log1p([0.0, 0.1, -0.05])
    h = stats.t.ppf(0.95, 2) * np.std(e, ddof=1) * np.sqrt(1 + 1 / 3)
    for s, k in (("x1", 1.0), ("x2", 2.0)):
        assert rows.loc[s, "low_pct"] == pytest.approx(100 * np.expm1(-e.mean() - k * h), rel=1e-9)
        assert rows.loc[s, "high_pct"] == pytest.approx(100 * np.expm1(-e.mean() + k * h), rel=1e-9)
        assert bool(rows.loc[s, "extrapolating"]) == (s == "x2")
    assert bool(rows.loc["x2", "covered"])
    cov = netval.coverage(df)
    assert cov["time"]["extrapolating"] == 1 and cov["time"]["coverage_pct"] == pytest.approx(100.0)


def test_a_network_beyond_its_calibration_covariates_is_counted_as_a_prediction_of_it_would_be() -> None:
    """Covariates (log(predicted / sum of op costs)): a, b, c at 0, 0.2, -0.1, x1 at 0.1 (inside), x2 at 1.5 (beyond
    |c| <= 0.2). x2's interval is the normalised one scaled at the edge 0.2 and doubled (flagged `extrapolating`),
    as a prediction of it is (model/prediction/answer.py); x1's is scaled at its own c and not widened."""
    from opcost.model.composition import compose, intervals

    cov = np.array([0.0, 0.2, -0.1, 0.1, 1.5])
    df = _family_split().assign(predicted_t_s=np.exp(cov), summed_t_s=1.0)
    rows = netval.interval_rows(df).set_index("set_id")
    base = intervals.log_interval(np.log1p([0.0, 0.1, -0.05]), groups=["a", "b", "c"], covariates=cov[:3])
    assert base.span == pytest.approx(0.2)
    want = {"x1": base.scaled(0.1), "x2": base.scaled(0.2).widened(compose.EXTRAPOLATION_WIDENING)}
    for s, iv in want.items():
        assert rows.loc[s, "low_pct"] == pytest.approx(100 * np.expm1(iv.lo), rel=1e-9)
        assert rows.loc[s, "high_pct"] == pytest.approx(100 * np.expm1(iv.hi), rel=1e-9)
        assert bool(rows.loc[s, "extrapolating"]) == (s == "x2")
