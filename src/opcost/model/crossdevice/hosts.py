"""Host profiles: what one CPU costs per op call when it drives a GPU in eager PyTorch (model/crossdevice/hostqueue.py).

Why: host cost belongs to the measuring host, not to the GPU. The thesis timed its ops by wall clock, so
each of its hosts left a plateau per op kind (the A30's host runs a small Linear call in 27 us, the RTX
host in 73-76 us); the H200 visit recorded each op's enqueue time apart from its GPU time. Learnt per host,
a profile lets the cross-device model pair any GPU's kernel times with the host that will drive it:
- `thesis-A30`, `thesis-RTX2080Ti`: the plateau of each kind's wall-clock rows (`plateau_profile`);
- `h200-visit`: the median enqueue time per call of each kind on the H200 visit's host (`timings_profile`);
- `neusight`: NeuSight's host, which published no host times: one per-call constant, fitted on its networks;
- a user's own CPU: `opcost calibrate-host` (`calibrate`), saved as JSON under `hosts/`.
A profile holds forward costs per cross-device kind (model/crossdevice/xdevice.XKINDS) and a default for the rest.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from opcost.errors import OpcostError

REFERENCE_HOST = "h200-visit"  # the default host of a transferred answer: the newest host we measured
HOST_RANGE_S = (1e-7, 1e-2)  # a per-call host cost outside this is not one
# The CUDA launch an eager op adds on a GPU machine beyond what the dispatcher costs on the CPU alone
# (cudaLaunchKernel plus the caching allocator and stream bookkeeping): `calibrate` measures dispatch on the
# meta device, which launches nothing, and adds this. 4 us: NVIDIA quotes 2-5 us per launch for its current
# drivers, and the H200 visit's host ran a ReLU call in 19 us of which the meta-device dispatch is ~15 us.
LAUNCH_S = 4e-6
FORMAT = "opcost-host/1"


@dataclass(frozen=True)
class HostProfile:
    """A host's cost per forward call, per cross-device kind, and where it was measured."""

    name: str
    per_call_s: dict[str, float]  # xkind -> seconds per forward call
    default_s: float  # kinds the profile did not measure
    source: str
    counts: dict[str, int] = field(default_factory=dict)  # xkind -> rows behind its cost

    def cost(self, xkind: str) -> float:
        return float(self.per_call_s.get(xkind, self.default_s))

    def costs(self, xkinds: Sequence[str]) -> np.ndarray:
        return np.array([self.cost(x) for x in xkinds], float)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "per_call_s": dict(sorted(self.per_call_s.items())),
            "default_s": self.default_s,
            "source": self.source,
            "counts": dict(sorted(self.counts.items())),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "host profile") -> "HostProfile":
        """Values checked: each cost a finite number of seconds within HOST_RANGE_S."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise OpcostError(f"{where}: not an opcost host profile (expected format {FORMAT!r})")
        lo, hi = HOST_RANGE_S
        costs = {**d.get("per_call_s", {}), "default": d.get("default_s")}
        for k, v in costs.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not (lo <= float(v) <= hi):
                raise OpcostError(f"{where}: per-call cost of {k!r} is {v!r}, expected seconds in [{lo:g}, {hi:g}]")
        per = {str(k): float(v) for k, v in d.get("per_call_s", {}).items()}
        return cls(str(d.get("name", "")), per, float(d["default_s"]), str(d.get("source", "")),
                   {str(k): int(v) for k, v in d.get("counts", {}).items()})  # fmt: skip


def uniform(name: str, per_call_s: float, source: str) -> HostProfile:
    return HostProfile(name, {}, float(per_call_s), source)


def _from_medians(
    name: str, groups: dict[str, np.ndarray], source: str, stat: Callable[[np.ndarray], float]
) -> HostProfile:
    per = {k: float(stat(v)) for k, v in groups.items() if len(v)}
    if not per:
        raise OpcostError(f"host profile {name}: no rows to learn it from ({source})")
    return HostProfile(name, per, float(np.median(list(per.values()))), source, {k: len(v) for k, v in groups.items()})


def plateau_profile(name: str, xkinds: np.ndarray, t_s: np.ndarray, min_rows: int, source: str) -> HostProfile:
    """From wall-clock op rows of one host: per kind with at least `min_rows` rows, the plateau its small
    calls sit on (data/floors.device_floor, the same percentile the cross-device model's host_bound uses)."""
    from opcost.data.floors import device_floor

    xkinds, t_s = np.asarray(xkinds).astype(str), np.asarray(t_s, float)
    groups = {k: t_s[xkinds == k] for k in np.unique(xkinds) if (xkinds == k).sum() >= min_rows}
    return _from_medians(name, groups, source, device_floor)


def timings_profile(name: str, xkinds: np.ndarray, host_s: np.ndarray, source: str) -> HostProfile:
    """From a campaign's per-call enqueue times (`host_time_per_call_s`, measure/gputime.py): the median per kind."""
    xkinds, host_s = np.asarray(xkinds).astype(str), np.asarray(host_s, float)
    ok = np.isfinite(host_s) & (host_s > 0)
    groups = {k: host_s[ok & (xkinds == k)] for k in np.unique(xkinds[ok])}
    return _from_medians(name, groups, source, np.median)


# --------------------------------------------------------------------------------------------
# calibrate-host: this machine's CPU
# --------------------------------------------------------------------------------------------
KINDS = ("conv", "linear", "batchnorm", "layernorm", "relu", "gelu", "softmax", "pool")  # what calibrate measures


def _probes() -> dict[str, Callable[[], tuple[Any, Any]]]:
    """One tiny module and input per cross-device kind, on the CPU: a kernel of a few elements costs little
    beside the call's dispatch. (Not the meta device: many of its kernels are Python decompositions, slower
    than the dispatch they stand for.)"""
    import torch
    from torch import nn

    def make(mod: nn.Module, *shape: int) -> Callable[[], tuple[Any, Any]]:
        return lambda: (mod.eval(), torch.zeros(*shape))

    return {
        "conv": make(nn.Conv2d(2, 2, 3, padding=1), 1, 2, 4, 4),
        "linear": make(nn.Linear(4, 4), 1, 4),
        "batchnorm": make(nn.BatchNorm2d(2), 1, 2, 4, 4),
        "layernorm": make(nn.LayerNorm(4), 1, 4),
        "relu": make(nn.ReLU(), 1, 4),
        "gelu": make(nn.GELU(), 1, 4),
        "softmax": make(nn.Softmax(-1), 1, 4),
        "pool": make(nn.MaxPool2d(2), 1, 2, 4, 4),
    }


def calibrate(name: str, seconds_per_kind: float = 0.2, progress: Callable[[str], None] | None = None) -> HostProfile:
    """This CPU's host cost per forward call of each kind: the median over repeats of the mean time of a burst
    of calls of a tiny module on the CPU (Python, nn.Module, the ATen dispatcher and a kernel of a few
    elements), plus LAUNCH_S for the launch a GPU adds. One thread, as an eager GPU step issues from one."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _calibrate(name, seconds_per_kind, progress)
    finally:
        torch.set_num_threads(threads)


def _calibrate(name: str, seconds_per_kind: float, progress: Callable[[str], None] | None) -> HostProfile:
    import torch

    per: dict[str, float] = {}
    counts: dict[str, int] = {}
    with torch.no_grad():
        for kind, make in _probes().items():
            mod, x = make()
            for _ in range(50):  # warm-up: first calls build caches
                mod(x)
            burst, samples = 200, list[float]()
            end = time.perf_counter() + seconds_per_kind
            while time.perf_counter() < end or len(samples) < 5:
                t0 = time.perf_counter()
                for _ in range(burst):
                    mod(x)
                samples.append((time.perf_counter() - t0) / burst)
            per[kind] = float(np.median(samples)) + LAUNCH_S
            counts[kind] = len(samples) * burst
            if progress is not None:
                progress(kind)
    import platform

    cpu = platform.processor() or platform.machine()
    src = (f"opcost calibrate-host on {platform.node()} ({cpu}, torch {torch.__version__}): tiny CPU calls "
           f"(dispatch) + {LAUNCH_S * 1e6:g} us launch constant")  # fmt: skip
    return HostProfile(name, per, float(np.median(list(per.values()))), src, counts)


def save(profile: HostProfile, path: Path) -> None:
    from opcost.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(profile.to_json(), indent=2) + "\n")


def load(path: Path) -> HostProfile:
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise OpcostError(f"host profile {path}: cannot read it as JSON ({e})") from None
    return HostProfile.from_json(d, str(path))


def check_name(name: str) -> str:
    """A host name is a file name: letters, digits, '.', '_' and '-'."""
    if not name or not all(c.isalnum() or c in "._-" for c in name) or name.startswith("."):
        raise OpcostError(f"host name {name!r}: expected letters, digits, '.', '_' or '-' (e.g. my-workstation)")
    return name


__all__ = ["HostProfile", "LAUNCH_S", "REFERENCE_HOST", "calibrate", "load", "plateau_profile", "save",
           "timings_profile", "uniform"]  # fmt: skip
