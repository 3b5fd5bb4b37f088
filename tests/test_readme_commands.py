"""Every command the README shows is one that works (issue 23): each `opcost` line's verb and flags
exist (`opcost <verb> --help` knows them), bench scripts run with `.venv/bin/python` and exist, `dvc
repro` names a stage of dvc.yaml, `make` a target of the Makefile, and source paths exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import typer.main
import yaml

REPO = Path(__file__).resolve().parents[1]


def sh_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()  # a comment after the command
            if line:
                lines.append(line)
    return lines


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split on &&, ||, ; and |), leading VAR=value dropped."""
    out = []
    for part in re.split(r"&&|\|\||;|\|", line):
        words = shlex.split(part)
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if words:
            out.append(words)
    return out


ALL = [c for line in sh_lines() for c in commands(line)]


def test_the_readme_shows_commands():
    assert sum(c[0] == "opcost" for c in ALL) >= 10


def _opcost() -> click.Group:
    from opcost.cli import app

    return typer.main.get_command(app)


@pytest.mark.parametrize("cmd", [c for c in ALL if c[0] == "opcost"], ids=lambda c: " ".join(c)[:60])
def test_opcost_verb_and_flags_exist(cmd):
    group = _opcost()
    verb = cmd[1]
    assert verb in group.commands, f"README: `opcost {verb}` is no verb of `opcost --help`"
    known = {o for p in group.commands[verb].params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    flags = [w.split("=")[0] for w in cmd[2:] if w.startswith("-") and not re.match(r"^-?\d", w)]
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"README: `opcost {verb}` has no option {unknown} (`opcost {verb} --help`)"


@pytest.mark.parametrize("cmd", [c for c in ALL if "python" in Path(c[0]).name], ids=lambda c: " ".join(c)[:60])
def test_python_commands_use_the_venv_and_existing_scripts(cmd):
    assert cmd[0] == ".venv/bin/python", f"README: `{' '.join(cmd)}` needs .venv's Python, not a bare python"
    script = next((w for w in cmd[1:] if w.endswith(".py")), None)
    if script is not None:
        assert (REPO / script).is_file(), f"README: {script} does not exist"


def test_dvc_repro_names_stages_and_make_names_targets():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    targets = set(re.findall(r"(?m)^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text()))
    for cmd in ALL:
        if cmd[:2] == ["dvc", "repro"]:
            for stage in (w for w in cmd[2:] if not w.startswith("-")):
                base = stage.split("@")[0]
                assert base in stages, f"README: `dvc repro {stage}`: no stage {base} in dvc.yaml"
        if cmd[0] == "make":
            for t in cmd[1:]:
                assert t in targets, f"README: `make {t}`: no such Makefile target"


def test_dvc_repro_campaigns_and_submit_campaigns_exist_in_params():
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    campaigns = set(params["profile"]["campaigns"])
    for cmd in ALL:
        for i, w in enumerate(cmd):
            if w == "--campaign" and i + 1 < len(cmd) and cmd[i + 1] not in ("NAME", "<name>"):
                assert cmd[i + 1] in campaigns, f"README: campaign {cmd[i + 1]} is not in params.yaml"
            if cmd[:2] == ["dvc", "repro"] and w.startswith("profile@") and w != "profile@<name>":
                assert w.split("@")[1] in campaigns, f"README: {w}: no such campaign in params.yaml"


def test_paths_in_commands_exist():
    for cmd in ALL:
        for w in cmd:
            if re.match(r"^(src|bench|tests|stack|\.ci)/", w):
                assert (REPO / w).exists(), f"README: {w} does not exist"


def test_the_pipeline_diagram_shows_every_stage():
    text = (REPO / "README.md").read_text()
    diagram = text[text.index("## Pipeline") :].split("```")[1]
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    missing = [s for s in stages if not re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", diagram)]
    assert not missing, f"README's pipeline diagram lacks the stages {missing}"
