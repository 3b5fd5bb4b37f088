"""A file store named in MLFLOW_TRACKING_URI is one line, not MLflow's traceback.

MLflow keeps its file store (`file:...`, or a bare path) in maintenance mode and raises when one is
opened; opcost's registry needs a database or a tracking server, so it says so before MLflow is asked.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner


@pytest.mark.parametrize("form", ["file:{}", "file://{}", "{}"], ids=["file-colon", "file-url", "bare-path"])
def test_a_file_store_is_refused_in_one_line(tmp_path, monkeypatch, form):
    from opcost.cli import app

    uri = form.format(tmp_path / "mlruns")
    monkeypatch.chdir(tmp_path)
    args = ["predict", "--registry", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30"]
    r = CliRunner().invoke(app, args, env={"MLFLOW_TRACKING_URI": uri})
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and f"MLFLOW_TRACKING_URI={uri} is a file store" in r.stderr
    assert "sqlite:////path/to/mlflow.db" in r.stderr
    assert not (tmp_path / "mlruns").exists()  # nothing was created there
