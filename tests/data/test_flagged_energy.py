"""A campaign row whose energy the profiler flagged (`energy_flag`) counts for time only in evaluate; a
campaign on an H200 is evaluated as device config H200."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcost.data.evaluate import OP_KEYS, device_config, evaluate_campaign_rows

FLAG = "energy window shorter than the counter's update period"


def trial_rows(flags: list[str | None]) -> pd.DataFrame:
    """Two trials of one op on an H200: 1 ms at 0.5 J (500 W) and 3 ms at 0.9 J (300 W)."""
    return pd.DataFrame(
        {
            "op_id": ["a", "a"],
            "kind": ["Conv2d", "Conv2d"],
            "device_config": ["H200", "H200"],
            "mode": ["inference", "inference"],
            "phase": ["forward", "forward"],
            "clock_mhz": [None, None],
            "power_limit_w": [None, None],
            "setting": ["default", "default"],
            "trial": [0, 1],
            "status": ["ok", "ok"],
            "mean_s": [1e-3, 3e-3],
            "std_s": [1e-5, 1e-5],
            "energy_per_iter_j": [0.5, 0.9],
            "power_w": [500.0, 300.0],
            "proportional": [False, True],
            "campaign": ["h200-probe", "h200-probe"],
            "energy_flag": pd.array(flags, dtype="string"),
        }
    )


def samples() -> pd.DataFrame:
    """The raw power log: 700 W throughout trial 0, 300 W throughout trial 1."""
    return pd.DataFrame(
        {
            "item_id": ["a"] * 6,
            "mode": ["inference"] * 6,
            "setting": ["default"] * 6,
            "trial": [0, 0, 0, 1, 1, 1],
            "power_w": [700.0] * 3 + [300.0] * 3,
        }
    )


def evaluate(flags: list[str | None]) -> pd.Series:
    out = evaluate_campaign_rows(trial_rows(flags), samples(), "op_id", OP_KEYS + ["kind"])
    assert len(out) == 1
    return out.iloc[0]


def test_unflagged_rows_keep_energy_from_both_trials():
    r = evaluate([None, None])
    assert r["t_s"] == pytest.approx(2e-3) and r["e_j"] == pytest.approx(0.7) and r["p_w"] == pytest.approx(400.0)
    assert r["thesis_p_w"] == pytest.approx(500.0)


def test_a_flagged_row_gives_time_but_no_energy_or_power():
    r = evaluate([FLAG, None])
    assert r["t_s"] == pytest.approx(2e-3) and r["n_trials"] == 2  # both trials' time stands
    assert r["e_j"] == pytest.approx(0.9) and r["p_w"] == pytest.approx(300.0)  # trial 1's energy alone
    assert r["thesis_p_w"] == pytest.approx(300.0)  # trial 0's power samples left out too
    assert r["thesis_e_j"] == pytest.approx(300.0 * 3e-3)


def test_all_rows_flagged_leave_no_energy_at_all():
    r = evaluate([FLAG, FLAG])
    assert r["t_s"] == pytest.approx(2e-3) and r["thesis_t_s"] == pytest.approx(2e-3)
    for col in ("e_j", "p_w", "thesis_e_j", "thesis_p_w", "trials_e_j", "trials_p_w", "sigma_e_j"):
        assert np.isnan(r[col]), col


def test_a_table_without_the_flag_column_flags_nothing():
    rows = trial_rows([None, None]).drop(columns=["energy_flag"])
    r = evaluate_campaign_rows(rows, samples(), "op_id", OP_KEYS + ["kind"]).iloc[0]
    assert r["e_j"] == pytest.approx(0.7)


def test_an_h200_campaign_is_device_config_h200():
    env = {"device_name": "NVIDIA H200", "nvml_device_name": "NVIDIA H200", "tf32_cudnn": True}
    assert device_config(env, "cuda:0") == "H200"
    assert device_config({**env, "tf32_cudnn": False}, "cuda:0") == "H200_no_tf32"


def test_two_campaigns_of_one_device_pool_their_trials_into_one_row():
    # the probe and a visit both measured op "a" on the H200: one evaluated row over all four trials, and each
    # trial's thesis-style power from its own campaign's samples (trial numbers repeat across campaigns)
    probe, visit = trial_rows([None, None]), trial_rows([None, None])
    visit["campaign"] = "visit-h200"
    visit["mean_s"] = [2e-3, 2e-3]
    s_probe, s_visit = samples(), samples()
    s_probe["campaign"], s_visit["campaign"] = "h200-probe", "visit-h200"
    s_visit["power_w"] = [100.0] * 6
    out = evaluate_campaign_rows(
        pd.concat([probe, visit], ignore_index=True),
        pd.concat([s_probe, s_visit], ignore_index=True),
        "op_id",
        OP_KEYS + ["kind"],
    )
    assert len(out) == 1
    r = out.iloc[0]
    assert r["n_trials"] == 4 and r["sources"] == "h200-probe,visit-h200"
    assert r["t_s"] == pytest.approx(2e-3)  # (1 + 3 + 2 + 2) / 4 ms
    assert r["thesis_p_w"] == pytest.approx((700 + 300 + 100 + 100) / 4)
