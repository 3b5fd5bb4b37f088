"""The opcost source files a module loads, and a hash of them: identities from the code that made a result.

A module's import closure is found by walking imports in the source (every `import opcost...` and
`from opcost... import ...` anywhere in a file, lazy imports inside functions included, plus every
package's __init__), not by importing anything. Three things are keyed on it, so none is a hand-kept
list that forgets a module:
- the `src/` deps of every DVC stage (tests/test_stage_deps.py checks dvc.yaml against them);
- a bundle's registry identity (model/fit.bundle_hash: the train stage's closure);
- the disk cache of extracted networks (model/netcache.py: the closure of model/network.EXTRACTION_ENTRIES).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path
from typing import Iterable

SRC = Path(__file__).resolve().parent.parent  # the directory holding the opcost package


def module_file(name: str, src: Path | None = None) -> Path | None:
    """The file of module `name` under `src` (module.py or package/__init__.py), None if not there."""
    base = (src or SRC) / Path(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def imported_modules(path: Path, src: Path | None = None) -> set[str]:
    """opcost modules a file imports anywhere (functions included)."""
    st = path.stat()  # the parse is cached per file version: a closure walk reads each file once
    return set(_imported_modules(str(path), st.st_mtime_ns, st.st_size, str(src or SRC)))


@functools.lru_cache(maxsize=4096)
def _imported_modules(path_name: str, _mtime_ns: int, _size: int, src_name: str) -> frozenset[str]:
    path, src = Path(path_name), Path(src_name)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "opcost"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "opcost":
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if module_file(f"{node.module}.{a.name}", src)}
    return frozenset(found)


def closure(*entries: str, src: Path | None = None) -> set[Path]:
    """Files loaded when the `entries` run: their imports, transitively, with every package __init__."""
    todo, files = list(entries), set[Path]()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ first
            f = module_file(".".join(parts[:i]), src)
            if f is not None and f not in files:
                files.add(f)
                todo.extend(imported_modules(f, src))
    return files


def code_hash(entries: Iterable[str], src: Path | None = None) -> str:
    """SHA-256 over the closure of `entries`: each file's path (relative to `src`) and bytes, in path
    order, so a rename, an edit, or a new import of another module changes it."""
    src = src or SRC
    h = hashlib.sha256()
    for f in sorted(closure(*entries, src=src), key=lambda p: p.relative_to(src).as_posix()):
        h.update(f.relative_to(src).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()
