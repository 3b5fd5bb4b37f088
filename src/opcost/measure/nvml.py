"""The NVML calls opcost makes, on one device, behind one small class.

`lib` is the real `pynvml` module (nvidia-ml-py) or, in unit tests, a fake with the same names that
replays recorded readings. Nothing else in opcost imports pynvml, so the fake sits exactly at the
hardware boundary and every line above it is the code that runs on a GPU node.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from opcost.errors import OpcostError
from opcost.measure.records import PowerSample


def load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a pinned dependency
        raise OpcostError("nvidia-ml-py is not installed: pip install nvidia-ml-py") from exc
    module: ModuleType = pynvml  # untyped: the library's calls are Any to mypy (ignore_missing_imports)
    return module


class Nvml:
    """One NVIDIA device through NVML. Values in SI units (W, J, MHz, degrees C)."""

    def __init__(self, index: int = 0, lib: Any = None) -> None:
        self.lib = lib if lib is not None else load_pynvml()
        try:
            self.lib.nvmlInit()
        except self.lib.NVMLError as exc:
            raise OpcostError(f"NVML is not available ({exc}): no NVIDIA driver on this machine?") from exc
        self.closed = False
        self.index = index
        try:
            self.handle = self.lib.nvmlDeviceGetHandleByIndex(index)
        except self.lib.NVMLError as exc:
            self.close()
            raise OpcostError(f"no NVIDIA device at index {index} ({exc})") from exc
        self._instant_ok = True

    def close(self) -> None:
        """Shut NVML down, once: every call after this fails, as it does in the real library."""
        if self.closed:
            return
        self.closed = True
        try:
            self.lib.nvmlShutdown()
        except self.lib.NVMLError:
            pass

    def _err(self, exc: Exception) -> int:
        return int(getattr(exc, "value", -1))

    # -- identity ---------------------------------------------------------------------------
    def name(self) -> str:
        n = self.lib.nvmlDeviceGetName(self.handle)
        return n.decode() if isinstance(n, bytes) else str(n)

    def uuid(self) -> str:
        """The device's UUID (GPU-...): what names its lock and its saved state, whatever its index."""
        u = self.lib.nvmlDeviceGetUUID(self.handle)
        return u.decode() if isinstance(u, bytes) else str(u)

    def driver_version(self) -> str:
        v = self.lib.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)

    # -- readings ---------------------------------------------------------------------------
    def energy_j(self) -> float | None:
        """Total energy since driver load (Volta and newer), or None where the GPU lacks the counter."""
        try:
            return float(self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0)
        except self.lib.NVMLError as exc:
            if self._err(exc) == self.lib.NVML_ERROR_NOT_SUPPORTED:
                return None
            raise

    def has_energy_counter(self) -> bool:
        return self.energy_j() is not None

    def power_w(self) -> tuple[float, str]:
        """Instant power where the GPU reports it (field NVML_FI_DEV_POWER_INSTANT), else the
        averaged `nvmlDeviceGetPowerUsage` (a 1 s moving average on A100/H100)."""
        if self._instant_ok:
            try:
                (fv,) = self.lib.nvmlDeviceGetFieldValues(self.handle, [self.lib.NVML_FI_DEV_POWER_INSTANT])
                if fv.nvmlReturn == self.lib.NVML_SUCCESS:
                    return fv.value.uiVal / 1000.0, "instant"
            except self.lib.NVMLError:
                pass
            self._instant_ok = False
        return self.lib.nvmlDeviceGetPowerUsage(self.handle) / 1000.0, "average"

    def clock_mhz(self, which: str = "sm") -> int:
        kind = self.lib.NVML_CLOCK_SM if which == "sm" else self.lib.NVML_CLOCK_MEM
        return int(self.lib.nvmlDeviceGetClockInfo(self.handle, kind))

    def sample(self) -> PowerSample:
        """One row of the raw power log."""
        power, power_kind = self.power_w()
        util = self.lib.nvmlDeviceGetUtilizationRates(self.handle)
        return {
            "timestamp": time.time(),
            "power_w": power,
            "power_kind": power_kind,
            "energy_j": self.energy_j(),
            "sm_clock_mhz": self.clock_mhz("sm"),
            "mem_clock_mhz": self.clock_mhz("mem"),
            "temperature_c": float(self.lib.nvmlDeviceGetTemperature(self.handle, self.lib.NVML_TEMPERATURE_GPU)),
            "utilization_pct": float(util.gpu),
            "throttle_reasons": int(self.lib.nvmlDeviceGetCurrentClocksEventReasons(self.handle)),
        }

    # -- knobs ------------------------------------------------------------------------------
    def supported_graphics_clocks(self) -> list[int]:
        """Core clocks supported at any memory clock, ascending."""
        clocks: set[int] = set()
        for mem in self.lib.nvmlDeviceGetSupportedMemoryClocks(self.handle):
            clocks.update(int(c) for c in self.lib.nvmlDeviceGetSupportedGraphicsClocks(self.handle, mem))
        return sorted(clocks)

    def power_limit_range_w(self) -> tuple[float, float]:
        lo, hi = self.lib.nvmlDeviceGetPowerManagementLimitConstraints(self.handle)
        return lo / 1000.0, hi / 1000.0

    def power_limit_w(self) -> float:
        return float(self.lib.nvmlDeviceGetPowerManagementLimit(self.handle) / 1000.0)

    def lock_clocks(self, mhz: int) -> None:
        self.lib.nvmlDeviceSetGpuLockedClocks(self.handle, int(mhz), int(mhz))

    def reset_clocks(self) -> None:
        self.lib.nvmlDeviceResetGpuLockedClocks(self.handle)

    def set_power_limit(self, watts: float) -> None:
        self.lib.nvmlDeviceSetPowerManagementLimit(self.handle, int(round(watts * 1000)))

    def is_permission_error(self, exc: Exception) -> bool:
        return isinstance(exc, self.lib.NVMLError) and self._err(exc) == self.lib.NVML_ERROR_NO_PERMISSION
