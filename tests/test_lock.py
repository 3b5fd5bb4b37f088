"""requirements.lock (every transitive dependency, pinned) and pyproject.toml's exact pins agree, so a fresh
machine in a year installs what CI tested (`make venv` installs with `-c requirements.lock`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for n, line in enumerate((REPO / "requirements.lock").read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert m, f"requirements.lock:{n}: {line!r} is not an exact pin name==version"
        assert norm(m.group(1)) not in pins, f"requirements.lock:{n}: {m.group(1)} pinned twice"
        pins[norm(m.group(1))] = m.group(2)
    return pins


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    pins = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;]+)", r.strip())
        assert m, f"pyproject.toml: {r!r} is not an exact pin"
        pins[norm(m.group(1))] = m.group(3)
    return pins


def test_every_pyproject_pin_is_in_the_lock_at_the_same_version():
    lock, pins = lock_pins(), pyproject_pins()
    missing = sorted(set(pins) - set(lock))
    assert not missing, f"pinned in pyproject.toml but not in requirements.lock: {missing}; run `make lock`"
    differ = {n: (v, lock[n]) for n, v in pins.items() if lock[n] != v}
    assert not differ, f"pyproject.toml vs requirements.lock (pin, lock): {differ}; run `make lock`"


def test_the_lock_holds_no_project_itself_and_no_local_paths():
    text = (REPO / "requirements.lock").read_text()
    assert "opcost" not in lock_pins()
    assert " @ " not in text and "file://" not in text and "-e " not in text
