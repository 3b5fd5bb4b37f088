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
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from opcost.errors import OpcostError

if TYPE_CHECKING:  # pandas is imported where a table is written: a prediction never needs it
    import pandas as pd


# A full disk or quota: the output cannot be written, which the user fixes by freeing space.
DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


def disk_full_error(target: Path, where: Path, exc: OSError) -> OpcostError:
    """The one line for an output that ran out of space (the caller has removed its temporary file)."""
    return OpcostError(
        f"cannot write {target}: {os.strerror(exc.errno or errno.ENOSPC)} (writing in {where}); nothing was "
        "half-written (the temporary file is removed): free space there and run it again"
    )


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` if the block succeeds.
    A full disk, in the block or at the rename, is a one-line OpcostError (`disk_full_error`)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    where = temp_dir_for(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=where)
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise disk_full_error(target, where, exc) from None
        raise
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary shared files
    try:
        yield tmp_path
        _replace(tmp_path, target)
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        tmp_path.unlink(missing_ok=True)
        raise disk_full_error(target, where, exc) from None
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def temp_dir_for(target: Path) -> Path:
    """Where the temporary file of `target` is written: the project's `.opcost/tmp/` when the target
    is inside a project (a folder with dvc.yaml), else the target's own folder."""
    from opcost.paths import find_root

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


def write_parquet(df: "pd.DataFrame", target: Path) -> None:
    """Write a DataFrame as Parquet atomically (no index: our tables carry their keys as columns)."""
    with atomic_path(target) as tmp:
        df.to_parquet(tmp, index=False)


def json_text(obj: Any, digits: int | None = None) -> str:
    """JSON as the project writes it: pretty-printed and key-sorted so diffs in git stay readable; floats
    exactly (or to `digits` significant digits). NaN and infinity are refused: they are not JSON."""
    data = round_floats(obj, digits) if digits is not None else obj
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_json(obj: Any, target: Path, digits: int | None = None) -> None:
    """Write `json_text(obj, digits)` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json_text(obj, digits))


# Reports carry what is meaningful: six significant digits (an error of 4.95675 %). A fit settles to ~1e-8 in its
# flattest direction and another CPU sums in another order, so more digits differed between machines.
REPORT_DIGITS = 6
# The derived figures a prediction reads back (a bundle's bundle.json): ten digits, so that predictions keep the
# precision they were fitted with.
MODEL_DIGITS = 10


def write_report(obj: Any, target: Path) -> None:
    """A report or metrics file: floats rounded to REPORT_DIGITS significant digits, the same way in
    every stage, so a report does not change in its last bits when a parallel reduction sums in
    another order or another CPU runs the fit, and `dvc repro -f` twice leaves dvc.lock as it was."""
    write_json(obj, target, digits=REPORT_DIGITS)


def report_text(obj: Any) -> str:
    """The text `write_report` writes, for a caller that renames several outputs into place together."""
    return json_text(obj, REPORT_DIGITS)


def round_floats(obj: Any, digits: int = 10) -> Any:
    """Floats (numpy's too) to `digits` significant digits, recursively; NaN becomes None (null)."""
    if isinstance(obj, (float, np.floating)):
        if obj != obj:
            return None
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    return obj


# A fixed timestamp for every member of the archives we write: np.savez stamps the current time,
# so the same arrays saved twice would differ and DVC would see a changed output.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_npz(arrays: dict[str, np.ndarray], target: Path) -> None:
    """Numeric arrays as a compressed .npz, byte-identical for identical arrays, written atomically.
    Object arrays are refused: they would need pickle to load."""
    with atomic_path(target) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            if a.dtype.hasobject:
                raise ValueError(f"array {name!r} has dtype object; only numeric arrays are stored")
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)


def read_json_model(path: Path, what: str, stage: str) -> dict[str, Any]:
    """A model stored as one JSON file (the clock, power and cross-device models), read as data: missing,
    it names the DVC `stage` that writes it; not JSON, or JSON but not an object, it is refused in one line.
    The model's own `from_json` checks the format and the parameters."""
    path = Path(path)
    if not path.is_file():
        raise OpcostError(f"no {what} at {path}: run `dvc pull` or `dvc repro {stage}`")
    try:
        data = json.loads(path.read_text())
    except ValueError:  # UnicodeDecodeError too
        raise OpcostError(f"{path} is not JSON; refused") from None
    if not isinstance(data, dict):
        raise OpcostError(f"{path} is not a {what} (a JSON {type(data).__name__}, not an object); refused")
    return data


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Arrays of an .npz as data only (allow_pickle=False): a file that holds pickled objects, or is
    not an .npz at all, is a one-line error naming it and nothing in it is executed."""
    try:
        with np.load(Path(path), allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError("not an .npz archive")
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise OpcostError(f"{path} is not a plain numeric .npz archive ({str(exc).splitlines()[0]}); refused") from None
