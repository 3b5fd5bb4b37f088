"""Host and GPU apart: the GPU's own time per call and the host's per-call cost, from one burst of calls.

A spin kernel (`torch.cuda._sleep`) holds the GPU's stream while the host enqueues a burst of calls behind it,
between two CUDA events. The host's enqueue time over the burst is its per-call cost (it never waits for the
GPU: the stream is held); the events' elapsed time is the GPU's own time for the burst, with no gaps left by
the host (the calls run back to back once the spin ends). CUDA events were chosen over a CUDA-graph replay
(graph capture refuses ops that synchronise, allocate on the host or run autograd's own threads, which
training ops do) and over the profiler's device time (it sums kernel durations only, leaving out the
gaps between kernels that a stream really spends, and its start-up costs seconds per campaign). A burst whose
enqueue outlasted the spin (a call that synchronises, or a launch queue that filled) gives no GPU time:
the GPU may have waited for the host there.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

BURST_S = 0.005  # host time a burst aims at
MAX_BURST = 64  # blocks per burst at most (a launch queue holds about a thousand kernels)
BURSTS = 3  # the median of this many bursts
LONG_BLOCK_S = 0.02  # blocks longer than this get one burst
HOLD_MARGIN = 1.5  # the spin lasts this many times the burst's expected enqueue time (plus 2 ms)

_CYCLES_PER_S: dict[int, float] = {}


@dataclass(frozen=True)
class HostGpu:
    """Per call: the GPU's own time (None: not measurable here) and the host's cost of issuing it."""

    gpu_s: float | None
    host_s: float | None


def _cycles_per_s(device: torch.device) -> float:
    """How many `_sleep` cycles the GPU spins per second (timed once per device with CUDA events)."""
    index = device.index or 0
    if index not in _CYCLES_PER_S:
        cycles = 10_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # first call loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _CYCLES_PER_S[index] = cycles / (start.elapsed_time(end) / 1000.0)
    return _CYCLES_PER_S[index]


def burst_size(wall_per_block_s: float) -> int:
    """Blocks per burst: about BURST_S of host time, between 1 and MAX_BURST."""
    if not math.isfinite(wall_per_block_s) or wall_per_block_s <= 0:
        return 1
    return max(1, min(MAX_BURST, math.ceil(BURST_S / wall_per_block_s)))


def host_and_gpu(
    block: Callable[[], None], instances: int, device: str, wall_per_block_s: float, bursts: int = BURSTS
) -> HostGpu:
    """The GPU's time and the host's cost per call of `block` (which runs `instances` calls) on a CUDA device;
    on any other device both are None (the host does the work itself: its wall time is the measurement)."""
    if not device.startswith("cuda"):
        return HostGpu(None, None)
    dev = torch.device(device)
    n = burst_size(wall_per_block_s)
    if wall_per_block_s > LONG_BLOCK_S:  # a whole network's step: one burst says enough, three cost seconds
        bursts = 1
    hold_s = HOLD_MARGIN * n * wall_per_block_s + 0.002
    cycles = int(hold_s * _cycles_per_s(dev))
    gpu, host = [], []
    with torch.cuda.device(dev):
        for _ in range(bursts):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(cycles)
            start.record()
            h0 = time.perf_counter()
            for _ in range(n):
                block()
            h1 = time.perf_counter()
            end.record()
            end.synchronize()
            if h1 - h0 >= 0.9 * hold_s:  # the host waited on the GPU: neither figure is its own
                return HostGpu(None, None)
            calls = n * instances
            host.append((h1 - h0) / calls)
            gpu.append(start.elapsed_time(end) / 1000.0 / calls)
    return HostGpu(statistics.median(gpu), statistics.median(host))
