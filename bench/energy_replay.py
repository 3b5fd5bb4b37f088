"""Energy windows on a replayed real counter: the H200 probe's, old windows against counter-aligned ones.

For every op and mode of the probe whose power log holds at least two whole counter updates, a fake NVML
replays that op's counter (measure/replay.py: its update period, jitter and increments) and the campaign's own
trial code measures two trials of a CPU stand-in workload against it, twice:
- `old`: the probe's setting, a 0.2 s window in 5 chunks read at its ends (the counter's plain difference);
- `new`: the campaign's current method, windows on the counter's changes, sized to a 2 % bound.
Reported per method: the trial-to-trial spread of the energy per second (median, 90th percentile), the error
against the trace's own integral over each window, how many rows are flagged, and the window lengths.

    PYTHONPATH=src:tests python bench/energy_replay.py [--items N]

Writes reports/bench/energy_replay.json (about 2 minutes for the probe's 110 items).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import benchreport
from fake_nvml import H200_PROBE_SAMPLES, ReplayNvml
from opcost.measure import campaign as campaign_mod
from opcost.measure.counter import CounterPeriod, counter_window, measure_period
from opcost.measure.nvml import Nvml
from opcost.measure.power import NvmlEnergy
from opcost.measure.replay import CounterTrace, items_with_updates, read_power_log
from opcost.measure.timing import measure_window
from opcost.measure.workload import Workload
from opcost.params.profile import CampaignParams

NEW = CampaignParams(name="new", sets=("x",), min_time_s=0.01, window_s=0.1, chunks=3)
OLD_WINDOW_S, OLD_CHUNKS = 0.2, 5


def _block() -> None:
    sum(range(2000))


def _block_s() -> float:
    """Seconds one stand-in block takes here (so that the old window lasts its 0.2 s)."""
    t0 = time.perf_counter()
    for _ in range(200):
        _block()
    return (time.perf_counter() - t0) / 200


def period_of(trace: CounterTrace) -> CounterPeriod:
    """The replayed counter's update period, as a campaign measures it once per setting."""
    nvml = Nvml(0, lib=ReplayNvml(trace))
    try:
        return measure_period(NvmlEnergy(nvml).read_energy_j)
    finally:
        nvml.close()


def trial(trace: CounterTrace, method: str, period: CounterPeriod) -> dict[str, float | bool | None]:
    """One trial on a fresh replay (its own phase of the trace): energy per second, truth, bound, flag, window."""
    fake = ReplayNvml(trace)
    nvml = Nvml(0, lib=fake)
    source = NvmlEnergy(nvml)
    try:
        wl = Workload(block=_block, instances=1)
        if method == "new":
            seen = []
            real = campaign_mod.measure_window

            def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
                w = real(*args, **kwargs)
                seen.append(w)
                return w

            campaign_mod.measure_window = spy  # type: ignore[assignment]
            try:
                row, _ = campaign_mod._measure_trial(NEW, wl, lambda: None, source, period)
            finally:
                campaign_mod.measure_window = real  # type: ignore[assignment]
            (w,) = seen
            energy, bound, flagged = row["window_energy_j"], row["energy_bound"], row["energy_flag"] is not None
        else:
            block_s = _block_s()
            per_chunk = max(1, int(OLD_WINDOW_S / OLD_CHUNKS / block_s))
            w = measure_window(_block, 1, per_chunk, OLD_CHUNKS, lambda: None, source.read_energy_j)
            got = counter_window(w.time_s, w.energy_j, [], w.start_s, w.end_s, period, NEW.energy_bound)
            energy, bound = got.energy_j, got.bound
            flagged = bound is None or bound > NEW.energy_bound
        truth = fake.true_energy_j(w.start_s, w.end_s)
    finally:
        nvml.close()
    return {
        "power_w": None if not energy else energy / w.time_s,
        "error": None if not energy else energy / truth - 1,
        "bound": bound,
        "flagged": flagged,
        "window_s": w.time_s,
    }


def summarise(rows: list[list[dict]]) -> dict[str, float | int]:
    spread = []
    for a, b in rows:
        if a["power_w"] and b["power_w"]:
            spread.append(abs(a["power_w"] - b["power_w"]) / ((a["power_w"] + b["power_w"]) / 2))
    flat = [r for pair in rows for r in pair]
    err = np.abs([r["error"] for r in flat if r["error"] is not None])
    return {
        "items": len(rows),
        "trial_spread_median": float(np.median(spread)),
        "trial_spread_p90": float(np.percentile(spread, 90)),
        "error_median": float(np.median(err)),
        "error_p90": float(np.percentile(err, 90)),
        "error_max": float(err.max()),
        "flagged": int(sum(bool(r["flagged"]) for r in flat)),
        "rows": len(flat),
        "window_median_s": float(np.median([r["window_s"] for r in flat])),
        "window_max_s": float(max(r["window_s"] for r in flat)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=None, help="only the first N items (default: all)")
    a = ap.parse_args()
    samples = read_power_log(H200_PROBE_SAMPLES)
    items = items_with_updates(samples)[: a.items]
    report: dict[str, object] = {"source": "tests/fixtures/h200_probe/power_samples.parquet", "energy_bound": 0.02}
    rows: dict[str, list[list[dict]]] = {"old": [], "new": []}
    for item, mode in items:
        trace = CounterTrace.for_item(samples, item, mode)
        period = period_of(trace)
        for method in rows:
            rows[method].append([trial(trace, method, period), trial(trace, method, period)])
    for method, pairs in rows.items():
        report[method] = summarise(pairs)
        print(method, report[method])
    return benchreport.save(report, "energy_replay.json")


if __name__ == "__main__":
    sys.exit(main())
