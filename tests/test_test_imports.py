"""No test module imports another test module: shared helpers live in tests/builders.py (or another helper
module whose name is not test_*; tests/integration/stack_tools.py for the team stack's tests). Importing a test
module runs its module-level code, can load it twice under two names (`test_x` and `tests.model.test_x`), and
makes its helpers look private to it while other files depend on them. Checked on the source (`ast`) of every
tests/**/*.py; a script a test hands to a subprocess (`python -c`) counts too.

No test imports or loads a bench script either (bench/*.py): a script's functions would become an API nobody
declared, pinning the library's internals as the script uses them. A test builds what it needs from the
library's public functions (tests/builders.py); a benchmark whose reported figure a test checks runs as a
subprocess (`python bench/NAME.py`), which is no import."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable

TESTS = Path(__file__).resolve().parent
BENCH = TESTS.parent / "bench"
# what loads a file as a module (or puts a folder on the import path): a bench script, where "bench" is in the call
LOADERS = {"load_bench", "spec_from_file_location", "SourceFileLoader", "run_path", "import_module", "insert", "append"}
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


def files_where(check: Callable[[str], list[str]], skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """What `check` finds in each tests/**/*.py but this file (it plants what the checks look for) and the
    top-level folders in `skip`, by path relative to tests/."""
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] in skip or path == Path(__file__).resolve():
            continue
        if hits := check(path.read_text()):
            found[rel.as_posix()] = hits
    return found


def test_no_imports_of_test_modules_another():
    offenders = files_where(imports_of_test_modules)
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
        "from builders import clone_of",
        "import pytest",
        'NOTE = "tests/measure/test_measure.py checks them"',
        'SCRIPT = "from builders import shard_campaign"',
    ]
    for source in clean:
        assert not imports_of_test_modules(source), source


def _bench_names() -> set[str]:
    """The names a bench script imports as (its stem; bench/ as a package), and the loader module tests had."""
    return {p.stem for p in BENCH.glob("*.py")} | {"bench", "bench_modules"}


def loads_of_bench_scripts(source: str, bench_names: set[str] | None = None) -> list[str]:
    """Each import of a bench script in `source` (as a module, or from bench/ as a package, also in a code string
    handed to a subprocess), each call of a module loader or sys.path insertion that names bench, as
    `line: statement`."""
    names_of_bench = _bench_names() if bench_names is None else bench_names
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            for m in SCRIPT_IMPORT.finditer(node.value):
                names += [m.group(1)] if m.group(1) else [n.strip().split(" ")[0] for n in m.group(3).split(",")]
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if called == "load_bench" or called in LOADERS:  # the segment only where it can matter: it rescans source
                text = ast.get_source_segment(source, node) or ""
                if called == "load_bench" or "bench" in text.lower():
                    found.append(f"{node.lineno}: {text}")
            continue
        if any(n.split(".")[0] in names_of_bench for n in names if n):
            found.append(f"{node.lineno}: {ast.get_source_segment(source, node) or names}")
    return found


def test_no_test_imports_or_loads_a_bench_script():
    names = _bench_names()  # once, not a glob of bench/ per test file
    offenders = files_where(lambda source: loads_of_bench_scripts(source, names))
    assert not offenders, (
        "tests importing or loading bench scripts (build it from the library in tests/builders.py, or run the "
        f"benchmark as a subprocess if its reported figure is what the test checks): {offenders}"
    )


def test_the_bench_check_finds_each_form_of_loading_a_script():
    """Planted loads, each of which the check must find; a subprocess run of a script and look-alikes pass."""
    names = {"net_split", "fuzz_ingest", "bench", "bench_modules"}
    planted = [
        "from bench_modules import load_bench",
        "mod = load_bench('net_split')",
        "import net_split",
        "from fuzz_ingest import fuzz",
        "import bench.net_split as ns",
        "from bench import fuzz_ingest",
        "from bench.net_split import worst_ops",
        'spec = importlib.util.spec_from_file_location("ns", BENCH / "net_split.py")',
        'spec = spec_from_file_location("ns", REPO / "bench" / "net_split.py")',
        'runpy.run_path("bench/fuzz_ingest.py")',
        "sys.path.insert(0, str(REPO / 'bench'))",
        'SCRIPT = """\nimport sys\nfrom net_split import worst_ops\n"""',
        "def f():\n    import fuzz_ingest",
    ]
    for source in planted:
        assert loads_of_bench_scripts(source, names), source
    clean = [
        "from builders import linear_op_row",
        "from opcost.model.training import netval",
        "from opcost.model.training.netval import SPLIT_MODEL",
        'subprocess.run([sys.executable, "bench/fuzz_ingest.py", "--inputs", "40"], cwd=REPO)',
        'spec = spec_from_file_location("plugin", tmp_path / "plugin.py")',
        "sys.path.insert(0, str(tmp_path))",
        'NOTE = "bench/net_split.py reports the same figures"',
    ]
    for source in clean:
        assert not loads_of_bench_scripts(source, names), source


def test_every_bench_script_is_a_name_the_check_knows():
    """The check's names come from bench/ itself, so a new script is covered without a list to keep."""
    names = _bench_names()
    assert {"fuzz_ingest", "net_split", "mutate", "bench_modules"} <= names
    assert all(loads_of_bench_scripts(f"import {n}") for n in names)
