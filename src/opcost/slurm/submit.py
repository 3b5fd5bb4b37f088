"""`opcost submit` and `opcost status`: a campaign as a SLURM job array plus a dependent merge job.

Each array task runs `opcost profile --campaign NAME --shard I/N` on one node (one GPU for a CUDA
campaign): it measures the units k with k mod N == I, writing one atomic part per unit and setting
under `.opcost/parts/NAME/`, so a task killed at its time limit or preempted loses nothing written
(and restores the clocks it set). The merge job (`--dependency=afterok:<array>`) runs `opcost profile
--campaign NAME --merge`, which writes data/raw/NAME exactly as a local run would.

Submitting again measures only what is missing: shards whose parts are all written are left out of
the new array, and inside a resubmitted shard the parts already written are skipped. Every
submission is recorded in `.opcost/slurm/NAME.json`, which `opcost status` reads back together with
squeue/sacct and the parts on disk. The repository must be on a file system the nodes share (as
home and project directories on clusters are): the tasks write parts where the merge job reads them.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from opcost.errors import OpcostError
from opcost.io import atomic_path, write_json
from opcost.locks import file_lock
from opcost.params.load import Params
from opcost.params.profile import CampaignParams, SlurmParams
from opcost.paths import Paths
from opcost.slurm import scheduler
from opcost.slurm.scheduler import JobState

if TYPE_CHECKING:
    from opcost.measure.records import ShardProgress

TELEMETRY_OFF = "export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true DVC_NO_ANALYTICS=1"


def campaign_of(params: Params, name: str) -> CampaignParams:
    campaigns = params.profile.campaigns
    if name not in campaigns:
        valid = ", ".join(sorted(campaigns)) or "none defined"
        raise OpcostError(f"unknown campaign {name!r}; campaigns in params.yaml: {valid}")
    return campaigns[name]


def resolve_options(params: Params, name: str, flags: Mapping[str, Any]) -> SlurmParams:
    """params.yaml's `profile.slurm` (with the campaign's own overrides) under the flags given."""
    given = {k: v for k, v in flags.items() if v is not None}
    return SlurmParams.from_dict(given, "command line", params.profile.slurm_for(name))


def array_spec(shards: Sequence[int], throttle: int | None) -> str:
    """`[0, 1, 2, 5]`, 2 -> `0-2,5%2`: the shard indices as sbatch --array ranges."""
    if not shards:
        raise ValueError("no shards")
    s = sorted(set(shards))
    ranges, start, prev = [], s[0], s[0]
    for i in [*s[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(ranges) + (f"%{throttle}" if throttle else "")


def _header(job_name: str, opts: SlurmParams, output: Path, cpus: int, gres: str | None) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --time={opts.time}"]
    lines += [f"#SBATCH --partition={opts.partition}"] if opts.partition else []
    lines += [f"#SBATCH --account={opts.account}"] if opts.account else []
    lines += [f"#SBATCH --cpus-per-task={cpus}"]
    lines += [f"#SBATCH --mem={opts.mem}"] if opts.mem else []
    lines += [f"#SBATCH --gres={gres}"] if gres else []
    lines += [f"#SBATCH --output={output}"]
    return lines


def _body(root: Path, src: Path, setup: Sequence[str]) -> list[str]:
    q = shlex.quote
    return [
        "set -eu",
        f"cd {q(str(root))}",
        f"export OPCOST_ROOT={q(str(root))}",
        # the code that submitted is the code that measures, whether or not it is installed on the node
        f"export PYTHONPATH={q(str(src))}${{PYTHONPATH:+:$PYTHONPATH}}",
        TELEMETRY_OFF,
        *setup,
    ]


def array_script(
    c: CampaignParams, opts: SlurmParams, shards: Sequence[int], root: Path, python: str, src: Path, run_dir: Path
) -> str:
    """The job array: task I measures shard I of `opts.shards` (one GPU each for a CUDA campaign)."""
    q = shlex.quote
    lines = _header(
        f"opcost-{c.name}",
        opts,
        run_dir / "logs" / "%A_%a.out",
        opts.cpus_per_task,
        opts.gres if c.device.startswith("cuda") else None,
    )
    lines.insert(2, f"#SBATCH --array={array_spec(shards, opts.throttle)}")
    jobs = run_dir / "jobs"
    lines += _body(root, src, opts.setup)
    lines += [
        # the task's own job id: `sacct -c` (no slurmdbd) knows tasks only by it
        f'echo "$SLURM_JOB_ID" > {q(str(jobs))}/"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"',
        # tasks that SLURM puts on one node take turns on its device (the CPU, or a GPU without gres)
        f'exec {q(python)} -m opcost profile --campaign {q(c.name)} --shard "$SLURM_ARRAY_TASK_ID/{opts.shards}" '
        "--wait-for-device --no-progress",
    ]
    return "\n".join(lines) + "\n"


def merge_script(
    c: CampaignParams, opts: SlurmParams, array_job: str | None, root: Path, python: str, src: Path, run_dir: Path
) -> str:
    """The merge job: after every task of `array_job` succeeded (cancelled if one fails), the parts
    become data/raw/NAME. One CPU, no GPU."""
    q = shlex.quote
    lines = _header(f"opcost-{c.name}-merge", opts, run_dir / "logs" / "merge-%j.out", 1, None)
    if array_job:
        lines += [f"#SBATCH --dependency=afterok:{array_job}", "#SBATCH --kill-on-invalid-dep=yes"]
    lines += _body(root, src, opts.setup)
    lines += [f"exec {q(python)} -m opcost profile --campaign {q(c.name)} --merge --shards {opts.shards} --no-progress"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The submission record
# --------------------------------------------------------------------------------------------


def read_record(paths: Paths, name: str) -> dict[str, Any]:
    f = paths.slurm_record(name)
    if not f.is_file():
        return {"campaign": name, "submissions": []}
    try:
        rec = json.loads(f.read_text())
    except json.JSONDecodeError as exc:
        raise OpcostError(f"{f} is not valid JSON ({exc.msg}); remove it to forget earlier submissions") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("submissions"), list):
        raise OpcostError(f"{f} is not a submission record; remove it to forget earlier submissions")
    return rec


def task_id(array_job: str, shard: int) -> str:
    return f"{array_job}_{shard}"


def _job_ids(record: Mapping[str, Any]) -> list[str]:
    """Every job of the record: task ids like 12_3, and merge job ids."""
    ids: list[str] = []
    for s in record["submissions"]:
        if s.get("array_job"):
            ids += [task_id(s["array_job"], i) for i in s["tasks"]]
        ids.append(s["merge_job"])
    return ids


def _raw_ids(run_dir: Path) -> dict[str, str]:
    """Own job id -> `ARRAY_TASK`, from the files each task writes when it starts."""
    out: dict[str, str] = {}
    jobs = run_dir / "jobs"
    if jobs.is_dir():
        for f in jobs.iterdir():
            raw = f.read_text().strip()
            if raw.isdigit():
                out[raw] = f.name
    return out


def job_states(paths: Paths, record: Mapping[str, Any]) -> dict[str, JobState]:
    """SLURM's view of every job in the record: squeue first, accounting for what it has forgotten."""
    ids = _job_ids(record)
    if not ids:
        return {}
    arrays = {s["array_job"] for s in record["submissions"] if s.get("array_job")}
    merges = {s["merge_job"] for s in record["submissions"]}
    states = scheduler.squeue(arrays | merges)
    missing = [i for i in ids if i not in states]
    if missing:
        raw = _raw_ids(paths.slurm_dir(record["campaign"]))
        raw.update({m: m for m in merges})
        wanted = {r: t for r, t in raw.items() if t in missing}
        states.update(scheduler.sacct(missing, wanted))
    return states


