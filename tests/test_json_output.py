"""Under `--json` stdout is JSON and nothing else: a user builder's prints go to stderr, and an error
is a JSON object on stdout (with its one line on stderr) and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import record_in_lock, tiny_bundle
from opcost.cli import app

PRINTING = """
from torch import nn

print("loading my model file")


def tiny():
    print("built!")
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU())
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tiny_bundle(tmp_path, "A30-inference")
    record_in_lock(tmp_path)
    (tmp_path / "printing.py").write_text(PRINTING)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


def test_a_builder_that_prints_leaves_the_json_on_stdout_alone(project):
    model = f"{project / 'printing.py'}:tiny"
    res = CliRunner().invoke(app, ["predict", "--model", model, "--input", "float32:2,8", "--device", "A30", "--json"])
    assert res.exit_code == 0, res.output
    answer = json.loads(res.stdout)  # the whole of stdout parses: nothing else was written there
    assert answer["time_s"] > 0 and answer["device_config"] == "A30"
    assert "built!" in res.stderr and "loading my model file" in res.stderr  # not lost: on stderr
    cov = CliRunner().invoke(app, ["coverage", model, "--input", "float32:2,8", "--json"])
    assert cov.exit_code == 0 and json.loads(cov.stdout)[0]["calls"] == 2


@pytest.mark.parametrize(
    "args, says",
    [
        (["predict", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30", "--top", "0"], "--top 0"),
        (["predict", "--model", "resnett18", "--device", "A30"], "unknown model 'resnett18'"),
        (["recommend", "--model", "resnet18", "--input-shape", "1,3,32,32", "--top", "-1"], "--top -1"),
        (["coverage", "resnet18", "--mode", "trianing"], "trianing"),
    ],
)
def test_an_error_under_json_is_a_json_object_on_stdout(project, args, says):
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["exit_code"] == 2 and says in doc["error"] and "\n" not in doc["error"]
    assert says in res.stderr  # the person at the terminal still reads it
    plain = CliRunner().invoke(app, args)  # without --json: stdout stays empty, the line is on stderr
    assert plain.exit_code == 2 and plain.stdout == "" and says in plain.stderr
