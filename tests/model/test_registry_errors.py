"""registry.ensure_registered_model: "exists already" is the one MLflow failure it may pass over."""

from __future__ import annotations

import socket

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from opcost.model.store import registry


def test_a_model_that_exists_already_is_kept(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    registry.ensure_registered_model(client, "opcost-A30-training")
    registry.ensure_registered_model(client, "opcost-A30-training")  # RESOURCE_ALREADY_EXISTS: nothing to do
    assert [m.name for m in client.search_registered_models()] == ["opcost-A30-training"]


def test_a_dead_server_is_raised_not_read_as_exists_already(monkeypatch):
    """Before: every MlflowException passed as "exists already", a connection failure included."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(MlflowException):
            registry.ensure_registered_model(MlflowClient(tracking_uri=url, registry_uri=url), "opcost-A30-training")
