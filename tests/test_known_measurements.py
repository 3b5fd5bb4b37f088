"""Known answers at the hardware boundary: a fake NVML (tests/fake_nvml.py) whose card draws a known power,
a real campaign on the CPU against it, and the evaluate stage's arithmetic on what the campaign wrote.
Expected figures follow from the trace's power alone, never from the code's own output."""

from __future__ import annotations

import pandas as pd
import pytest

from builders import CONV, WATTS, steady_trace
from fake_nvml import FakeNvml
from opcost.data.evaluate import OP_KEYS, evaluate_campaign_rows
from opcost.measure.campaign import Campaign, Unit, make_plan
from opcost.measure.timing import FLAG_COUNTER_STUCK, FLAG_COUNTER_STUCK_NO_SAMPLES, FLAG_IMPLAUSIBLE, window_energy
from opcost.params.profile import CampaignParams


def run_campaign(tmp_path, fake: FakeNvml, trials: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    c = CampaignParams(name="k", device="cpu", modes=("inference",), sets=("x",), networks=False, trials=trials,
                       min_time_s=0.01, window_s=0.2, energy_source="nvml", sample_interval_s=0.01,
                       max_instances=4, instance_budget_mb=8)  # fmt: skip
    plan = make_plan(c, [Unit("op", CONV.op_id, "inference", CONV.kind, spec=CONV)])
    Campaign(plan, tmp_path / "out", tmp_path / "parts", state_dir=tmp_path / "state", nvml_lib=fake).run(
        show_progress=False
    )
    return (
        pd.read_parquet(tmp_path / "out" / "timings.parquet"),
        pd.read_parquet(tmp_path / "out" / "power_samples.parquet"),
    )


@pytest.mark.slow
def test_evaluated_energy_and_power_are_the_cards(tmp_path):
    """A card at a steady 180 W: every evaluated power is 180 W, every energy per call 180 W x the time
    per call of its energy window, the thesis-style figures from the samples alike."""
    t, samples = run_campaign(tmp_path, FakeNvml(trace=steady_trace(WATTS)))
    assert (t["status"] == "ok").all() and len(t) == 2
    t["device_config"], t["phase"] = "fake", "forward"
    ev = evaluate_campaign_rows(t, samples[samples["item_type"] == "op"], "op_id", OP_KEYS + ["kind"])
    assert len(ev) == 1
    row = ev.iloc[0]
    per_call_window_s = (t["window_time_s"] / t["window_iterations"]).mean()
    assert row["p_w"] == pytest.approx(WATTS, rel=0.03)
    assert row["e_j"] == pytest.approx(WATTS * per_call_window_s, rel=0.03)
    assert row["t_s"] == pytest.approx(t["mean_s"].mean(), rel=1e-12) and row["n_trials"] == 2
    assert row["thesis_p_w"] == pytest.approx(WATTS, rel=1e-9)  # every sample reads 180 W
    assert row["thesis_e_j"] == pytest.approx(WATTS * row["t_s"], rel=1e-9)
    assert row["sigma_p_w"] == pytest.approx(0.0, abs=WATTS * 0.03)


@pytest.mark.slow
def test_a_counter_that_does_not_move_is_flagged_and_integrated_power_stands_in(tmp_path):
    """The card draws 180 W but its energy counter never moves: no SchemaError from write_part; each
    window is flagged, its energy the integral of the 180 W samples, and the campaign finishes."""
    t, samples = run_campaign(tmp_path, FakeNvml(trace=steady_trace(WATTS, counter_w=0.0)))
    assert (t["status"] == "ok").all() and len(t) == 2
    assert (t["energy_flag"] == FLAG_COUNTER_STUCK).all()
    assert t["power_w"].to_numpy() == pytest.approx([WATTS, WATTS], rel=0.1)
    assert t["energy_per_iter_j"].to_numpy() == pytest.approx(
        (WATTS * t["window_time_s"] / t["window_iterations"]).to_numpy(), rel=0.1
    )
    # the benchmark library's own warning flag and the interquartile range of the block means are kept
    assert t["timing_warnings"].notna().all() and (t["iqr_s"].notna() == (t["runs"] > 1)).all()
    healthy, _ = run_campaign(tmp_path / "ok", FakeNvml(trace=steady_trace(WATTS)))
    assert healthy["energy_flag"].isna().all()


def test_window_energy_rules():
    assert window_energy(5.0, True, 4.0, 1.0) == (5.0, None)  # the counter, when it moved
    assert window_energy(0.0, True, 4.0, 1.0) == (4.0, FLAG_COUNTER_STUCK)
    assert window_energy(-3.0, True, 4.0, 1.0) == (4.0, FLAG_COUNTER_STUCK)  # went backwards
    assert window_energy(None, True, 4.0, 1.0) == (4.0, FLAG_COUNTER_STUCK)
    assert window_energy(0.0, True, None, 1.0) == (None, FLAG_COUNTER_STUCK_NO_SAMPLES)
    assert window_energy(None, False, 4.0, 1.0) == (4.0, None)  # no counter: integrating is the method
    assert window_energy(None, False, None, 1.0) == (None, None)  # no energy source at all
    assert window_energy(5000.0, True, 4.0, 1.0) == (None, FLAG_IMPLAUSIBLE)  # 5 kW from one device
