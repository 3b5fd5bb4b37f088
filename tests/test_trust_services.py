"""Issue 24.5: a dead team service is one line within seconds, not minutes of retries and a chain
of tracebacks. Two dead MLflow servers on 127.0.0.1: a port that accepts connections and never
answers (a hung server), and a port nothing listens on (a killed one)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def hung_port():
    """A TCP port on 127.0.0.1 that accepts every connection and never sends a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


@pytest.fixture
def refused_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def _project(tmp_path: Path) -> Path:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    return tmp_path


def _opcost(root: Path, uri: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "OPCOST_ROOT": str(root), "MLFLOW_TRACKING_URI": uri}
    for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        env.pop(k, None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "opcost", *args], env=env, capture_output=True, text=True, timeout=120)
    return r, time.monotonic() - t0


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "No CUDA runtime is found" not in ln]


@pytest.mark.parametrize("kind", ["hung", "refused"])
def test_a_dead_tracking_server_is_one_line_within_a_minute(tmp_path, hung_port, refused_port, kind):
    port = hung_port if kind == "hung" else refused_port
    uri = f"http://127.0.0.1:{port}"
    r, took = _opcost(_project(tmp_path), uri, "promote", "--target", "A30-inference", "--version", "1")
    assert r.returncode == 2, r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: the MLflow tracking server {uri} is down (")
    assert "Traceback" not in r.stderr
    assert took < 60


def test_a_dead_database_is_one_line(tmp_path, refused_port):
    uri = f"postgresql+psycopg2://opcost@127.0.0.1:{refused_port}/mlflow"
    r, took = _opcost(_project(tmp_path), uri, "promote", "--target", "A30-inference", "--version", "1")
    assert r.returncode == 2 and len(_error_lines(r.stderr)) == 1, r.stderr
    assert f"the MLflow database 127.0.0.1:{refused_port} (postgresql) is down" in r.stderr
    assert took < 60


def test_mlflow_http_retries_are_bounded_unless_the_user_set_them(monkeypatch, tmp_path):
    from opcost.model import tracking

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    tracking.setup(tmp_path, experiment="bounds")
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
