"""Shared fixtures. Tests run real code on small inputs; nothing here fakes the core."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = REPO / "data" / "external"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root for stage runs; OPCOST_ROOT points there."""
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session")
def external_data() -> Path:
    """data/external/ as DVC tracks it; pulled from the in-repo remote when a fresh clone lacks it."""
    targets = [EXTERNAL / f"{d}.dvc" for d in ("nicolai-thesis", "zeus-power-limit", "dvfs-conv")]
    if not all((EXTERNAL / t.stem).is_dir() for t in targets):
        dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
        subprocess.run([dvc, "pull", *map(str, targets)], cwd=REPO, check=True, capture_output=True)
    return EXTERNAL
