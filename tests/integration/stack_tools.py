"""Helpers of the integration tests: run commands in a clone, edit its params, wait."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True, timeout: float = 900):
    """Run a command; on failure show its output in the test report."""
    r = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env or os.environ.copy(), capture_output=True, text=True, timeout=timeout
    )
    if check and r.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {r.returncode}\n"
            f"--- stdout\n{r.stdout[-6000:]}\n--- stderr\n{r.stderr[-6000:]}"
        )
    return r


def opcost_env(clone: Path, **extra: str) -> dict[str, str]:
    """The clone's code first on the path, the venv's tools on PATH, the stack's settings inherited."""
    env = os.environ.copy()
    env["PYTHONPATH"] = str(clone / "src")
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env.pop("OPCOST_ROOT", None)
    env.update(extra)
    return env


def opcost(clone: Path, *args: str, env: dict[str, str] | None = None, check: bool = True, timeout: float = 900):
    return run([sys.executable, "-m", "opcost", *args], clone, env or opcost_env(clone), check, timeout)


def dvc(clone: Path, *args: str, env: dict[str, str] | None = None, check: bool = True, timeout: float = 900):
    return run([BIN / "dvc", *args], clone, env or opcost_env(clone), check, timeout)


def make_clone(dest: Path, source: Path = REPO, rev: str | None = None) -> Path:
    """A git clone of `source` at `rev` (default: this checkout's HEAD commit) on a branch named main,
    as a team member's checkout would be (the champion alias moves only from committed main), DVC
    analytics off."""
    rev = rev or run(["git", "rev-parse", "HEAD"], source).stdout.strip()
    run(["git", "clone", "--quiet", "--no-checkout", str(source), str(dest)], dest.parent)
    run(["git", "checkout", "--quiet", "-B", "main", rev], dest)
    run(["git", "config", "user.email", "ci@opcost.invalid"], dest)
    run(["git", "config", "user.name", "opcost integration test"], dest)
    dvc(dest, "config", "--local", "core.analytics", "false")
    return dest


def set_params(clone: Path, edit: Callable[[dict], None]) -> None:
    p = clone / "params.yaml"
    raw = yaml.safe_load(p.read_text())
    edit(raw)
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    # committed, as a team commits its configuration: results from uncommitted parameters never move
    # the champion alias
    run(["git", "commit", "--quiet", "-m", "integration test parameters", "params.yaml"], clone)


def wait_for(what: str, done: Callable[[], bool], timeout: float, every: float = 0.5) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def small_training(raw: dict) -> None:
    """params.yaml's train section cut to a few small trees: a training run the stack tests can wait for."""
    raw["train"].update({"folds": 3, "random_forest": {"n_estimators": 10}, "xgboost": {"n_estimators": 20}})


def training_inputs(clone: Path, target: str) -> None:
    """The evaluate stage's per-target table, made here if the commit's data was not pushed yet."""
    if not (clone / "data" / "evaluated" / "targets" / target / "operations.parquet").is_file():
        dvc(clone, "repro", "--single-item", "evaluate")
