"""Energy sources behind one interface, and the sampler that writes the raw power log.

- `nvml`: the GPU's total-energy counter (Volta and newer), read around the measured loop; a thread
  logs power samples (instant power where the GPU reports it), clocks, temperature, utilisation
  and throttle reasons.
- `nvidia-smi`: the thesis method: `nvidia-smi` logs CSV while the loop runs and energy is the mean
  logged power times the window's duration. On A100/H100 `power.draw` is a 1 s moving average, so
  this source is kept for comparison, not as the default.
- `rapl`: CPU package energy from `/sys/class/powercap/intel-rapl:N/energy_uj` where readable.
- `none`: time only; outputs say energy is absent.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from opcost.errors import OpcostError
from opcost.measure.records import PowerSample
from opcost.params.profile import ENERGY_SOURCES

if TYPE_CHECKING:
    from opcost.measure.nvml import Nvml

RAPL_ROOT = Path("/sys/class/powercap")


class EnergySource(ABC):
    """Reads a cumulative energy counter (if it has one) and one power-log row per sample."""

    name: str = "none"
    has_counter: bool = False

    def read_energy_j(self) -> float | None:
        return None

    @abstractmethod
    def sample(self) -> PowerSample | None:
        """One raw power-log row, or None if this source logs nothing."""

    def start_sampling(self, interval_s: float) -> "Sampler":
        sampler = Sampler(self, interval_s)
        sampler.start()
        return sampler

    def window_energy_j(self, samples: list[PowerSample], seconds: float) -> float | None:
        """Energy of a window from its power samples, for sources without an energy counter."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook; most sources hold nothing to release
        pass


