"""Issue 24.1: `dvc exp run --temp` and `--queue` stay in their copy.

DVC 3 runs temp and queued experiments in a copy of the repository and sets `DVC_ROOT` to the
user's workspace. A stage that resolved its root from `DVC_ROOT` read the workspace's params and
overwrote the workspace's outputs. These tests run real DVC experiments on a tiny git+DVC repository
whose stage is an opcost-style entry point: it finds the root with `paths.find_root`, reads a
parameter from `Paths.params` and writes an output, and records which MLflow store
`tracking.tracking_uri` would use (the workspace's shared one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

STAGE = """\
import json
from pathlib import Path

import yaml

from opcost.paths import Paths, find_root
from opcost.model.records import tracking

root = find_root()
seed = yaml.safe_load(Paths(root).params.read_text())["seed"]
out = root / "out.json"
out.write_text(json.dumps({"seed": seed, "root": str(root), "store": tracking.tracking_uri(root)}))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPCOST_ROOT", "DVC_ROOT", "MLFLOW_TRACKING_URI")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # `dvc queue start` spawns its worker as `dvc` from PATH: without this environment's on it (pytest run as
    # .venv/bin/python -m pytest, not under `make test`), no worker starts and the experiment stays queued
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        DVC_NO_ANALYTICS="1",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    return env


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    res = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{args}: {res.stdout}\n{res.stderr}"
    return res


@pytest.fixture
def exp_repo(tmp_path: Path) -> Path:
    if shutil.which("dvc") is None and not (Path(sys.executable).parent / "dvc").exists():
        pytest.skip("dvc not installed")
    repo = tmp_path / "ws"
    repo.mkdir()
    (repo / "stage.py").write_text(STAGE)
    (repo / "params.yaml").write_text("seed: 1\n")
    (repo / "dvc.yaml").write_text(
        "stages:\n  fit:\n"
        f"    cmd: {sys.executable} stage.py\n"
        "    deps: [stage.py]\n    params: [seed]\n    outs: [out.json]\n"
    )
    _run(["git", "init", "-q", "-b", "main"], repo)
    _run([_dvc(), "init", "-q"], repo)
    _run([_dvc(), "repro", "-q"], repo)
    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-qm", "init"], repo)
    return repo


def _dvc() -> str:
    local = Path(sys.executable).parent / "dvc"
    return str(local) if local.exists() else "dvc"


def _workspace_unchanged(repo: Path) -> None:
    out = json.loads((repo / "out.json").read_text())
    assert out["seed"] == 1, "the experiment overwrote the workspace's output"
    assert out["root"] == str(repo.resolve())
    assert _run(["git", "status", "--porcelain"], repo).stdout.strip() == ""
    status = _run([_dvc(), "status"], repo).stdout
    assert "up to date" in status.lower() or not status.strip(), status


def _exp_output(repo: Path, name: str) -> dict:
    # the experiment's own committed out.json (DVC-tracked: read through `dvc exp apply` in a throwaway
    # copy would be slow; the exp ref's dvc.lock md5 is compared to the cache instead)
    show = json.loads(_run([_dvc(), "exp", "show", "--json"], repo).stdout)
    for commit in show:
        for exp in commit.get("experiments") or []:
            for rev in exp.get("revs", []):
                if rev.get("name") == name:
                    data = rev["data"]
                    outs = data["outs"]
                    md5 = outs["out.json"]["hash"]
                    cached = repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
                    return {"params": data["params"]["params.yaml"]["data"], "out": json.loads(cached.read_text())}
    raise AssertionError(f"experiment {name} not found in {show}")


def test_exp_run_temp_stays_in_its_copy(exp_repo: Path) -> None:
    _run([_dvc(), "exp", "run", "--temp", "-n", "tmpexp", "-S", "seed=2"], exp_repo, timeout=180)
    _workspace_unchanged(exp_repo)
    got = _exp_output(exp_repo, "tmpexp")
    assert got["params"]["seed"] == 2
    assert got["out"]["seed"] == 2, "the experiment read the workspace's params, not its own"
    assert got["out"]["root"] != str(exp_repo.resolve())
    # the MLflow store stays the shared one in the workspace, not the throwaway copy's
    assert got["out"]["store"] == f"sqlite:///{exp_repo.resolve() / 'mlflow.db'}"


def test_exp_run_queue_stays_in_its_copy(exp_repo: Path) -> None:
    _run([_dvc(), "exp", "run", "--queue", "-n", "qexp", "-S", "seed=3"], exp_repo)
    _run([_dvc(), "queue", "start", "-j", "1"], exp_repo)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            status = _run([_dvc(), "queue", "status"], exp_repo).stdout
            line = next((ln for ln in status.splitlines() if "qexp" in ln), "")
            if "Success" in line or "Failed" in line:
                break
            time.sleep(1)
        assert "Success" in line, status
    finally:
        subprocess.run([_dvc(), "queue", "stop", "--kill"], cwd=exp_repo, env=_env(), capture_output=True, timeout=60)
    _workspace_unchanged(exp_repo)
    got = _exp_output(exp_repo, "qexp")
    assert got["params"]["seed"] == 3
    assert got["out"]["seed"] == 3, "the queued experiment read the workspace's params, not its own"
    assert got["out"]["store"] == f"sqlite:///{exp_repo.resolve() / 'mlflow.db'}"
