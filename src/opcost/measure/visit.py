"""A GPU visit: one command that makes a short stay on a GPU machine count, and its landing on the DVC side.

On the GPU machine (PyTorch, NVML bindings, pandas, pyarrow, typer, rich, PyYAML; no DVC, MLflow, XGBoost or
scikit-learn, no network), `opcost visit --campaign NAME --out ARCHIVE`:
1. checks the environment (a CUDA device, NVML with an energy counter, the packages the profile path needs,
   disk space) and records it, the host CPU included;
2. runs the 10 s energy-counter check (measure/energycheck.py);
3. runs campaign NAME of params.yaml, planned over ops traced on the spot (extraction runs on meta tensors,
   so no DVC output is needed) and resumable after an interrupt;
4. packs the campaign's files, the check and the visit record into one .tar.gz of at most 16 MB.
On the DVC machine `opcost land ARCHIVE` (measure/land.py) puts the campaign into data/raw/NAME/, so that
`dvc repro profile@NAME` records it as complete.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opcost.errors import OpcostError
from opcost.io import atomic_path, write_json
from opcost.measure.records import VisitEnvironment, VisitRecord, VisitResult
from opcost.params.extract import ModelInputSet
from opcost.params.profile import CampaignParams

if TYPE_CHECKING:
    from opcost.measure.campaign import Plan

ARCHIVE_LIMIT_BYTES = 16 * 2**20
NEEDED = ("torch", "torchvision", "pandas", "pyarrow", "pynvml", "typer", "rich", "yaml")
NOT_NEEDED = ("dvc", "mlflow", "xgboost", "sklearn")  # the visit never imports these: recorded, not required
VISIT_FILE = "visit.json"
CHECK_FILE = "energy_counter_check.json"
MIN_FREE_BYTES = 1 * 2**30


def environment_check(campaign: CampaignParams, out: Path) -> VisitEnvironment:
    """What the machine has, as a record; an OpcostError naming the first thing missing that the visit needs."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        raise OpcostError(f"this machine lacks {', '.join(missing)}: a visit needs {', '.join(NEEDED)}")
    import torch

    if not campaign.device.startswith("cuda"):
        raise OpcostError(f"campaign {campaign.name} measures on {campaign.device}: a visit is for a CUDA device")
    index = int(campaign.device.split(":")[1]) if ":" in campaign.device else 0
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        raise OpcostError(f"no CUDA device {campaign.device} on this machine: run the visit where the GPU is")
    free = shutil.disk_usage(out.parent if out.parent.exists() else Path(".")).free
    if free < MIN_FREE_BYTES:
        raise OpcostError(f"{out.parent}: {free / 2**20:.0f} MiB free, a visit needs {MIN_FREE_BYTES / 2**30:g} GiB")
    from opcost.measure.campaign import _cpu_model

    props = torch.cuda.get_device_properties(index)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "device": campaign.device,
        "device_name": props.name,
        "device_memory_gib": round(props.total_memory / 2**30, 1),
        "host_cpu": _cpu_model(),
        "host_cpu_count": __import__("os").cpu_count(),
        "platform": platform.platform(),
        "present": {m: importlib.util.find_spec(m) is not None for m in NEEDED + NOT_NEEDED},
        "free_disk_gib": round(free / 2**30, 1),
    }


