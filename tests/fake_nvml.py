"""A fake NVML library (the hardware boundary only) that replays a trace of readings.

It has the names of `pynvml` that `opcost.measure.nvml.Nvml` calls. Readings come from a trace of
(seconds, energy_mJ, power_mW, sm_MHz, mem_MHz, temp_C, util_%, reasons) rows, replayed against
the wall clock since the fake was created and linearly interpolated, so an energy window of t
seconds sees the energy the trace accumulates in t seconds. Knob calls are recorded, and
`deny_knobs` makes them fail with NVML_ERROR_NO_PERMISSION like a non-root user's would.

The trace in tests/data/nvml_trace.json is synthetic (no GPU was available when it was written):
a card idling at ~60 W that steps to ~250 W under load, with 1410 MHz clocks. Replace it with a
trace recorded on a real GPU when one is at hand (see the README, "Measuring on a GPU").
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

TRACE = Path(__file__).parent / "data" / "nvml_trace.json"


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    NVML_SUCCESS = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
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
    ) -> None:
        self.trace = trace if trace is not None else json.loads(TRACE.read_text())["readings"]
        self.energy_counter = energy_counter
        self.instant_power = instant_power
        self.deny_knobs = deny_knobs
        self.graphics_clocks = list(graphics_clocks)
        self.power_range_w = power_range_w
        self.power_limit_mw = int(power_limit_w * 1000)
        self.locked: tuple[int, int] | None = None
        self.calls: list[tuple] = []
        self.t0 = time.monotonic()
        self.initialised = False

    # -- replay ---------------------------------------------------------------------------
    def _at(self, col: int) -> float:
        t = time.monotonic() - self.t0
        tr = self.trace
        span = tr[-1][0]
        base = 0.0
        if t > span:  # beyond the trace: repeat its last segment's rates (energy keeps growing)
            cycles = int(t // span)
            e_per_cycle = tr[-1][1] - tr[0][1]
            t -= cycles * span
            base = cycles * e_per_cycle if col == 1 else 0.0
        for (t0, *a), (t1, *b) in zip(tr, tr[1:]):
            if t0 <= t <= t1:
                w = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
                return base + a[col - 1] + w * (b[col - 1] - a[col - 1])
        return base + tr[-1][col]

    # -- pynvml API -----------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "Fake GPU (replayed trace)"

    def nvmlSystemGetDriverVersion(self) -> str:
        return "0.0-fake"

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:
        if not self.energy_counter:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(self._at(1))

    def nvmlDeviceGetFieldValues(self, h: str, fields: list[int]) -> list:
        ok = self.instant_power and fields == [self.NVML_FI_DEV_POWER_INSTANT]
        value = SimpleNamespace(uiVal=int(self._at(2)))
        return [SimpleNamespace(nvmlReturn=self.NVML_SUCCESS if ok else self.NVML_ERROR_NOT_SUPPORTED, value=value)]

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return int(self._at(2))

    def nvmlDeviceGetClockInfo(self, h: str, which: int) -> int:
        if which == self.NVML_CLOCK_SM and self.locked is not None:
            return self.locked[0]
        return int(self._at(3 if which == self.NVML_CLOCK_SM else 4))

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return int(self._at(5))

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=int(self._at(6)), memory=0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return int(self._at(7))

    def nvmlDeviceGetSupportedMemoryClocks(self, h: str) -> list[int]:
        return [1215]

    def nvmlDeviceGetSupportedGraphicsClocks(self, h: str, mem: int) -> list[int]:
        return list(reversed(self.graphics_clocks))

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: str) -> tuple[int, int]:
        return int(self.power_range_w[0] * 1000), int(self.power_range_w[1] * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, h: str) -> int:
        return self.power_limit_mw

    def nvmlDeviceSetGpuLockedClocks(self, h: str, lo: int, hi: int) -> None:
        self.calls.append(("lock", lo, hi))
        if self.deny_knobs:
            raise NVMLError(self.NVML_ERROR_NO_PERMISSION)
        self.locked = (lo, hi)

    def nvmlDeviceResetGpuLockedClocks(self, h: str) -> None:
        self.calls.append(("reset",))
        self.locked = None

    def nvmlDeviceSetPowerManagementLimit(self, h: str, mw: int) -> None:
        self.calls.append(("power_limit", mw))
        if self.deny_knobs:
            raise NVMLError(self.NVML_ERROR_NO_PERMISSION)
        self.power_limit_mw = mw
