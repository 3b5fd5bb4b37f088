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

REPO = Path(__file__).resolve().parents[2]


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
    from opcost.model.records import tracking

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    tracking.setup(tmp_path, experiment="bounds")
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"


# ------------------------------------------------------------------------------------------------
# The server dies DURING a command, after setup's reachability check passed
# ------------------------------------------------------------------------------------------------

MLFLOW_SERVER = """
import os, sys
os.environ["_MLFLOW_SERVER_FILE_STORE"] = os.environ["_MLFLOW_SERVER_REGISTRY_STORE"] = sys.argv[2]
os.environ["_MLFLOW_SERVER_ARTIFACT_ROOT"] = sys.argv[3]
os.environ["_MLFLOW_SERVER_SERVE_ARTIFACTS"] = "false"
from werkzeug.serving import make_server
from mlflow.server import app
srv = make_server("127.0.0.1", 0, app, threaded=True)
print(srv.server_port, flush=True)
srv.serve_forever()
"""


class DyingProxy:
    """A real MLflow tracking server (MLflow's own app over SQLite, in a subprocess) behind a proxy on
    127.0.0.1 that forwards every request until the first whose path contains `die_at`; from then on
    it closes each connection without an answer, as a killed server's host does."""

    def __init__(self, tmp: Path, die_at: str) -> None:
        import http.server

        self.die_at, self.dead, self.seen = die_at, False, []
        self.server = subprocess.Popen(
            [sys.executable, "-c", MLFLOW_SERVER, "", f"sqlite:///{tmp / 'server.db'}", str(tmp / "artifacts")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        backend = int(self.server.stdout.readline())
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                import http.client

                proxy.seen.append(self.path)
                if proxy.die_at in self.path:
                    proxy.dead = True
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.dead:
                    self.close_connection = True
                    return  # no answer: the client sees the connection dropped
                conn = http.client.HTTPConnection("127.0.0.1", backend, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PATCH = do_DELETE = _forward

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.server.kill()
        self.server.wait(timeout=30)


@pytest.fixture
def dying_server(tmp_path):
    made: list[DyingProxy] = []

    def make(die_at: str) -> DyingProxy:
        made.append(DyingProxy(tmp_path / f"server{len(made)}", die_at))
        return made[-1]

    (tmp_path / "server0").mkdir()
    (tmp_path / "server1").mkdir()
    yield make
    for p in made:
        p.close()


VALIDATE_LIKE = """
import sys
from opcost.io import write_report
from opcost.stages._run import execute
from opcost.validate.report import log_mlflow

DETAIL = {c: {"resnet18": {"time_mape_pct": 12.5, "energy_mape_pct": 9.0}}
          for c in ("summed_vs_measured", "predicted_in_sample")}

def run(paths, params, args):  # what the validate stage does: its report first, then the MLflow run
    write_report(DETAIL, paths.validate_detail)
    log_mlflow(paths, DETAIL, [])

sys.exit(execute([], "validate-like", lambda p: None, run, str))
"""


@pytest.mark.slow
def test_a_server_dying_mid_validate_run_is_one_line_and_the_report_is_replayed_later(tmp_path, dying_server,
                                                                                      monkeypatch):  # fmt: skip
    """The validate stage's MLflow path (stages/_run.execute around validate.report.log_mlflow) against a
    real MLflow server that dies at the run's first metric: one line naming the server, exit 2, no
    traceback, within a minute; the report is on disk, and once the server is back `sync-registry`'s
    validate replay logs it (the cut-short run does not count as the replay)."""
    from mlflow import MlflowClient

    from opcost.model.records import tracking
    from opcost.paths import Paths
    from opcost.validate.replay import sync_validate

    (tmp_path / "proj").mkdir()
    root = _project(tmp_path / "proj")
    srv = dying_server("runs/log-metric")
    env = {**os.environ, "OPCOST_ROOT": str(root), "MLFLOW_TRACKING_URI": srv.uri}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", VALIDATE_LIKE], env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert any("runs/create" in p for p in srv.seen) and srv.dead  # it died mid-run, after the checks
    assert r.returncode == 2, r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"error: the MLflow tracking server {srv.uri} went down during the run (")
    assert "`dvc commit` its stage and run `opcost sync-registry` to replay it" in lines[0]
    assert took < 60
    paths = Paths(root)
    assert paths.validate_detail.is_file()  # nothing lost

    srv.dead, srv.die_at = False, "\0never"  # the server is back
    monkeypatch.setenv("MLFLOW_TRACKING_URI", srv.uri)
    run_id = sync_validate(paths)
    assert run_id
    client = MlflowClient(tracking_uri=srv.uri)
    assert client.get_run(run_id).data.metrics["summed_vs_measured.resnet18.time_mape_pct"] == 12.5
    exp = client.get_experiment_by_name(tracking.VALIDATE_EXPERIMENT)
    statuses = sorted(x.info.status for x in client.search_runs([exp.experiment_id]))
    assert statuses == ["FINISHED", "KILLED"]  # the cut-short run reaped (its process is gone), the replay whole


@pytest.mark.slow
def test_a_server_dying_mid_cli_command_is_one_line(tmp_path, dying_server):
    """The CLI's boundary (cli._run, around every command that talks to MLflow: train, validate,
    sync-registry, promote): a real server that answers setup's checks, then dies at the first registry
    request of `opcost promote`: one line naming it, exit 2, no traceback."""
    srv = dying_server("model-versions")
    (tmp_path / "proj").mkdir()
    r, took = _opcost(_project(tmp_path / "proj"), srv.uri, "promote", "--target", "A30-inference", "--version", "1")
    assert srv.dead and any("experiments" in p for p in srv.seen)
    assert r.returncode == 2, r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"error: the MLflow tracking server {srv.uri} went down during the run (")
    assert took < 60
