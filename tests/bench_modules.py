"""Bench scripts (bench/*.py) loaded as modules, for the tests that guard their figures.

Why one loader: the scripts are not a package, and six tests each carried their own copy of the same
importlib lines (two of them without the sibling path, one without the sys.modules entry dataclasses need).
Here a script is loaded as `python bench/NAME.py` runs it: its sibling scripts importable while it loads,
and registered under its own name, where dataclasses look their module up.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/`name`.py as a fresh module object (each call executes the script again)."""
    path = BENCH / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"no bench script {path}"
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    added = str(BENCH) not in sys.path
    if added:
        sys.path.insert(0, str(BENCH))  # a script may import its sibling (baseline_variants: family_split)
    try:
        spec.loader.exec_module(mod)
    finally:
        if added:
            sys.path.remove(str(BENCH))
    return mod
