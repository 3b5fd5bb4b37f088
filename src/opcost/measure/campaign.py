"""Measurement campaigns: units (ops and networks) x modes x settings x trials, resumable.

Each (setting, unit) is a *part*: its k trials and their power samples are written atomically to
`<parts>/<fingerprint>/<part>.{samples,timings}.parquet` (samples first; the timings file marks the
part done). A campaign killed at any point (SIGKILL included) and started again skips finished
parts, so nothing is measured twice and no file is half-written; a part file found empty or
unreadable is measured again. When all parts are done they are consolidated into the campaign's
tables. The fingerprint covers every parameter that changes how a unit is measured, and the
measuring code, so parts from a differently configured run are never mixed in.

A campaign whose output folder already holds it complete (same fingerprint, same planned parts)
is not measured again: a `persist`ed DVC stage re-run on a machine without the campaign's GPU
then reproduces the pulled results instead of failing.

On a cluster a campaign is split into shards (`Campaign.run_shard`: unit k belongs to shard
k mod N, with all settings), each writing parts only, and `Campaign.merge` consolidates them
exactly as a local run does. Every measuring run leaves a small record beside the parts
(`<name>.run.json`: host, environment, state) that the merge and `opcost status` read.

Locks: the output folder (a local run, a merge), each shard, and each measuring device (machine
wide, see `opcost.locks`), all taken without waiting: a second run fails at once, naming the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import re
import shutil
import socket
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import pandas as pd
import pyarrow.parquet as pq
import torch

from opcost.errors import OpcostError
from opcost.io import write_json, write_parquet
from opcost.locks import cpu_lock_key, device_lock, device_state_dir, file_lock
from opcost.measure.clocks import DeviceControl, Setting, settings_grid
from opcost.measure.counter import (
    PERIOD_PROBE_S,
    PLANNING_PERIOD,
    CounterPeriod,
    CounterPoller,
    aligned_energy,
    bound_flag,
    counter_window,
    expected_window_s,
    measure_period,
    window_for,
)
from opcost.measure.gputime import host_and_gpu
from opcost.measure.interrupts import Interrupted, stop_on_signals
from opcost.measure.interrupts import say as _say
from opcost.measure.power import EnergySource, integrate_power_j, open_source
from opcost.measure.records import (
    CampaignJson,
    CampaignMeta,
    EnergyRows,
    Environment,
    ErrorCount,
    PartsRecord,
    PartStats,
    PeriodRecord,
    PlanSummary,
    PowerSample,
    RecordExtra,
    RunRecord,
    ShardResult,
)
from opcost.measure.timing import measure_window, time_block, window_energy
from opcost.measure.workload import VARIANT_AS_IS, Workload, blocks_for, device_sync, network_workload, op_workload
from opcost.ops.spec import OpSpec
from opcost.params.extract import ModelInputSet
from opcost.params.profile import CampaignParams
from opcost.progress import progress_bar
from opcost.schemas import NETWORKS, POWER_SAMPLES, TIMINGS, Table, conform

if TYPE_CHECKING:
    from opcost.measure.nvml import Nvml

# What a trial costs beyond its energy window, from the first visit (visit-h200 on an H200: 572 op trials took
# 0.86 s each, 0.46 s of it the window): building instances, warm-up and calibration (TRIAL_OVERHEAD_S), the
# held bursts (BURST_OVERHEAD_S) and benchmark.Timer's autorange, about three times its min_time_s (0.15 s
# for 0.05 s). A whole network's trial took 0.41 s more (NETWORK_OVERHEAD_S).
TRIAL_OVERHEAD_S = 0.2
TIMING_FACTOR = 3.0
POLL_SWITCH_S = 0.0002  # the interpreter's thread switch interval while the counter poller runs
NETWORK_OVERHEAD_S = 0.4  # building a whole network and its first passes (cuDNN's algorithm search), per trial
BURST_OVERHEAD_S = 0.05  # the held bursts that part host and GPU time (gputime.py), per trial


@dataclass(frozen=True)
class Unit:
    """One thing to measure in one mode: an operation (spec) or a whole network (set)."""

    item_type: str  # "op" or "network"
    item_id: str  # op_id or set_id
    mode: str
    label: str  # op kind or model name, for people
    spec: OpSpec | None = None
    set: ModelInputSet | None = None


@dataclass(frozen=True)
class Plan:
    campaign: CampaignParams
    units: tuple[Unit, ...]
    settings: tuple[Setting, ...]

    @property
    def parts(self) -> int:
        return len(self.units) * len(self.settings)

    @property
    def measurements(self) -> int:
        return self.parts * self.campaign.trials

    def shard(self, index: int, count: int) -> "Plan":
        """Shard `index` of `count`: the units at plan positions k with k mod count == index, all settings."""
        if not (count >= 1 and 0 <= index < count):
            raise OpcostError(f"shard {index}/{count} does not exist: expected I/N with 0 <= I < N, e.g. 0/4")
        return Plan(self.campaign, self.units[index::count], self.settings)

    def part_names(self) -> list[str]:
        return [part_name(s, u) for s in self.settings for u in self.units]

    def parts_record(self) -> PartsRecord:
        """What campaign.json keeps of the plan so a later run can tell it is the same plan."""
        digest = hashlib.sha256("\n".join(self.part_names()).encode()).hexdigest()[:16]
        return {"count": self.parts, "digest": digest}

    def estimated_seconds(self) -> float:
        """Planned duration: per trial the timing, the host/GPU bursts and the energy window (sized for the
        counter period of an H100-class card where the campaign runs on a GPU, counter.PLANNING_PERIOD), plus
        building each network, plus the counter-period probe at each setting."""
        c = self.campaign
        period = PLANNING_PERIOD if c.device.startswith("cuda") and c.energy_source != "none" else None
        per_trial = TRIAL_OVERHEAD_S + TIMING_FACTOR * c.min_time_s + energy_window_s(c, period)
        per_trial += BURST_OVERHEAD_S if c.device.startswith("cuda") else 0.0
        networks = sum(u.item_type == "network" for u in self.units) * len(self.settings) * c.trials
        probes = len(self.settings) * (PERIOD_PROBE_S if period is not None else 0.0)
        return self.measurements * per_trial + networks * NETWORK_OVERHEAD_S + probes

    def summary(self) -> PlanSummary:
        ops = {m: sum(u.item_type == "op" and u.mode == m for u in self.units) for m in self.campaign.modes}
        nets = {m: sum(u.item_type == "network" and u.mode == m for u in self.units) for m in self.campaign.modes}
        return {
            "campaign": self.campaign.name,
            "device": self.campaign.device,
            "ops_per_mode": ops,
            "networks_per_mode": nets,
            "settings": [s.label for s in self.settings],
            "trials": self.campaign.trials,
            "cpu_threads": self.campaign.threads,  # None: as the measuring process finds them (cputhreads.py)
            "parts": self.parts,
            "measurements": self.measurements,
            "estimated_seconds": round(self.estimated_seconds(), 1),
        }


def unit_key(unit: Unit) -> tuple[str, str, str]:
    """What identifies a unit in a plan (and in the consolidated tables): type, id, mode."""
    return unit.item_type, unit.item_id, unit.mode


def make_plan(campaign: CampaignParams, units: Sequence[Unit]) -> Plan:
    settings = settings_grid(campaign.clocks_mhz, campaign.power_limits_w)
    unique = {unit_key(u): u for u in units}.values()  # an op of a set that op_ids names too: measured once
    ordered = sorted(unique, key=lambda u: (campaign.modes.index(u.mode), u.item_type != "op", u.label, u.item_id))
    return Plan(campaign, tuple(ordered), tuple(settings))


def code_hash() -> str:
    """Hash of the code that decides how a unit is measured (this package and op rebuilding)."""
    import opcost.measure
    import opcost.ops.features
    import opcost.ops.spec

    files = sorted(Path(opcost.measure.__file__).parent.glob("*.py"))
    files += [Path(opcost.ops.spec.__file__), Path(opcost.ops.features.__file__)]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def fingerprint(campaign: CampaignParams) -> str:
    """Parts are resumed only by a run with the same measuring parameters and the same code."""
    text = json.dumps({**campaign.fingerprint_fields(), "code": code_hash()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parameters_fingerprint(campaign: CampaignParams) -> str:
    """What a campaign landed from elsewhere (measure/land.py) must agree on with its params.yaml entry: the
    measuring parameters, not the code (the code that measured it is recorded, and cannot rerun here)."""
    text = json.dumps(campaign.fingerprint_fields(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stable_seed(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) % (2**31)


def part_name(setting: Setting, unit: Unit) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", unit.item_id)
    return f"{setting.label}__{unit.mode}__{unit.item_type}__{safe}"


# --------------------------------------------------------------------------------------------
# Device and environment
# --------------------------------------------------------------------------------------------


def check_device(campaign: CampaignParams) -> None:
    """A CUDA campaign on a machine without that GPU stops here and says where to run it."""
    if not campaign.device.startswith("cuda"):
        return
    index = int(campaign.device.split(":")[1]) if ":" in campaign.device else 0
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        raise OpcostError(
            f"campaign {campaign.name!r} measures on {campaign.device}, which this machine does not have: run "
            f"`dvc repro profile@{campaign.name}` on a node with that GPU, then `dvc push` and commit dvc.lock; "
            f"elsewhere `dvc pull` brings its results"
        )


def open_nvml(campaign: CampaignParams, nvml_lib: Any = None) -> Nvml | None:
    """NVML for CUDA campaigns (or wherever a fake library is injected); None on a plain CPU run."""
    if nvml_lib is None and not campaign.device.startswith("cuda"):
        return None
    from opcost.measure.nvml import Nvml

    index = int(campaign.device.split(":")[1]) if ":" in campaign.device else 0
    return Nvml(index, lib=nvml_lib)


def environment(campaign: CampaignParams, source: EnergySource | None, nvml: Nvml | None) -> Environment:
    """Everything that decides what the numbers mean: host, device, versions, math flags.

    Called while NVML is open (the real library refuses every call after nvmlShutdown); with
    `source` None (consolidating parts measured elsewhere, no record of them) the device is not
    touched."""
    cpu = _cpu_model()
    vision: str | None
    try:
        import torchvision

        vision = torchvision.__version__
    except ImportError:  # pragma: no cover
        vision = None
    device_name: str | None
    if not campaign.device.startswith("cuda"):
        device_name = cpu
    elif torch.cuda.is_available() and (torch.device(campaign.device).index or 0) < torch.cuda.device_count():
        device_name = torch.cuda.get_device_name(torch.device(campaign.device))
    else:
        device_name = None
    env: Environment = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cpu_threads": torch.get_num_threads(),
        "cpu": cpu,
        "energy_source": source.name if source is not None else campaign.energy_source,
        "energy_counter": source.has_counter if source is not None else None,
        "torchvision": vision,
        "device_name": device_name,
    }
    if nvml is not None:
        env["nvml_device_name"] = nvml.name()
        env["nvml_uuid"] = nvml.uuid()
        env["driver"] = nvml.driver_version()
    return env


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --------------------------------------------------------------------------------------------
# Measuring one part
# --------------------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _row_base(campaign: CampaignParams, unit: Unit, setting: Setting, source: EnergySource) -> dict[str, Any]:
    """The columns every timing row of one part shares (the row's first columns, in this order)."""
    return {
        "campaign": campaign.name,
        "mode": unit.mode,
        "setting": setting.label,
        "clock_mhz": setting.clock_mhz,
        "power_limit_w": setting.power_limit_w,
        "energy_source": source.name,
    }


def _unit_workload(campaign: CampaignParams, unit: Unit, seed: int) -> Workload:
    """What one trial runs: the op's instances (within the campaign's memory budget) or the network."""
    if unit.item_type == "op":
        assert unit.spec is not None
        return op_workload(
            unit.spec, unit.mode, campaign.device, seed, campaign.max_instances, campaign.instance_budget_mb * 1e6
        )
    assert unit.set is not None
    return network_workload(unit.set, unit.mode, campaign.device, seed)


def energy_window_s(campaign: CampaignParams, period: CounterPeriod | None) -> float:
    """The energy window a trial is expected to take: the campaign's `window_s` (its planned chunks), or, where
    the counter's update period asks for more, about half a period to the first change plus the span the bound
    needs in whole periods (counter.expected_window_s). For dry-run estimates."""
    return max(campaign.window_s, expected_window_s(period, campaign.energy_bound))


def max_window_s(campaign: CampaignParams, period: CounterPeriod | None) -> float:
    """How long a window may run on while its counter changes do not yet bound its energy: three times its
    planned `window_s`, or twice the window the period says would meet the bound (counter.window_for)."""
    return max(3 * campaign.window_s, 2 * window_for(period, campaign.energy_bound))


def _measure_trial(
    campaign: CampaignParams,
    wl: Workload,
    sync: Callable[[], None],
    source: EnergySource,
    period: CounterPeriod | None = None,
) -> tuple[dict[str, Any], list[PowerSample]]:
    """One trial of a built workload: warm-up, timing, host and GPU time apart, then the energy window with
    power sampled and the counter polled alongside: its planned chunks, then more until the counter's changes
    bound its energy within `energy_bound` (or the window reaches max_window_s). Returns the row's
    measured columns (in row order) and the trial's power samples."""
    wl.block()  # warm-up: allocator, cuDNN algorithm choice, caches
    sync()
    timing = time_block(wl.block, wl.instances, campaign.min_time_s)
    stats = timing.stats()
    block_s = float(stats["mean_s"] or 0.0) * wl.instances
    split = host_and_gpu(wl.block, wl.instances, campaign.device, block_s)
    per_chunk = blocks_for(campaign.window_s, block_s, campaign.chunks)
    poller = CounterPoller(source.read_energy_j) if source.has_counter else None

    def more(t0: float, now: float) -> bool:
        """A window runs on (up to 3x its chunks) until its counter changes bound its energy."""
        assert poller is not None
        aligned = aligned_energy(poller.changes, t0, now, period)
        return aligned is None or aligned.bound > campaign.energy_bound

    sampler = source.start_sampling(campaign.sample_interval_s)
    switch = sys.getswitchinterval()
    try:
        if poller is not None:
            # the poller's reads bracket each change: it must not wait 5 ms for the GIL behind the work's thread
            sys.setswitchinterval(POLL_SWITCH_S)
            poller.__enter__()
        window = measure_window(
            wl.block,
            wl.instances,
            per_chunk,
            campaign.chunks,
            sync,
            source.read_energy_j,
            more=more if poller is not None else None,
            max_s=max_window_s(campaign, period),
        )
    finally:  # also on an interrupt: no sampler or poller thread left reading a device being shut down
        if poller is not None:
            poller.stop()
        sys.setswitchinterval(switch)
        trial_samples = sampler.stop()
    integrated = source.window_energy_j(trial_samples, window.time_s) or integrate_power_j(trial_samples)
    counted = (
        counter_window(
            window.time_s,
            window.energy_j,
            poller.changes,
            window.start_s,
            window.end_s,
            period,
            campaign.energy_bound,
        )
        if poller is not None
        else None
    )
    energy, energy_flag = window_energy(
        counted.energy_j if counted is not None else window.energy_j, source.has_counter, integrated, window.time_s
    )
    bound = counted.bound if counted is not None and energy is not None else None
    if energy_flag is None and bound is not None and counted is not None and bound > campaign.energy_bound:
        energy_flag = bound_flag(bound, campaign.energy_bound, counted.needed_window_s or float("inf"))
    t_fit, e_fit = window.fit("time"), window.fit("energy")
    clocks = [c for s in trial_samples if (c := s.get("sm_clock_mhz")) is not None]
    measured: dict[str, Any] = dict(
        instances=wl.instances,
        number_per_run=timing.number_per_run,
        runs=len(timing.block_means_s),
        iterations=timing.iterations,
        total_time_s=timing.total_time_s,
        **stats,
        window_iterations=window.iterations,
        window_time_s=window.time_s,
        window_energy_j=energy,
        time_per_iter_s=window.time_s / window.iterations,
        energy_per_iter_j=None if energy is None else energy / window.iterations,
        power_w=None if energy is None or window.time_s <= 0 else energy / window.time_s,
        time_r2=None if t_fit is None else t_fit[0],
        energy_r2=None if e_fit is None else e_fit[0],
        proportional=window.proportional(),
        energy_flag=energy_flag,
        energy_bound=None if bound is None or not math.isfinite(bound) else bound,
        energy_span_s=counted.span_s if counted is not None else None,
        counter_updates=counted.updates if counted is not None else None,
        energy_window_needed_s=(
            counted.needed_window_s
            if counted is not None and counted.needed_window_s is not None and math.isfinite(counted.needed_window_s)
            else None
        ),
        gpu_time_per_call_s=split.gpu_s,
        host_time_per_call_s=split.host_s,
        timing_warnings=timing.has_warnings,
        sm_clock_mhz=sum(clocks) / len(clocks) if clocks else None,
    )
    if period is not None:
        trial_samples = [
            {**s, "counter_period_s": period.median_s, "counter_jitter_s": period.jitter_s} for s in trial_samples
        ]
    return measured, trial_samples


def _sample_context(campaign: CampaignParams, unit: Unit, setting: Setting, trial: int) -> dict[str, Any]:
    """The columns that tie a power sample to its trial."""
    return {
        "campaign": campaign.name,
        "item_type": unit.item_type,
        "item_id": unit.item_id,
        "mode": unit.mode,
        "setting": setting.label,
        "trial": trial,
    }


def _item_columns(unit: Unit) -> dict[str, Any]:
    """The row's last columns: which op (id, kind) or which network (set, model, input shape)."""
    if unit.item_type == "op":
        return {"op_id": unit.item_id, "kind": unit.label}
    assert unit.set is not None
    return {"set_id": unit.item_id, "model": unit.set.model, "input_shape": list(unit.set.input_shape)}


def measure_part(
    campaign: CampaignParams, unit: Unit, setting: Setting, source: EnergySource, period: CounterPeriod | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`campaign.trials` trials of one unit at one setting, each on its own seed: timing rows and power-sample rows."""
    sync = device_sync(campaign.device)
    base = _row_base(campaign, unit, setting, source)
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    failure: str | None = None
    for trial in range(campaign.trials):
        seed = stable_seed(campaign.seed, unit.item_id, unit.mode, setting.label, trial)
        row: dict[str, Any] = {**base, "trial": trial, "seed": seed, "variant": VARIANT_AS_IS}
        row["started_at"] = time.time()
        # Any earlier trial of this part failed (out of memory, unsupported), not only the first: the
        # rest would fail the same way, so they are recorded as failed with its error, without running.
        if failure is not None:
            rows.append({**row, "status": "failed", "error": failure, "ended_at": time.time()})
            continue
        try:
            wl = _unit_workload(campaign, unit, seed)
            row["variant"] = wl.variant
            measured, trial_samples = _measure_trial(campaign, wl, sync, source, period)
            row.update(status="ok", **measured)
            ctx = _sample_context(campaign, unit, setting, trial)
            samples.extend({**ctx, **s} for s in trial_samples)
        except (RuntimeError, ValueError, OpcostError) as exc:
            # out of memory (torch.OutOfMemoryError is a RuntimeError), an op or dtype this device does not
            # support: record and go on. Anything else is a bug in opcost and stops the campaign.
            failure = _first_line(exc)
            row.update(status="failed", error=failure)
            if campaign.device.startswith("cuda"):
                torch.cuda.empty_cache()
        row["ended_at"] = time.time()
        rows.append(row)
    item = _item_columns(unit)
    for r in rows:
        r.update(item)
    return rows, samples


# --------------------------------------------------------------------------------------------
# Running a campaign
# --------------------------------------------------------------------------------------------


TABLE_FILES = ("timings.parquet", "networks.parquet", "power_samples.parquet", "campaign.json")
PART_KINDS = ("samples", "timings")


def _part_file_problem(path: Path) -> str | None:
    """Why a part file cannot be used (None if it can): missing, empty, or not a readable Parquet."""
    try:
        if path.stat().st_size == 0:
            return "empty (0 bytes)"
        pq.read_metadata(path)
    except FileNotFoundError:
        return "missing"
    except Exception as exc:  # truncated, garbage, no permission: whatever stops a reader
        return f"unreadable ({_first_line(exc)})"
    return None


def _stale_tmp_target(name: str) -> str | None:
    """The target file name of an `atomic_path` temporary (`.<target>.<random>.tmp`), else None."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    return name[1:-4].rsplit(".", 1)[0]


def error_summary(*tables: pd.DataFrame, top: int = 5) -> list[ErrorCount]:
    """The most frequent errors of failed rows, with their counts (most frequent first)."""
    counts: Counter[str] = Counter()
    for t in tables:
        if len(t):
            counts.update(t.loc[t["status"] == "failed", "error"].fillna("").tolist())
    return [{"error": e, "rows": n} for e, n in counts.most_common(top)]


def all_failed_message(result: CampaignMeta | ShardResult) -> str | None:
    """A one-line error when every measured row of a campaign (or a shard) failed, else None."""
    rows = result["rows"]
    total = rows.get("timings", 0) + rows.get("networks", 0)
    if total == 0 or result["failed_rows"] < total:
        return None
    errors = result.get("errors") or []
    first = f"; most frequent error: {errors[0]['error']}" if errors else ""
    what = f"shard {result['shard']}/{result['shards']} of " if "shard" in result else ""
    return f"every measurement of {what}campaign {result['campaign']} failed ({total} rows){first}"


def energy_summary(result: CampaignJson) -> str | None:
    """The summary line's energy part: how many rows are flagged and which window would have met the bound."""
    e = result.get("energy_rows")
    if not e or not e.get("rows"):
        return None
    text = f"energy: {e['flagged']} of {e['rows']} rows flagged"
    if e["flagged"]:
        window = e.get("needed_window_s")
        text += f" (bound above {e['target_bound']:.0%}" + (
            f"; a window of {window:.2f} s would have met it)" if window is not None else ")"
        )
    return text


def all_flagged_message(result: CampaignJson) -> str | None:
    """A one-line error when every energy row of a campaign is flagged (its energy measures nothing), else None."""
    e = result.get("energy_rows")
    if not e or not e.get("rows") or e["flagged"] < e["rows"]:
        return None
    return f"every energy row of campaign {result['campaign']} is flagged: {energy_summary(result)}"


class Campaign:
    """Runs a plan into `out_dir`, keeping resumable parts in `parts_root`.

    `state_dir` holds the original GPU state while clocks are changed (default: machine-wide,
    beside the device locks); `say` prints notices (warnings about bad parts, a restored device).
    """

    def __init__(
        self,
        plan: Plan,
        out_dir: Path,
        parts_root: Path,
        nvml_lib: Any = None,
        rapl_root: Path | None = None,
        state_dir: Path | None = None,
        say: Callable[[str], None] = _say,
    ):
        self.plan = plan
        self.c = plan.campaign
        self.out_dir = Path(out_dir)
        self.parts_root = Path(parts_root)
        self.parts_dir = self.parts_root / fingerprint(self.c)
        self.nvml_lib = nvml_lib
        self.rapl_root = rapl_root
        self.state_dir = Path(state_dir) if state_dir is not None else device_state_dir()
        self.say = say

    # -- where things are -------------------------------------------------------------------
    @property
    def output_lock(self) -> Path:
        """Lock of the output folder (beside the parts: nothing but results goes into the output)."""
        return self.parts_root / "output.lock"

    def shard_lock(self, index: int, count: int) -> Path:
        return self.parts_root / f"shard-{index}-of-{count}.lock"

    def record_path(self, name: str) -> Path:
        return self.parts_dir / f"{name}.run.json"

    def _done(self, name: str) -> bool:
        return (self.parts_dir / f"{name}.timings.parquet").is_file()

    def pending(self, plan: Plan | None = None) -> list[tuple[Setting, Unit]]:
        plan = plan or self.plan
        return [(s, u) for s in plan.settings for u in plan.units if not self._done(part_name(s, u))]

    def completed(self) -> CampaignMeta | None:
        """campaign.json of `out_dir` if it holds this very plan complete (same fingerprint, or for a campaign
        landed from elsewhere the same measuring parameters; same planned parts; every table with the rows
        campaign.json counts), else None."""
        try:
            meta: CampaignMeta = json.loads((self.out_dir / "campaign.json").read_text())
            landed = meta.get("landed")
            same = meta.get("fingerprint") == fingerprint(self.c) or bool(
                landed and landed.get("parameters_fingerprint") == parameters_fingerprint(self.c)
            )
            if not same or meta.get("planned_parts") != self.plan.parts_record():
                return None
            for table in ("timings", "networks", "power_samples"):
                if pq.read_metadata(self.out_dir / f"{table}.parquet").num_rows != meta["rows"][table]:
                    return None
        except Exception:  # missing, unreadable, an older layout: not complete
            return None
        return meta

    # -- running ----------------------------------------------------------------------------
    def run(self, show_progress: bool = True, remeasure: bool = False) -> CampaignMeta:
        """Measure what is missing and consolidate; nothing when `out_dir` already holds this plan."""
        with stop_on_signals(), file_lock(self.output_lock, f"campaign output {self.out_dir}", wait=False):
            if not remeasure:
                done = self.completed()
                if done is not None:
                    return {**done, "complete": True}
            elif self.parts_dir.exists():
                shutil.rmtree(self.parts_dir)
            self._tidy(self.plan, output=True)
            skipped = self.plan.parts - len(self.pending())
            if self.pending():
                self._measure(self.plan, show_progress, "local", {})
            meta = self.consolidate(skipped)
            # parts exist only to resume an interrupted run; a finished campaign measured again
            # (--remeasure, changed code) must measure afresh
            shutil.rmtree(self.parts_dir)
            return meta

    def run_shard(
        self, index: int, count: int, show_progress: bool = True, wait_for_device: bool = False
    ) -> ShardResult:
        """Measure shard `index` of `count` into parts only (no consolidation, no output written).
        With `wait_for_device`, queue behind another process measuring on the same device (array
        tasks that SLURM put on one node) instead of failing."""
        sub = self.plan.shard(index, count)
        name = f"shard-{index}-of-{count}"
        lock = file_lock(self.shard_lock(index, count), f"shard {index}/{count} of campaign {self.c.name}", wait=False)
        with stop_on_signals(), lock:
            self._tidy(sub, output=False)
            skipped = sub.parts - len(self.pending(sub))
            extra: RecordExtra = {"shard": index, "shards": count, "parts_total": sub.parts}
            if self.pending(sub):
                self._measure(sub, show_progress, name, extra, wait_for_device)
            elif not self.record_path(name).is_file():
                self.parts_dir.mkdir(parents=True, exist_ok=True)
                write_json(
                    {**self._record_base(name, extra), "status": "done", "ended_at": time.time()},
                    self.record_path(name),
                )
            stats = part_stats(self.parts_dir, sub.part_names())
        return {
            "campaign": self.c.name,
            "shard": index,
            "shards": count,
            "parts": sub.parts,
            "parts_resumed": skipped,
            "parts_dir": str(self.parts_dir),
            **stats,
        }

    def merge(self, count: int | None = None) -> CampaignMeta:
        """Consolidate the parts of every shard into `out_dir` as a local run would; a one-line
        error naming the shards whose parts are missing."""
        with stop_on_signals(), file_lock(self.output_lock, f"campaign output {self.out_dir}", wait=False):
            done = self.completed()
            if done is not None:
                return {**done, "complete": True}
            self._tidy(self.plan, output=True)
            missing = self.pending()
            if missing:
                raise OpcostError(self._missing_message(missing, count))
            meta = self.consolidate(self.plan.parts)
            shutil.rmtree(self.parts_dir)
            return meta

    def _missing_message(self, missing: list[tuple[Setting, Unit]], count: int | None) -> str:
        n = f"campaign {self.c.name}: {len(missing)} of {self.plan.parts} parts missing"
        if count is None:
            counts: set[int] = {int(r["shards"]) for r in self.records() if r.get("shards")}
            if len(counts) > 1:
                return f"{n}; the shard records disagree on the shard count ({sorted(counts)}): pass --shards N"
            count = counts.pop() if counts else None
        if count is None:
            return f"{n} (no shard records: pass --shards N to name their shards)"
        position = {unit_key(u): k for k, u in enumerate(self.plan.units)}
        shards = sorted({position[unit_key(u)] % count for _, u in missing})
        return (
            f"{n}, in shard(s) {', '.join(map(str, shards))} of {count}: run `opcost profile --campaign "
            f"{self.c.name} --shard I/{count}` for each, then merge again"
        )

    def _measure(
        self, plan: Plan, show_progress: bool, record: str, extra: RecordExtra, wait_for_device: bool = False
    ) -> None:
        """Measure the missing parts of `plan` on the device, under its lock, leaving a run record."""
        check_device(self.c)
        nvml = open_nvml(self.c, self.nvml_lib)
        source: EnergySource | None = None
        try:
            kwargs = {"rapl_root": self.rapl_root} if self.rapl_root is not None else {}
            source = open_source(self.c.energy_source, self.c.device, nvml=nvml, **kwargs)
            env = environment(self.c, source, nvml)  # while NVML is open
            control = DeviceControl(nvml, self.c.device, self.state_dir, self.say)
            with contextlib.ExitStack() as locks:
                if not self.c.device.startswith("cuda"):
                    what = f"device {self.c.device} ({cpu_lock_key()})"
                    locks.enter_context(device_lock(cpu_lock_key(), what, wait_for_device, self.say))
                if control.key is not None:
                    what = f"device {self.c.device} ({control.key})"
                    locks.enter_context(device_lock(control.key, what, wait_for_device, self.say))
                # the session covers the whole control lifetime: handlers are in place before the
                # leftover state is restored and before the permission probe
                with control.session():
                    control.recover()
                    control.validate(plan.settings)
                    control.check_permission(plan.settings)  # before anything is measured
                    self._measure_parts(plan, show_progress, control, source, record, {**extra, "environment": env})
        finally:
            if source is not None:
                source.close()
            if nvml is not None:
                nvml.close()

    def _measure_parts(
        self,
        plan: Plan,
        show_progress: bool,
        control: DeviceControl,
        source: EnergySource,
        record: str,
        extra: RecordExtra,
    ) -> None:
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        rec: RunRecord = {**self._record_base(record, extra), "status": "running"}
        counters: dict[str, PeriodRecord | None] = {}
        write_json(rec, self.record_path(record))
        try:
            with progress_bar(show_progress) as progress:
                task = progress.add_task(self.c.name, total=plan.parts, completed=plan.parts - len(self.pending(plan)))
                for setting in plan.settings:
                    todo = [u for u in plan.units if not self._done(part_name(setting, u))]
                    if not todo:
                        continue
                    control.apply(setting)
                    # the counter's update period after every change of clock or power limit (it may follow them)
                    period = measure_period(source.read_energy_j) if source.has_counter else None
                    counters[setting.label] = None if period is None else period.record()
                    rec["energy_counter"] = counters
                    write_json(rec, self.record_path(record))
                    for unit in todo:
                        progress.update(task, description=f"{setting.label} {unit.mode} {unit.label}")
                        rows, samples = measure_part(self.c, unit, setting, source, period)
                        self.write_part(part_name(setting, unit), unit, rows, samples)
                        progress.advance(task)
            rec["status"] = "done"
        except Interrupted as exc:
            rec["status"], rec["error"] = "interrupted", f"interrupted by {exc}"
            raise
        except BaseException as exc:
            rec["status"], rec["error"] = "failed", _first_line(exc)
            raise
        finally:
            rec["ended_at"] = time.time()
            write_json(rec, self.record_path(record))

    def _record_base(self, name: str, extra: RecordExtra) -> RunRecord:
        return {
            "name": name,
            "campaign": self.c.name,
            "fingerprint": fingerprint(self.c),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": time.time(),
            "error": None,
            **extra,
        }

    def records(self) -> list[RunRecord]:
        """The run records beside the parts (local first, then shards in order)."""
        found: list[RunRecord] = []
        for p in sorted(self.parts_dir.glob("*.run.json")) if self.parts_dir.is_dir() else []:
            try:
                found.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                self.say(f"warning: run record {p} is unreadable; ignored")
        return sorted(found, key=lambda r: (r.get("name") != "local", r.get("shard", 0)))

    def _tidy(self, plan: Plan, output: bool) -> None:
        """Before a run: drop this plan's unusable part files (measured again, with a warning) and the
        temporary files runs killed mid-write left beside them (or in `out_dir`)."""
        own = {f"{n}.{k}.parquet" for n in plan.part_names() for k in PART_KINDS}
        folders = [(self.parts_dir, own)]
        if output:
            folders.append((self.out_dir, set(TABLE_FILES)))
        for folder, targets in folders:
            if folder.is_dir():
                for f in folder.iterdir():
                    if _stale_tmp_target(f.name) in targets:  # only ours: other shards may be writing
                        f.unlink(missing_ok=True)
        for name in plan.part_names():
            timings = self.parts_dir / f"{name}.timings.parquet"
            if not timings.exists():
                continue
            for f in (timings, self.parts_dir / f"{name}.samples.parquet"):
                problem = _part_file_problem(f)
                if problem is not None:
                    self.say(f"warning: part file {f} is {problem}; measuring that part again")
                    timings.unlink(missing_ok=True)
                    break

    def write_part(self, name: str, unit: Unit, rows: list[dict[str, Any]], samples: list[dict[str, Any]]) -> None:
        table = TIMINGS if unit.item_type == "op" else NETWORKS
        write_parquet(conform(pd.DataFrame(samples), POWER_SAMPLES), self.parts_dir / f"{name}.samples.parquet")
        # the timings file last: its presence marks the part done
        write_parquet(conform(pd.DataFrame(rows), table), self.parts_dir / f"{name}.timings.parquet")

    def _read_parts(self, item_type: str, suffix: str) -> list[pd.DataFrame]:
        frames = []
        for s in self.plan.settings:
            for u in self.plan.units:
                if u.item_type == item_type:
                    p = self.parts_dir / f"{part_name(s, u)}.{suffix}.parquet"
                    if p.is_file():
                        frames.append(pd.read_parquet(p))
        return frames

    def consolidate(self, skipped: int) -> CampaignMeta:
        """All parts of this plan into timings, networks and power_samples, plus campaign.json.

        The tables depend on the parts alone (read in plan order), so a merge of shards and a local
        run write the same bytes. The environment is the measuring runs' (from their records)."""
        missing = self.pending()
        if missing:
            raise OpcostError(f"campaign {self.c.name}: {len(missing)} parts still missing; run it again to resume")
        records = self.records()
        with_env = [r for r in records if r.get("environment")]
        env = with_env[0]["environment"] if with_env else environment(self.c, None, None)
        started = min((r["started_at"] for r in records if r.get("started_at")), default=time.time())
        ops = _concat(self._read_parts("op", "timings"), TIMINGS)
        nets = _concat(self._read_parts("network", "timings"), NETWORKS)
        samples = _concat(self._read_parts("op", "samples") + self._read_parts("network", "samples"), POWER_SAMPLES)
        write_parquet(ops, self.out_dir / "timings.parquet")
        write_parquet(nets, self.out_dir / "networks.parquet")
        write_parquet(samples, self.out_dir / "power_samples.parquet")
        failed = int((ops["status"] == "failed").sum() + (nets["status"] == "failed").sum())
        counters: dict[str, PeriodRecord | None] = {}
        for r in records:
            counters.update(r.get("energy_counter") or {})
        meta: CampaignMeta = {
            "campaign": self.c.name,
            "parameters": {**asdict(self.c)},
            "fingerprint": fingerprint(self.c),
            "code_hash": code_hash(),
            "plan": self.plan.summary(),
            "planned_parts": self.plan.parts_record(),
            "environment": env,
            "runs": [_without_environment(r) for r in records],
            "started_at": started,
            "ended_at": time.time(),
            "parts_resumed": skipped,
            "rows": {"timings": len(ops), "networks": len(nets), "power_samples": len(samples)},
            "failed_rows": failed,
            "errors": error_summary(ops, nets),
            "energy_counter": counters,
            "energy_rows": energy_rows(ops, nets, self.c.energy_bound),
            "energy_note": None
            if env["energy_source"] != "none"
            else "no energy source: time only, energy columns are null",
        }
        write_json(meta, self.out_dir / "campaign.json")
        return meta


def _without_environment(record: RunRecord) -> RunRecord:
    """A run record as campaign.json lists it: the environment is kept once, beside the runs."""
    out = record.copy()
    out.pop("environment", None)
    return out


def energy_rows(ops: pd.DataFrame, nets: pd.DataFrame, target: float) -> EnergyRows:
    """Of the measured rows that have an energy source: how many, how many are flagged (energy_flag), and the
    longest window a flagged row says would have met the bound (None: no row is flagged for its bound)."""
    frames = [t for t in (ops, nets) if len(t)]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(TIMINGS.names))
    measured = rows[(rows["status"] == "ok") & (rows["energy_source"] != "none")]
    flagged = measured[measured["energy_flag"].notna()]
    needed = pd.to_numeric(flagged["energy_window_needed_s"], errors="coerce").dropna()
    return {
        "target_bound": target,
        "rows": len(measured),
        "flagged": len(flagged),
        "needed_window_s": None if needed.empty else round(float(needed.max()), 3),
    }


def part_stats(parts_dir: Path, names: Sequence[str]) -> PartStats:
    """Counts over the finished parts among `names`: parts done, rows, failed rows and the latest error."""
    done, rows, nets, failed = 0, 0, 0, 0
    last: tuple[float, str] | None = None
    frames = []
    for name in names:
        p = parts_dir / f"{name}.timings.parquet"
        if not p.is_file():
            continue
        try:
            t = pd.read_parquet(p, columns=["status", "error", "ended_at"])
        except Exception:  # unreadable: counted as not done (the next run measures it again)
            continue
        done += 1
        is_net = "__network__" in name
        nets += len(t) if is_net else 0
        rows += 0 if is_net else len(t)
        bad = t[t["status"] == "failed"]
        failed += len(bad)
        frames.append(t)
        if len(bad):
            row = bad.sort_values("ended_at").iloc[-1]
            if last is None or row["ended_at"] >= last[0]:
                last = (float(row["ended_at"]), str(row["error"]).splitlines()[0] if row["error"] else "")
    return {
        "parts_done": done,
        "rows": {"timings": rows, "networks": nets},
        "failed_rows": failed,
        "last_error": last[1] if last else None,
        "errors": error_summary(*frames),
    }


def _concat(frames: Iterable[pd.DataFrame], table: Table) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return conform(pd.DataFrame({c: [] for c in table.names}), table)
    return conform(pd.concat(frames, ignore_index=True), table)


def units_from_sets(
    sets: Sequence[ModelInputSet],
    modes: Sequence[str],
    occurrences: pd.DataFrame,
    operations: pd.DataFrame,
    networks: bool,
    ops: bool = True,
    set_modes: dict[str, tuple[str, ...]] | None = None,
) -> list[Unit]:
    """The ops (if `ops`) and networks (if `networks`) of model-input sets, from the extract stage's tables, in
    `modes` (or, for a set that `set_modes` names, in its modes there)."""
    specs = dict(zip(operations["op_id"], operations["spec_json"]))
    units: dict[tuple[str, str, str], Unit] = {}
    for s in sets:
        for mode in (set_modes or {}).get(s.set_id, tuple(modes)):
            rows = occurrences[(occurrences["set_id"] == s.set_id) & (occurrences["mode"] == mode)]
            if rows.empty:
                raise OpcostError(
                    f"set {s.set_id} in mode {mode} is not in the extract outputs; add it to the sets of sets.yaml"
                )
            for op_id in rows["op_id"] if ops else []:
                spec = OpSpec.from_json(json.loads(specs[op_id]))
                units[("op", op_id, mode)] = Unit("op", op_id, mode, spec.kind, spec=spec)
            if networks:
                units[("network", s.set_id, mode)] = Unit("network", s.set_id, mode, s.model, set=s)
    return list(units.values())


def units_from_op_ids(op_ids: Sequence[str], modes: Sequence[str], operations: pd.DataFrame) -> list[Unit]:
    """The units of a campaign's op_ids entries: `ID` in every mode, `ID@mode` in that one."""
    specs = dict(zip(operations["op_id"], operations["spec_json"]))
    entries = [(e.partition("@")[0], e.partition("@")[2]) for e in op_ids]
    unknown = sorted({o for o, _ in entries if o not in specs})
    if unknown:
        raise OpcostError(
            f"op id(s) {', '.join(unknown)} not in operations.parquet; run `opcost extract` for their networks"
        )
    out: dict[tuple[str, str], Unit] = {}
    for o, only in entries:
        spec = OpSpec.from_json(json.loads(specs[o]))
        for m in [only] if only else modes:
            out[(o, m)] = Unit("op", o, m, spec.kind, spec=spec)
    return list(out.values())
