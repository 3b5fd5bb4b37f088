"""SLURM's command-line tools through subprocess, and their output parsed.

The CLI (`sbatch --parsable`, `squeue`, `sacct --parsable2`) is what every SLURM site has and what
users type themselves; it needs no extra package and its output is easy to capture for tests
(tests/fixtures/slurm/ holds output of a real slurmctld). The parsers are pure functions.

Finished jobs: `squeue` shows them only for MinJobAge seconds (300 by default). After that, `sacct`
knows them where the cluster keeps accounting (slurmdbd). A cluster without slurmdbd but with
`JobCompType=jobcomp/filetxt` (the local stack) answers only `sacct -c`, which knows no array
indices: there the caller maps each task's own job id (which the job script records) back to it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from opcost.errors import OpcostError

# squeue state words -> the phase opcost reports; any other state is finished (COMPLETED, FAILED, ...)
ACTIVE: dict[str, str] = {
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "RESIZING": "running",
}
SQUEUE_FORMAT = "%i|%A|%T|%r"  # job id (ARRAY_TASK for array tasks), own job id, state, reason
SACCT_FORMAT = "JobID,JobIDRaw,State,ExitCode"
NO_ACCOUNTING = "accounting storage is disabled"


@dataclass(frozen=True)
class JobState:
    """One job or array task as SLURM reports it."""

    job_id: str  # "12_3" for task 3 of array job 12, "13" for a plain job
    raw_id: str  # the job id SLURM gave this task itself
    state: str  # SLURM's state word: PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
    reason: str = ""  # squeue's reason (Dependency, Resources, NonZeroExitCode, ...)
    exit_code: str = ""  # sacct's exit code, "code:signal"

    @property
    def phase(self) -> str:
        """pending, running or finished."""
        return ACTIVE.get(self.state, "finished")

    def describe(self) -> str:
        """`TIMEOUT`, `FAILED (exit 3:0)`, `CANCELLED (DependencyNeverSatisfied)`."""
        extra = [x for x in (f"exit {self.exit_code}" if self.exit_code else "", self.reason) if x and x != "None"]
        return f"{self.state} ({', '.join(extra)})" if extra else self.state


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise OpcostError(
            f"`{cmd[0]}` not found: run this on a SLURM login node (locally: `make stack-up`, then `source .stack/env`)"
        ) from None
    except subprocess.TimeoutExpired:
        raise OpcostError(f"`{' '.join(cmd[:2])} ...` did not answer within 60 s: is slurmctld up?") from None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_sbatch(stdout: str) -> str:
    """`sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`."""
    first = stdout.strip().split(";")[0]
    if not first.isdigit():
        raise OpcostError(f"sbatch printed {stdout.strip()!r}, not a job id")
    return first


def sbatch(script: Path) -> str:
    """Submit `script` (its options are #SBATCH lines); returns the job id."""
    r = _run(["sbatch", "--parsable", str(script)])
    if r.returncode != 0:
        raise OpcostError(f"sbatch {script.name} failed: {_first_line(r.stderr) or _first_line(r.stdout)}")
    return parse_sbatch(r.stdout)


def _state_word(text: str) -> str:
    return text.split()[0] if text.strip() else ""


def parse_squeue(text: str) -> dict[str, JobState]:
    """Lines of `squeue -h -r -o '%i|%A|%T|%r'`, by job id (`12_3` or `13`)."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or "[" in fields[0]:  # not ours, or an array range that -r did not split
            continue
        out[fields[0]] = JobState(fields[0], fields[1], _state_word(fields[2]), reason=fields[3])
    return out


def parse_sacct(text: str, raw_to_job: Mapping[str, str] | None = None) -> dict[str, JobState]:
    """Lines of `sacct --parsable2 --noheader --format=JobID,JobIDRaw,State,ExitCode`, by job id.

    Job steps (`12_3.batch`) are skipped. `raw_to_job` maps own job ids to `ARRAY_TASK` ids, for
    `sacct -c`, whose JobID is the own id."""
    raw_to_job = raw_to_job or {}
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or "." in fields[0] or "[" in fields[0]:
            continue
        job_id = raw_to_job.get(fields[0], fields[0])
        out[job_id] = JobState(job_id, fields[1], _state_word(fields[2]), exit_code=fields[3])
    return out


def squeue(job_ids: Iterable[str]) -> dict[str, JobState]:
    """Jobs and array tasks of these jobs that the controller still knows (finished ones for MinJobAge)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    r = _run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(ids), "-o", SQUEUE_FORMAT])
    if r.returncode != 0:
        if "invalid job id" in r.stderr.lower():  # every id has left the controller's memory
            return {}
        raise OpcostError(f"squeue failed: {_first_line(r.stderr)}")
    return parse_squeue(r.stdout)


def sacct(job_ids: Iterable[str], raw_to_job: Mapping[str, str]) -> dict[str, JobState]:
    """Finished jobs from accounting: `sacct` where slurmdbd keeps it, else `sacct -c` (job completion
    records) on the own ids in `raw_to_job`. Empty where neither knows them."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    base = ["sacct", "--parsable2", "--noheader", f"--format={SACCT_FORMAT}"]
    r = _run([*base, "-X", "-j", ",".join(ids)])
    if r.returncode == 0:
        return parse_sacct(r.stdout)
    if NO_ACCOUNTING not in (r.stderr + r.stdout).lower():
        raise OpcostError(f"sacct failed: {_first_line(r.stderr) or _first_line(r.stdout)}")
    if not raw_to_job:
        return {}
    r = _run([*base, "-c", "-j", ",".join(sorted(raw_to_job))])
    if r.returncode != 0:  # no job completion records either
        return {}
    return parse_sacct(r.stdout, raw_to_job)
