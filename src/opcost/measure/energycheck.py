"""Cross-check of a GPU's energy counter against its integrated instant power.

On a constant load (a large matrix product, repeated) the energy counter's difference over the
window and the trapezoidal integral of the instant-power samples should agree; how far they do
not says how far either can be trusted (Yang et al., SC'24, found the averaged power readings of
A100/H100 miss most of each 100 ms). Both figures are recorded, with the sampling statistics.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from opcost.measure.power import NvmlEnergy, integrate_power_j
from opcost.measure.workload import device_sync


def energy_check(
    nvml: Any, device: str, seconds: float = 10.0, size: int = 8192, interval_s: float = 0.005
) -> dict[str, Any]:
    """Run `size`x`size` matmuls on `device` for `seconds`; compare counter and integrated power."""
    source = NvmlEnergy(nvml)
    sync = device_sync(device)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    (a @ b).sum().item()  # warm-up
    sync()
    sampler = source.start_sampling(interval_s)
    e0 = source.read_energy_j()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
        if n % 8 == 0:
            sync()
    sync()
    elapsed = time.perf_counter() - t0
    e1 = source.read_energy_j()
    samples = sampler.stop()
    counter = None if e0 is None or e1 is None else e1 - e0
    integrated = integrate_power_j(samples)
    gaps = [t1["timestamp"] - t0_["timestamp"] for t0_, t1 in zip(samples, samples[1:])]
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
    }
