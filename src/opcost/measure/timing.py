"""Timing one block of work, and the energy window with its proportionality check.

`time_block` uses `torch.utils.benchmark.Timer.blocked_autorange`: its `times` are per-run means of
`number_per_run` block executions, so their spread is the spread of block means, not of single
iterations (reported as such). Each block cycles through several instances with their own random
weights so the cache is not hit every time.

`measure_window` runs the block in chunks inside one synchronised window, reading the energy counter
and the clock at each chunk boundary, and runs further chunks while `more` asks for them (a window whose
counter has not yet changed often enough, opcost.measure.counter). Time must grow linearly with
iterations; a straight-line fit through the checkpoints gives R^2 and the intercept, and runs that are
not proportional are flagged. The energy checkpoints are fitted too (energy_r2), for information only:
a counter that changes every 100 ms makes them steps, so whether a row's energy holds is decided by its
error bound (counter.aligned_energy), not by that fit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch.utils import benchmark

R2_MIN = 0.99  # below this, time or energy does not grow linearly with iterations
INTERCEPT_MAX = 0.05  # |intercept| as a share of the window's total


@dataclass(frozen=True)
class TimingResult:
    instances: int  # ops per block
    number_per_run: int  # blocks per timed run
    block_means_s: tuple[float, ...]  # per-iteration time of each timed run
    total_time_s: float  # time spent in the timed runs
    has_warnings: bool = False  # torch.utils.benchmark's own flag: runs too few or too spread to trust

    @property
    def iterations(self) -> int:
        return self.instances * self.number_per_run * len(self.block_means_s)

    def stats(self) -> dict[str, float | None]:
        """Mean, median, IQR and std of the block means; no spread from a single timed run."""
        t = np.asarray(self.block_means_s)
        q1, q3 = np.percentile(t, [25, 75])
        several = len(t) > 1
        return {
            "mean_s": float(t.mean()),
            "median_s": float(np.median(t)),
            "iqr_s": float(q3 - q1) if several else None,
            "std_s": float(t.std(ddof=1)) if several else None,
        }


def time_block(block: Callable[[], None], instances: int, min_time_s: float) -> TimingResult:
    """Time `block` (which runs `instances` ops) for at least `min_time_s`; per-iteration figures."""
    # Timer defaults to num_threads=1; measure with the threads the process really uses
    timer = benchmark.Timer(stmt="block()", globals={"block": block}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=min_time_s)
    per_iter = tuple(float(t) / instances for t in m.times)
    return TimingResult(
        instances=instances,
        number_per_run=int(m.number_per_run),
        block_means_s=per_iter,
        total_time_s=float(sum(m.times) * m.number_per_run),
        has_warnings=bool(m.has_warnings),
    )


@dataclass
class WindowResult:
    iterations: int
    time_s: float
    energy_j: float | None
    checkpoints: list[tuple[int, float, float | None]] = field(default_factory=list)  # (iters, s, J)
    start_s: float = 0.0  # perf_counter at the window's start and end (the counter poller's clock)
    end_s: float = 0.0

    def fit(self, which: str) -> tuple[float, float] | None:
        """(R^2, intercept share) of a straight line through the checkpoints, time or energy."""
        pts = [(i, t if which == "time" else e) for i, t, e in self.checkpoints]
        if any(v is None for _, v in pts) or len(pts) < 3:
            return None
        x = np.array([p[0] for p in pts], float)
        y = np.array([p[1] for p in pts], float)
        slope, intercept = np.polyfit(x, y, 1)
        pred = slope * x + intercept
        ss_tot = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
        share = abs(float(intercept)) / float(y[-1]) if y[-1] else float("inf")
        return r2, share

    def proportional(self) -> bool | None:
        """Time grows linearly with iterations (None: too few checkpoints)."""
        fit = self.fit("time")
        if fit is None:
            return None
        r2, share = fit
        return r2 >= R2_MIN and share <= INTERCEPT_MAX


def measure_window(
    block: Callable[[], None],
    instances: int,
    blocks_per_chunk: int,
    chunks: int,
    sync: Callable[[], None],
    read_energy: Callable[[], float | None],
    more: Callable[[float, float], bool] | None = None,
    max_chunks: int | None = None,
) -> WindowResult:
    """Run `chunks` x `blocks_per_chunk` blocks; checkpoint time and energy after each chunk. Then, while
    `more(start, now)` (perf_counter times) is true, run further chunks, `max_chunks` in all at most."""
    sync()
    e0 = read_energy()
    t0 = time.perf_counter()
    checkpoints: list[tuple[int, float, float | None]] = [(0, 0.0, 0.0 if e0 is not None else None)]
    done = 0
    limit = max(chunks, max_chunks or chunks)
    ran = 0
    while ran < chunks or (more is not None and ran < limit and more(t0, time.perf_counter())):
        for _ in range(blocks_per_chunk):
            block()
        sync()
        ran += 1
        done += blocks_per_chunk * instances
        e = read_energy()
        checkpoints.append((done, time.perf_counter() - t0, None if e is None or e0 is None else e - e0))
    total_t = checkpoints[-1][1]
    return WindowResult(
        iterations=done,
        time_s=total_t,
        energy_j=checkpoints[-1][2],
        checkpoints=checkpoints,
        start_s=t0,
        end_s=t0 + total_t,
    )


# Why a window's energy is not its counter's difference (TIMINGS.energy_flag); null where it is.
FLAG_COUNTER_STUCK = "counter did not move: integrated power samples"
FLAG_COUNTER_STUCK_NO_SAMPLES = "counter did not move and too few power samples: no energy"
FLAG_IMPLAUSIBLE = "energy gives an implausible power: no energy"
MAX_POWER_W = 2000.0  # no single device draws more (schemas.power_col)


def window_energy(
    counter_j: float | None, has_counter: bool, integrated_j: float | None, seconds: float
) -> tuple[float | None, str | None]:
    """The energy of a window and a flag saying why it is not the counter's difference, if it is not.

    A counter that did not move over a timed window (0 J, or a reading that went backwards) is a bad
    reading, not a measurement: the window is flagged and its energy integrated from the power samples
    where there are enough of them, else left null. Either way the campaign goes on (a tool that stops
    a whole campaign for one bad window loses every measurement after it). Sources without a counter
    integrate their samples (no flag: that is how they measure)."""
    if not has_counter:
        energy, flag = integrated_j, None
    elif counter_j is not None and math.isfinite(counter_j) and counter_j > 0:
        energy, flag = counter_j, None
    else:
        energy = integrated_j
        flag = FLAG_COUNTER_STUCK if energy is not None and energy > 0 else FLAG_COUNTER_STUCK_NO_SAMPLES
    if energy is None or not math.isfinite(energy) or energy <= 0:
        return None, flag
    if seconds <= 0 or energy / seconds > MAX_POWER_W:
        return None, FLAG_IMPLAUSIBLE
    return energy, flag
