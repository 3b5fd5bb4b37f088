"""MLflow failures the registry and tracking code expect (a name not registered yet, a server that does
not let this user list experiments) are handled; every other failure is raised, never swallowed, and
reads as one line. The server is a small HTTP stand-in at the network boundary answering MLflow's REST
error bodies."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from opcost.model.records import tracking
from opcost.model.store import registry
from opcost.stages import _run


class _Answer(BaseHTTPRequestHandler):
    status, body = 200, {}

    def _reply(self) -> None:
        data = json.dumps(type(self).body).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _reply

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch):
    """`set(status, error_code)`: what every request is answered with; yields (url, set)."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    handler = type("Handler", (_Answer,), {})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def answer(status: int, code: str) -> None:
        handler.status, handler.body = status, {"error_code": code, "message": f"{code} from the stand-in"}

    yield f"http://127.0.0.1:{srv.server_address[1]}", answer
    srv.shutdown()
    srv.server_close()


def _client(url: str) -> MlflowClient:
    return MlflowClient(tracking_uri=url, registry_uri=url)


def test_repair_of_a_model_not_registered_yet_is_nothing(server):
    url, answer = server
    answer(404, "RESOURCE_DOES_NOT_EXIST")
    assert registry.repair(_client(url), "opcost-A30-training") == []


def test_repair_raises_a_server_error_instead_of_reading_it_as_nothing_to_repair(server):
    url, answer = server
    answer(500, "INTERNAL_ERROR")
    with pytest.raises(MlflowException):
        registry.repair(_client(url), "opcost-A30-training")


def test_repair_against_a_dead_server_raises_and_reads_as_one_line(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(Exception) as exc:
            registry.repair(_client(url), "opcost-A30-training")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(url)
    try:
        line = _run.service_down_line(exc.value)
    finally:
        mlflow.set_tracking_uri(before)
    assert line is not None and line.startswith(f"the MLflow tracking server {url} went down during the run (")
    assert "\n" not in line


def test_project_experiments_without_permission_to_list_is_the_current_one(server):
    url, answer = server
    answer(403, "PERMISSION_DENIED")
    assert tracking.project_experiments(_client(url), "opcost-train") == ["opcost-train"]


def test_project_experiments_raises_a_server_error(server):
    url, answer = server
    answer(500, "INTERNAL_ERROR")
    with pytest.raises(MlflowException):
        tracking.project_experiments(_client(url), "opcost-train")


@pytest.mark.parametrize(
    ("uri", "address"),
    [
        ("postgresql+psycopg2://opcost@db/mlflow", ("db", 5432, "postgresql")),
        ("postgres://db.example:6543/mlflow", ("db.example", 6543, "postgres")),
        ("mysql+pymysql://u:p@10.0.0.2/mlflow", ("10.0.0.2", 3306, "mysql")),
        ("mssql://sql/mlflow", ("sql", 1433, "mssql")),
        ("http://127.0.0.1:5000", None),
        ("sqlite:////tmp/mlflow.db", None),
        ("postgresql:///mlflow", None),  # no host: a local socket, nothing to name
    ],
)
def test_one_database_port_table_for_the_reachability_check_and_the_one_line_report(uri, address):
    assert tracking.database_address(uri) == address
    expected = None if address is None else f"{address[0]}:{address[1]} ({address[2]})"
    assert _run._database_host(uri) == expected
