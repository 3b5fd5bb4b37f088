"""A fake NVML library (the hardware boundary only) that replays a trace of readings.

It has the names, signatures and constants of `pynvml` that `opcost.measure.nvml.Nvml` calls
(tests/measure/test_measure.py checks them against the real module). Like the real library, every call
fails with NVML_ERROR_UNINITIALIZED before `nvmlInit` and after the matching `nvmlShutdown`.

Readings come from a trace of (seconds, energy_mJ, power_mW, sm_MHz, mem_MHz, temp_C, util_%,
reasons) rows, replayed against the wall clock since the fake was created and linearly
interpolated, so an energy window of t seconds sees the energy the trace accumulates in t seconds.

Knobs (locked clocks, power limit) are recorded with their wall-clock time (`knob_log`), and can be
made to misbehave the way hardware does:
- `deny_knobs`: fail with NVML_ERROR_NO_PERMISSION like a non-root user's calls;
- `fail`: {knob: NVML error value}: that knob's call fails (e.g. a reset the driver refuses);
- `hooks`: {knob: callable}: called inside the knob's call after the device changed, e.g. to
  send the process a signal "during" the call; `early_hooks` alike, before the device changes
  (pynvml's wrappers are Python code around the C call: a signal can be handled there);
- `sag_mhz`: a locked clock reads that much below its lock, as a card held back by its power limit or
  temperature does (what a campaign records must be the clock read, not the one asked for);
- `state_file`: the device state (locked clocks, power limit) is kept in a JSON file, so it
  outlives the process that changed it, as a GPU's does (a run killed with SIGKILL).

The trace in tests/fixtures/nvml_trace.json is synthetic (no GPU was available when it was written):
a card idling at ~60 W that steps to ~250 W under load, with 1410 MHz clocks. Replace it with a
trace recorded on a real GPU when one is at hand (see docs/measuring.md).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

TRACE = Path(__file__).parent / "fixtures" / "nvml_trace.json"

KNOBS = ("lock", "reset", "power_limit")


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _initialised(fn: Callable) -> Callable:
    """Like the real library: a call outside nvmlInit .. nvmlShutdown fails with UNINITIALIZED."""

    @functools.wraps(fn)
    def call(self: "FakeNvml", *args: Any) -> Any:
        if self.inits <= 0:
            raise NVMLError(self.NVML_ERROR_UNINITIALIZED)
        return fn(self, *args)

    return call


class FakeNvml:
    NVML_SUCCESS = 0
    NVML_ERROR_UNINITIALIZED = 1
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_UNKNOWN = 999
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVMLError = NVMLError

    def __init__(
        self,
        trace: list[list[float]] | None = None,
        energy_counter: bool = True,
        instant_power: bool = True,
        deny_knobs: bool = False,
        graphics_clocks: tuple[int, ...] = tuple(range(210, 1411, 15)),
        power_range_w: tuple[float, float] = (100.0, 300.0),
        power_limit_w: float = 300.0,
        uuid: str = "GPU-00000000-fake-0000-0000-000000000000",
        fail: dict[str, int] | None = None,
        hooks: dict[str, Callable[[], None]] | None = None,
        early_hooks: dict[str, Callable[[], None]] | None = None,
        state_file: Path | None = None,
        name: str = "Fake GPU (replayed trace)",
        sag_mhz: int = 0,
    ) -> None:
        self.name = name  # what nvmlDeviceGetName reports (a real product name makes a table GPU)
        self.trace = trace if trace is not None else json.loads(TRACE.read_text())["readings"]
        self.energy_counter = energy_counter
        self.instant_power = instant_power
        self.deny_knobs = deny_knobs
        self.graphics_clocks = list(graphics_clocks)
        self.power_range_w = power_range_w
        self.uuid = uuid
        self.fail = dict(fail or {})
        self.hooks = dict(hooks or {})
        self.early_hooks = dict(early_hooks or {})
        self.state_file = Path(state_file) if state_file else None
        self.sag_mhz = sag_mhz
        self.power_limit_mw = int(power_limit_w * 1000)
        self.locked: tuple[int, int] | None = None
        if self.state_file is not None and self.state_file.is_file():
            saved = json.loads(self.state_file.read_text())
            self.power_limit_mw = saved["power_limit_mw"]
            self.locked = tuple(saved["locked"]) if saved["locked"] else None
        self.calls: list[tuple] = []
        self.knob_log: list[tuple[float, tuple]] = []  # (time.time() when the call returned, call)
        self.t0 = time.monotonic()
        self.inits = 0
        self.shutdowns = 0

    @property
    def initialised(self) -> bool:
        return self.inits > 0

    # -- replay ---------------------------------------------------------------------------
    def _at(self, col: int) -> float:
        t = time.monotonic() - self.t0
        tr = self.trace
        span = tr[-1][0]
        base = 0.0
        if t > span:  # beyond the trace: replay it again from the start (energy keeps growing)
            cycles = int(t // span)
            e_per_cycle = tr[-1][1] - tr[0][1]
            t -= cycles * span
            base = cycles * e_per_cycle if col == 1 else 0.0
        for (t0, *a), (t1, *b) in zip(tr, tr[1:]):
            if t0 <= t <= t1:
                w = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
                return base + a[col - 1] + w * (b[col - 1] - a[col - 1])
        return base + tr[-1][col]

    def _knob(self, name: str, *args: Any) -> None:
        """Record a knob call; fail it as configured (before the device changes)."""
        self.calls.append((name, *args))
        if self.deny_knobs:
            raise NVMLError(self.NVML_ERROR_NO_PERMISSION)
        if name in self.fail:
            raise NVMLError(self.fail[name])
        if name in self.early_hooks:
            self.early_hooks[name]()

    def _changed(self, name: str, *args: Any) -> None:
        """The device changed: persist it, log when, then run the knob's hook (still inside the call)."""
        if self.state_file is not None:
            state = {"power_limit_mw": self.power_limit_mw, "locked": list(self.locked) if self.locked else None}
            self.state_file.write_text(json.dumps(state))
        self.knob_log.append((time.time(), (name, *args)))
        if name in self.hooks:
            self.hooks[name]()

    # -- pynvml API (names and parameter names as in pynvml) -------------------------------
    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        if self.inits <= 0:
            raise NVMLError(self.NVML_ERROR_UNINITIALIZED)
        self.inits -= 1
        self.shutdowns += 1

    @_initialised
    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    @_initialised
    def nvmlDeviceGetName(self, handle: str) -> str:
        return self.name

    @_initialised
    def nvmlDeviceGetUUID(self, handle: str) -> str:
        return self.uuid

    @_initialised
    def nvmlSystemGetDriverVersion(self) -> str:
        return "0.0-fake"

    @_initialised
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.energy_counter:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(self._at(1))

    @_initialised
    def nvmlDeviceGetFieldValues(self, handle: str, fieldIds: list[int]) -> list:
        ok = self.instant_power and fieldIds == [self.NVML_FI_DEV_POWER_INSTANT]
        value = SimpleNamespace(uiVal=int(self._at(2)))
        return [SimpleNamespace(nvmlReturn=self.NVML_SUCCESS if ok else self.NVML_ERROR_NOT_SUPPORTED, value=value)]

    @_initialised
    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return int(self._at(2))

    @_initialised
    def nvmlDeviceGetClockInfo(self, handle: str, type: int) -> int:
        if type == self.NVML_CLOCK_SM and self.locked is not None:
            return self.locked[0] - self.sag_mhz
        return int(self._at(3 if type == self.NVML_CLOCK_SM else 4))

    @_initialised
    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return int(self._at(5))

    @_initialised
    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=int(self._at(6)), memory=0)

    @_initialised
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return int(self._at(7))

    @_initialised
    def nvmlDeviceGetSupportedMemoryClocks(self, handle: str) -> list[int]:
        return [1215]

    @_initialised
    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: str, memoryClockMHz: int) -> list[int]:
        return list(reversed(self.graphics_clocks))

    @_initialised
    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: str) -> tuple[int, int]:
        return int(self.power_range_w[0] * 1000), int(self.power_range_w[1] * 1000)

    @_initialised
    def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:
        return self.power_limit_mw

    @_initialised
    def nvmlDeviceSetGpuLockedClocks(self, handle: str, minGpuClockMHz: int, maxGpuClockMHz: int) -> None:
        self._knob("lock", minGpuClockMHz, maxGpuClockMHz)
        self.locked = (minGpuClockMHz, maxGpuClockMHz)
        self._changed("lock", minGpuClockMHz, maxGpuClockMHz)

    @_initialised
    def nvmlDeviceResetGpuLockedClocks(self, handle: str) -> None:
        self._knob("reset")
        self.locked = None
        self._changed("reset")

    @_initialised
    def nvmlDeviceSetPowerManagementLimit(self, handle: str, limit: int) -> None:
        self._knob("power_limit", limit)
        self.power_limit_mw = limit
        self._changed("power_limit", limit)