# --------------------------------------------------------------------------------------------
# Submitting
# --------------------------------------------------------------------------------------------


def shard_progress(paths: Paths, params: Params, name: str, n_shards: int) -> list[ShardProgress]:
    """Per shard: parts_total, parts_done, failed_rows, last_error, and merged (data/raw/NAME holds
    the whole campaign), from what is on disk; the profiler's own account (opcost.measure.shards)."""
    from opcost.measure.shards import shard_progress as progress
    from opcost.stages.profile import stage_campaign

    return progress(stage_campaign(paths, params, name), n_shards)


def is_merged(progress: Sequence[Mapping[str, Any]]) -> bool:
    return bool(progress) and all(p.get("merged", False) for p in progress)


def package_dir() -> Path:
    """The folder holding the `opcost` package that runs now (src/ of a checkout)."""
    import opcost

    return Path(opcost.__file__).resolve().parent.parent


def submit(
    paths: Paths,
    params: Params,
    name: str,
    flags: Mapping[str, Any] | None = None,
    python: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Submit the missing shards of campaign `name` as a job array and a merge job after it."""
    c = campaign_of(params, name)
    opts = resolve_options(params, name, flags or {})
    python = python or sys.executable
    with file_lock(paths.slurm_record(name).with_suffix(".lock"), f"submitting campaign {name}", wait=False):
        record = read_record(paths, name)
        if not dry_run:
            states = job_states(paths, record)
            active = sorted(j for j, s in states.items() if s.phase != "finished")
            if active:
                raise OpcostError(
                    f"campaign {name}: job(s) {', '.join(active)} still queued or running; wait for them "
                    f"(`opcost status --campaign {name}`) or scancel them, then submit again"
                )
        progress = shard_progress(paths, params, name, opts.shards)
        if is_merged(progress):
            return {"campaign": name, "complete": True, "submitted": False}
        empty = [i for i, p in enumerate(progress) if p["parts_total"] == 0]
        if empty:
            total = sum(p["parts_total"] for p in progress)
            raise OpcostError(
                f"campaign {name} has {total} parts, too few for {opts.shards} shards (shard(s) "
                f"{', '.join(map(str, empty))} would be empty): use --shards {min(total, opts.shards - len(empty))} "
                f"or fewer"
            )
        todo = [i for i, p in enumerate(progress) if p["parts_done"] < p["parts_total"]]
        run_dir = paths.slurm_dir(name)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        src = package_dir()
        result: dict[str, Any] = {
            "campaign": name,
            "complete": False,
            "submitted": not dry_run,
            "shards": opts.shards,
            "tasks": todo,
            "done_shards": [i for i in range(opts.shards) if i not in todo],
            "options": asdict(opts),
        }
        scripts = {}
        if todo:
            scripts["array"] = array_script(c, opts, todo, paths.root, python, src, run_dir)
        if dry_run:
            scripts["merge"] = merge_script(
                c, opts, "<array job id>" if todo else None, paths.root, python, src, run_dir
            )
            return {**result, "scripts": scripts}
        for sub in ("logs", "jobs"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        array_job = None
        if todo:
            array_file = run_dir / f"array-{stamp}.sh"
            _write(array_file, scripts["array"])
            array_job = scheduler.sbatch(array_file)
        merge_file = run_dir / f"merge-{stamp}.sh"
        _write(merge_file, merge_script(c, opts, array_job, paths.root, python, src, run_dir))
        merge_job = scheduler.sbatch(merge_file)
        record["submissions"].append(
            {
                "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "shards": opts.shards,
                "tasks": todo,
                "array_job": array_job,
                "merge_job": merge_job,
                "array_script": str(array_file) if todo else None,
                "merge_script": str(merge_file),
                "options": asdict(opts),
            }
        )
        write_json(record, paths.slurm_record(name))
        return {**result, "array_job": array_job, "merge_job": merge_job}


def _write(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------


def log_tail(path: Path, limit: int = 300) -> str:
    """The last non-empty line of a job's log (where opcost prints its one-line error), or ''."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def shard_rows(
    progress: Sequence[Mapping[str, Any]],
    submissions: Sequence[Mapping[str, Any]],
    states: Mapping[str, JobState],
    tail: Callable[[str], str],
) -> list[dict[str, Any]]:
    """Per shard: done (all parts written), pending, running, failed (with why) or not submitted.

    A shard belongs to the newest submission that included it; `tail(task id)` gives the last line of
    that task's log. A task that ended without writing all its parts failed, whatever its exit code."""
    rows = []
    for shard, p in enumerate(progress):
        sub = next((s for s in reversed(submissions) if s.get("array_job") and shard in s["tasks"]), None)
        job = task_id(sub["array_job"], shard) if sub else None
        st = states.get(job) if job else None
        row = {
            "shard": shard,
            "state": "",
            "parts_done": int(p["parts_done"]),
            "parts_total": int(p["parts_total"]),
            "failed_rows": int(p.get("failed_rows") or 0),
            "job": job,
            "slurm_state": st.state if st else None,
            "error": None,
        }
        if p["parts_done"] >= p["parts_total"]:
            row["state"] = "done"
            if row["failed_rows"]:
                row["error"] = f"{row['failed_rows']} measurement(s) failed, last: {p.get('last_error')}"
        elif job is None:
            row["state"] = "not submitted"
        elif st is not None and st.phase != "finished":
            row["state"] = st.phase
        else:
            row["state"] = "failed"
            why = st.describe() if st else "no record in squeue or sacct (cancelled before it started?)"
            if st is not None and st.state == "COMPLETED":
                why = "ended without writing all its parts"
            last = tail(job)
            row["error"] = f"{why}: {last}" if last else why
        rows.append(row)
    return rows


