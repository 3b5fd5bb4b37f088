"""Atomic file output: write to a temporary file beside the target, then rename.

A stage that fails (or is killed) half-way never leaves a truncated Parquet or JSON file that the
next stage, or DVC, would mistake for a finished output.
"""

from __future__ import annotations

import json
import os
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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary shared files
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


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
