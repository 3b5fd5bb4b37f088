"""Advisory file locks (fcntl.flock) for everything two processes must not do at once.

Registry writes, creating a fresh MLflow store, measuring into one output folder, measuring on one
GPU: each takes a lock file. `flock` locks die with their process (SIGKILL included), so a killed
run never leaves a stale lock behind; the lock file itself may stay and is harmless.

Device locks are machine-wide, not per project: two checkouts must not measure on one GPU (or the
CPU) at once. They live in `OPCOST_LOCK_DIR`, else `<system temp>/opcost-locks-<uid>`. The original
state of a GPU a campaign changed is kept beside them (`device-state/`), so whichever checkout runs
next, or `opcost restore-device` from any directory, finds what a killed campaign left changed.

What is kept there sets a GPU's power limit and is written by processes that may run as root, so
nobody else may be able to plant anything in it:
- the lock folder and `device-state/` must be owned by root or the current user and writable by
  nobody else (no group or other write); anything else is refused in one line saying how to fix it;
- every lock and state file is opened with O_NOFOLLOW and must be a plain file with one link, so a
  planted symbolic or hard link never makes opcost truncate or write another file;
- a state file is trusted only if root or the current user owns it (`read_private_json`); what it
  records is checked by its reader (measure/clocks.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from opcost.errors import OpcostError


@contextlib.contextmanager
def file_lock(path: Path, what: str, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing). With `wait=False`, fail at once with a
    one-line error naming `what` is busy instead of waiting for the other process."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_plain(path, os.O_RDWR | os.O_CREAT, "lock file")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                holder = _holder(fd)
                raise OpcostError(
                    f"{what} is in use by another process{holder} (lock {path}); wait for it to finish"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


class UnsafeFile(OpcostError):
    """A lock or state file opcost will not open: a symbolic link, not a plain file, or not openable."""

    def __init__(self, path: Path, what: str, why: str, fix: str) -> None:
        super().__init__(f"{what} {path} {why}: {fix}")
        self.why = why


def _open_plain(path: Path, flags: int, what: str) -> int:
    """Open `path` without following a symbolic link (O_NOFOLLOW) and only if it is a plain file with
    one link: a planted link would make the caller truncate or write the file it points to."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafeFile(
                path,
                what,
                "is a symbolic link, and opcost never follows one there (it would write to its target)",
                "remove the link",
            ) from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise UnsafeFile(
                path,
                what,
                f"cannot be opened ({exc.strerror})",
                "run as a user who may write it, or (device locks) set OPCOST_LOCK_DIR to a folder of your own",
            ) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        kind = "not a plain file" if not stat.S_ISREG(st.st_mode) else f"a file with {st.st_nlink} hard links"
        raise UnsafeFile(path, what, f"is {kind}, and opcost writes only plain files of its own there", "remove it")
    return fd


def trusted_uids() -> tuple[int, ...]:
    """Who may own the lock folder, the state folder and the state files: root and the current user."""
    return (0, os.geteuid())


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def private_dir(d: Path) -> Path:
    """`d`, made (mode 0700) if missing, and refused in one line unless root or the current user owns it
    and nobody else can write into it: whoever can write there can plant locks and device state."""
    d = Path(d)
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    fix = f"remove it (as root if need be: rm -r {d}) or set OPCOST_LOCK_DIR to a folder only you can write"
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
        raise OpcostError(
            f"lock folder {d} is {what}; opcost keeps device locks and state only in a real folder: {fix}"
        )
    if st.st_uid not in trusted_uids():
        raise OpcostError(
            f"lock folder {d} is owned by {_owner(st.st_uid)}, not by root or you ({_owner(os.geteuid())}), "
            f"so its owner could plant device locks and state: {fix}"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise OpcostError(
            f"lock folder {d} is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o}), so anyone "
            f"could plant device locks and state in it: run `chmod go-w {d}`, or set OPCOST_LOCK_DIR to a folder "
            "only you can write"
        )
    return d


def machine_lock_dir() -> Path:
    """Where machine-wide locks live: OPCOST_LOCK_DIR, else <system temp dir>/opcost-locks-<uid>; checked
    by `private_dir` (a folder another user can write into is refused)."""
    env = os.environ.get("OPCOST_LOCK_DIR")
    return private_dir(Path(env) if env else Path(tempfile.gettempdir()) / f"opcost-locks-{os.geteuid()}")


def device_state_dir() -> Path:
    """Where GPUs' saved original states live: beside the machine-wide device locks, because a GPU
    is shared by every checkout on the machine (two clones on one SLURM node)."""
    return private_dir(machine_lock_dir() / "device-state")


def read_private_json(path: Path, what: str) -> tuple[Any, str]:
    """(parsed JSON, "") of a file root or the current user owns, read without following a link; (None,
    why not trusted) otherwise. Raises ValueError for a file that is not JSON."""
    try:
        fd = _open_plain(path, os.O_RDONLY, what)
    except UnsafeFile as exc:
        return None, f"it {exc.why}"
    try:
        st = os.fstat(fd)
        if st.st_uid not in trusted_uids():
            return None, f"it is owned by {_owner(st.st_uid)}, not by root or you ({_owner(os.geteuid())})"
        with os.fdopen(fd, "rb", closefd=False) as f:
            text = f.read(1 << 20)
    finally:
        os.close(fd)
    return json.loads(text), ""


def write_private_json(obj: Any, path: Path) -> None:
    """Write `obj` as JSON to `path` atomically in a `private_dir`: a temporary file created with
    O_EXCL|O_NOFOLLOW (never an existing file or link), renamed over `path` (a rename replaces a link,
    never writes through it)."""
    d = private_dir(Path(path).parent)
    tmp = d / f".{Path(path).name}.{os.getpid()}.tmp"
    data = (json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:  # left by a killed process with this pid: ours to replace
        os.unlink(tmp)
        fd = os.open(tmp, flags, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@contextlib.contextmanager
def device_lock(key: str, what: str, wait: bool = False, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """The lock of one measuring device. `key` is a GPU's UUID, or `cpu_lock_key()` for the CPU.

    By default fail at once if another process holds it: two measurements on one device would both
    be wrong, and someone at a terminal wants to know now. With `wait` (SLURM shards that share a
    node, `profile --shard --wait-for-device`), say so and queue behind the holder instead."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    path = machine_lock_dir() / f"device-{safe}.lock"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(path, what, wait=False))
        except OpcostError as busy:
            if not wait:
                raise
            if say is not None:
                say(f"{busy}: waiting for it")
            held.enter_context(file_lock(path, what, wait=True))
        yield


def cpu_lock_key() -> str:
    """The CPU as a device: one per host (the lock dir may be shared between the nodes of a cluster)."""
    return f"cpu-{socket.gethostname()}"
