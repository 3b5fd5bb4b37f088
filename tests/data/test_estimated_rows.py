"""Known answers for the training rows estimated from a device's inference rows (data/targets.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcost.data.targets import estimated_training_rows

US = 1e-6


def _row(dev: str, mode: str, phase: str, op: str, kind: str, t: float, p: float) -> dict:
    return {"device_config": dev, "mode": mode, "phase": phase, "op_id": op, "kind": kind, "t_s": t, "p_w": p,
            "e_j": t * p, "clock_mhz": np.nan, "power_limit_w": np.nan, "sigma_t_s": 0.0, "sigma_e_j": 0.0,
            "sigma_p_w": 0.0, "method": "measured", "n_trials": 3}  # fmt: skip


def _ops(dev_train: int = 30) -> pd.DataFrame:
    """REF: inference floor 10 us, forward+backward floor 100 us, work ratio 3 (conv) and 2 (add), power
    unchanged. DEV: inference floor 20 us, forward+backward floor 200 us, training power 1.5x inference."""
    rows = []
    for i in range(60):
        kind, r = ("Conv2d", 3.0) if i % 2 else ("add", 2.0)
        work = 0.0 if i < 6 else 50.0 * i  # six ops at each floor: the 2nd percentile is the floor
        op = f"op{i:02d}"
        rows.append(_row("REF", "inference", "forward", op, kind, (10 + work) * US, 100.0))
        rows.append(_row("REF", "training", "forward_backward", op, kind, (100 + r * work) * US, 100.0))
        rows.append(_row("DEV", "inference", "forward", op, kind, (20 + 2 * work) * US, 50.0))
        if i < dev_train:  # DEV measured some of them in training (floor 200 us, power 75 W)
            rows.append(_row("DEV", "training", "forward_backward", op, kind, (200 + 2 * r * work) * US, 75.0))
    return pd.DataFrame(rows)


def test_additive_estimate_keeps_the_floor_out_of_the_ratio() -> None:
    est = estimated_training_rows(_ops(), "DEV").set_index("op_id")
    assert sorted(est.index) == [f"op{i:02d}" for i in range(30, 60)]  # measured rows are never replaced
    for op, row in est.iterrows():
        i = int(op[2:])
        r = 3.0 if i % 2 else 2.0
        assert row["t_s"] == pytest.approx((200 + r * 2 * 50.0 * i) * US, rel=1e-9)
        assert row["p_w"] == pytest.approx(75.0)  # the device's own training/inference power ratio, 1.5
        assert row["e_j"] == pytest.approx(row["t_s"] * row["p_w"])
    assert (est["mode"] == "training").all() and (est["phase"] == "forward_backward").all()


def test_a_device_without_training_rows_scales_its_floor_like_the_reference() -> None:
    """Few own training rows: floor_fb = floor_inf x the reference's floor_fb / floor_inf (20 x 10 = 200 us)."""
    ops = _ops(dev_train=3)
    ops = ops[~((ops["device_config"] == "DEV") & (ops["mode"] == "training") & (ops["op_id"] < "op02"))]
    est = estimated_training_rows(ops, "DEV").set_index("op_id")
    assert est.loc["op03", "t_s"] == pytest.approx(20 * 10 * US, rel=1e-9)  # a floor op: the floor alone
    assert est.loc["op41", "t_s"] == pytest.approx((200 + 3.0 * 2 * 50.0 * 41) * US, rel=1e-9)
    assert est.loc["op41", "p_w"] == pytest.approx(75.0)  # one pair (op02): the overall median ratio
