"""Known answers for bench/net_split.py's `worst_ops`: the ops of a held-out network whose cost the fold's models
missed the most, as calls x (predicted - measured) in % of the network's measured time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench_modules import load_bench
from builders import linear_op_row
from opcost.model.basis.features import OpRecord
from opcost.model.composition.compose import Costs


def _bench():
    return load_bench("net_split")


def test_worst_ops_rank_calls_times_the_time_gap_against_the_network_time() -> None:
    """Four ops: a (2 calls, 10 us over), b (1 call, 30 us under), c (5 calls, exact), d (1 call, 5 us over,
    a proxy). Network measured at 200 us: gaps +20, -30, 0 and +5 us are +10 %, -15 %, 0 and +2.5 %; ranked by
    size b, a, d; c (no error) is never listed."""
    recs = [OpRecord(k, kind, {}, (1,), 1, {"params": 0}) for k, kind in
            (("a", "Conv2d"), ("b", "Linear"), ("c", "ReLU"), ("d", "Conv2d"))]  # fmt: skip
    measured = Costs(np.array([40e-6, 80e-6, 5e-6, 20e-6]), np.array([150.0, 120.0, 90.0, 100.0]),
                     ["measured"] * 4, [None] * 4)  # fmt: skip
    predicted = Costs(np.array([50e-6, 50e-6, 5e-6, 25e-6]), np.array([140.0, 160.0, 90.0, 100.0]),
                      ["predicted", "predicted", "predicted", "proxy"], [None] * 4)  # fmt: skip
    calls = np.array([2.0, 1.0, 5.0, 1.0])
    got = _bench().worst_ops(predicted, measured, calls, recs, 200e-6, top=4)
    assert [o["op_id"] for o in got] == ["b", "a", "d"]
    assert [o["gap_pct_of_network"] for o in got] == pytest.approx([-15.0, 10.0, 2.5])
    b = got[0]
    assert (b["kind"], b["calls"], b["source"]) == ("Linear", 1.0, "predicted")
    assert (b["predicted_us"], b["measured_us"]) == (pytest.approx(50.0), pytest.approx(80.0))
    assert (b["predicted_w"], b["measured_w"]) == (160.0, 120.0)
    assert [o["op_id"] for o in _bench().worst_ops(predicted, measured, calls, recs, 200e-6, top=2)] == ["b", "a"]


def test_kind_floors_take_the_cheapest_calls_of_the_fold_rows_only() -> None:
    """bench/net_split.py `kind_floors`: per kind, the 5 % quantile of the measured default-clock times among the
    given rows; estimated rows, rows at another clock and rows outside the fold never count, nor a kind with
    fewer than five rows. Linear rows: times 1..12 us; row 0 (1 us) estimated, row 1 (2 us) at 900 MHz, rows
    10-11 outside the fold: rows 2-9 remain, 3..10 us, whose 5 % quantile (linear) is 3 + 0.35 = 3.35 us."""
    from opcost.model.training.fit import prepare

    rows = [linear_op_row(f"op{i}", 8, 64 + i, 32, ["fam"]) | {"t_s": (i + 1) * 1e-6} for i in range(12)]
    rows[0]["estimated"] = True
    rows[1]["clock_mhz"] = 900.0
    relu = [linear_op_row(f"relu{i}", 8, 64, 32, ["fam"]) | {"kind": "ReLU", "t_s": 1e-6} for i in range(4)]
    data = prepare(pd.DataFrame(rows + relu), "inference", "A30")
    got = _bench().kind_floors(data, np.r_[0:10, 12:16])
    assert got == {"Linear": pytest.approx(3.35e-6)}
