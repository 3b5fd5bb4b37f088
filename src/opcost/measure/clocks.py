"""Core clocks and power limits: validate, set, record what was reached, and always restore.

Settings are checked against what the device supports before anything is measured; permission is
probed by applying the first setting (and restoring it) before the first measurement, so a
campaign without the right to change clocks stops at once with a message saying what it needs.
`DeviceControl.session()` restores the original state in `finally` and on SIGINT/SIGTERM.

Tested against a fake NVML and a dry run only: no test here changes a real GPU's clocks.
"""

from __future__ import annotations

import contextlib
import signal
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from opcost.errors import OpcostError

PERMISSION_HELP = (
    "changing clocks or power limits needs root (or `nvidia-smi -acp UNRESTRICTED` by an admin for clocks); "
    "run the campaign as a user allowed to, or sweep nothing to measure the device as it is"
)


@dataclass(frozen=True, order=True)
class Setting:
    """One point of a sweep; None means 'as the device is'."""

    clock_mhz: int | None = None
    power_limit_w: float | None = None

    @property
    def is_default(self) -> bool:
        return self.clock_mhz is None and self.power_limit_w is None

    @property
    def label(self) -> str:
        parts = []
        if self.clock_mhz is not None:
            parts.append(f"clk{self.clock_mhz}")
        if self.power_limit_w is not None:
            parts.append(f"pl{self.power_limit_w:g}")
        return "-".join(parts) or "default"


def settings_grid(clocks_mhz: Sequence[int], power_limits_w: Sequence[float]) -> list[Setting]:
    """Every combination of the swept clocks and power limits; [default] when nothing is swept."""
    clocks: list[int | None] = list(clocks_mhz) or [None]
    limits: list[float | None] = list(power_limits_w) or [None]
    return [Setting(c, p) for c in clocks for p in limits]


class DeviceControl:
    """Applies settings to one device through `Nvml` (None for a CPU: only the default setting)."""

    def __init__(self, nvml: Any = None, device: str = "cpu") -> None:
        self.nvml = nvml
        self.device = device
        self._saved_limit: float | None = None
        self._changed_clocks = False
        self._changed_limit = False

    def validate(self, settings: Sequence[Setting]) -> None:
        """Refuse unsupported values before anything starts, listing what is supported."""
        swept = [s for s in settings if not s.is_default]
        if not swept:
            return
        if self.nvml is None:
            raise OpcostError(
                f"device {self.device} has no clock or power-limit control; remove clocks_mhz/power_limits_w"
            )
        clocks = [s.clock_mhz for s in swept if s.clock_mhz is not None]
        if clocks:
            supported = self.nvml.supported_graphics_clocks()
            bad = sorted({c for c in clocks if c not in supported})
            if bad:
                shown = ", ".join(map(str, supported[:: max(1, len(supported) // 12)]))
                raise OpcostError(
                    f"core clock(s) {bad} MHz not supported by {self.device}; "
                    f"supported: {supported[0]}..{supported[-1]} MHz in steps, e.g. {shown}"
                )
        limits = [s.power_limit_w for s in swept if s.power_limit_w is not None]
        if limits:
            lo, hi = self.nvml.power_limit_range_w()
            bad_l = sorted({p for p in limits if not lo <= p <= hi})
            if bad_l:
                raise OpcostError(f"power limit(s) {bad_l} W outside what {self.device} allows: {lo:g}..{hi:g} W")

    def check_permission(self, settings: Sequence[Setting]) -> None:
        """Apply the first non-default setting and restore it: fails before any measurement."""
        first = next((s for s in settings if not s.is_default), None)
        if first is None:
            return
        try:
            self.apply(first)
        finally:
            self.restore()

    def apply(self, setting: Setting) -> dict[str, Any]:
        """Set clocks/limit (or reset them for the default); return what the device reports now."""
        if self.nvml is None:
            return {}
        try:
            if setting.clock_mhz is not None:
                self.nvml.lock_clocks(setting.clock_mhz)
                self._changed_clocks = True
            elif self._changed_clocks:
                self.nvml.reset_clocks()
                self._changed_clocks = False
            if setting.power_limit_w is not None:
                if self._saved_limit is None:
                    self._saved_limit = self.nvml.power_limit_w()
                self.nvml.set_power_limit(setting.power_limit_w)
                self._changed_limit = True
            elif self._changed_limit and self._saved_limit is not None:
                self.nvml.set_power_limit(self._saved_limit)
                self._changed_limit = False
        except Exception as exc:
            if self.nvml.is_permission_error(exc):
                raise OpcostError(
                    f"no permission to apply {setting.label} on {self.device}: {PERMISSION_HELP}"
                ) from exc
            raise
        return {"sm_clock_mhz": self.nvml.clock_mhz("sm"), "power_limit_w": self.nvml.power_limit_w()}

    def restore(self) -> None:
        """Back to the state found: locked clocks reset, the original power limit set again."""
        if self.nvml is None:
            return
        if self._changed_clocks:
            self.nvml.reset_clocks()
            self._changed_clocks = False
        if self._changed_limit and self._saved_limit is not None:
            self.nvml.set_power_limit(self._saved_limit)
            self._changed_limit = False

    @contextlib.contextmanager
    def session(self) -> Iterator["DeviceControl"]:
        """Restore on normal exit, on exceptions, and on SIGINT/SIGTERM (then re-raise the signal's exit)."""
        previous: dict[int, Any] = {}

        def on_signal(signum: int, frame: Any) -> None:
            self.restore()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, on_signal)
            except ValueError:  # not the main thread: rely on finally
                pass
        try:
            yield self
        finally:
            self.restore()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