class ReplayNvml(FakeNvml):
    """A FakeNvml whose energy counter and power reading replay a real card's counter record
    (opcost.measure.replay.CounterTrace, from the H200 probe's raw power log): the counter changes only at
    the recorded update instants, in whole mJ, and the power reading holds between them, as on the card.
    `true_energy_j(p0, p1)` is the trace's own integral between two time.perf_counter() readings."""

    def __init__(self, counter: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.counter = counter
        self.c0 = time.perf_counter()

    def _elapsed(self) -> float:
        return time.perf_counter() - self.c0

    def true_energy_j(self, p0: float, p1: float) -> float:
        return float(self.counter.energy_between(p0 - self.c0, p1 - self.c0))

    @_initialised
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return int(self.counter.counter_j(self._elapsed()) * 1000)

    @_initialised
    def nvmlDeviceGetFieldValues(self, handle: str, fieldIds: list[int]) -> list:
        value = SimpleNamespace(uiVal=int(self.counter.power_w(self._elapsed()) * 1000))
        return [SimpleNamespace(nvmlReturn=self.NVML_SUCCESS, value=value)]

    @_initialised
    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return int(self.counter.power_w(self._elapsed()) * 1000)


H200_PROBE = Path(__file__).parent / "fixtures" / "h200_probe"  # ../shared/datasets/h200-probe, as measured
H200_PROBE_SAMPLES = H200_PROBE / "power_samples.parquet"
