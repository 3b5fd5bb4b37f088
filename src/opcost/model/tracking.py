"""MLflow: the only module that knows tracking URIs, experiment, run and registered-model names.

Tracking URI: `MLFLOW_TRACKING_URI` if set, else `sqlite:///<repo root>/mlflow.db` (MLflow 3
refuses the file store unless forced). The root comes from `config.find_root`, which honours
`DVC_ROOT`, so `dvc exp run --temp` logs into the repository's database, not the temporary copy's;
for the same reason experiments get an explicit artifact location under the root (`mlruns/`).
Numbers that decide things live in DVC metrics files; MLflow mirrors them for browsing.

Concurrency and interrupts:
- On SQLite, creating a fresh store (MLflow migrates its schema) and every registry write happen
  under one file lock beside the database (`mlflow.db.lock`), so two processes never race. A
  tracking server serialises writes itself; there the registry relies on resolving duplicate
  versions after the fact (model/registry.py), which needs no lock.
- `tracked_run` ends a run FINISHED, FAILED on an exception, or KILLED on SIGINT/SIGTERM/SIGHUP,
  never leaving it RUNNING; a run whose process died without a chance to say so (SIGKILL) is
  marked KILLED by the next `setup` on the same host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path
from typing import Any, Iterator

from opcost.locks import file_lock

EXPERIMENT = "opcost-train"
VALIDATE_EXPERIMENT = "opcost-validate"
VALIDATE_RUN = "validate"
CHAMPION = "champion"
CLOCK_MODEL = "opcost-clock"  # the registered transferred clock model (stage train-clock)
CLOCK_RUN = "train-clock"
HOST_TAG = "opcost.host"
PID_TAG = "opcost.pid"


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def _sqlite_file(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def registered_name(target: str) -> str:
    """`A30-inference` -> `opcost-A30-inference`."""
    return f"opcost-{target}"


def stage_run_name(target: str) -> str:
    return f"train@{target}"


def nested_run_name(algorithm: str, quantity: str, feature_set: str, split: str) -> str:
    return f"{algorithm}-{quantity}-{feature_set}-{split}"


@contextlib.contextmanager
def write_lock(root: Path) -> Iterator[None]:
    """Exclusive access for store creation and registry writes on a SQLite store; a no-op for a
    tracking server."""
    db = _sqlite_file(tracking_uri(root))
    if db is None:
        yield
        return
    with file_lock(db.with_name(db.name + ".lock"), f"the MLflow store {db}"):
        yield


def setup(root: Path, experiment: str = EXPERIMENT) -> Any:
    """Point MLflow at the project's store and experiment (creating both under the lock); mark runs
    of dead processes on this host KILLED. Returns the mlflow module."""
    import logging

    import mlflow
    from mlflow import MlflowClient

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    uri = tracking_uri(root)
    mlflow.set_tracking_uri(uri)
    with write_lock(root):
        client = MlflowClient()
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            location = (Path(root).resolve() / "mlruns").as_uri() if _sqlite_file(uri) else None
            client.create_experiment(experiment, artifact_location=location)
        mlflow.set_experiment(experiment)
        reap_dead_runs(client, experiment)
    return mlflow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_runs(client: Any, experiment: str) -> list[str]:
    """Runs still RUNNING whose process (on this host) is gone: set to KILLED. Returns their ids."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    host = socket.gethostname()
    runs = client.search_runs(
        [exp.experiment_id], filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'"
    )
    dead = []
    for r in runs:
        pid = r.data.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            client.set_terminated(r.info.run_id, status="KILLED")
            dead.append(r.info.run_id)
    return dead


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C so every run and lock is closed."""


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def tracked_run(mlflow: Any, run_name: str, nested: bool = False, tags: dict[str, str] | None = None) -> Iterator[Any]:
    """A run that always ends: FINISHED, FAILED (exception) or KILLED (interrupt or signal)."""
    all_tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), **(tags or {})}
    run = mlflow.start_run(run_name=run_name, nested=nested, tags=all_tags)
    guard = contextlib.nullcontext() if nested else _signals_interrupt()
    try:
        with guard:
            yield run
    except KeyboardInterrupt:
        mlflow.end_run(status="KILLED")
        raise
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run()


def source_tags(root: Path) -> dict[str, str]:
    """Where a run's code came from: the git commit (and whether the tree had uncommitted changes)
    and the DVC experiment name when `dvc exp run` is running it."""
    import subprocess

    tags = {}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            tags["git_commit"] = head.stdout.strip()
            tags["git_dirty"] = str(bool(dirty.stdout.strip())).lower()
    except (OSError, subprocess.SubprocessError):
        pass
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    return tags


CHAMPION_BRANCH = "main"
# Files whose uncommitted changes make a run "not committed work" (dvc.lock and outputs may differ
# while `dvc repro` runs; code, parameters and the pipeline may not).
COMMITTED_PATHS = ("src", "params.yaml", "dvc.yaml", "pyproject.toml")


def committed_main(root: Path) -> tuple[bool, str]:
    """Whether a run here is committed work on the main branch (not a DVC experiment), and why not."""
    import subprocess

    if os.environ.get("DVC_EXP_NAME"):
        return False, f"a DVC experiment ({os.environ['DVC_EXP_NAME']})"
    try:
        branch = subprocess.run(
            ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        diff = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--", *COMMITTED_PATHS], cwd=root, capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False, "not a git checkout"
    if branch.returncode != 0:
        return False, "not a git checkout"
    if branch.stdout.strip() != CHAMPION_BRANCH:
        return False, f"branch {branch.stdout.strip()!r}, not {CHAMPION_BRANCH!r}"
    if diff.returncode != 0:
        return False, f"uncommitted changes in {', '.join(COMMITTED_PATHS)}"
    return True, ""


def find_version(client: Any, name: str, bundle_hash: str) -> Any | None:
    """The registered version of `name` whose bundle has this content hash (the oldest, if several)."""
    found = versions_with_hash(client, name, bundle_hash)
    return found[0] if found else None


def versions_with_hash(client: Any, name: str, bundle_hash: str) -> list[Any]:
    try:
        versions = client.search_model_versions(f"name='{name}'")
    except Exception:  # no such registered model yet
        return []
    return sorted((v for v in versions if v.tags.get("bundle_hash") == bundle_hash), key=lambda v: int(v.version))


def champion_version(client: Any, name: str) -> Any | None:
    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except Exception:
        return None
