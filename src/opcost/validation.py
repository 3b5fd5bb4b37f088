"""Strict checks of untrusted settings (params.yaml, the command line): one-line errors that say where,
what and what would be valid.

Separate from the parameter classes (opcost/params/) so that every parser uses the same few checks
and the same wording, and so that a module needing one check does not load every parameter section.
Every parameter class parses its section the same way: `checked_fields` over a table of per-key
checks (an unknown key is named with the closest valid one), then checks across keys where needed.

Names that become paths (campaigns, ingest sources, train targets, model names in set ids) use only
`[A-Za-z0-9_.-]`, never `..` or a leading dot, and a source's path stays inside data/external/.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import PurePosixPath
from typing import Any, Callable, Sequence

from opcost.errors import OpcostError, some_of

# A check of one value: (value, where it is) -> the value converted, or an OpcostError.
Check = Callable[[Any, str], Any]

SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
EXTERNAL_DIR = ("data", "external")


def check_name(name: Any, where: str, what: str) -> str:
    """A name that becomes part of a path: `[A-Za-z0-9_.-]`, no leading dot, no `..`."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or name.startswith(".") or ".." in name:
        raise OpcostError(
            f"{where}: {what} {name!r} may use only letters, digits, '_', '.' and '-', without a leading dot "
            "or '..' (it becomes part of a file path)"
        )
    return name


def check_keys(raw: dict[Any, Any], valid: Sequence[str], where: str, notes: dict[str, str] | None = None) -> None:
    """Every key of `raw` is one of `valid`; the error names the closest valid key (difflib), and
    why the key is not taken where `notes` says."""
    for key in raw:
        if key not in valid:
            closest = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.0)
            hint = f"closest valid key: {closest[0]!r}; " if closest else ""
            note = f"; {notes[key]}" if notes and key in notes else ""
            raise OpcostError(f"{where}: unknown key {key!r} ({hint}valid keys: {some_of(valid)}){note}")


def mapping(raw: Any, where: str, what: str = "a mapping") -> dict[Any, Any]:
    """A YAML mapping (None, an empty section, counts as empty)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise OpcostError(f"{where}: expected {what}, got {type(raw).__name__} {raw!r}")
    return raw


def as_int(v: Any, where: str, lo: int | None = None) -> int:
    """An integer (not a bool, not a float, not a string), at least `lo`."""
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo):
        bound = f" >= {lo}" if lo is not None else ""
        raise OpcostError(f"{where}: expected an integer{bound}, got {v!r}")
    return v


def as_number(
    v: Any,
    where: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite number (int or float, not a bool or string) in [lo, hi] (open ends where asked)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v < hi if hi_open else v <= hi
    if not ok:
        left = "" if lo is None else f"{'>' if lo_open else '>='} {lo:g}"
        right = "" if hi is None else f"{'<' if hi_open else '<='} {hi:g}"
        rng = " and ".join(x for x in (left, right) if x)
        raise OpcostError(f"{where}: expected a finite number{' ' + rng if rng else ''}, got {v!r}")
    return float(v)


def as_positive(v: Any, where: str) -> float:
    """A duration, size or rate: finite and > 0."""
    return as_number(v, where, lo=0, lo_open=True)


def as_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise OpcostError(f"{where}: expected true or false, got {v!r}")
    return v


def as_str(v: Any, where: str, choices: Sequence[str] | None = None) -> str:
    if not isinstance(v, str) or not v or (choices is not None and v not in choices):
        valid = f"one of {', '.join(choices)}" if choices is not None else "a non-empty string"
        raise OpcostError(f"{where}: expected {valid}, got {v!r}")
    return v


def as_list(v: Any, where: str, item: Callable[[Any, str], Any]) -> tuple[Any, ...]:
    """A list (a single value counts as a list of one), each item checked by `item`."""
    items = v if isinstance(v, (list, tuple)) else [v]
    return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(items))


def check_external_path(v: Any, where: str) -> str:
    """A source path: relative, inside data/external/, made of safe names (no `..`, no leading dot)."""
    if not isinstance(v, str) or not v or "\\" in v:
        raise OpcostError(f"{where}: expected a path inside data/external/, got {v!r}")
    p = PurePosixPath(v)
    parts = p.parts
    if p.is_absolute() or parts[:2] != EXTERNAL_DIR or len(parts) < 3:
        raise OpcostError(f"{where}: path {v!r} must lie inside data/external/ (e.g. data/external/<source>)")
    for part in parts[2:]:
        check_name(part, where, "path component")
    return str(p)


def optional(check: Check) -> Check:
    """`check`, letting null (None: the library's own default) through."""
    return lambda v, w: None if v is None else check(v, w)


def checked_fields(
    raw: Any, where: str, checks: dict[str, Check], notes: dict[str, str] | None = None
) -> dict[str, Any]:
    """The one way a settings mapping is parsed: `raw` (None counts as empty) may hold only the keys of
    `checks`, and each value given is converted by its check (where: `<where>.<key>`). Keys not given
    are left out, so the caller's dataclass defaults apply."""
    raw = mapping(raw, where)
    check_keys(raw, list(checks), where, notes)
    return {k: checks[k](v, f"{where}.{k}") for k, v in raw.items()}
