"""What the command line writes: output paths a user names (`--plot FILE`, `--out DIR`), checked
before any work starts (a missing or unwritable folder, a file where a folder belongs or the reverse
is one line naming the option, not a traceback after minutes of measuring or predicting), and
`--json` text that a strict JSON parser accepts. Light imports only: the CLI loads it at start."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from opcost.errors import OpcostError


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output_file(path: Path, option: str) -> Path:
    """`path` can be written as a file: its folder exists and is writable, and it is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise OpcostError(f"{option} {path}: is a folder; give a file name")
    folder = path.absolute().parent
    if not folder.exists():
        raise OpcostError(f"{option} {path}: folder {folder} does not exist; create it first or choose another path")
    if not folder.is_dir():
        raise OpcostError(f"{option} {path}: {_nearest_file(folder)} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OpcostError(f"{option} {path}: folder {folder} is not writable")
    _probe(folder, path, option)
    return path


def check_output_dir(path: Path, option: str) -> Path:
    """`path` is a folder or can be made one: no file in its place or above it, and writable."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OpcostError(f"{option} {path}: is a file; give a folder")
    base = _nearest_existing(path)
    if not base.is_dir():
        raise OpcostError(f"{option} {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OpcostError(f"{option} {path}: folder {base} is not writable")
    _probe(base, path, option)
    return path


def _probe(folder: Path, path: Path, option: str) -> None:
    """Create and remove an empty file in `folder`: permission bits do not tell everything (root passes
    every `os.access` check, yet /proc and /sys take no new files, and a read-only mount takes none)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".opcost-probe-", dir=folder)
    except OSError as exc:
        raise OpcostError(
            f"{option} {path}: no file can be created in {folder} ({exc.strerror or exc}; a system or read-only "
            "file system?): choose another path"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _nearest_file(folder: Path) -> Path:
    p = folder
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def finite_json(obj: object, indent: int | None = 2) -> str:
    """JSON text without NaN or infinities (JSON has no such numbers; Python's json would print
    `NaN`): they become null; numpy scalars become plain numbers."""

    def clean(o: object) -> object:
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if type(o).__module__ == "numpy" and hasattr(o, "item"):
            o = o.item()
        if isinstance(o, float) and not math.isfinite(o):
            return None
        return o

    return json.dumps(clean(obj), indent=indent, allow_nan=False)
