"""The recommend table on known predictions: intervals carried as given, ties where 90 % intervals
overlap the best's, uncalibrated and transferred answers marked, drops said once, removals counted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opcost.model.predict import NetworkPrediction
from opcost.model.recommend import dropped_once, settings_table, summary_lines


def pred(device, clock, t, t_iv, e, e_iv, calibrated=True, clock_source=None) -> NetworkPrediction:
    return NetworkPrediction(
        model="m", input_shape=(1,), device_config=device, mode="inference", clock_mhz=clock,
        time_s=t, time_interval_s=t_iv, energy_j=e, energy_interval_j=e_iv,
        avg_power_w=None if e is None else e / t, sum_s=t, op_ids=["a"], kinds=["conv2d"],
        calls=np.array([1.0]), t_s=np.array([t]), e_j=None if e is None else np.array([e]),
        sources=["measured"], proxies=[None], calibrated=calibrated, clock_source=clock_source,
    )  # fmt: skip


@pytest.fixture
def preds():
    return [
        # 784 vs 702 MHz: 0.1 % apart in energy, intervals of +-25 %: a tie the table must call
        pred("A30", 784.0, 0.010, (0.008, 0.013), 1.000, (0.80, 1.25), clock_source="transferred"),
        pred("A30", 702.0, 0.011, (0.009, 0.014), 1.001, (0.80, 1.25), clock_source="transferred"),
        # clearly worse energy (interval disjoint from the best's), uncalibrated
        pred("T4", None, 0.040, (0.030, 0.050), 3.000, (2.60, 3.50), calibrated=False),
    ]


def test_intervals_ties_and_marks(preds):
    df = settings_table(preds)
    best = df.iloc[0]
    assert best["device_config"] == "A30" and best["clock_mhz"] == 784.0
    assert (best["time_lo_s"], best["time_hi_s"]) == (0.008, 0.013)
    assert (best["energy_lo_j"], best["energy_hi_j"]) == (0.80, 1.25)
    assert best["edp_lo_js"] == pytest.approx(0.008 * 0.80) and best["edp_hi_js"] == pytest.approx(0.013 * 1.25)
    by = {(r.device_config, r.clock_mhz if r.clock_mhz == r.clock_mhz else None): r for r in df.itertuples()}
    assert by[("A30", 702.0)].tie_energy and by[("A30", 784.0)].tie_energy and not by[("T4", None)].tie_energy
    assert by[("A30", 702.0)].tie_time and not by[("T4", None)].tie_time
    assert df.attrs["ties"]["energy"] == [{"device_config": "A30", "clock_mhz": 702.0, "energy_j": 1.001}]
    assert by[("T4", None)].marks == "uncalibrated" and by[("A30", 702.0)].marks == "clock transferred"
    lines = summary_lines(df)
    tie = [line for line in lines if line.startswith("tie for best energy: 1 other setting(s)")]
    assert len(tie) == 1 and "A30 at 702 MHz" in tie[0]
    assert any(line.startswith("uncalibrated:") for line in lines)
    # the JSON the CLI prints carries the intervals and ties
    rows = json.loads(df.to_json(orient="records"))
    assert rows[0]["energy_lo_j"] == 0.80 and rows[0]["tie_energy"] is True


def test_a_device_transferred_answer_is_marked(preds):
    p = preds[2]
    p.sources = ["transferred"] * len(p.sources)  # the cross-device model's answer: every op transferred
    p.composition = "cross-device"  # its scale and host floor, fitted on other GPUs' networks: not "uncalibrated"
    df = settings_table([p])
    assert df.loc[0, "marks"] == "device transferred"
    assert df.loc[0, "source"] == "transferred" and df.loc[0, "composition"] == "cross-device"


def test_a_transferred_composition_is_said_once_and_the_same_everywhere(preds):
    """A layer transferred from other configs is applied: the JSON, the marks and the note agree (never
    `composition_calibrated: false` beside a note saying a layer was applied)."""
    p = preds[2]
    p.composition, p.note = "transferred", "the T4-inference composition layer is transferred from A30-inference"
    assert settings_table([p]).loc[0, "marks"] == "composition transferred"
    doc = p.to_json()
    assert doc["composition"] == "transferred" and "composition_calibrated" not in doc
    assert preds[0].to_json()["composition"] == "calibrated"


def test_max_slowdown_counts_what_it_removes(preds):
    df = settings_table(preds, max_slowdown=1.5)
    assert len(df) == 2 and df.attrs["removed_by_max_slowdown"] == 1
    assert "--max-slowdown removed 1 setting(s) slower than allowed" in summary_lines(df)


def test_a_device_dropped_at_every_clock_is_said_once(preds):
    drops = [{"device_config": "RTX2080Ti", "clock_mhz": float(c), "needed_bytes": 14 * 2**30,
              "device_memory_bytes": 11 * 2**30} for c in range(300, 2001, 100)]  # fmt: skip
    assert len(drops) == 18
    (once,) = dropped_once(drops)
    assert once["settings"] == 18 and "clock_mhz" not in once
    lines = summary_lines(settings_table(preds, dropped=drops))
    assert [line for line in lines if "RTX2080Ti" in line] == [
        "dropped RTX2080Ti: the step needs 14.00 GiB, the device has 11.00 GiB (18 setting(s))"
    ]
