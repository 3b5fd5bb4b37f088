"""Section `profile` of params.yaml: the profiling campaigns (what to measure where, how long and how
often) and how `opcost submit` runs them on SLURM. Parsed like every section: `from_dict` classmethods
over tables of per-key checks (opcost/validation.py), then `check` for what spans keys (also called on
ad-hoc campaigns and SLURM options from the command line, whose numbers come from typer).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

from opcost.errors import OpcostError
from opcost.modes import MODES
from opcost.shapes import DTYPES
from opcost.validation import (
    Check,
    as_bool,
    as_int,
    as_list,
    as_positive,
    as_str,
    check_keys,
    check_name,
    checked_fields,
    mapping,
)

# A set id (ModelInputSet.set_id): a torchvision name or a user's `module:callable(args)` (group model), the
# input shape with the batch first (group shape), options (group dtype). Readers take the groups, never slice.
SET_ID = re.compile(
    r"(?P<model>[A-Za-z0-9_.-]+|[A-Za-z0-9_./-]+:[A-Za-z_][A-Za-z0-9_.]*(?:\([^()]*\))?)"
    r":(?P<shape>[0-9]+(?:x[0-9]+)*)(?::(?P<dtype>[a-z0-9]+))?(?::(?:input|vocab)=[a-z0-9]+)*"
)
OP_ID = re.compile(r"[0-9a-f]{16}")
# a campaign's op_ids entry: an op id, measured in every mode of the campaign, or `ID@mode` for one mode
OP_ID_ENTRY = re.compile(r"(?P<op_id>[0-9a-f]{16})(?:@(?P<mode>[a-z]+))?")
# Upper bounds of a campaign's knobs: beyond them a campaign measures for years (--trials 1e20) or
# overflows (--window 1e308); a real campaign stays far below.
CAMPAIGN_LIMITS: dict[str, float] = {"trials": 1000, "min_time_s": 600.0, "window_s": 3600.0, "sample_interval_s": 60.0}
MAX_THREADS = 1024  # a campaign's `threads`: more is a typo (torch takes a C int), not a machine

ENERGY_SOURCES: tuple[str, ...] = ("auto", "nvml", "nvidia-smi", "rapl", "none")
DEVICE = re.compile(r"cpu|cuda(?::(?:[0-9]|[1-5][0-9]|6[0-3]))?")


def split_mode(entry: str) -> tuple[str, str | None]:
    """A sets or op_ids entry `ID@mode` as (ID, mode); a plain `ID` as (ID, None)."""
    head, at, mode = entry.rpartition("@")
    return (head, mode) if at and mode in MODES else (entry, None)


@dataclass(frozen=True)
class CampaignParams:
    """One profiling campaign: where, what, which settings, how long and how often.

    `threads`: the CPU threads the measuring process uses (torch's intra-op and, where torch still allows
    it, inter-op pools; opcost.cputhreads applies it before any op runs, in local and shard runs alike).
    None: as the process finds them (OMP_NUM_THREADS, else one per core). It decides the timings of a CPU
    campaign: the cpu-* campaigns pin 1, so that they do not fight other work on shared cores and repeat.
    On a GPU campaign it only affects CPU-side work (the Python loop, kernel launches, host copies), not
    what the GPU does. It is not in the fingerprint (that predates it and would re-measure every campaign);
    the stage compares it with the thread count recorded in the measured environment instead."""

    name: str
    device: str = "cpu"
    modes: tuple[str, ...] = ("inference",)
    sets: tuple[str, ...] = ()  # model-input set ids from extract (their ops): ID (every mode) or ID@mode
    op_ids: tuple[str, ...] = ()  # single ops from operations.parquet: ID (every mode) or ID@mode
    networks: bool = True  # also measure the sets' whole networks
    set_ops: bool = True  # measure the sets' ops (false: only their whole networks, and op_ids)
    clocks_mhz: tuple[int, ...] = ()
    power_limits_w: tuple[float, ...] = ()
    trials: int = 3
    min_time_s: float = 0.2  # benchmark.Timer.blocked_autorange(min_run_time)
    window_s: float = 2.0  # energy window per trial, at least (longer where the counter's update period needs it)
    energy_bound: float = 0.02  # a row's energy must be within this by its own error bound, else it is flagged
    chunks: int = 5  # checkpoints in the window for the proportionality fit
    energy_source: str = "auto"
    sample_interval_s: float = 0.02
    seed: int = 0
    max_instances: int = 16
    instance_budget_mb: float = 256.0
    threads: int | None = None  # CPU threads while measuring; None: as the process finds them

    @classmethod
    def from_dict(cls, name: str, raw: Any, where: str) -> "CampaignParams":
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: a campaign must be a mapping of its settings, got {raw!r}")
        c = cls(name=name, **checked_fields(raw, where, CAMPAIGN_FIELDS))
        c.check(where)
        for i, entry in enumerate(c.sets):
            s, only = split_mode(entry)
            if only is not None and only not in c.modes:
                raise OpcostError(
                    f"{where}.sets[{i}]: {entry!r} names mode {only!r}, not one of the campaign's modes "
                    f"({', '.join(c.modes)})"
                )
            m = SET_ID.fullmatch(s)
            if not m or (m.group("dtype") and m.group("dtype") not in DTYPES):
                raise OpcostError(
                    f"{where}.sets[{i}]: {s!r} is not a model-input set id such as resnet18:32x3x224x224[:dtype] "
                    "or networks/recurrent.py:lstm:16x8x32"
                )
            if ":" not in m.group("model"):  # a torchvision name; a user's network is checked against extract's sets
                check_name(m.group("model"), f"{where}.sets[{i}]", "model")
        for i, op in enumerate(c.op_ids):
            m = OP_ID_ENTRY.fullmatch(op)
            if not m or (m.group("mode") and m.group("mode") not in c.modes):
                raise OpcostError(
                    f"{where}.op_ids[{i}]: {op!r} is not an op id (16 lowercase hex digits), optionally with "
                    f"@mode for one of the campaign's modes ({', '.join(c.modes)})"
                )
        return c

    def check(self, where: str) -> None:
        """Values that make a campaign impossible (also for ad-hoc campaigns from the command line,
        whose numbers come from typer and may be NaN or infinite)."""
        if not isinstance(self.device, str) or not DEVICE.fullmatch(self.device):
            raise OpcostError(f"{where}: device {self.device!r} must be cpu or cuda:N")
        if not self.modes or any(m not in MODES for m in self.modes):
            raise OpcostError(f"{where}: modes {list(self.modes)!r} must be a non-empty list of {', '.join(MODES)}")
        if self.energy_source not in ENERGY_SOURCES:
            raise OpcostError(
                f"{where}: energy_source {self.energy_source!r} is not one of {', '.join(ENERGY_SOURCES)}"
            )
        if not 1 <= self.trials <= CAMPAIGN_LIMITS["trials"] or self.chunks < 3:
            raise OpcostError(
                f"{where}: trials must be 1..{CAMPAIGN_LIMITS['trials']:g} and chunks >= 3 (got {self.trials}, "
                f"{self.chunks})"
            )
        if (
            isinstance(self.energy_bound, bool)
            or not isinstance(self.energy_bound, (int, float))
            or not (0 < self.energy_bound < 1)
        ):
            raise OpcostError(
                f"{where}: energy_bound must be a fraction between 0 and 1 (0.02: 2 %), got {self.energy_bound!r}"
            )
        for key in ("min_time_s", "window_s", "sample_interval_s", "instance_budget_mb"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise OpcostError(f"{where}: {key} must be a finite number > 0, got {v!r}")
            if key in CAMPAIGN_LIMITS and v > CAMPAIGN_LIMITS[key]:
                raise OpcostError(f"{where}: {key} = {v!r} is more than the {CAMPAIGN_LIMITS[key]:g} allowed")
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS
        ):
            raise OpcostError(
                f"{where}: threads {self.threads!r} must be a whole number of CPU threads, 1..{MAX_THREADS}, or absent"
            )
        if self.max_instances < 1 or self.seed < 0:
            raise OpcostError(
                f"{where}: max_instances must be >= 1 and seed >= 0 (got {self.max_instances}, {self.seed})"
            )
        if not self.sets and not self.op_ids:
            raise OpcostError(f"{where}: name the operations to measure: sets (model-input set ids) and/or op_ids")
        if any(not (isinstance(c, int) and c > 0) for c in self.clocks_mhz) or any(
            not (isinstance(p, (int, float)) and math.isfinite(p) and p > 0) for p in self.power_limits_w
        ):
            raise OpcostError(f"{where}: clocks_mhz and power_limits_w must be positive finite numbers")

    def set_modes(self) -> dict[str, tuple[str, ...]]:
        """Each set id of `sets` with the modes it is measured in (an `@mode` entry: that one; else all)."""
        out: dict[str, tuple[str, ...]] = {}
        for entry in self.sets:
            set_id, only = split_mode(entry)
            modes = (only,) if only else self.modes
            out[set_id] = tuple(m for m in self.modes if m in modes or m in out.get(set_id, ()))
        return out

    def fingerprint_fields(self) -> dict[str, Any]:
        """What makes two measurements of one unit comparable; resumed parts must agree on it. `threads`
        is not here (see the class docstring): opcost.stages.profile checks it against the recorded
        environment's cpu_threads, so the campaigns measured before it existed keep their fingerprint."""
        return {
            k: getattr(self, k)
            for k in (
                "device",
                "trials",
                "min_time_s",
                "window_s",
                "energy_bound",
                "chunks",
                "energy_source",
                "sample_interval_s",
                "seed",
                "max_instances",
                "instance_budget_mb",
            )
        }


