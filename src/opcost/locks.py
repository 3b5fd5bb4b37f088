"""Advisory file locks (fcntl.flock) for everything two processes must not do at once.

Registry writes, creating a fresh MLflow store, measuring into one output folder, measuring on one
GPU: each takes a lock file. `flock` locks die with their process (SIGKILL included), so a killed
run never leaves a stale lock behind; the lock file itself may stay and is harmless.

Device locks are machine-wide, not per project: two checkouts must not measure on one GPU (or the
CPU) at once. They live in `OPCOST_LOCK_DIR`, else `<system temp>/opcost-locks` (made sticky and
world-writable like /tmp, so several users share it). The original state of a GPU a campaign
changed is kept beside them (`device-state/`), so whichever checkout runs next on the machine, or
`opcost restore-device` from any directory, finds what a killed campaign left changed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from opcost.errors import OpcostError


@contextlib.contextmanager
def file_lock(path: Path, what: str, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing). With `wait=False`, fail at once with a
    one-line error naming `what` is busy instead of waiting for the other process."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
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


def machine_lock_dir() -> Path:
    """Where machine-wide locks live: OPCOST_LOCK_DIR, else <system temp dir>/opcost-locks."""
    env = os.environ.get("OPCOST_LOCK_DIR")
    d = Path(env) if env else Path(tempfile.gettempdir()) / "opcost-locks"
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True)
        if not env:
            os.chmod(d, 0o1777)
    return d


def device_state_dir() -> Path:
    """Where GPUs' saved original states live: beside the machine-wide device locks, because a GPU
    is shared by every checkout on the machine (two clones on one SLURM node)."""
    d = machine_lock_dir() / "device-state"
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True)
        if not os.environ.get("OPCOST_LOCK_DIR"):
            os.chmod(d, 0o1777)
    return d


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
