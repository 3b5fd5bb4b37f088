"""A time limit on work that runs a user's code: a builder or forward pass that never returns.

`opcost predict` builds and traces whatever network it is given; a user's builder stuck in a loop
would hang it forever. `deadline(seconds, what)` interrupts the main thread with SIGALRM after
`seconds` and turns that into one OpcostError line. An import in progress (torch's, seconds cold)
is let finish first (`_importing`): interrupted half-way it would leave torch unusable. The
interrupt is a BaseException while it travels, so no `except Exception` on the way (an op that
fails to rebuild is recorded, not raised) can swallow it. Where SIGALRM does not exist (Windows)
or off the main thread, no limit applies.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from typing import Any, Iterator

from opcost.errors import OpcostError

DEFAULT_TIMEOUT_S = 300.0  # the slowest known network (a detection model traced on the CPU) takes about 60 s


# How long past the deadline an import in progress may still finish before it is interrupted anyway.
IMPORT_GRACE_S = 30.0


def _importing() -> bool:
    """Whether a library module is half-way through its import (`import torch` takes seconds cold).
    Interrupted there, it would stay half-initialised in sys.modules and break every later use (a
    segfault at the next garbage collection). A user's own model file is not waited for."""
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if getattr(spec, "_initializing", False) and not name.startswith("opcost_user_"):
            return True
    return False


class _Expired(BaseException):
    """Raised in the main thread when the deadline passes (see module docstring)."""


@contextlib.contextmanager
def deadline(seconds: float | None, what: str, option: str = "--timeout") -> Iterator[None]:
    """Run the body with at most `seconds` of wall time (None or 0: no limit)."""
    if seconds is not None and not seconds >= 0:
        raise OpcostError(f"{option} {seconds}: expected seconds >= 0 (0 = no limit)")
    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not seconds or not usable:
        yield
        return

    grace_until = time.monotonic() + seconds + IMPORT_GRACE_S

    def expire(signum: int, frame: Any) -> None:
        if _importing() and time.monotonic() < grace_until:
            signal.setitimer(signal.ITIMER_REAL, 0.05)  # never break `import torch` half-way: try again soon
            return
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    except _Expired:
        raise OpcostError(
            f"{what} did not finish within {seconds:g} s ({option} {seconds:g}): a model builder or forward pass "
            f"that never returns? Give a larger {option}, or {option} 0 for no limit"
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
