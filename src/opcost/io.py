"""Atomic file output: write to a temporary file, then rename it onto the target.

A stage that fails (or is killed) half-way never leaves a truncated Parquet or JSON file that the
next stage, or DVC, would mistake for a finished output. Inside a project the temporary file lives
in `.opcost/tmp/` (git- and DVC-ignored), not beside the target: a SIGKILL between writing and
renaming then leaves nothing inside a DVC output folder. Elsewhere (an ad-hoc `--out` folder) it
sits beside the target as a hidden `.name.*.tmp` file.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=temp_dir_for(target))
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary shared files
    try:
        yield tmp_path
        _replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def temp_dir_for(target: Path) -> Path:
    """Where the temporary file of `target` is written: the project's `.opcost/tmp/` when the target
    is inside a project (a folder with dvc.yaml), else the target's own folder."""
    from opcost.config import find_root

    root = find_root()
    if (root / "dvc.yaml").is_file():
        try:
            Path(target).resolve().relative_to(root)
        except ValueError:
            return Path(target).parent
        d = root / ".opcost" / "tmp"
        d.mkdir(parents=True, exist_ok=True)
        return d
    return Path(target).parent


def _replace(tmp: Path, target: Path) -> None:
    try:
        os.replace(tmp, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        # .opcost/tmp on another file system than the target: copy beside the target, then rename
        fd, near = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            shutil.copyfile(tmp, near)
            os.replace(near, target)
        finally:
            if os.path.exists(near):
                os.unlink(near)


def write_parquet(df: pd.DataFrame, target: Path) -> None:
    """Write a DataFrame as Parquet atomically (no index: our tables carry their keys as columns)."""
    with atomic_path(target) as tmp:
        df.to_parquet(tmp, index=False)


def write_json(obj: Any, target: Path) -> None:
    """Write JSON atomically, pretty-printed and key-sorted so diffs in git stay readable."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def round_floats(obj: Any, digits: int = 10) -> Any:
    """Floats to `digits` significant digits, recursively: metrics files then do not change in the
    last bits when parallel reductions sum in another order."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    return obj
