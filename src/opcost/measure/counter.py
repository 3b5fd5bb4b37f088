"""Energy over whole updates of a device's energy counter, with a bound on each row's error.

Real energy counters do not change on every read: an H100/H200's NVML total-energy counter changes about
every 100 ms, at slightly irregular instants. A window read at arbitrary instants is off by up to one update
at each end. So a thread polls the counter while the work runs and records each change: the read that saw the
new value and the read before it, which bracket the instant of the change. A window's energy is taken between
its first and last change, (E_last - E_first) / (their time apart) being the mean power of the work, and its
error is bounded by
- the brackets of the two changes (half of each, read against their midpoints),
- the counter's resolution (1 mJ on NVML).
That bound takes a change's value to hold the energy up to the instant it became visible (the driver's
refresh); the update instants may be irregular (their jitter is recorded) without harm to it. The visit's
energy check tests that on the card: short aligned windows against a 10 s one (measure/energycheck.py).
`CounterPeriod` is measured at campaign start and after every clock or power-limit change; `window_for` sizes
a window from it: the span the bound needs plus one update gap (90th percentile) before the first change and
after the last. Design notes: docs/measuring.md.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from opcost.measure.records import PeriodRecord

ENERGY_BOUND = 0.02  # the relative error a row's energy must be within by its own bound
RESOLUTION_J = 0.001  # NVML's counter counts mJ
POLL_S = 0.0005  # the poller sleeps this long between reads (the GIL is free while it sleeps)
PERIOD_PROBE_S = 1.5  # at most this long to measure the update period
PERIOD_PROBE_UPDATES = 12  # ... or until this many updates were seen

# The update period a dry run plans a GPU campaign's windows with: an H100-class card's, as the first visit
# measured it on an H200 (counter changes every 100 ms, 10th-90th percentile 99.5-100.3 ms, largest gap 102 ms),
# and the gap between the poller's reads while ops ran there (3.8 ms: NVML reads are slow on that host). A
# campaign measures the real period at start and after each setting change.
PLANNING_PERIOD_S = {"median_s": 0.1, "p10_s": 0.0995, "p90_s": 0.1003, "max_s": 0.1025, "read_s": 0.004}

Clock = Callable[[], float]
Reader = Callable[[], "float | None"]


@dataclass(frozen=True)
class Change:
    """One observed counter update: the value seen, the read that saw it, and the read before it."""

    before_s: float
    seen_s: float
    energy_j: float

    @property
    def at_s(self) -> float:
        return (self.before_s + self.seen_s) / 2

    @property
    def width_s(self) -> float:
        return self.seen_s - self.before_s


@dataclass(frozen=True)
class CounterPeriod:
    """How often a counter changes: median, 10th and 90th percentile and largest gap between updates, and the
    median time between two of the poller's reads. `median_s` None: the counter never changed twice."""

    median_s: float | None
    p10_s: float | None
    p90_s: float | None
    max_s: float | None
    read_s: float
    updates: int

    @property
    def jitter_s(self) -> float:
        """Half the 10th-90th percentile range of the period: the uncertainty of one update's instant."""
        if self.p10_s is None or self.p90_s is None:
            return 0.0
        return (self.p90_s - self.p10_s) / 2

    def record(self) -> PeriodRecord:
        """What campaign.json and the raw power log keep of it."""
        return {
            "median_s": self.median_s,
            "p10_s": self.p10_s,
            "p90_s": self.p90_s,
            "max_s": self.max_s,
            "jitter_s": self.jitter_s,
            "read_s": self.read_s,
            "updates": self.updates,
        }


def period_from_gaps(gaps: list[float], read_gaps: list[float], updates: int) -> CounterPeriod:
    """The update period from gaps between consecutive changes, and the median gap between reads."""
    read_s = float(np.median(read_gaps)) if read_gaps else 0.0
    if len(gaps) == 0:
        return CounterPeriod(None, None, None, None, read_s, updates)
    g = np.asarray(gaps, float)
    p10, p50, p90 = (float(v) for v in np.percentile(g, [10, 50, 90]))
    return CounterPeriod(p50, p10, p90, float(g.max()), read_s, updates)


def period_from_changes(changes: list[Change], read_gaps: list[float]) -> CounterPeriod:
    """The update period of a run of observed changes (gaps between consecutive change midpoints)."""
    gaps = [b.at_s - a.at_s for a, b in zip(changes, changes[1:])]
    return period_from_gaps(gaps, read_gaps, len(changes))


class CounterPoller:
    """A thread that reads a counter every `poll_s` and keeps each change (`Change`) and the gaps between reads.

    `read` returns the counter in J (None: no reading; such reads are skipped)."""

    def __init__(self, read: Reader, poll_s: float = POLL_S, clock: Clock = time.perf_counter) -> None:
        self.read = read
        self.poll_s = poll_s
        self.clock = clock
        self.changes: list[Change] = []
        self.read_gaps: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="opcost-counter-poller", daemon=True)

    def __enter__(self) -> "CounterPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        last_value: float | None = None
        last_t: float | None = None
        while not self._stop.is_set():
            value = self.read()
            t = self.clock()
            if value is not None:
                if last_t is not None:
                    self.read_gaps.append(t - last_t)
                    if value != last_value:
                        self.changes.append(Change(last_t, t, float(value)))
                last_value, last_t = value, t
            self._stop.wait(self.poll_s)

    def count_after(self, t0: float) -> int:
        return sum(c.before_s >= t0 for c in self.changes)


