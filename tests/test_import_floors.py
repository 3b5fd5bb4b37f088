"""The package's floors: which sub-package may import which. Written down here and checked on the source (every
`import opcost...`, at module level or inside a function; `if TYPE_CHECKING:` blocks left out, they run nothing).

Floors, bottom up: the top-level modules (errors, io, paths, devices, schemas, tables ...) with `params`;
`ops`; `measure` and `data`; `model`; `validate`; `stages`; `slurm`; the entry points (cli, api, __main__). A
package imports only from its own floor's or lower ones. One known exception runs back up, and with its
counterpart it is the one cycle left between packages: `data/targets.py` takes the device floor from
`model/floors.py`, while `model/clock.py` reads the kernel table `data/clock_kernels.py`. Any new arrow up or
new cycle fails here."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "opcost"
ENTRY = {"cli", "api", "__main__"}
FLOOR = {"(base)": 0, "params": 0, "ops": 1, "measure": 2, "data": 2, "model": 3, "validate": 4, "stages": 5,
         "slurm": 6, "(entry)": 7}  # fmt: skip
KNOWN_UP = {("data", "model")}  # data/targets.py -> model/floors.py (module docstring)


def _room(parts: list[str]) -> str:
    """The room of a module given as its path parts under opcost/ (no suffix)."""
    if len(parts) == 1:
        return "(entry)" if parts[0] in ENTRY else "(base)"
    return parts[0]


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for m in n.body:
                lines.update(range(m.lineno, (m.end_lineno or m.lineno) + 1))
    return lines


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the modules that make the arrow."""
    edges: dict[tuple[str, str], list[str]] = {}
    for f in sorted(SRC.rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        src = _room(parts)
        tree = ast.parse(f.read_text())
        skip = _type_checking_lines(tree)
        for n in ast.walk(tree):
            if getattr(n, "lineno", None) in skip:
                continue
            targets: list[list[str]] = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "opcost" and n.level == 0:
                mod = n.module.split(".")[1:]
                targets = [mod] if mod else [[a.name] for a in n.names]
            elif isinstance(n, ast.Import):
                targets = [a.name.split(".")[1:] for a in n.names if a.name.startswith("opcost.")]
            for t in targets:
                dst = t[0] if (SRC / t[0]).is_dir() else _room(t[:1])
                if dst != src:
                    edges.setdefault((src, dst), []).append(str(f.relative_to(SRC)))
    return edges


def test_every_room_has_a_floor():
    rooms = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert rooms <= set(FLOOR), f"sub-packages without a floor here: {sorted(rooms - set(FLOOR))}"


def test_no_package_imports_from_a_floor_above_but_the_known_one():
    up = {e: m for e, m in package_edges().items() if FLOOR[e[1]] > FLOOR[e[0]]}
    assert set(up) == KNOWN_UP, {e: sorted(set(m)) for e, m in up.items()}
    assert sorted(set(up[("data", "model")])) == ["data/targets.py"]


def test_the_only_cycle_between_packages_is_the_known_one():
    edges = set(package_edges())
    cycles = {tuple(sorted((a, b))) for a, b in edges if (b, a) in edges}
    assert cycles <= {("(base)", "params"), ("data", "model")}, cycles


def test_the_check_sees_an_arrow_up_and_leaves_type_checking_imports_out(tmp_path, monkeypatch):
    pkg = tmp_path / "opcost"
    for room in ("ops", "model"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "ops" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opcost.model import b\n"
    )
    monkeypatch.setitem(globals(), "SRC", pkg)  # package_edges reads the module's SRC
    assert package_edges() == {}
    (pkg / "ops" / "c.py").write_text("def f():\n    from opcost.model.b import x\n")
    assert package_edges() == {("ops", "model"): ["ops/c.py"]}
