"""Signals that stop a campaign: turned into one exception, after a clean-up that always runs.

A campaign may be stopped by Ctrl-C (SIGINT), by a scheduler (SLURM sends SIGTERM, then SIGKILL
after a grace period), by a closed terminal (SIGHUP), by SIGQUIT, or by a signal whose default
action ends the process: SIGUSR1/SIGUSR2 (SLURM's `--signal`, `scancel -s USR1`) and SIGALRM
(`timeout -s ALRM`, an alarm). Each becomes `Interrupted`,
raised where the main thread is, after `cleanup` ran inside the handler itself: restoring a GPU's
clocks there, not only in a `finally`, means a signal that lands inside a `finally` (or inside
another clean-up) cannot skip the restore. Parts already written stay; the CLI says how to resume
and exits 128 + the signal number, as a shell does.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from types import FrameType
from typing import Any, Callable, Iterator

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)
RESUME_HINT = "interrupted; run the same command again to resume"


class Interrupted(BaseException):
    """A run stopped by a signal. A BaseException, so the per-op `except` of a campaign (which
    records an op's failure and goes on) cannot swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def say(text: str) -> None:
    """A one-line notice on stderr (stdout stays for results)."""
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def stop_on_signals(cleanup: Callable[[], None] | None = None) -> Iterator[None]:
    """Within the block, every signal of HANDLED runs `cleanup` and raises `Interrupted`.

    The previous handlers come back when the block ends. Outside the main thread Python cannot
    install handlers; there the block relies on its callers' `finally`.
    """
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if cleanup is not None:
            try:
                cleanup()
            except Exception as exc:  # reported, never allowed to hide the interrupt
                say(f"warning: {exc}")
        raise Interrupted(signum)

    try:
        for sig in HANDLED:
            try:
                previous[sig] = signal.signal(sig, on_signal)
            except ValueError:  # not the main thread
                break
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