def _str_item(v: Any, where: str) -> str:
    return as_str(v, where)


# How each campaign setting in params.yaml is checked and converted; a test checks that every
# field of CampaignParams has an entry, so a new setting cannot arrive unchecked.
CAMPAIGN_FIELDS: dict[str, Check] = {
    "device": as_str,
    "modes": lambda v, w: as_list(v, w, lambda x, w2: as_str(x, w2, MODES)),
    "sets": lambda v, w: as_list(v, w, _str_item),
    "op_ids": lambda v, w: as_list(v, w, _str_item),
    "networks": as_bool,
    "set_ops": as_bool,
    "clocks_mhz": lambda v, w: as_list(v, w, lambda x, w2: as_int(x, w2, lo=1)),
    "power_limits_w": lambda v, w: as_list(v, w, as_positive),
    "trials": lambda v, w: as_int(v, w, lo=1),
    "min_time_s": as_positive,
    "window_s": as_positive,
    "energy_bound": as_positive,
    "chunks": lambda v, w: as_int(v, w, lo=3),
    "energy_source": lambda v, w: as_str(v, w, ENERGY_SOURCES),
    "sample_interval_s": as_positive,
    "seed": lambda v, w: as_int(v, w, lo=0),
    "max_instances": lambda v, w: as_int(v, w, lo=1),
    "instance_budget_mb": as_positive,
    "threads": lambda v, w: as_int(v, w, lo=1),  # absent: None (the key has no null value)
}

