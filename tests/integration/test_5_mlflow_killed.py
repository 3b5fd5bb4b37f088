"""The stack's MLflow server killed in the middle of `opcost train` (issue 24.5): the command ends in one
line naming the server with exit status 2, nothing it wrote is lost, and once the server is back the
run record is replayed and the bundle registered by `opcost sync-registry`.

Runs last (file order): it kills the stack's `mlflow server` (its whole process group, as a crash or
an OOM kill would) and starts it again with the same command line and environment, so the stack is
whole again afterwards (`make stack-down` stops the new one by the same PID file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from stack_tools import dvc, opcost, opcost_env, run, set_params, small_training, training_inputs, wait_for

TARGET = "RTX2080Ti-training"


class StackServer:
    """The stack's `mlflow server`, found by its PID file (stack/up.sh), killed and started again."""

    def __init__(self) -> None:
        stack = Path(os.environ["SLURM_CONF"]).parents[1]  # $STACK/slurm/slurm.conf
        self.pid_file = stack / "pids" / "mlflow.pid"
        self.log = stack / "logs" / "mlflow.log"
        self.pid = int(self.pid_file.read_text().split()[0])
        proc = Path(f"/proc/{self.pid}")
        self.argv = [a for a in (proc / "cmdline").read_bytes().decode().split("\0") if a]
        self.env = dict(kv.split("=", 1) for kv in (proc / "environ").read_bytes().decode().split("\0") if "=" in kv)
        self.cwd = os.readlink(proc / "cwd")
        self.uri = os.environ["MLFLOW_TRACKING_URI"]

    def kill(self) -> None:
        os.killpg(self.pid, signal.SIGKILL)  # setsid in up.sh: the group is the server and its workers

    def start(self) -> None:
        with open(self.log, "a") as log:
            p = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        self.pid = p.pid
        self.pid_file.write_text(f"{p.pid}\n")
        wait_for("mlflow server back", self.healthy, timeout=120, every=1)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.uri + "/health", timeout=2):
                return True
        except OSError:
            return False


def _running_train_run(uri: str, since_ms: int) -> bool:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("opcost-train")
    if exp is None:
        return False
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.dvc_stage = 'train@{TARGET}' and attributes.status = 'RUNNING'",
    )
    return any(r.info.start_time >= since_ms for r in runs)


def test_the_server_killed_mid_train_is_one_line_and_nothing_is_lost(clone, stack):
    def one_target(raw: dict) -> None:
        small_training(raw)
        raw["train"]["targets"] = [TARGET]  # sync-registry below vouches for every target's folder

    set_params(clone, one_target)
    training_inputs(clone, TARGET)
    server = StackServer()
    assert server.healthy()

    since = int(time.time() * 1000)
    train = subprocess.Popen(
        [sys.executable, "-m", "opcost", "train", "--target", TARGET],
        cwd=clone, env=opcost_env(clone), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # the kill lands while the run is being logged: after train's start-up check of the server
        wait_for("train's MLflow run", lambda: _running_train_run(server.uri, since) or train.poll() is not None, 900)
        assert train.poll() is None, "train finished before its run could be caught RUNNING; nothing was tested"
        server.kill()
        out, err = train.communicate(timeout=180)
    finally:
        if train.poll() is None:
            train.kill()
        if not server.healthy():
            server.start()

    lines = [ln for ln in err.splitlines() if ln.strip() and "No CUDA runtime is found" not in ln]
    assert train.returncode == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: the MLflow tracking server {server.uri} went down during the run ("), err

    # nothing lost: the bundle and the run record were written before logging, and they load
    folder = clone / "models" / TARGET
    bundle = json.loads((folder / "bundle.json").read_text())
    record = json.loads((folder / "run.json").read_text())
    assert record["children"] and bundle["bundle_hash"]
    assert (clone / "reports" / "train" / "targets" / f"{TARGET}.json").is_file()

    # the server is back: the stage's outputs committed, sync-registry replays the record and registers it
    dvc(clone, "commit", "--force", f"train@{TARGET}")
    synced = opcost(clone, "sync-registry").stdout
    # registered now, or already by an earlier test of this stack that trained the same bundle (same hash)
    assert f"{TARGET}: registered version" in synced or f"{TARGET}: already registered" in synced, synced
    probe = run(
        [
            sys.executable,
            "-c",
            "import json, sys; from mlflow import MlflowClient; c = MlflowClient(); "
            "vs = c.search_model_versions(f\"name='{sys.argv[1]}'\"); "
            "print(json.dumps([v.tags.get('bundle_hash') for v in vs]))",
            f"opcost-{TARGET}",
        ],
        clone,
    )
    assert json.loads(probe.stdout).count(bundle["bundle_hash"]) == 1
