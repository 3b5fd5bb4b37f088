"""Measurement campaigns: units (ops and networks) x modes x settings x trials, resumable.

Each (setting, unit) is a *part*: its k trials and their power samples are written atomically to
`<parts>/<fingerprint>/<part>.{samples,timings}.parquet` (samples first; the timings file marks the
part done). A campaign killed at any point (SIGKILL included) and started again skips finished
parts, so nothing is measured twice and no file is half-written. When all parts are done they are
consolidated into the campaign's tables. The fingerprint covers every parameter that changes how a
unit is measured, so parts from a differently configured run are never mixed in.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd
import torch

from opcost.config import CampaignParams, ModelInputSet
from opcost.errors import OpcostError
from opcost.io import write_json, write_parquet
from opcost.measure.clocks import DeviceControl, Setting, settings_grid
from opcost.measure.power import EnergySource, open_source
from opcost.measure.timing import measure_window, time_block
from opcost.measure.workload import blocks_for, device_sync, network_workload, op_workload
from opcost.ops.spec import OpSpec
from opcost.progress import progress_bar
from opcost.schemas import NETWORKS, POWER_SAMPLES, TIMINGS, conform

# Rough seconds a trial spends outside the timed loops (building instances, warm-up, calibration).
TRIAL_OVERHEAD_S = 0.1


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

    def estimated_seconds(self) -> float:
        c = self.campaign
        return self.measurements * (TRIAL_OVERHEAD_S + 1.5 * c.min_time_s + c.window_s)

    def summary(self) -> dict[str, Any]:
        ops = {m: sum(u.item_type == "op" and u.mode == m for u in self.units) for m in self.campaign.modes}
        nets = {m: sum(u.item_type == "network" and u.mode == m for u in self.units) for m in self.campaign.modes}
        return {
            "campaign": self.campaign.name,
            "device": self.campaign.device,
            "ops_per_mode": ops,
            "networks_per_mode": nets,
            "settings": [s.label for s in self.settings],
            "trials": self.campaign.trials,
            "parts": self.parts,
            "measurements": self.measurements,
            "estimated_seconds": round(self.estimated_seconds(), 1),
        }


def make_plan(campaign: CampaignParams, units: Sequence[Unit]) -> Plan:
    settings = settings_grid(campaign.clocks_mhz, campaign.power_limits_w)
    ordered = sorted(units, key=lambda u: (campaign.modes.index(u.mode), u.item_type != "op", u.label, u.item_id))
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


def stable_seed(*parts: Any) -> int:
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


def open_nvml(campaign: CampaignParams, nvml_lib: Any = None) -> Any:
    """NVML for CUDA campaigns (or wherever a fake library is injected); None on a plain CPU run."""
    if nvml_lib is None and not campaign.device.startswith("cuda"):
        return None
    from opcost.measure.nvml import Nvml

    index = int(campaign.device.split(":")[1]) if ":" in campaign.device else 0
    return Nvml(index, lib=nvml_lib)


def environment(campaign: CampaignParams, source: EnergySource, nvml: Any) -> dict[str, Any]:
    """Everything that decides what the numbers mean: host, device, versions, math flags."""
    env: dict[str, Any] = {
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
        "cpu": _cpu_model(),
        "energy_source": source.name,
        "energy_counter": source.has_counter,
    }
    try:
        import torchvision

        env["torchvision"] = torchvision.__version__
    except ImportError:  # pragma: no cover
        env["torchvision"] = None
    if campaign.device.startswith("cuda"):
        env["device_name"] = torch.cuda.get_device_name(torch.device(campaign.device))
    else:
        env["device_name"] = env["cpu"]
    if nvml is not None:
        env["nvml_device_name"] = nvml.name()
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


def measure_part(
    campaign: CampaignParams, unit: Unit, setting: Setting, source: EnergySource
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """k independent trials of one unit at one setting: timing rows and power-sample rows."""
    sync = device_sync(campaign.device)
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    base = {
        "campaign": campaign.name,
        "mode": unit.mode,
        "setting": setting.label,
        "clock_mhz": setting.clock_mhz,
        "power_limit_w": setting.power_limit_w,
        "energy_source": source.name,
    }
    failure: str | None = None
    for trial in range(campaign.trials):
        seed = stable_seed(campaign.seed, unit.item_id, unit.mode, setting.label, trial)
        row: dict[str, Any] = {**base, "trial": trial, "seed": seed, "variant": "as-is", "started_at": time.time()}
        if failure is not None:  # the first trial failed (out of memory, unsupported): so will the rest
            rows.append({**row, "status": "failed", "error": failure, "ended_at": time.time()})
            continue
        try:
            if unit.item_type == "op":
                assert unit.spec is not None
                wl = op_workload(
                    unit.spec,
                    unit.mode,
                    campaign.device,
                    seed,
                    campaign.max_instances,
                    campaign.instance_budget_mb * 1e6,
                )
            else:
                assert unit.set is not None
                wl = network_workload(unit.set, unit.mode, campaign.device, seed)
            row["variant"] = wl.variant
            wl.block()  # warm-up: allocator, cuDNN algorithm choice, caches
            sync()
            timing = time_block(wl.block, wl.instances, campaign.min_time_s)
            block_s = float(timing.stats()["mean_s"] or 0.0) * wl.instances
            per_chunk = blocks_for(campaign.window_s, block_s, campaign.chunks)
            sampler = source.start_sampling(campaign.sample_interval_s)
            window = measure_window(wl.block, wl.instances, per_chunk, campaign.chunks, sync, source.read_energy_j)
            trial_samples = sampler.stop()
            energy = window.energy_j if source.has_counter else source.window_energy_j(trial_samples, window.time_s)
            t_fit, e_fit = window.fit("time"), window.fit("energy")
            clocks = [s["sm_clock_mhz"] for s in trial_samples if s.get("sm_clock_mhz") is not None]
            row.update(
                status="ok",
                instances=wl.instances,
                number_per_run=timing.number_per_run,
                runs=len(timing.block_means_s),
                iterations=timing.iterations,
                total_time_s=timing.total_time_s,
                **timing.stats(),
                window_iterations=window.iterations,
                window_time_s=window.time_s,
                window_energy_j=energy,
                time_per_iter_s=window.time_s / window.iterations,
                energy_per_iter_j=None if energy is None else energy / window.iterations,
                power_w=None if energy is None or window.time_s <= 0 else energy / window.time_s,
                time_r2=None if t_fit is None else t_fit[0],
                energy_r2=None if e_fit is None else e_fit[0],
                proportional=window.proportional(),
                sm_clock_mhz=sum(clocks) / len(clocks) if clocks else None,
            )
            ctx = {
                "campaign": campaign.name,
                "item_type": unit.item_type,
                "item_id": unit.item_id,
                "mode": unit.mode,
                "setting": setting.label,
                "trial": trial,
            }
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
    for r in rows:
        if unit.item_type == "op":
            r.update(op_id=unit.item_id, kind=unit.label)
        else:
            assert unit.set is not None
            r.update(set_id=unit.item_id, model=unit.set.model, input_shape=list(unit.set.input_shape))
    return rows, samples


# --------------------------------------------------------------------------------------------
# Running a campaign
# --------------------------------------------------------------------------------------------


class Campaign:
    """Runs a plan into `out_dir`, keeping resumable parts in `parts_root`."""

    def __init__(
        self, plan: Plan, out_dir: Path, parts_root: Path, nvml_lib: Any = None, rapl_root: Path | None = None
    ):
        self.plan = plan
        self.c = plan.campaign
        self.out_dir = Path(out_dir)
        self.parts_dir = Path(parts_root) / fingerprint(self.c)
        self.nvml_lib = nvml_lib
        self.rapl_root = rapl_root

    def _done(self, name: str) -> bool:
        return (self.parts_dir / f"{name}.timings.parquet").is_file()

    def pending(self) -> list[tuple[Setting, Unit]]:
        return [(s, u) for s in self.plan.settings for u in self.plan.units if not self._done(part_name(s, u))]

    def run(self, show_progress: bool = True) -> dict[str, Any]:
        check_device(self.c)
        nvml = open_nvml(self.c, self.nvml_lib)
        kwargs = {"rapl_root": self.rapl_root} if self.rapl_root is not None else {}
        source = open_source(self.c.energy_source, self.c.device, nvml=nvml, **kwargs)
        control = DeviceControl(nvml, self.c.device)
        control.validate(self.plan.settings)
        control.check_permission(self.plan.settings)  # before anything is measured
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.parts_dir.glob(".*.tmp"):  # left by a run killed mid-write (SIGKILL)
            stale.unlink()
        started = time.time()
        skipped = self.plan.parts - len(self.pending())
        try:
            with control.session(), progress_bar(show_progress) as progress:
                task = progress.add_task(self.c.name, total=self.plan.parts, completed=skipped)
                for setting in self.plan.settings:
                    todo = [u for u in self.plan.units if not self._done(part_name(setting, u))]
                    if not todo:
                        continue
                    control.apply(setting)
                    for unit in todo:
                        progress.update(task, description=f"{setting.label} {unit.mode} {unit.label}")
                        rows, samples = measure_part(self.c, unit, setting, source)
                        self._write_part(part_name(setting, unit), unit, rows, samples)
                        progress.advance(task)
        finally:
            source.close()
            if nvml is not None:
                nvml.close()
        meta = self.consolidate(environment(self.c, source, nvml), started, skipped)
        # parts exist only to resume an interrupted run; a finished campaign measured again
        # (`dvc repro -f`, changed code) must measure afresh
        shutil.rmtree(self.parts_dir)
        return meta

    def _write_part(self, name: str, unit: Unit, rows: list[dict], samples: list[dict]) -> None:
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

    def consolidate(self, env: dict[str, Any], started: float, skipped: int) -> dict[str, Any]:
        """All parts of this plan into timings, networks and power_samples, plus campaign.json."""
        missing = self.pending()
        if missing:
            raise OpcostError(f"campaign {self.c.name}: {len(missing)} parts still missing; run it again to resume")
        ops = _concat(self._read_parts("op", "timings"), TIMINGS)
        nets = _concat(self._read_parts("network", "timings"), NETWORKS)
        samples = _concat(self._read_parts("op", "samples") + self._read_parts("network", "samples"), POWER_SAMPLES)
        write_parquet(ops, self.out_dir / "timings.parquet")
        write_parquet(nets, self.out_dir / "networks.parquet")
        write_parquet(samples, self.out_dir / "power_samples.parquet")
        failed = int((ops["status"] == "failed").sum() + (nets["status"] == "failed").sum())
        meta = {
            "campaign": self.c.name,
            "parameters": {**asdict(self.c)},
            "fingerprint": fingerprint(self.c),
            "plan": self.plan.summary(),
            "environment": env,
            "started_at": started,
            "ended_at": time.time(),
            "parts_resumed": skipped,
            "rows": {"timings": len(ops), "networks": len(nets), "power_samples": len(samples)},
            "failed_rows": failed,
            "energy_note": None
            if env["energy_source"] != "none"
            else "no energy source: time only, energy columns are null",
        }
        write_json(meta, self.out_dir / "campaign.json")
        return meta


def _concat(frames: Iterable[pd.DataFrame], table: Any) -> pd.DataFrame:
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
) -> list[Unit]:
    """The ops (and networks) of model-input sets, from the extract stage's tables."""
    specs = dict(zip(operations["op_id"], operations["spec_json"]))
    units: dict[tuple[str, str, str], Unit] = {}
    for s in sets:
        for mode in modes:
            rows = occurrences[(occurrences["set_id"] == s.set_id) & (occurrences["mode"] == mode)]
            if rows.empty:
                raise OpcostError(
                    f"set {s.set_id} in mode {mode} is not in the extract outputs; "
                    "add it to extract.sets in params.yaml"
                )
            for op_id in rows["op_id"]:
                spec = OpSpec.from_json(json.loads(specs[op_id]))
                units[("op", op_id, mode)] = Unit("op", op_id, mode, spec.kind, spec=spec)
            if networks:
                units[("network", s.set_id, mode)] = Unit("network", s.set_id, mode, s.model, set=s)
    return list(units.values())


def units_from_op_ids(op_ids: Sequence[str], modes: Sequence[str], operations: pd.DataFrame) -> list[Unit]:
    specs = dict(zip(operations["op_id"], operations["spec_json"]))
    unknown = [o for o in op_ids if o not in specs]
    if unknown:
        raise OpcostError(
            f"op id(s) {', '.join(unknown)} not in operations.parquet; run `opcost extract` for their networks"
        )
    out = []
    for o in op_ids:
        spec = OpSpec.from_json(json.loads(specs[o]))
        out.extend(Unit("op", o, m, spec.kind, spec=spec) for m in modes)
    return out
