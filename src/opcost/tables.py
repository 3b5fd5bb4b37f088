"""Reading the project's tables: one place that knows which stage makes each file.

Every reader validates against `schemas.py`, and a missing upstream output is a one-line error that
names the file and the `dvc repro` stage that makes it. This module imports no torch, so stages that
only read tables (evaluate, train, validate) stay fast and their DVC dependencies stay small.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pandas as pd

from opcost.errors import OpcostError, shown_path
from opcost.params.ingest import OP_SOURCE_KINDS
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import OPERATIONS, Table


def require(path: Path, stage: str) -> Path:
    """`path` if it exists, else a one-line error naming the stage that writes it."""
    if not Path(path).exists():
        raise OpcostError(f"{path} is missing: run `dvc repro {stage}` (or `dvc pull` to fetch it)")
    return Path(path)


def read_parquet(path: Path, stage: str | None = None, **kwargs: object) -> pd.DataFrame:
    """`pd.read_parquet`, but a file that is not readable Parquet (truncated, overwritten, a DVC
    pointer left in place) is a one-line error naming the file and how to get it back, not
    pyarrow's traceback. So is a path that is no regular file (a link to /dev/zero, a folder): pyarrow
    calls it missing."""
    try:
        mode = os.stat(path).st_mode  # follows links: what would be read
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise OpcostError(
            f"{shown_path(path)} cannot be read ({exc.strerror}): `dvc checkout {shown_path(path)}` restores it"
        ) from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise OpcostError(f"{shown_path(path)} is {what}, not a Parquet file: {_again(stage)} restores it")
    try:
        return pd.read_parquet(path, **kwargs)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
        if isinstance(exc, FileNotFoundError):
            raise
        why = _short(str(exc)) or type(exc).__name__
        raise OpcostError(
            f"{shown_path(path)} is not a readable Parquet file ({why}): {_again(stage)} restores it"
        ) from None


def _short(text: str, limit: int = 60) -> str:
    """pyarrow's reason in a few words: its first sentence without the path it names (the message names it
    already), cut at a word boundary to `limit` characters."""
    text = re.sub(r"Could not open Parquet input source '[^']*'[:.]?", "", " ".join(text.split()))
    text = text.split(". ")[0].strip(" '.:")
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def _again(stage: str | None) -> str:
    """How a damaged stage output comes back: the stage again, or the DVC cache's copy."""
    return f"`dvc repro {stage}` (or `dvc checkout`)" if stage else "`dvc checkout`"


def read_table(path: Path, table: Table, stage: str) -> pd.DataFrame:
    """A Parquet table, checked against its schema; missing -> which stage makes it; corrupt -> which file."""
    return table.validate(read_parquet(require(path, stage), stage))


def known_operations(paths: Paths, params: Params) -> pd.DataFrame:
    """Every op spec the project knows, indexed by op_id: extract's operations table and those of
    the thesis-log ingest sources (ops the thesis measured that no extract set contains)."""
    frames = [read_table(paths.operations, OPERATIONS, "extract")]
    for name, src in params.ingest.sources.items():
        if src.kind in OP_SOURCE_KINDS:
            f = paths.ingested_dir(name) / "operations.parquet"
            frames.append(read_table(f, OPERATIONS, f"ingest@{name}"))
    return pd.concat(frames, ignore_index=True).drop_duplicates("op_id").set_index("op_id")
