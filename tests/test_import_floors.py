"""The package's floors: which sub-package may import which. Written down here and checked on the source (every
`import opcost...`, at module level or inside a function).

Floors, bottom up: the top-level modules (errors, io, paths, devices, schemas, tables ...) with `params`;
`ops`; `measure` and `data`; `model`; `validate`; `stages`; `slurm`; the entry points (cli, api, __main__). A
package imports only from its own floor's or lower ones (`if TYPE_CHECKING:` blocks left out between these
packages: they run nothing). No arrow runs back up.

Inside `model`, its rooms, bottom up (`MODEL_FLOORS`): basis; records; crossdevice; clocks; composition; the
loader module pyfunc.py; training; store; prediction; the loader module pyfunc_folders.py (the two loader
modules sit in model/ itself, their paths named in registered MLflow models). A room imports only from lower
ones, type-only imports counted too: no circle between rooms, no arrow up. Any new arrow up or new cycle fails
here."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "opcost"
ENTRY = {"cli", "api", "__main__"}
FLOOR = {"(base)": 0, "params": 0, "ops": 1, "measure": 2, "data": 2, "model": 3, "validate": 4, "stages": 5,
         "slurm": 6, "(entry)": 7}  # fmt: skip
KNOWN_UP: set[tuple[str, str]] = set()


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


def test_no_package_imports_from_a_floor_above():
    up = {e: m for e, m in package_edges().items() if FLOOR[e[1]] > FLOOR[e[0]]}
    assert set(up) == KNOWN_UP, {e: sorted(set(m)) for e, m in up.items()}


def test_the_only_cycle_between_packages_is_the_known_one():
    edges = set(package_edges())
    cycles = {tuple(sorted((a, b))) for a, b in edges if (b, a) in edges}
    assert cycles <= {("(base)", "params")}, cycles


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


MODEL = SRC / "model"
MODEL_FLOORS = ("basis", "records", "crossdevice", "clocks", "composition", "pyfunc", "training", "store", "prediction",
                "pyfunc_folders")  # fmt: skip


def model_edges(model: Path | None = None) -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the modules that make the arrow, between model's rooms: a sub-package, or a
    module directly in model/ (a room of its own). Type-only imports count: a circle through a type is still
    a circle a reader has to untangle."""
    model = model or MODEL
    edges: dict[tuple[str, str], list[str]] = {}
    for f in sorted(model.rglob("*.py")):
        parts = list(f.relative_to(model).with_suffix("").parts)
        if parts == ["__init__"]:
            continue
        src = parts[0]
        for n in ast.walk(ast.parse(f.read_text())):
            targets: list[str] = []
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                if n.module == "opcost.model":
                    targets = [a.name for a in n.names]
                elif n.module.startswith("opcost.model."):
                    targets = [n.module.split(".")[2]]
            elif isinstance(n, ast.Import):
                targets = [a.name.split(".")[2] for a in n.names if a.name.startswith("opcost.model.")]
            for dst in targets:
                if dst != src:
                    edges.setdefault((src, dst), []).append(f.relative_to(model).as_posix())
    return edges


def _rooms(model: Path) -> set[str]:
    return {p.name for p in model.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} | {
        p.stem for p in model.glob("*.py") if p.stem != "__init__"
    }


def _up_and_circles(model: Path) -> tuple[dict[tuple[str, str], list[str]], set[tuple[str, str]]]:
    edges = model_edges(model)
    floor = {r: i for i, r in enumerate(MODEL_FLOORS)}
    up = {e: sorted(set(m)) for e, m in edges.items() if floor.get(e[1], -1) >= floor.get(e[0], -1)}
    cycles = {tuple(sorted((a, b))) for a, b in edges if (b, a) in edges}
    return up, cycles  # type: ignore[return-value]


def test_every_room_of_model_has_a_floor_and_a_docstring():
    rooms = _rooms(MODEL)
    assert rooms == set(MODEL_FLOORS), f"model rooms without a floor here: {sorted(rooms - set(MODEL_FLOORS))}"
    for room in rooms:
        init = MODEL / room / "__init__.py"
        if init.is_file():
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and len(doc.splitlines()) == 1, f"model/{room}/__init__.py: one line saying what it holds"
            assert not (MODEL / room / f"{room}.py").exists(), f"model/{room}/ holds a module of its own name"


def test_model_rooms_import_only_from_lower_floors_and_make_no_circle():
    up, cycles = _up_and_circles(MODEL)
    assert not up, f"arrows up (or unknown rooms) between model's rooms: {up}"
    assert not cycles, cycles


def test_no_data_module_imports_model():
    assert not [e for e in package_edges() if e == ("data", "model")]


def test_the_model_check_sees_an_arrow_up_a_type_only_import_and_a_circle(tmp_path):
    model = tmp_path / "model"
    for room in ("basis", "clocks"):
        (model / room).mkdir(parents=True)
        (model / room / "__init__.py").write_text('"""A room."""\n')
    (model / "clocks" / "clock.py").write_text("from opcost.model.basis.physics import x\n")
    (model / "basis" / "physics.py").write_text("x = 1\n")
    assert _up_and_circles(model) == ({}, set())
    (model / "basis" / "gemm.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opcost.model.clocks.clock import y\n"
    )
    up, cycles = _up_and_circles(model)
    assert up == {("basis", "clocks"): ["basis/gemm.py"]} and cycles == {("basis", "clocks")}
