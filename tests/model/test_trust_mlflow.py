"""Issue 24.7: MLflow leftovers of killed processes are cleaned up on the next start.

- a SIGKILLed `validate` run is marked KILLED by the next start of any project command (`train`'s
  experiment included), from the host and PID tags every run carries;
- a process SIGKILLed between creating a registry version and deciding the `champion` alias: the
  next registration of the same content makes the decision.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from opcost.model.records import tracking

REPO = Path(__file__).resolve().parents[2]

VALIDATE_RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from opcost.model.records import tracking
    mlflow = tracking.setup(Path(sys.argv[1]), experiment=tracking.VALIDATE_EXPERIMENT)
    with tracking.tracked_run(mlflow, tracking.VALIDATE_RUN):
        print(mlflow.active_run().info.run_id, flush=True)
        time.sleep(120)
    """
)

KILLED_BEFORE_THE_ALIAS = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from opcost.model.store import registry
    from opcost.model.records import tracking
    root = Path(sys.argv[1])
    def die(*a, **k):  # the process is killed right after the version exists, before the alias decision
        os.kill(os.getpid(), signal.SIGKILL)
    registry.consider_champion = die
    mlflow = tracking.setup(root)
    with tracking.tracked_run(mlflow, "train@clock-like"):
        registry.register_folder(root, mlflow, "opcost-demo", root / "model", "abc123", -1.0, "grouped-k3", {})
    """
)


def _env(uri: str) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_URI": uri}


def test_a_sigkilled_validate_run_is_marked_killed_by_the_next_train_start(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'runs.db'}"
    p = subprocess.Popen(
        [sys.executable, "-c", VALIDATE_RUN, str(tmp_path)], env=_env(uri), stdout=subprocess.PIPE, text=True
    )
    run_id = p.stdout.readline().strip()
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(run_id).info.status == "RUNNING"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracking.setup(tmp_path, experiment=tracking.EXPERIMENT)  # the next `train`, not `validate`
    assert client.get_run(run_id).info.status == "KILLED"


def test_a_kill_before_the_alias_decision_is_repaired_by_the_next_registration(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from opcost.model.clocks.clock import ClockModel
    from opcost.model.store import registry

    root = tmp_path / "proj"
    (root / "model").mkdir(parents=True)
    # a folder model as train-clock writes one (registered as a pyfunc model: model/pyfunc.FOLDER_MODELS); built
    # here, not read from models/clock: CI's clean clone has no DVC outputs
    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(root / "model")
    (root / "dvc.yaml").write_text("stages: {}\n")
    (root / ".gitignore").write_text("*.db\nmlruns/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "main"], cwd=root, check=True)
    uri = f"sqlite:///{tmp_path / 'reg.db'}"
    p = subprocess.run([sys.executable, "-c", KILLED_BEFORE_THE_ALIAS, str(root)], env=_env(uri), timeout=120)
    assert p.returncode == -signal.SIGKILL
    client = MlflowClient(tracking_uri=uri)
    assert [str(v.version) for v in client.search_model_versions("name='opcost-demo'")] == ["1"]
    assert tracking.champion_version(client, "opcost-demo") is None  # killed before the decision

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow = tracking.setup(root)
    with tracking.tracked_run(mlflow, "train@clock-like"):
        again = registry.register_folder(root, mlflow, "opcost-demo", root / "model", "abc123", -1.0, "grouped-k3", {})
    assert again is None  # no second version ...
    assert str(tracking.champion_version(client, "opcost-demo").version) == "1"  # ... and the decision is made
