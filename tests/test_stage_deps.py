"""Every DVC stage depends on exactly the opcost source files whose code can change its outputs.

A stage runs `python3 -m opcost.stages.<name>`. Its import closure is derived by walking the
imports of that module (every `import opcost...` / `from opcost... import ...` anywhere in a file,
lazy imports inside functions included, plus the packages' __init__ files), and compared with the
`src/` entries of the stage's `deps:` in dvc.yaml. A missing entry means `dvc repro` could call a
stale result up to date; an extra one means a change reruns a stage it cannot affect.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from opcost.closure import closure as _closure

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def closure(entry: str) -> set[Path]:
    """Files loaded when `entry` runs (opcost.closure, the same walk the bundle hash and cache key use)."""
    return _closure(entry, src=SRC)


def stage_entries() -> dict[str, tuple[str, list[str]]]:
    """dvc.yaml stage name -> (entry module, declared deps)."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, st in stages.items():
        body = st.get("do", st)
        m = re.search(r"python3 -m (opcost\.stages\.\w+)", body["cmd"])
        assert m, f"stage {name} does not run a stage module: {body['cmd']}"
        out[name] = (m.group(1), body.get("deps", []))
    return out


def covered(f: Path, deps: list[str]) -> bool:
    rel = f.relative_to(REPO).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


@pytest.mark.parametrize("stage", sorted(stage_entries()))
def test_stage_deps_are_its_import_closure(stage):
    entry, deps = stage_entries()[stage]
    files = closure(entry)
    missing = sorted(f.relative_to(REPO).as_posix() for f in files if not covered(f, deps))
    assert not missing, f"{stage} loads {missing} but dvc.yaml does not list them in its deps"
    src_deps = [d for d in deps if d.startswith("src/")]
    extra = [d for d in src_deps if not any(covered(f, [d]) for f in files)]
    assert not extra, f"{stage} lists {extra} in deps but never imports them"


def test_the_closure_sees_lazy_imports():
    """The walk finds imports inside functions (a stage importing torch-heavy code lazily still
    depends on it): predict reaches ops.catalog only inside network.extract_network."""
    names = {f.relative_to(SRC).as_posix() for f in closure("opcost.model.prediction.predict")}
    assert "opcost/ops/catalog.py" in names and "opcost/__init__.py" in names


def sync_dvc_yaml() -> None:
    """Rewrite the src/ deps of every stage in dvc.yaml to its import closure (keeps all else)."""
    lines = (REPO / "dvc.yaml").read_text().splitlines(keepends=True)
    stages = stage_entries()
    out, current = [], None
    for line in lines:
        m = re.match(r"^  ([\w-]+):\s*$", line)
        if m and m.group(1) in stages:
            current = m.group(1)
        if current and re.match(r"^\s+- src/opcost/", line):
            indent = line[: len(line) - len(line.lstrip())]
            if not out or not out[-1].startswith(f"{indent}- src/opcost/"):
                entry = stages[current][0]
                out += [f"{indent}- {f.relative_to(REPO).as_posix()}\n" for f in sorted(closure(entry))]
            continue
        out.append(line)
    (REPO / "dvc.yaml").write_text("".join(out))


if __name__ == "__main__":  # python tests/test_stage_deps.py: bring dvc.yaml's src deps up to date
    sync_dvc_yaml()


def test_train_depends_on_every_table_it_reads():
    """train@<target> reads the target's operations, networks and network_ops tables (the last two
    fit the composition layer): each must lie under a declared dep, or new network measurements
    would leave a stale composition layer 'up to date'."""
    from opcost.paths import Paths

    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["train"]
    target = "A30-inference"
    deps = [REPO / d.replace("${item.target}", target) for d in stage["deps"] if not d.startswith("src/")]
    paths = Paths(REPO)
    read = [paths.target_operations(target), paths.target_networks(target), paths.target_network_ops(target)]
    uncovered = [p.relative_to(REPO) for p in read if not any(p == d or d in p.parents for d in deps)]
    assert uncovered == []
