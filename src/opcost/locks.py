"""Advisory file locks (fcntl.flock) for everything two processes must not do at once.

Registry writes, creating a fresh MLflow store, measuring into one output folder, measuring on one
GPU: each takes a lock file. `flock` locks die with their process (SIGKILL included), so a killed
run never leaves a stale lock behind; the lock file itself may stay and is harmless.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterator

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
