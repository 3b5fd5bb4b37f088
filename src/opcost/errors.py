"""User-facing errors.

Every error a user can cause by bad input is an `OpcostError`: the CLI prints its message on one
line and exits non-zero, without a traceback. Messages name the bad input and what would be valid,
and stay under MAX_LINE columns: a long list of valid values is cut to its closest or first few
entries (`closest`, `some_of`) and the message says where the whole list lives.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Iterable

MAX_LINE = 200  # columns an error line may take, "error: " included


class OpcostError(Exception):
    """An error caused by input the user can fix; its message is shown as is."""


class SchemaError(OpcostError):
    """A table does not match its declared schema (missing column, wrong dtype, out-of-range value)."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `choices` closest to `name` (difflib, case-insensitive), best first."""
    by_low: dict[str, str] = {}
    for c in choices:
        by_low.setdefault(str(c).lower(), str(c))
    return [by_low[m] for m in difflib.get_close_matches(str(name).lower(), list(by_low), n=n, cutoff=0.5)]


def some_of(items: Iterable[str], limit: int = 8) -> str:
    """`a, b, c` or, past `limit` entries, `a, b, ... and 12 more`: a list that keeps a line short."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def shown_path(path: str | os.PathLike[str]) -> str:
    """`path` as a user would type it here: relative to the working directory where it lies below it."""
    p = Path(path)
    try:
        rel = os.path.relpath(os.path.abspath(p), os.getcwd())
    except ValueError:  # another drive (Windows)
        return str(p)
    return str(p) if rel.startswith(os.pardir) else rel
