"""A real energy counter's record, replayed: the update instants and values a GPU's counter showed.

Built from a campaign's raw power log (power_samples.parquet), where the sampler read the counter every
few tens of milliseconds inside each energy window. Each window's changes of the counter give the energy
each update added (exact: the counter's own values) and roughly when it came (to the sampler's 25 ms).
`CounterTrace.for_item` takes one measured item (an op in one mode, all its trials), whose power is steady
while it runs: its mean power is the sum of its increments over the sum of their recorded gaps, and each
update's true gap is its increment over that power. So the replayed counter has the card's update period and
its jitter, carried by the exact increments rather than by the sampler's coarse clock, and steps as the real
one did: it changes only at update instants and holds its value in between. Its own integral
(`energy_between`) spreads each update's energy evenly over its gap: what a meter that read the card
continuously would have shown. Used by tests and benchmarks to judge window logic against a real card's
counter, never to measure.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class CounterTrace:
    """Update gaps (s) and the energy (J) each update adds, looped from `t = 0`; power readings step with
    the counter (each update's mean power, as the card's power reading did at its update instants)."""

    gaps_s: tuple[float, ...]
    increments_j: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.gaps_s) < 2 or len(self.gaps_s) != len(self.increments_j) or min(self.gaps_s) <= 0:
            raise ValueError("a counter trace needs two or more positive gaps, one increment each")

    @property
    def cycle_s(self) -> float:
        return float(sum(self.gaps_s))

    @property
    def cycle_j(self) -> float:
        return float(sum(self.increments_j))

    def _edges(self) -> tuple[list[float], list[float]]:
        return list(np.cumsum(self.gaps_s)), list(np.cumsum(self.increments_j))

    def counter_j(self, t: float) -> float:
        """The counter at `t`: the energy of every update at or before `t` (a step function)."""
        if t < 0:
            return 0.0
        cycles, rest = divmod(t, self.cycle_s)
        times, energies = self._edges()
        k = bisect.bisect_right(times, rest)
        return cycles * self.cycle_j + (energies[k - 1] if k else 0.0)

    def power_w(self, t: float) -> float:
        """The power reading at `t`: the mean power of the last update (held until the next one)."""
        rest = max(t, 0.0) % self.cycle_s
        times, _ = self._edges()
        k = bisect.bisect_right(times, rest) - 1
        return self.increments_j[k] / self.gaps_s[k]

    def energy_at(self, t: float) -> float:
        """The trace's own integral from 0 to `t`: each update's energy spread evenly over its gap."""
        if t <= 0:
            return 0.0
        cycles, rest = divmod(t, self.cycle_s)
        times, energies = self._edges()
        k = min(bisect.bisect_right(times, rest), len(self.gaps_s) - 1)  # the gap `rest` lies in
        before_t = times[k - 1] if k else 0.0
        before_e = energies[k - 1] if k else 0.0
        share = min(1.0, (rest - before_t) / self.gaps_s[k])
        return cycles * self.cycle_j + before_e + share * self.increments_j[k]

    def energy_between(self, t0: float, t1: float) -> float:
        return self.energy_at(t1) - self.energy_at(t0)

    @classmethod
    def for_item(cls, samples: pd.DataFrame, item_id: str, mode: str) -> "CounterTrace":
        """The trace of one item in one mode, from the raw power log: its windows' counter changes in order."""
        rows = samples[(samples["item_id"] == item_id) & (samples["mode"] == mode)]
        gaps: list[float] = []
        incs: list[float] = []
        for _, window in rows.groupby(["setting", "trial"], sort=True):
            w = window.sort_values("timestamp")
            e = w["energy_j"].to_numpy(float)
            t = w["timestamp"].to_numpy(float)
            changed = np.nonzero(np.diff(e) != 0)[0] + 1
            for a, b in zip(changed, changed[1:]):
                if e[b] > e[a] and t[b] > t[a]:
                    gaps.append(float(t[b] - t[a]))
                    incs.append(float(e[b] - e[a]))
        if len(gaps) < 2:
            raise ValueError(f"{item_id} {mode}: fewer than two whole counter updates in the power log")
        power = sum(incs) / sum(gaps)
        return cls(tuple(e / power for e in incs), tuple(incs))


def items_with_updates(samples: pd.DataFrame, minimum: int = 2) -> list[tuple[str, str]]:
    """(item_id, mode) of the items whose windows hold at least `minimum` whole counter updates."""
    out = []
    for (item, mode), _ in samples.groupby(["item_id", "mode"], sort=True):
        try:
            trace = CounterTrace.for_item(samples, str(item), str(mode))
        except ValueError:
            continue
        if len(trace.gaps_s) >= minimum:
            out.append((str(item), str(mode)))
    return out


def read_power_log(path: Path) -> pd.DataFrame:
    """A campaign's raw power log (Parquet, loaded as data)."""
    return pd.read_parquet(path, columns=["item_id", "mode", "setting", "trial", "timestamp", "energy_j"])
