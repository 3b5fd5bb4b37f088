"""Module docstrings say what the code does and why in a few lines and point to the design note in docs/; the
long descriptions (formats, equations, evidence) live in docs/, the history in docs/CHANGELOG.md. So every module
docstring under src/opcost is short, and neither it nor any comment names a round or an issue."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "opcost"
MODULES = sorted(SRC.rglob("*.py"))
MAX_LINES = 25
HISTORY = re.compile(r"\b(round|issue)s? \d", flags=re.I)


def _rel(path: Path) -> str:
    return str(path.relative_to(SRC.parent))


def test_there_are_modules_to_check():
    assert len(MODULES) > 100


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_a_module_docstring_is_at_most_25_lines(path: Path):
    """Lines as the file shows them, from the opening quotes to the closing ones."""
    body = ast.parse(path.read_text()).body
    first = body[0] if body else None
    n = 0
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        n = (first.end_lineno or first.lineno) - first.lineno + 1
    assert n <= MAX_LINES, f"{_rel(path)}: module docstring of {n} lines; move formats and evidence to docs/"


@pytest.mark.parametrize("path", MODULES, ids=_rel)
def test_no_module_docstring_or_comment_names_a_round_or_an_issue(path: Path):
    text = path.read_text()
    doc = ast.get_docstring(ast.parse(text)) or ""
    found = [m.group(0) for m in HISTORY.finditer(doc)]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            found += [f"line {tok.start[0]}: {m.group(0)}" for m in HISTORY.finditer(tok.string)]
    assert not found, f"{_rel(path)}: history in a docstring or comment {found}; it belongs in docs/CHANGELOG.md"


def test_the_history_pattern_catches_what_it_should():
    assert HISTORY.search("as round 43 made it") and HISTORY.search("(Issue 21)") and HISTORY.search("rounds 31-32")
    assert not HISTORY.search("rounded to 6 digits") and not HISTORY.search("around 4 ms")
