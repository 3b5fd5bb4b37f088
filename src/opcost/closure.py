"""The opcost source files a module loads, and a hash of them: identities from the code that made a result.

A module's import closure is found by walking imports in the source (every `import opcost...` and
`from opcost... import ...` anywhere in a file, lazy imports inside functions included, plus every
package's __init__), not by importing anything. Three things are keyed on it, so none is a hand-kept
list that forgets a module:
- the `src/` deps of every DVC stage (tests/test_stage_deps.py checks dvc.yaml against them);
- a bundle's registry identity (model/training/fit.bundle_hash: the train stage's closure);
- the disk cache of extracted networks (model/composition/netcache.py: the closure of
model/composition/network.EXTRACTION_ENTRIES).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
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
    src = Path(src_name)
    found: set[str] = set()
    for module, names in _import_facts(Path(path_name).read_text()):
        found.add(module)
        found |= {f"{module}.{n}" for n in names if module_file(f"{module}.{n}", src)}
    return frozenset(found)


# Why: parsing the closure's files is most of a closure walk (28 files, about 0.1 s), and a cold
# `opcost predict` walks one for its network cache key. What a file imports depends on its text
# alone, so the parse is kept by the SHA-256 of the text, in memory and, where a caller names a
# file (`code_hash(facts_file=...)`), on disk: a changed file is a new key, never a stale answer.
_FACTS: dict[str, list[tuple[str, list[str]]]] = {}


def _import_facts(text: str) -> list[tuple[str, list[str]]]:
    """The opcost imports of a file's text: (module, names) of each `from opcost... import names`,
    (module, []) of each `import opcost...`."""
    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _FACTS:
        facts: list[tuple[str, list[str]]] = []
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                facts += [(a.name, []) for a in node.names if a.name.split(".")[0] == "opcost"]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "opcost":
                facts.append((node.module, [a.name for a in node.names]))
        _FACTS[key] = facts
    return _FACTS[key]


def _load_facts(f: Path) -> int:
    """Parses kept in `f` (JSON: text hash -> [[module, [names]], ...]) into memory; a file that is not
    that is ignored (it is rewritten). Returns how many entries memory holds."""
    try:
        raw = json.loads(f.read_text())
        for key, facts in raw.items():
            if isinstance(key, str) and all(
                isinstance(m, str) and isinstance(ns, list) and all(isinstance(n, str) for n in ns) for m, ns in facts
            ):
                _FACTS.setdefault(key, [(m, list(ns)) for m, ns in facts])
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return len(_FACTS)


def _save_facts(f: Path) -> None:
    """Write the parses in memory to `f` (atomically: a reader never sees half a file); best effort."""
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({k: [[m, ns] for m, ns in v] for k, v in _FACTS.items()}))
        os.replace(tmp, f)
    except OSError:
        pass


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


def code_hash(entries: Iterable[str], src: Path | None = None, facts_file: Path | None = None) -> str:
    """SHA-256 over the closure of `entries`: each file's path (relative to `src`) and bytes, in path
    order, so a rename, an edit, or a new import of another module changes it. `facts_file`: where the
    files' parses are kept across processes (the same hash, without parsing files seen before)."""
    src = src or SRC
    known = _load_facts(facts_file) if facts_file is not None else 0
    h = hashlib.sha256()
    for f in sorted(closure(*entries, src=src), key=lambda p: p.relative_to(src).as_posix()):
        h.update(f.relative_to(src).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    if facts_file is not None and len(_FACTS) > known:
        _save_facts(facts_file)
    return h.hexdigest()
