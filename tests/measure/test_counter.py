"""Energy over whole counter updates (opcost.measure.counter), against known answers and against a fake NVML
that replays the H200 probe's real counter record (its update period and jitter, its increments)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fake_nvml import H200_PROBE_SAMPLES, ReplayNvml
from opcost.measure import campaign as campaign_mod
from opcost.measure.counter import (
    Change,
    CounterPeriod,
    aligned_energy,
    counter_window,
    measure_period,
    period_from_changes,
    unaligned_bound,
    window_for,
)
from opcost.measure.nvml import Nvml
from opcost.measure.power import NvmlEnergy
from opcost.measure.replay import CounterTrace, items_with_updates, read_power_log
from opcost.measure.workload import Workload
from opcost.params.profile import CampaignParams


def test_aligned_energy_is_the_mean_power_between_first_and_last_change():
    # changes at midpoints 0.1, 0.2, 0.3 s (each bracketed by 2 ms), 40 J apart: 400 W
    changes = [Change(0.099, 0.101, 100.0), Change(0.199, 0.201, 140.0), Change(0.299, 0.301, 180.0)]
    period = CounterPeriod(0.1, 0.09, 0.11, 0.12, 0.001, 3)
    got = aligned_energy(changes, 0.0, 0.5, period, resolution_j=0.001)
    assert got is not None
    assert got.power_w == pytest.approx(400.0) and got.span_s == pytest.approx(0.2) and got.updates == 3
    # per end: half its 2 ms bracket; plus 1 mJ of 80 J
    assert got.bound == pytest.approx(0.001 * 2 / 0.2 + 0.001 / 80.0)
    # a change bracketed across the window's start is not inside it
    assert aligned_energy(changes, 0.1, 0.5, period).updates == 2  # type: ignore[union-attr]
    assert aligned_energy(changes, 0.15, 0.25, period) is None


def test_period_and_window_sizing_known_answers():
    changes = [Change(t - 0.001, t + 0.001, 10.0 * i) for i, t in enumerate([0.0, 0.1, 0.2, 0.35, 0.45])]
    p = period_from_changes(changes, [0.001, 0.001, 0.003])
    assert p.median_s == pytest.approx(0.1) and p.max_s == pytest.approx(0.15) and p.updates == 5
    assert p.p10_s == pytest.approx(0.1) and p.p90_s == pytest.approx(0.135)
    assert p.jitter_s == pytest.approx(0.0175) and p.read_s == pytest.approx(0.001)
    # span for 2 %: 2 x (read/2) / 0.02, the read gap at least 1 ms; window: span + two 90th-percentile gaps
    assert window_for(p, 0.02) == pytest.approx(2 * 0.0005 / 0.02 + 2 * 0.135)
    assert window_for(p, 0.02, read_s=0.004) == pytest.approx(2 * 0.002 / 0.02 + 2 * 0.135)
    assert window_for(None) == 0.0
    # read at arbitrary instants, each end may be stale by the largest gap
    assert unaligned_bound(0.2, p) == pytest.approx(2 * 0.15 / 0.2)
    assert math.isinf(unaligned_bound(0.2, None))


def test_counter_window_falls_back_to_the_plain_difference_with_its_bound():
    p = CounterPeriod(0.1, 0.095, 0.113, 0.12, 0.001, 10)
    w = counter_window(0.2, 80.0, [], 0.0, 0.2, p, 0.02)
    assert w.energy_j == 80.0 and w.span_s is None and w.updates == 0
    assert w.bound == pytest.approx(1.2)  # 2 x 120 ms / 200 ms
    assert w.needed_window_s == pytest.approx(window_for(p, 0.02))


@pytest.fixture(scope="module")
def probe_samples() -> pd.DataFrame:
    return read_power_log(H200_PROBE_SAMPLES)


def test_replayed_trace_has_the_probe_s_update_period(probe_samples):
    items = items_with_updates(probe_samples)
    gaps = np.concatenate([CounterTrace.for_item(probe_samples, i, m).gaps_s for i, m in items])
    # the probe's README: the counter changes about every 100 ms on that card
    assert 0.09 <= float(np.median(gaps)) <= 0.11 and len(items) >= 100


def _probe_items(samples: pd.DataFrame, k: int) -> list[tuple[str, str]]:
    """k items spread over the probe's range of power (lowest to highest mean power)."""
    items = items_with_updates(samples, minimum=3)
    power = [CounterTrace.for_item(samples, i, m) for i, m in items]
    order = np.argsort([t.cycle_j / t.cycle_s for t in power])
    return [items[j] for j in order[np.linspace(0, len(order) - 1, k).astype(int)]]


def _replayed_trial(trace: CounterTrace, campaign: CampaignParams, monkeypatch) -> tuple[dict, float]:
    """One trial measured by the campaign code on a replayed counter: the row's columns and the trace's own
    integral over the energy window (a spy on measure_window gives the window's start and end)."""
    fake = ReplayNvml(trace)
    nvml = Nvml(0, lib=fake)
    source = NvmlEnergy(nvml)
    seen = []
    real = campaign_mod.measure_window

    def spy(*args, **kwargs):
        w = real(*args, **kwargs)
        seen.append(w)
        return w

    monkeypatch.setattr(campaign_mod, "measure_window", spy)
    period = measure_period(source.read_energy_j)
    wl = Workload(block=lambda: sum(range(2000)) and None, instances=1)
    measured, _ = campaign_mod._measure_trial(campaign, wl, lambda: None, source, period)
    (w,) = seen
    nvml.close()
    return measured, fake.true_energy_j(w.start_s, w.end_s)


@pytest.mark.slow
def test_windows_on_the_replayed_h200_counter_are_within_2_percent_of_its_integral(probe_samples, monkeypatch):
    c = CampaignParams(name="replay", sets=("x",), min_time_s=0.01, window_s=0.05, chunks=5)
    for item, mode in _probe_items(probe_samples, 6):
        trace = CounterTrace.for_item(probe_samples, item, mode)
        row, truth = _replayed_trial(trace, c, monkeypatch)
        err = abs(row["window_energy_j"] / truth - 1)
        assert row["energy_flag"] is None, (item, mode, row["energy_flag"])
        assert row["energy_bound"] <= 0.02 and err <= 0.02, (item, mode, err, row["energy_bound"])
        assert err <= row["energy_bound"] + 1e-9  # the row's own bound holds
        assert row["window_time_s"] <= 1.0 and row["counter_updates"] >= 2


def test_the_probe_s_own_setting_is_flagged(probe_samples):
    # the probe read the counter at the ends of a 0.2 s window, not on its changes: each end may be a whole
    # update stale, so no 0.2 s window of that card can be trusted to 2 %
    items = items_with_updates(probe_samples)
    gaps = np.concatenate([CounterTrace.for_item(probe_samples, i, m).gaps_s for i, m in items])
    changes = []
    t = 0.0
    for g in gaps:
        t += g
        changes.append(Change(t, t, t))
    period = period_from_changes(changes, [0.0005])  # our poller reads every 0.5 ms
    w = counter_window(0.2, 100.0, [], 0.0, 0.2, period, 0.02)
    assert w.bound is not None and w.bound > 0.02 and w.needed_window_s is not None and w.needed_window_s <= 1.0
