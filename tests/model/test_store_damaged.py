"""A local MLflow store (mlflow.db) that is overwritten, cut short or locked is one line, not MLflow's
traceback of over a hundred lines, for `predict --registry`, `sync-registry` and the train stage.

The broken stores are real SQLite files: a database made here with the standard library and then cut
in half (SQLite's own check finds the missing pages), random bytes in place of the file, and a sound
database another process holds an exclusive lock on.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[2]
PREDICT = ["predict", "--registry", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30"]


def _database(path: Path, rows: int = 3000) -> Path:
    """A sound SQLite database of a few hundred KiB (several B-tree pages deep)."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT, value REAL)")
    con.executemany("INSERT INTO runs (name, value) VALUES (?, ?)", [(f"run-{i:06d}" * 4, i / 7) for i in range(rows)])
    con.execute("CREATE INDEX runs_name ON runs (name)")
    con.commit()
    con.close()
    return path


def _project(tmp_path: Path) -> Path:
    """A folder the CLI takes for a project (dvc.yaml, params.yaml, sets.yaml), with no models."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    for name in ("params.yaml", "sets.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def _opcost(args: list[str], cwd: Path, module: str = "opcost", **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "OPCOST_ROOT", "DVC_ROOT")}
    environ.update(PYTHONPATH=src_dir(), **env)
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


def _damage(db: Path, how: str) -> None:
    if how == "overwritten":
        db.write_bytes(bytes(range(256)) * 40)
    else:
        data = _database(db.with_name("sound.db")).read_bytes()
        db.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("how, why", [("overwritten", "not an SQLite database"), ("cut", "malformed")])
def test_predict_registry_on_a_damaged_store_is_one_line(tmp_path, how, why):
    root = _project(tmp_path)
    _damage(root / "mlflow.db", how)
    r = _opcost(PREDICT, root)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"the MLflow store {root / 'mlflow.db'} is damaged (" in r.stderr and why in r.stderr
    assert "`opcost sync-registry`" in r.stderr


def test_sync_registry_and_the_train_stage_on_a_damaged_store_are_one_line(tmp_path):
    root = _project(tmp_path)
    _damage(root / "mlflow.db", "cut")
    sync = _opcost(["sync-registry"], root)
    assert sync.returncode == 2 and sync.stderr.count("\n") == 1, sync.stderr[-2000:]
    assert "is damaged (database disk image is malformed)" in sync.stderr
    # the train stage checks the store before it reads or fits anything (and so before it logs)
    train = _opcost(["--target", "A30-inference"], root, module="opcost.stages.train")
    assert train.returncode == 2 and train.stderr.count("\n") == 1, train.stderr[-2000:]
    assert "is damaged (database disk image is malformed)" in train.stderr


@pytest.fixture
def locked(tmp_path):
    """A sound database that another process holds an exclusive lock on until the test ends."""
    db = _database(tmp_path / "mlflow.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield db
    holder.communicate("", timeout=30)


def test_a_store_locked_by_another_process_is_one_line(tmp_path, locked, monkeypatch):
    from typer.testing import CliRunner

    from opcost.cli import app
    from opcost.model.records import tracking

    monkeypatch.setattr(tracking, "LOCK_WAIT_S", 0.5)
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    r = CliRunner().invoke(app, PREDICT)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1
    assert f"the MLflow store {locked} is locked by another process (still locked after 0.5 s)" in r.stderr


def test_a_store_locked_while_a_command_runs_is_one_line(locked):
    """Past the start-up check (another process took the lock later): SQLite's "database is locked",
    raised through SQLAlchemy and MLflow, is named in one line, with what the command kept."""
    from mlflow import MlflowClient

    from opcost.stages._run import service_down_line

    uri = f"sqlite:///{locked}?timeout=0.2"  # SQLite's wait for the lock, so the test does not wait 5 s
    import mlflow

    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with pytest.raises(Exception) as exc:
            MlflowClient(tracking_uri=uri).search_experiments()
        line = service_down_line(exc.value)
    finally:
        mlflow.set_tracking_uri(before)
    assert line is not None and "\n" not in line
    assert line.startswith(f"the MLflow store {locked} stayed locked by another process (database is locked)")
    assert "once the store works again" in line


def test_a_sound_store_and_an_empty_file_pass_the_check(tmp_path):
    from opcost.model.records import tracking

    tracking.check_sqlite_store(f"sqlite:///{_database(tmp_path / 'mlflow.db')}")
    (tmp_path / "empty.db").write_bytes(b"")
    tracking.check_sqlite_store(f"sqlite:///{tmp_path / 'empty.db'}")
    tracking.check_sqlite_store(f"sqlite:///{tmp_path / 'absent.db'}")
