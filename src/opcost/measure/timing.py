"""Timing one block of work, and the energy window with its proportionality check.

`time_block` uses `torch.utils.benchmark.Timer.blocked_autorange`: its `times` are per-run means of
`number_per_run` block executions, so their spread is the spread of block means, not of single
iterations (reported as such). Each block cycles through several instances with their own random
weights so the cache is not hit every time.

`measure_window` runs the block in chunks inside one synchronised window of at least a few
seconds (on a GPU), reading the energy counter and the clock at each chunk boundary. Total time
and energy must grow linearly with iterations; a straight-line fit through the checkpoints gives
R^2 and the intercept, and runs that are not proportional are flagged.
"""

from __future__ import annotations

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
    )


@dataclass
class WindowResult:
    iterations: int
    time_s: float
    energy_j: float | None
    checkpoints: list[tuple[int, float, float | None]] = field(default_factory=list)  # (iters, s, J)

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
        fits = [f for f in (self.fit("time"), self.fit("energy")) if f is not None]
        if not fits:
            return None
        return all(r2 >= R2_MIN and share <= INTERCEPT_MAX for r2, share in fits)


def measure_window(
    block: Callable[[], None],
    instances: int,
    blocks_per_chunk: int,
    chunks: int,
    sync: Callable[[], None],
    read_energy: Callable[[], float | None],
) -> WindowResult:
    """Run `chunks` x `blocks_per_chunk` blocks; checkpoint time and energy after each chunk."""
    sync()
    e0 = read_energy()
    t0 = time.perf_counter()
    checkpoints: list[tuple[int, float, float | None]] = [(0, 0.0, 0.0 if e0 is not None else None)]
    done = 0
    for _ in range(chunks):
        for _ in range(blocks_per_chunk):
            block()
        sync()
        done += blocks_per_chunk * instances
        e = read_energy()
        checkpoints.append((done, time.perf_counter() - t0, None if e is None or e0 is None else e - e0))
    total_t = checkpoints[-1][1]
    return WindowResult(iterations=done, time_s=total_t, energy_j=checkpoints[-1][2], checkpoints=checkpoints)