_SLURM_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}(:\d{2})?)?|\d+(:\d{2}(:\d{2})?)?)$")
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")
_SLURM_GRES = re.compile(r"^[A-Za-z][\w.-]*(:[\w.-]+)?(:\d+)?$")


@dataclass(frozen=True)
class SlurmParams:
    """How `opcost submit` runs a campaign on a SLURM cluster: a job array of `shards` tasks, at most
    `throttle` at once, then a merge job. Not a measuring parameter: DVC's profile stages do not depend
    on it, so moving a campaign to another partition re-measures nothing."""

    shards: int = 4
    throttle: int | None = None  # the array's %N; None: as many at once as the cluster allows
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    time: str = "02:00:00"  # per task, any sbatch --time format (MM, HH:MM:SS, D-HH:MM, ...)
    gres: str | None = "gpu:1"  # per task of a CUDA campaign; CPU campaigns request no GRES
    cpus_per_task: int = 4
    mem: str | None = None  # per task, e.g. 16G; None: the cluster's default
    setup: tuple[str, ...] = ()  # shell lines each job runs first (module load ..., source .venv/bin/activate)

    @classmethod
    def from_dict(cls, raw: Any, where: str, base: "SlurmParams | None" = None) -> "SlurmParams":
        """`raw` over `base` (the profile-level defaults), checked."""
        raw = mapping(raw, where, "a mapping of SLURM settings")
        check_keys(raw, [f.name for f in fields(cls)], where)
        kw = {**(base or cls()).__dict__, **raw}
        if isinstance(kw["setup"], str):
            kw["setup"] = (kw["setup"],)
        kw["setup"] = tuple(kw["setup"] or ())
        s = cls(**kw)
        s.check(where)
        return s

    def check(self, where: str) -> None:
        def positive(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 1

        if not positive(self.shards) or not positive(self.cpus_per_task):
            raise OpcostError(f"{where}: shards and cpus_per_task must be integers >= 1")
        if self.throttle is not None and not positive(self.throttle):
            raise OpcostError(f"{where}: throttle must be an integer >= 1 (tasks at once) or null for no limit")
        if not isinstance(self.time, str) or not _SLURM_TIME.match(self.time):
            raise OpcostError(
                f'{where}: time {self.time!r} must be a quoted SLURM time such as "30", "02:00:00" or '
                f'"1-12:00" (YAML reads an unquoted 02:00:00 as a number)'
            )
        if self.mem is not None and not _SLURM_MEM.match(str(self.mem)):
            raise OpcostError(f"{where}: mem {self.mem!r} must be a size such as 16G or 4000M, or null")
        if self.gres is not None and not _SLURM_GRES.match(str(self.gres)):
            raise OpcostError(f"{where}: gres {self.gres!r} must look like gpu:1 or gpu:a100:1, or be null")
        for key in ("partition", "account"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, str) or not re.match(r"^[\w.,-]+$", v)):
                raise OpcostError(f"{where}: {key} {v!r} must be a SLURM name (letters, digits, _ . , -) or null")
        if not all(isinstance(line, str) and "\n" not in line for line in self.setup):
            raise OpcostError(f"{where}: setup must be a list of single-line shell commands")