class Sampler:
    """A thread that calls `source.sample()` every `interval_s` until stopped."""

    def __init__(self, source: EnergySource, interval_s: float) -> None:
        self.source = source
        self.interval_s = interval_s
        self.rows: list[PowerSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="opcost-power-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            row = self.source.sample()
            if row is not None:
                self.rows.append(row)
            self._stop.wait(self.interval_s)

    def stop(self) -> list[PowerSample]:
        self._stop.set()
        self._thread.join()
        row = self.source.sample()  # one closing sample, so every window has at least two
        if row is not None:
            self.rows.append(row)
        return self.rows


class NoEnergy(EnergySource):
    name = "none"

    def sample(self) -> PowerSample | None:
        return None

    def start_sampling(self, interval_s: float) -> Sampler:
        return _NullSampler(self, interval_s)


class _NullSampler(Sampler):
    def start(self) -> None:
        pass

    def stop(self) -> list[PowerSample]:
        return []


class NvmlEnergy(EnergySource):
    name = "nvml"

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.has_counter = nvml.has_energy_counter()

    def read_energy_j(self) -> float | None:
        return self.nvml.energy_j()

    def sample(self) -> PowerSample:
        return {**self.nvml.sample(), "source": self.name}

    def window_energy_j(self, samples: list[PowerSample], seconds: float) -> float | None:
        return integrate_power_j(samples)  # pre-Volta GPUs: no counter, integrate logged power


class RaplEnergy(EnergySource):
    """Sum of the CPU package domains (`intel-rapl:N`, not their sub-domains), wrap-around aware."""

    name = "rapl"
    has_counter = True

    def __init__(self, root: Path = RAPL_ROOT) -> None:
        self.domains = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
        if not self.domains:
            raise OpcostError(f"no RAPL package domain under {root}: this CPU or kernel does not expose RAPL")
        self._max = []
        for d in self.domains:
            try:
                int((d / "energy_uj").read_text())
            except (PermissionError, OSError) as exc:
                raise OpcostError(
                    f"{d / 'energy_uj'} is not readable ({exc.__class__.__name__}): RAPL needs root here"
                ) from exc
            rng = d / "max_energy_range_uj"
            self._max.append(int(rng.read_text()) if rng.exists() else 2**32)
        self._last = [self._raw(i) for i in range(len(self.domains))]
        self._total_uj = 0

    def _raw(self, i: int) -> int:
        return int((self.domains[i] / "energy_uj").read_text())

    def read_energy_j(self) -> float:
        for i in range(len(self.domains)):
            now = self._raw(i)
            delta = now - self._last[i]
            if delta < 0:  # the counter wrapped around
                delta += self._max[i]
            self._total_uj += delta
            self._last[i] = now
        return self._total_uj / 1e6

    def sample(self) -> PowerSample:
        return {"timestamp": time.time(), "energy_j": self.read_energy_j(), "source": self.name}


class NvidiaSmiEnergy(EnergySource):
    """`nvidia-smi --query-gpu ... -lms N` in a subprocess per window; energy = mean power x time."""

    name = "nvidia-smi"
    QUERY = "timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu"

    def __init__(self, index: int = 0, executable: str = "nvidia-smi") -> None:
        exe = shutil.which(executable)
        if exe is None:
            raise OpcostError(
                f"{executable} not found on PATH: the nvidia-smi energy source needs the NVIDIA driver tools"
            )
        self.exe = exe
        self.index = index

    def sample(self) -> PowerSample | None:
        return None

    def start_sampling(self, interval_s: float) -> Sampler:
        s = _SmiSampler(self, interval_s)
        s.start()
        return s

    def window_energy_j(self, samples: list[PowerSample], seconds: float) -> float | None:
        powers = [p for s in samples if (p := s.get("power_w")) is not None]
        return sum(powers) / len(powers) * seconds if powers else None


def parse_smi_line(line: str) -> PowerSample | None:
    """One CSV line of `nvidia-smi --format=csv,noheader,nounits` in NvidiaSmiEnergy.QUERY order."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 6:
        return None

    def num(v: str) -> float | None:
        try:
            return float(v)
        except ValueError:
            return None  # "[N/A]", "[Not Supported]"

    return {
        "timestamp": time.time(),
        "smi_timestamp": parts[0],
        "power_w": num(parts[1]),
        "sm_clock_mhz": num(parts[2]),
        "mem_clock_mhz": num(parts[3]),
        "temperature_c": num(parts[4]),
        "utilization_pct": num(parts[5]),
        "source": "nvidia-smi",
    }


class _SmiSampler(Sampler):
    source: NvidiaSmiEnergy

    def start(self) -> None:
        ms = max(int(self.interval_s * 1000), 1)
        cmd = [
            self.source.exe,
            f"--query-gpu={NvidiaSmiEnergy.QUERY}",
            "--format=csv,noheader,nounits",
            f"-lms={ms}",
            f"-i={self.source.index}",
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            row = parse_smi_line(line)
            if row is not None:
                self.rows.append(row)

    def stop(self) -> list[PowerSample]:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._thread.join(timeout=5)
        return self.rows


def integrate_power_j(samples: list[PowerSample]) -> float | None:
    """Trapezoidal integral of power over the samples' timestamps (J)."""
    pts = sorted((s["timestamp"], p) for s in samples if (p := s.get("power_w")) is not None)
    if len(pts) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(pts, pts[1:]))


def open_source(name: str, device: str, nvml: Nvml | None = None, rapl_root: Path = RAPL_ROOT) -> EnergySource:
    """The energy source `name` for `device`; `auto` picks nvml on CUDA, rapl (else none) on CPU."""
    if name not in ENERGY_SOURCES:
        raise OpcostError(f"unknown energy source {name!r}; valid: {', '.join(ENERGY_SOURCES)}")
    is_cuda = device.startswith("cuda")
    if name == "auto":
        if is_cuda:
            name = "nvml"
        else:
            try:
                return RaplEnergy(rapl_root)
            except OpcostError:
                return NoEnergy()
    if name == "none":
        return NoEnergy()
    if name == "rapl":
        return RaplEnergy(rapl_root)
    if name == "nvml":
        if nvml is None:
            raise OpcostError(f"energy source nvml needs an NVIDIA device; {device} has none")
        return NvmlEnergy(nvml)
    index = int(device.split(":")[1]) if ":" in device else 0
    return NvidiaSmiEnergy(index)
