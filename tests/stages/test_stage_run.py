"""The stages' shared entry point (stages/_run.py): flags reach `run`, user errors are one line and exit 2."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from opcost.errors import OpcostError
from opcost.stages import train_clock, train_xdevice

LOGGED_STAGES = [train_clock, train_xdevice]


@pytest.fixture
def project(tmp_root, repo_root):
    shutil.copy(repo_root / "params.yaml", tmp_root / "params.yaml")
    return tmp_root


@pytest.mark.parametrize("stage", LOGGED_STAGES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_mlflow_flag_reaches_run(stage, project, monkeypatch, capsys):
    calls: list[tuple[Any, bool]] = []

    def spy(paths, params, log_to_mlflow=True):
        calls.append((paths.root, log_to_mlflow))
        return {"done": log_to_mlflow}

    monkeypatch.setattr(stage, "run", spy)
    monkeypatch.setattr(stage, "summary", lambda r: f"summary {r['done']}")
    assert stage.main(["--no-mlflow"]) == 0
    assert stage.main([]) == 0
    assert calls == [(project.resolve(), False), (project.resolve(), True)]
    assert capsys.readouterr().out.splitlines() == ["summary False", "summary True"]


@pytest.mark.parametrize("stage", LOGGED_STAGES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_user_error_is_one_line_and_exit_2(stage, project, monkeypatch, capsys):
    def refuse(paths, params, log_to_mlflow=True):
        raise OpcostError("data/evaluated/sweeps.parquet not found: run `dvc repro evaluate` first")

    monkeypatch.setattr(stage, "run", refuse)
    assert stage.main(["--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert err == "error: data/evaluated/sweeps.parquet not found: run `dvc repro evaluate` first\n"
    with pytest.raises(SystemExit) as exc:
        stage.main(["--mlflow-off"])
    assert exc.value.code == 2  # an unknown flag: argparse's usage error, as before
