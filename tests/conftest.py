"""Shared fixtures. Tests run real code on small inputs; nothing here fakes the core."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root for stage runs; OPCOST_ROOT points there."""
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path