def status(paths: Paths, params: Params, name: str) -> dict[str, Any]:
    """Per-shard state of campaign `name` and of its latest merge job."""
    campaign_of(params, name)
    record = read_record(paths, name)
    subs = record["submissions"]
    n = subs[-1]["shards"] if subs else params.profile.slurm_for(name).shards
    progress = shard_progress(paths, params, name, n)
    complete = is_merged(progress)
    states = job_states(paths, record) if subs else {}
    logs = paths.slurm_dir(name) / "logs"
    rows = shard_rows(progress, subs, states, lambda job: log_tail(logs / f"{job}.out"))
    if complete:  # merged: the parts are gone, the tables in data/raw/NAME hold them
        for r in rows:
            r.update(state="done", parts_done=r["parts_total"], error=None)
    merge = None
    if subs:
        m = subs[-1]["merge_job"]
        st = states.get(m)
        merge = {
            "job": m,
            "state": st.phase if st else ("finished" if complete else "unknown"),
            "slurm_state": st.state if st else None,
            "detail": st.describe() if st else None,
            "error": log_tail(logs / f"merge-{m}.out") if st and st.phase == "finished" and not complete else None,
        }
    return {
        "campaign": name,
        "complete": complete,
        "shards": n,
        "submissions": len(subs),
        "merge": merge,
        "rows": rows,
    }