def measure_period(
    read: Reader,
    seconds: float = PERIOD_PROBE_S,
    updates: int = PERIOD_PROBE_UPDATES,
    poll_s: float = POLL_S,
    clock: Clock = time.perf_counter,
) -> CounterPeriod:
    """Watch the counter for up to `seconds` (or `updates` changes) and return its update period."""
    with CounterPoller(read, poll_s, clock) as poller:
        t0 = clock()
        while clock() - t0 < seconds and len(poller.changes) < updates + 1:
            time.sleep(min(0.01, seconds / 10))
    # the first change only says where the first gap starts
    return period_from_changes(poller.changes, poller.read_gaps)


@dataclass(frozen=True)
class AlignedEnergy:
    """The mean power between the first and last counter change of a window, and its relative error bound."""

    power_w: float
    span_s: float
    energy_j: float
    updates: int
    bound: float
    end_uncertainty_s: tuple[float, float] = field(default=(0.0, 0.0))


def end_uncertainty_s(change: Change) -> float:
    """How far the instant a change's energy was counted up to may lie from the change's midpoint."""
    return change.width_s / 2


def aligned_energy(
    changes: list[Change], t0: float, t1: float, period: CounterPeriod | None, resolution_j: float = RESOLUTION_J
) -> AlignedEnergy | None:
    """Mean power over the changes seen wholly inside [t0, t1] (first to last); None with fewer than two."""
    inside = [c for c in changes if c.before_s >= t0 and c.seen_s <= t1]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    span = b.at_s - a.at_s
    energy = b.energy_j - a.energy_j
    if span <= 0 or not math.isfinite(energy) or energy <= 0:
        return None
    ua, ub = end_uncertainty_s(a), end_uncertainty_s(b)
    bound = (ua + ub) / span + resolution_j / energy
    return AlignedEnergy(energy / span, span, energy, len(inside), bound, (ua, ub))


def unaligned_bound(seconds: float, period: CounterPeriod | None) -> float:
    """The error bound of an energy read at arbitrary instants over `seconds`: each end may be stale by up to
    the largest update gap (no period known: unbounded)."""
    if period is None or period.max_s is None or seconds <= 0:
        return math.inf
    return 2 * period.max_s / seconds


def span_needed_s(period: CounterPeriod, bound: float = ENERGY_BOUND, read_s: float | None = None) -> float:
    """The span between first and last change that meets `bound` when each change is bracketed by one read gap
    (at least 1 ms: a poller shares the host with the work it measures)."""
    read = max(period.read_s if read_s is None else read_s, 0.001)
    return 2 * (read / 2) / bound


def window_for(period: CounterPeriod | None, bound: float = ENERGY_BOUND, read_s: float | None = None) -> float:
    """The window (s) that holds a span meeting `bound`: the span plus up to one update gap (90th percentile)
    before the first change and after the last. No period known (a counter that never changed twice): 0,
    the caller's own window stands."""
    if period is None or period.median_s is None or period.p90_s is None:
        return 0.0
    return span_needed_s(period, bound, read_s) + 2 * period.p90_s


def expected_window_s(period: CounterPeriod | None, bound: float = ENERGY_BOUND) -> float:
    """The window a trial typically needs: half a period to the first change, the span the bound needs rounded
    up to whole periods past it, and half a period more until the window's chunk ends after the last change.
    0 without a period."""
    if period is None or period.median_s is None:
        return 0.0
    p = period.median_s
    return p / 2 + (math.floor(span_needed_s(period, bound) / p) + 1) * p + p / 2


def bound_flag(bound: float, target: float, needed_window_s: float) -> str:
    """TIMINGS.energy_flag of a row whose energy is not within `target` by its own bound."""
    needed = f"a window of {needed_window_s:.2f} s would meet it" if math.isfinite(needed_window_s) else "no window"
    return f"energy bound {bound:.1%} above {target:.0%}: {needed}"


@dataclass(frozen=True)
class WindowEnergy:
    """What a window's counter says: energy over the window (None: no counter reading), its relative error
    bound, the span and number of the counter changes it rests on, and the window that would meet the bound."""

    energy_j: float | None
    bound: float | None
    span_s: float | None
    updates: int | None
    needed_window_s: float | None


def counter_window(
    window_s: float,
    counter_diff_j: float | None,
    changes: list[Change],
    t0: float,
    t1: float,
    period: CounterPeriod | None,
    target: float = ENERGY_BOUND,
) -> WindowEnergy:
    """A counter window's energy: the mean power between its first and last change times its length where it
    saw two changes; else the counter's plain difference, bounded by the largest update gap at each end."""
    slack = 2 * period.p90_s if period is not None and period.p90_s is not None else 0.0
    aligned = aligned_energy(changes, t0, t1, period)
    if aligned is not None:
        per_end = sum(aligned.end_uncertainty_s)
        room = target - RESOLUTION_J / aligned.energy_j
        needed = per_end / room + slack if room > 0 else math.inf
        return WindowEnergy(aligned.power_w * window_s, aligned.bound, aligned.span_s, aligned.updates, needed)
    updates = sum(c.before_s >= t0 and c.seen_s <= t1 for c in changes)
    needed = window_for(period, target) or math.inf
    return WindowEnergy(counter_diff_j, unaligned_bound(window_s, period), None, updates, needed)


PLANNING_PERIOD = CounterPeriod(**PLANNING_PERIOD_S, updates=0)
