"""Every command the README and the design notes in docs/ show is one that works: each `opcost` line's
verb and flags exist (`opcost <verb> --help` knows them), bench scripts run with `.venv/bin/python` and
exist, `dvc repro` names a stage of dvc.yaml, `make` a target of the Makefile, and source paths exist.
The README starts where a user starts (the set-up commands, then a quick start), keeps the reference, the method
and its history in docs/, and every page and heading a page links exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import typer.main
import yaml

REPO = Path(__file__).resolve().parents[1]


DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def sh_lines() -> list[str]:
    text = "\n".join(page.read_text() for page in DOCS)
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
    if cmd[:3] == ["python3", "-m", "opcost"]:
        return  # the GPU visit: run on a machine without .venv, with PYTHONPATH=src and that machine's Python
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
    diagram = text[text.index("## How the pieces fit") :].split("```")[1]
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    missing = [s for s in stages if not re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", diagram)]
    assert not missing, f"README's pipeline diagram lacks the stages {missing}"


def _readme() -> str:
    return (REPO / "README.md").read_text()


def test_the_readme_starts_with_the_two_setup_commands():
    first = re.match(r"```sh\n(.*?)```", _readme(), flags=re.S)
    assert first, "README must open with a ```sh block"
    commands = [re.sub(r"\s*#.*$", "", line).strip() for line in first.group(1).splitlines()]
    assert commands == ["make repro", "make test"], commands


def test_the_quick_start_is_on_the_first_screen():
    """How to get `opcost` on PATH and a first question with its answer, within the first 60 lines."""
    head = "\n".join(_readme().splitlines()[:60])
    assert ".venv/bin/activate" in head and ".venv/bin/opcost" in head, "README: say how to get opcost on PATH"
    assert re.search(r"^opcost predict --model \S+ .*--device", head, flags=re.M), "README: no question on screen 1"
    assert re.search(r"time [\d.]+ ms \(90 %: ", head), "README: the first question has no answer beside it"


def test_no_readme_heading_names_an_issue_or_a_round():
    """The history lives in docs/CHANGELOG.md; the README's headings name what a user does."""
    bad = [h for h in re.findall(r"(?m)^#+ .*$", _readme()) if re.search(r"\b(issue|round)s? \d", h, flags=re.I)]
    assert not bad, f"README headings naming an issue or a round (move them to docs/): {bad}"


def test_every_relative_link_resolves_and_the_readme_links_every_docs_page():
    for page in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"^[a-z]+:", target):
                assert (page.parent / target).exists(), f"{page.relative_to(REPO)}: the link {target} leads nowhere"
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", _readme()))
    missing = [f"docs/{p.name}" for p in DOCS[1:] if f"docs/{p.name}" not in linked]
    assert not missing, f"README links no {missing}"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_anchor_names_a_heading_of_its_page():
    """A link into a page's section (`page.md#section`, `#section`) leads to a heading that exists, so moving a
    section from one page to another cannot leave links pointing at nothing."""
    for page in DOCS:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            linked = (page.parent / target) if target else page
            if re.match(r"^[a-z]+:", target) or linked.suffix != ".md":
                continue
            text = re.sub(r"(?ms)^```.*?^```", "", linked.read_text())  # a `# comment` in a code block is no heading
            anchors = {_slug(h) for h in re.findall(r"(?m)^#+ (.*)$", text)}
            assert anchor in anchors, f"{page.relative_to(REPO)}: {target or page.name}#{anchor} names no heading"


def test_the_project_tree_lists_what_exists():
    """The tree in docs/architecture.md (the README links it) names the folders and modules that exist."""
    text = (REPO / "docs" / "architecture.md").read_text()
    tree = text[text.index("## Project tree") :].split("```")[1]
    named = re.findall(r"^\s{0,2}([\w./]+/|[\w]+\.py)\s", tree, flags=re.M)
    top = set("src/opcost/ networks/ tests/ docs/ stack/ data/ models/ reports/ bench/ dvcstore/".split())
    assert top <= set(named), top - set(named)
    pkg = REPO / "src" / "opcost"
    for name in named:
        if name not in top:
            assert (pkg / name).exists(), f"docs/architecture.md's project tree names {name}, which src/opcost lacks"
    folders = {p.name + "/" for p in pkg.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders <= set(named), f"docs/architecture.md's project tree lacks {folders - set(named)}"
