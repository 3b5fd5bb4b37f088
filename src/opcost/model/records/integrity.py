"""Is a model folder the one the pipeline produced? Content hashes checked against a record the
folder cannot forge.

A bundle's own `bundle_hash` is a field it declares about itself (the identity of its inputs), so
it proves nothing about its content: anyone who edits `trees.npz` or `bundle.json` can write any
value there. What a folder is checked against instead:
- `dvc.lock`, committed to git, records the md5 DVC computed for every stage output folder when
  the stage ran. `dir_md5` computes the same digest from the files (DVC 3's directory hash: the md5
  of the JSON list of `{"md5", "relpath"}` entries sorted by path), so a folder whose content was
  changed after training no longer matches the lock;
- a registered version carries the md5 of the bundle files it was registered with (tag
  `BUNDLE_MD5_TAG`), computed by the registering process from the content, not read from it;
- `dvc status` on the stage that writes the folder: a stage DVC reports changed (its outputs, deps,
  parameters or command) did not produce what the folder holds now.

A folder is looked up in `dvc.lock` by its path inside the project as written (`models/<target>`),
never by where a symbolic link leads: a linked folder, or a linked `models/`, is checked like any
other. A folder with no record (no `dvc.lock`, or a path it does not list) is vouched for by nothing:
`unrecorded_error` refuses it, and only an explicit `trust_unrecorded` serves it, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from opcost.errors import OpcostError, shown_path

BUNDLE_MD5_TAG = "bundle_md5"
LOCK_FILE = "dvc.lock"
_STAGE = re.compile(r"^  (\S.*):\s*$")
_SECTION = re.compile(r"^    (deps|outs|params|cmd|frozen|always_changed)\s*:")
_PATH = re.compile(r"^\s*- path:\s*(.+?)\s*$")
_MD5 = re.compile(r"^\s+md5:\s*([0-9a-f]{32})(\.dir)?\s*$")


def file_md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dir_md5(folder: Path) -> str:
    """DVC 3's md5 of a directory output (without the `.dir` suffix): computed from every file's
    bytes, so comparable with what `dvc.lock` records. Symlinks are refused (DVC would follow them
    to content outside the folder)."""
    folder = Path(folder)
    entries = []
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            raise OpcostError(f"{p} is a symbolic link; a model folder holds plain files only; refused")
        if p.is_file():
            entries.append({"md5": file_md5(p), "relpath": p.relative_to(folder).as_posix()})
    entries.sort(key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest()


def locked_out(root: Path, folder: Path) -> tuple[str, str] | None:
    """(stage, md5) that `dvc.lock` records for `folder` as a stage output, None if it records none.
    A line scan, not a YAML parse: a prediction's cold start should not pay ~0.1 s for the lock.
    `folder` is placed by its path, not resolved: a link inside the project is looked up by its name."""
    rel = project_path(root, folder)
    if rel is None:
        return None
    lock = root / LOCK_FILE
    if not lock.is_file():
        return None
    stage, section, in_path = "", "", False
    for line in lock.read_text().splitlines():
        if m := _STAGE.match(line):
            stage, section, in_path = m.group(1).strip().strip("'\""), "", False
            continue
        if m := _SECTION.match(line):
            section, in_path = m.group(1), False
            continue
        if m := _PATH.match(line):
            in_path = section == "outs" and m.group(1).strip("'\"").rstrip("/") == rel
            continue
        if in_path and (m := _MD5.match(line)):
            return stage, m.group(1)
    return None


def project_path(root: Path, folder: Path) -> str | None:
    """`folder`'s path inside the project as `dvc.lock` writes it (`models/A30-inference`), from the paths
    as given (made absolute and normalised, no symbolic link followed); None outside the project."""
    rel = os.path.relpath(os.path.abspath(folder), os.path.abspath(root))
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return Path(rel).as_posix()


def unrecorded_why(root: Path, folder: Path) -> str:
    """Why nothing vouches for `folder`, in a few words: `dvc.lock` is missing, or records no output there."""
    rel = project_path(root, folder) or str(folder)
    if not (Path(root) / LOCK_FILE).is_file():
        return f"{LOCK_FILE} is missing, so nothing vouches for the content of {rel}"
    return f"{LOCK_FILE} records no output at {rel}, so nothing vouches for its content"


def unrecorded_error(root: Path, folder: Path, flag: bool = True) -> OpcostError:
    """`unrecorded_why` and how to go on, in one line; `flag`: the command has --trust-unrecorded
    (predict, recommend) to use the folder as it is."""
    if not (Path(root) / LOCK_FILE).is_file():
        how = f"restore it (`git checkout {LOCK_FILE}`)"
    else:
        how = "a renamed or copied model folder? train it with `dvc repro`, or `dvc commit` one you trained yourself"
    if flag:
        how += ", or pass --trust-unrecorded to use it as it is"
    return OpcostError(f"{unrecorded_why(root, folder)}: {how}; refused")


def locked_md5(root: Path, folder: Path) -> str | None:
    found = locked_out(root, folder)
    return None if found is None else found[1]


def check_locked(root: Path, folder: Path, actual_md5: str) -> str:
    """Refuse a folder whose content differs from what `dvc.lock` records; returns the stage that
    writes it. A folder `dvc.lock` does not record is refused too (nothing vouches for it)."""
    found = locked_out(root, folder)
    if found is None:
        raise unrecorded_error(root, folder, flag=False)
    stage, md5 = found
    if md5 != actual_md5:
        rel = project_path(root, folder) or shown_path(folder)
        raise OpcostError(
            f"{rel} was modified after `{stage}` wrote it (md5 differs from {LOCK_FILE}'s): `dvc checkout {rel}` "
            "restores it; refused"
        )
    return stage


def dvc_command() -> list[str]:
    """How to run the DVC installed with this Python: the `dvc` script beside `sys.executable` (the
    environment opcost runs in), else `python -m dvc`. Never a `dvc` found on PATH: that may be
    another installation (another DVC version computes other hashes) or none at all (cron, IDEs)."""
    beside = Path(sys.executable).parent / "dvc"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "dvc"]


def dvc_changed(root: Path, stages: list[str], timeout: float = 300) -> dict[str, str]:
    """What `dvc status` reports changed, per stage of `stages` (absent: up to date); one DVC call.
    Raises OpcostError when DVC cannot tell (not a DVC repository, dvc missing, timed out): unknown
    is not clean."""
    if not stages:
        return {}
    what = f"`dvc status {' '.join(stages)}`"
    try:
        res = subprocess.run(
            [*dvc_command(), "status", "--json", *stages], cwd=root, capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OpcostError(f"{what} could not run ({type(exc).__name__}); cannot vouch for the models") from None
    if res.returncode != 0:
        why = (res.stderr.strip().splitlines() or ["no message"])[-1]
        raise OpcostError(f"{what} failed ({why}); cannot vouch for the models")
    try:
        status = json.loads(res.stdout or "{}")
    except ValueError:
        raise OpcostError(f"{what} printed no JSON; cannot vouch for the models") from None
    return {str(k): json.dumps(v, sort_keys=True) for k, v in status.items()}


_LOCKED_MODEL = re.compile(r"^\s*- path:\s*['\"]?models/([^/'\"\s]+)/?['\"]?\s*$")


def locked_models(root: Path) -> frozenset[str]:
    """The folders under models/ that `dvc.lock` records as stage outputs (`A30-inference`, `xdevice`, ...):
    what a complete checkout holds. A line scan, as `locked_out` reads the lock (no YAML parse on the
    prediction path); cached per lock file content stamp."""
    lock = Path(root) / "dvc.lock"
    try:
        st = lock.stat()
    except OSError:
        return frozenset()
    key = (str(lock), st.st_mtime_ns, st.st_size)
    if key not in _LOCKED:
        _LOCKED.clear()
        _LOCKED[key] = frozenset(
            m.group(1) for line in lock.read_text().splitlines() if (m := _LOCKED_MODEL.match(line))
        )
    return _LOCKED[key]


_LOCKED: dict[tuple[str, int, int], frozenset[str]] = {}
