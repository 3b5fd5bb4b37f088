"""Cross-check of a GPU's energy counter: against its integrated instant power, and short windows on the
counter's changes against a long one.

On a constant load (a large matrix product, repeated) the energy counter's difference over the window and
the trapezoidal integral of the instant-power samples should agree; how far they do not says how far either
can be trusted (Yang et al., SC'24, found the averaged power readings of A100/H100 miss most of each
100 ms). The counter is polled alongside (measure/counter.py): its update period is recorded, and the run is
cut into consecutive short windows, each from one counter change to a later one at least `short_s` on,
whose mean power is compared with the whole run's. Each short window's error bound (from its changes'
brackets) should hold against the long window in about every case: that is the evidence that energy over
whole counter updates is as good as its bound says on this card.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import torch

from opcost.measure.counter import Change, CounterPoller, aligned_energy, period_from_changes
from opcost.measure.power import NvmlEnergy, integrate_power_j
from opcost.measure.records import EnergyCheck, ShortWindows
from opcost.measure.workload import device_sync

if TYPE_CHECKING:
    from opcost.measure.nvml import Nvml

SHORT_S = 0.3  # the short windows' span between counter changes


def short_windows(changes: list[Change], long_power_w: float, short_s: float = SHORT_S) -> ShortWindows:
    """Consecutive windows of at least `short_s` between counter changes: each one's mean power against the
    long window's, and how often its own bound held (|deviation| <= bound)."""
    devs, bounds = [], []
    start = 0
    for k in range(1, len(changes)):
        if changes[k].at_s - changes[start].at_s < short_s:
            continue
        got = aligned_energy(changes[start : k + 1], changes[start].before_s, changes[k].seen_s, None)
        if got is not None:
            devs.append(got.power_w / long_power_w - 1)
            bounds.append(got.bound)
        start = k
    d, b = np.abs(np.asarray(devs)), np.asarray(bounds)
    return {
        "short_s": short_s,
        "windows": len(devs),
        "median_abs_deviation": float(np.median(d)) if len(d) else None,
        "p90_abs_deviation": float(np.percentile(d, 90)) if len(d) else None,
        "median_bound": float(np.median(b)) if len(b) else None,
        "bound_held_share": float((d <= b).mean()) if len(d) else None,
    }


def energy_check(
    nvml: Nvml, device: str, seconds: float = 10.0, size: int = 8192, interval_s: float = 0.005
) -> EnergyCheck:
    """Run `size`x`size` matmuls on `device` for `seconds`; compare counter, integrated power and short
    counter-aligned windows."""
    source = NvmlEnergy(nvml)
    sync = device_sync(device)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    (a @ b).sum().item()  # warm-up
    sync()
    sampler = source.start_sampling(interval_s)
    with CounterPoller(source.read_energy_j) as poller:
        e0 = source.read_energy_j()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            a @ b
            n += 1
            if n % 8 == 0:
                sync()
        sync()
        t1 = time.perf_counter()
        elapsed = t1 - t0
        e1 = source.read_energy_j()
    samples = sampler.stop()
    counter = None if e0 is None or e1 is None else e1 - e0
    integrated = integrate_power_j(samples)
    gaps = [t1_["timestamp"] - t0_["timestamp"] for t0_, t1_ in zip(samples, samples[1:])]
    period = period_from_changes(poller.changes, poller.read_gaps)
    long = aligned_energy(poller.changes, t0, t1, period)
    return {
        "device": device,
        "device_name": nvml.name(),
        "driver": nvml.driver_version(),
        "matmul_size": size,
        "matmuls": n,
        "seconds": elapsed,
        "counter_energy_j": counter,
        "integrated_energy_j": integrated,
        "relative_difference": None if not counter or integrated is None else (integrated - counter) / counter,
        "counter_power_w": None if counter is None else counter / elapsed,
        "samples": len(samples),
        "power_kind": samples[0].get("power_kind") if samples else None,
        "median_sample_interval_s": sorted(gaps)[len(gaps) // 2] if gaps else None,
        "counter_period": period.record(),
        "aligned_power_w": None if long is None else long.power_w,
        "aligned_bound": None if long is None else long.bound,
        "short_windows": None if long is None else short_windows(poller.changes, long.power_w),
    }