@dataclass(frozen=True)
class ProfileParams:
    campaigns: dict[str, CampaignParams] = field(default_factory=dict)
    slurm: SlurmParams = field(default_factory=SlurmParams)  # defaults for every campaign
    slurm_campaigns: dict[str, SlurmParams] = field(default_factory=dict)  # per campaign, defaults filled in

    def slurm_for(self, campaign: str) -> SlurmParams:
        return self.slurm_campaigns.get(campaign, self.slurm)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ProfileParams":
        """`profile`: `campaigns: {NAME: settings}` and `slurm` (see `_slurm`)."""
        prof = mapping(raw, where)
        check_keys(prof, ("campaigns", "slurm"), where)
        raw_campaigns = mapping(
            prof.get("campaigns"), f"{where}.campaigns", "a mapping of campaign names to their settings"
        )
        campaigns = {}
        for name, c in raw_campaigns.items():
            check_name(name, f"{where}.campaigns", "campaign name")
            campaigns[name] = CampaignParams.from_dict(name, c, f"{where}.campaigns.{name}")
        slurm, slurm_campaigns = cls._slurm(prof.get("slurm"), campaigns, f"{where}.slurm")
        return cls(campaigns=campaigns, slurm=slurm, slurm_campaigns=slurm_campaigns)

    @staticmethod
    def _slurm(
        raw: Any, campaigns: dict[str, CampaignParams], where: str
    ) -> tuple[SlurmParams, dict[str, SlurmParams]]:
        """`profile.slurm`: defaults, plus `campaigns: {NAME: overrides}` for campaigns of profile.campaigns."""
        if raw is None:
            return SlurmParams(), {}
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: expected a mapping of SLURM settings, got {raw!r}")
        raw = dict(raw)
        per = raw.pop("campaigns", None) or {}
        defaults = SlurmParams.from_dict(raw, where)
        if not isinstance(per, dict):
            raise OpcostError(f"{where}.campaigns: must map campaign names to SLURM settings")
        unknown = sorted(set(map(str, per)) - set(campaigns))
        if unknown:
            valid = ", ".join(sorted(campaigns)) or "none defined"
            raise OpcostError(f"{where}.campaigns: {', '.join(unknown)} not in profile.campaigns ({valid})")
        return defaults, {str(n): SlurmParams.from_dict(v, f"{where}.campaigns.{n}", defaults) for n, v in per.items()}
