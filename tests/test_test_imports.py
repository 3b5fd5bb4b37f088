"""No test module imports another test module: shared helpers live in tests/builders.py (or another helper
module whose name is not test_*). Importing a test module runs its module-level code, can load it twice
under two names (`test_x` and `tests.model.test_x`), and makes its helpers look private to it while other
files depend on them. Checked on the source (`ast`) of every tests/**/*.py but tests/integration/, which runs
apart against the team stack; a script a test hands to a subprocess (`python -c`) counts too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# an import statement at the start of a line of a code string (a `python -c` script)
SCRIPT_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w, ]+)|import\s+([\w., ]+))", re.MULTILINE)


def _is_test_module(dotted: str) -> bool:
    """`test_x`, `tests.model.test_x`, `x_test`: a name pytest collects as a test module."""
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last.endswith("_test")


def imports_of_test_modules(source: str) -> list[str]:
    """Each import of a test module in `source` (any depth, relative or not), as `line: statement`."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else []
            names += [f"{node.module or ''}.{a.name}" for a in node.names]  # `from tests.model import test_x`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            for m in SCRIPT_IMPORT.finditer(node.value):
                if m.group(1):
                    names += [m.group(1)] + [f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",")]
                else:
                    names += [n.strip().split(" ")[0] for n in m.group(3).split(",")]
        if any(_is_test_module(n) for n in names if n):
            found.append(f"{node.lineno}: {ast.get_source_segment(source, node) or names}")
    return found


def test_no_imports_of_test_modules_another():
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] == "integration" or path == Path(__file__).resolve():  # this file plants such imports
            continue
        found = imports_of_test_modules(path.read_text())
        if found:
            offenders[rel.as_posix()] = found
    assert not offenders, f"test modules importing test modules (move the helper to tests/builders.py): {offenders}"


def test_the_check_finds_each_form_of_such_an_import():
    """Planted imports, each of which the check must find; helper modules and look-alikes pass."""
    planted = [
        "from test_measure import CONV",
        "import test_measure",
        "from tests.model.test_xdevice import FAST",
        "import tests.model.test_xdevice as tx",
        "from tests.model import test_xdevice",
        "from . import test_registry",
        "def f():\n    from test_ux_net import _tiny_bundle",
        'SCRIPT = """\nimport sys\nfrom test_measure import shard_campaign\n"""',
        'SCRIPT = "import os, test_measure"',
    ]
    for source in planted:
        assert imports_of_test_modules(source), source
    clean = [
        "from builders import CONV, module_spec",
        "from fake_nvml import FakeNvml",
        "from opcost.model.training import fit",
        "from conftest import clone_of",
        "import pytest",
        'NOTE = "tests/measure/test_measure.py checks them"',
        'SCRIPT = "from builders import shard_campaign"',
    ]
    for source in clean:
        assert not imports_of_test_modules(source), source