def visit_plan(campaign: CampaignParams, sets: list[ModelInputSet], extracted: tuple[Path, Path] | None) -> Plan:
    """The campaign's plan: over the extract stage's tables where they travelled with the project
    (`extracted`: operations and occurrences Parquet files), else over ops traced on the spot (its own sets,
    and every torchvision set of sets.yaml for its op ids: an op id is a hash of the op's spec, so tracing finds
    the ids DVC's extract stage does; about a minute on two cores)."""
    import pandas as pd

    from opcost.measure.profile import campaign_plan
    from opcost.schemas import OCCURRENCES, OPERATIONS

    wanted = campaign.set_modes()
    by_id = {s.set_id: s for s in sets}
    unknown = [s for s in wanted if s not in by_id]
    if unknown:
        raise OpcostError(f"campaign {campaign.name}: set(s) {', '.join(unknown)} not in sets.yaml")
    if extracted is not None and all(p.is_file() for p in extracted):
        ops, occ = (
            OPERATIONS.validate(pd.read_parquet(extracted[0])),
            OCCURRENCES.validate(pd.read_parquet(extracted[1])),
        )
    else:
        from opcost.ops.catalog import extract_sets, occurrences_frame, operations_frame

        traced = [s for s in sets if s.set_id in wanted or (campaign.op_ids and not s.is_user)]
        catalog = extract_sets(traced, show_progress=False)
        ops, occ = operations_frame(catalog), occurrences_frame(catalog)
    return campaign_plan(campaign, [by_id[s] for s in wanted], ops, occ)


def pack(folder: Path, archive: Path, name: str) -> int:
    """`folder`'s files (not its parts) into `archive` (.tar.gz) under `name/`; its size, at most the limit."""
    with atomic_path(archive) as tmp:
        with tarfile.open(tmp, "w:gz") as tar:
            for f in sorted(folder.iterdir()):
                if f.is_file() and not f.name.startswith("."):
                    tar.add(f, arcname=f"{name}/{f.name}")
        size = tmp.stat().st_size
        if size > ARCHIVE_LIMIT_BYTES:
            raise OpcostError(
                f"{archive}: {size / 2**20:.1f} MB is over the visit's {ARCHIVE_LIMIT_BYTES / 2**20:g} MB: measure "
                "fewer units or a longer sample_interval_s"
            )
    return size


def run_visit(
    campaign: CampaignParams,
    sets: list[ModelInputSet],
    archive: Path,
    work: Path,
    check_seconds: float = 10.0,
    show_progress: bool = True,
    say: Callable[[str], None] = print,
    extracted: tuple[Path, Path] | None = None,
) -> VisitResult:
    """The whole visit (environment, energy check, campaign, archive); resumes in `work` after an interrupt."""
    from opcost.locks import device_state_dir
    from opcost.measure.campaign import Campaign
    from opcost.measure.energycheck import energy_check
    from opcost.measure.nvml import Nvml

    started = time.time()
    env = environment_check(campaign, archive)
    say(f"visit {campaign.name}: {env['device_name']} on {env['host_cpu']} ({env['host_cpu_count']} CPUs)")
    out = work / campaign.name
    out.mkdir(parents=True, exist_ok=True)
    check_path = out / CHECK_FILE
    if not check_path.is_file():
        index = int(campaign.device.split(":")[1]) if ":" in campaign.device else 0
        nvml = Nvml(index)
        try:
            check = energy_check(nvml, campaign.device, check_seconds)
        finally:
            nvml.close()
        write_json(check, check_path)
        say(
            f"energy check: counter {check['counter_power_w']:.0f} W over {check['seconds']:.1f} s, integrated "
            f"power {100 * (check['relative_difference'] or 0):+.2f} %, counter period "
            f"{1000 * (check['counter_period']['median_s'] or 0):.0f} ms"
        )
    plan = visit_plan(campaign, sets, extracted)
    say(f"plan: {plan.parts} parts, {plan.measurements} measurements, about {plan.estimated_seconds() / 60:.1f} min")
    result = Campaign(plan, out, work / ".parts", state_dir=device_state_dir()).run(show_progress)
    record: VisitRecord = {
        "campaign": campaign.name,
        "environment": env,
        "started_at": started,
        "ended_at": time.time(),
        "plan_estimated_seconds": plan.estimated_seconds(),
        "argv": sys.argv,
    }
    write_json(record, out / VISIT_FILE)
    size = pack(out, archive, campaign.name)
    return {**result, "archive": str(archive), "archive_bytes": size, "visit_seconds": time.time() - started}
