"""A params typo never costs outputs (issue 23): `dvc repro` deletes a stage's outputs before its
command runs, so `make repro` checks params.yaml first (`opcost check-params`), and every stage
command refuses a bad params.yaml before it writes anything."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from opcost.cli import app

REPO = Path(__file__).resolve().parents[1]


def bad_params(root: Path) -> Path:
    text = (REPO / "params.yaml").read_text()
    bad, n = re.subn(r"(?m)^(  folds:) *\d+", r"\1 fifteen", text)
    assert n == 1
    (root / "params.yaml").write_text(bad)
    (root / "dvc.yaml").write_text("stages: {}\n")
    return root / "params.yaml"


def test_check_params_refuses_a_typo_in_one_line(tmp_path):
    bad_params(tmp_path)
    res = CliRunner().invoke(app, ["check-params"], env={"OPCOST_ROOT": str(tmp_path)})
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: params.yaml: train.folds: expected an integer >= 2, got 'fifteen'"
    ok = CliRunner().invoke(app, ["check-params", "--params", str(REPO / "params.yaml")])
    assert ok.exit_code == 0 and "params.yaml: valid" in ok.stdout


def test_make_repro_checks_params_before_dvc_touches_anything():
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"(?m)^repro:.*\n((?:\t.*\n)+)", text).group(1).splitlines()
    assert recipe[0].strip() == "$(BIN)/opcost check-params"
    assert all("dvc" not in line for line in recipe[:1]) and any("dvc repro" in line for line in recipe[1:])


def stage_commands() -> list[tuple[str, list[str]]]:
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    out = []
    for name, st in stages.items():
        cmd = st.get("do", st)["cmd"].replace("${item.target}", "A30-inference").replace("${key}", "x")
        words = cmd.split()
        assert words[:2] == ["python3", "-m"], name
        out.append((name, [words[2], *words[3:]]))
    return out


@pytest.mark.parametrize("stage,cmd", stage_commands(), ids=[n for n, _ in stage_commands()])
def test_every_stage_command_refuses_bad_params_before_writing(stage, cmd, tmp_path, monkeypatch, capsys):
    bad_params(tmp_path)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    module = importlib.import_module(cmd[0])
    assert module.main(cmd[1:]) == 2
    assert "train.folds: expected an integer >= 2, got 'fifteen'" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
