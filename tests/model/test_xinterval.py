"""The per-network interval of transferred times (model/crossdevice/xinterval.py): the quantile law's known answers, its
leave-one-GPU-out coverage (a law that never saw the GPU), the share that drives it, and an answer's interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opcost.model.crossdevice import xinterval


def frame(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(xinterval.COLUMNS))


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.0, 0.5), b=st.floats(0.0, 0.3), c=st.floats(0.0, 0.6), seed=st.integers(0, 10**6))
def test_a_noiseless_linear_spread_is_recovered(a, b, c, seed):
    """Errors exactly a + b distance + c share: every quantile of them is that plane, so the law is (a, b, c)."""
    rng = np.random.default_rng(seed)
    d, s = rng.uniform(0.2, 3.0, 30), rng.uniform(0.0, 1.0, 30)
    law = xinterval.fit(frame([("g", x, y, a + b * x + c * y) for x, y in zip(d, s)]))
    assert (law["a"], law["b"], law["c"]) == pytest.approx((a, b, c), abs=1e-7)


def test_the_law_is_the_90th_percentile_and_never_narrows_with_distance_or_share():
    # 20 errors at one point: 0.01 .. 0.20; the 90 % pinball minimiser is the 18th (0.18) .. 19th value
    law = xinterval.fit(frame([("g", 1.0, 0.5, 0.01 * k) for k in range(1, 21)]))
    h = xinterval.halfwidth(law, 1.0, 0.5)
    assert 0.18 - 1e-9 <= h <= 0.19 + 1e-9
    # errors that shrink with distance and share: the slopes stay at zero (never a narrower interval)
    law = xinterval.fit(frame([("g", x, x / 3, 0.5 - 0.1 * x) for x in (0.5, 1.0, 2.0, 3.0)]))
    assert law["b"] == 0.0 and law["c"] == 0.0


def test_halfwidth_reads_old_laws_and_has_a_floor():
    assert xinterval.halfwidth({"a": 0.2, "b": 0.1}, 2.0, 0.9) == pytest.approx(0.4)  # no c: one band per GPU
    assert xinterval.halfwidth({"a": 0.2, "b": 0.1, "c": 0.5}, 2.0, 0.4) == pytest.approx(0.6)
    assert xinterval.halfwidth({"a": -1.0, "b": 0.0, "c": 0.0}, 1.0) == xinterval.MIN_HALFWIDTH


def test_coverage_scores_each_gpu_with_a_law_that_never_saw_it():
    """One point (distance 0, share 0), so each fold's law is the largest error of the other GPUs (fewer than
    ten errors: the 90 % pinball minimiser is the maximum): A faces 0.35 (2 of 2 inside), B 0.25 (its 0.35 is
    out), C 0.35 (2 of 2). A law that saw B would cover B's own 0.35."""
    f = frame([("A", 0, 0, 0.05), ("A", 0, 0, 0.25), ("B", 0, 0, 0.35), ("C", 0, 0, 0.25), ("C", 0, 0, 0.10)])
    got = xinterval.coverage(f)
    assert got["coverage_90"] == pytest.approx(4 / 5) and got["n"] == 5
    per = got["per_gpu"]
    assert {g: v["coverage_90"] for g, v in per.items()} == {"A": 1.0, "B": 0.0, "C": 1.0}
    assert per["B"]["halfwidth_pct"] == pytest.approx(100 * (math.exp(0.25) - 1), rel=1e-6)
    assert per["A"]["median_width_pct"] == pytest.approx(100 * (math.exp(0.35) - math.exp(-0.35)), rel=1e-6)
    assert got["median_halfwidth_pct"] == pytest.approx(100 * (math.exp(0.35) - 1), rel=1e-6)


def test_other_share_counts_kernel_time_outside_matrix_products():
    xk = ["linear", "conv", "bmm", "relu"]
    assert xinterval.other_share(xk, [1.0, 2.0, 3.0, 4.0], [1, 1, 2, 0.5]) == pytest.approx((2 + 2) / (1 + 2 + 6 + 2))
    assert xinterval.other_share([], [], []) == 1.0
