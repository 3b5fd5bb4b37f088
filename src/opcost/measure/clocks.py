"""Core clocks and power limits: validate, set, record what was reached, and always restore.

Settings are checked against the device and permission is probed before the first measurement, so a
campaign without the right to change clocks stops at once. Restoring must survive everything short
of a power cut: `DeviceControl.session()` restores on exit, exceptions and catchable signals, and the
original state is written to a per-GPU state file first, so after a SIGKILL the next run (or
`opcost restore-device`) restores from it; a state file is trusted only if it can be ours
(`DeviceControl.trusted_record`). Tested against a fake NVML only.
Design: docs/measuring.md#clocks-and-power-limits-set-and-always-restored.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from opcost.errors import OpcostError
from opcost.locks import device_lock, private_dir, read_private_json, write_private_json
from opcost.measure.interrupts import say as _say
from opcost.measure.interrupts import stop_on_signals

if TYPE_CHECKING:
    from opcost.measure.nvml import Nvml

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


class RestoreError(OpcostError):
    """Some knob could not be put back; what is left is kept in the state file."""


KNOBS = ("clocks", "power_limit")
PID_MAX = 1 << 22  # Linux's largest pid_max: no process anywhere has a larger PID
CLOCK_SLACK_S = 300.0  # a state file may be stamped this far in the future (clock adjustments)


def device_key(nvml: Nvml) -> str:
    """What names a GPU's lock and state file: its UUID (stable across index renumbering)."""
    try:
        key = nvml.uuid()
    except Exception:  # an NVML without UUIDs: the index on this host
        key = f"{socket.gethostname()}-index{nvml.index}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _when(t: Any) -> str:
    """A recorded time as local date and time; as written where it is none."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(t)))
    except (TypeError, ValueError, OverflowError, OSError):
        return repr(t)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class DeviceControl:
    """Applies settings to one device through `Nvml` (None for a CPU: only the default setting).

    `state_dir` is where the original state of a GPU is saved before the first change (None: not
    saved, for tests of the knobs alone); `say` prints notices (a restore of a killed run's state).
    """

    def __init__(
        self,
        nvml: Nvml | None = None,
        device: str = "cpu",
        state_dir: Path | None = None,
        say: Callable[[str], None] = _say,
    ) -> None:
        self.nvml = nvml
        self.device = device
        self.say = say
        self._saved_limit: float | None = None
        self._changed = {k: False for k in KNOBS}
        self.key = device_key(nvml) if nvml is not None else None
        self.state_file = Path(state_dir) / f"{self.key}.json" if state_dir is not None and self.key else None

    # -- checks -----------------------------------------------------------------------------
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

    # -- changing ---------------------------------------------------------------------------
    def apply(self, setting: Setting) -> dict[str, float]:
        """Set clocks/limit (or reset them for the default); return what the device reports now."""
        nvml, clock, limit = self.nvml, setting.clock_mhz, setting.power_limit_w
        if nvml is None:
            return {}
        try:
            if clock is not None:
                self._change("clocks", lambda: nvml.lock_clocks(clock))
            elif self._changed["clocks"]:
                nvml.reset_clocks()
                self._changed["clocks"] = False
            if limit is not None:
                self._change("power_limit", lambda: nvml.set_power_limit(limit))
            elif self._changed["power_limit"] and self._saved_limit is not None:
                nvml.set_power_limit(self._saved_limit)
                self._changed["power_limit"] = False
        except Exception as exc:
            if nvml.is_permission_error(exc):
                raise OpcostError(
                    f"no permission to apply {setting.label} on {self.device}: {PERMISSION_HELP}"
                ) from exc
            raise
        return {"sm_clock_mhz": nvml.clock_mhz("sm"), "power_limit_w": nvml.power_limit_w()}

    def _change(self, knob: str, call: Callable[[], None]) -> None:
        """Mark `knob` changed (and save the originals) BEFORE the NVML call, so that a signal
        arriving while the call runs still restores it; unmark it if the call fails (an NVML call
        that returns an error changed nothing)."""
        assert self.nvml is not None  # apply calls it on a GPU only
        was = self._changed[knob]
        if not was:
            if self._saved_limit is None:
                self._saved_limit = self.nvml.power_limit_w()  # the original, read before any change
            self._changed[knob] = True
            try:
                self._save_state()
            except BaseException:  # nothing changed yet, and nothing saved
                self._changed[knob] = False
                raise
        try:
            call()
        except Exception:
            self._changed[knob] = was
            raise

    # -- restoring --------------------------------------------------------------------------
    def restore(self) -> None:
        """Back to the state found: locked clocks reset, the original power limit set again.

        Every step runs whatever the others did; failures are raised together (RestoreError)
        after all ran, and what is still changed stays in the state file."""
        if self.nvml is None:
            return
        errors = []
        if self._changed["clocks"]:
            try:
                self.nvml.reset_clocks()
                self._changed["clocks"] = False
            except Exception as exc:
                errors.append(f"resetting the locked clocks failed ({_first_line(exc)})")
        if self._changed["power_limit"] and self._saved_limit is not None:
            try:
                self.nvml.set_power_limit(self._saved_limit)
                self._changed["power_limit"] = False
            except Exception as exc:
                errors.append(f"setting the power limit back to {self._saved_limit:g} W failed ({_first_line(exc)})")
        if errors:
            where = ""
            if self.state_file is not None:
                self._save_state()
                where = (
                    f"; what is left is saved in {self.state_file}: run `opcost restore-device --device "
                    f"cuda:{self.nvml.index}` as a user allowed to change it"
                )
            raise RestoreError(f"could not restore {self.device}: {'; '.join(errors)}{where}")
        if self.state_file is not None and os.path.lexists(self.state_file):
            self.state_file.unlink()

    def recover(self) -> bool:
        """Restore what a run killed on this GPU left changed (its state file); False if nothing was left.
        A state file that is not trusted (`trusted_record`) is refused in one line, changing nothing."""
        if self.nvml is None or self.state_file is None or not os.path.lexists(self.state_file):
            return False
        fix = (
            f"check the clocks and power limit of {self.device} (nvidia-smi -q -d CLOCK,POWER), reset them "
            "(nvidia-smi -rgc, nvidia-smi -pl W) and delete the file"
        )
        private_dir(self.state_file.parent)  # a folder another user can write into is refused first
        try:
            saved, why = read_private_json(self.state_file, "device state file")
            why = why or self.trusted_record(saved)
            if why:
                untrusted = f"device state file {self.state_file} is not trusted: {why}; nothing was changed"
                raise OpcostError(f"{untrusted}: {fix}")
            changed = [k for k in saved["changed"] if k in KNOBS]
            limit = saved["original"]["power_limit_w"]
            limit = None if limit is None else float(limit)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise OpcostError(
                f"device state file {self.state_file} is unreadable ({_first_line(exc)}): {fix}"
            ) from None
        what = ["reset locked clocks" if k == "clocks" else f"power limit back to {limit} W" for k in changed]
        when = _when(saved["saved_at"])
        self.say(
            f"{self.device}: restoring the state saved by an interrupted run (pid {saved['pid']} on "
            f"{saved['host']}, {when}): {', '.join(what) or 'nothing left changed'}"
        )
        self._saved_limit = limit if limit is not None else self._saved_limit
        for k in changed:
            self._changed[k] = k != "power_limit" or limit is not None
        self.restore()
        return True

    def trusted_record(self, saved: object) -> str:
        """Why the record of a state file cannot have been written by a run on this GPU ("" if it can): it
        must name this GPU and this host, a possible PID (alive or dead), and a time between this
        machine's boot and now; its original power limit must be one the GPU accepts."""
        if not isinstance(saved, dict):
            return "it holds no record"
        host = socket.gethostname()
        if saved.get("key") != self.key:
            return f"it records GPU {saved.get('key')!r}, not {self.key}"
        if saved.get("host") != host:
            return f"it was written on host {saved.get('host')!r}, not on this host ({host})"
        pid = saved.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= PID_MAX:
            return f"its pid {pid!r} is no process id"
        at = saved.get("saved_at")
        now, booted = time.time(), boot_time()
        if not isinstance(at, (int, float)) or isinstance(at, bool) or not booted <= at <= now + CLOCK_SLACK_S:
            return f"its time {_when(at)} is not between this machine's boot ({_when(booted)}) and now"
        changed, original = saved.get("changed"), saved.get("original")
        if not isinstance(changed, list) or not set(changed) <= set(KNOBS) or not isinstance(original, dict):
            return "it does not record which knobs were changed and their originals"
        limit = original.get("power_limit_w")
        if limit is not None:
            if not isinstance(limit, (int, float)) or isinstance(limit, bool):
                return f"its original power limit {limit!r} is no number"
            assert self.nvml is not None  # the record names this GPU's key, which only a GPU has
            lo, hi = self.nvml.power_limit_range_w()
            if not lo <= limit <= hi:
                return f"its original power limit {limit:g} W is outside what {self.device} allows ({lo:g}..{hi:g} W)"
        return ""

    def _save_state(self) -> None:
        if self.state_file is None or self.nvml is None:  # no state file without a GPU
            return
        write_private_json(
            {
                "device": self.device,
                "key": self.key,
                "index": self.nvml.index,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "saved_at": time.time(),
                "original": {"power_limit_w": self._saved_limit},
                "changed": [k for k in KNOBS if self._changed[k]],
            },
            self.state_file,
        )

    @contextlib.contextmanager
    def session(self) -> Iterator["DeviceControl"]:
        """Restore on normal exit, on exceptions, and on the signals of interrupts.HANDLED (restored in
        the handler, then `Interrupted` is raised). Enter it before the first change."""
        with stop_on_signals(self.restore):
            try:
                yield self
            except BaseException:
                try:
                    self.restore()
                except RestoreError as exc:  # reported; the original error is what stopped the run
                    self.say(f"warning: {exc}")
                raise
            self.restore()


def boot_time() -> float:
    """When this machine booted (Linux: /proc/stat btime); 0 where it cannot be read. A GPU's clocks and
    power limit return to the driver's defaults at boot, so a state saved before it describes nothing."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def restore_device(state_dir: Path, index: int, lib: Any = None, say: Callable[[str], None] = _say) -> str:
    """`opcost restore-device`: restore GPU `index` from the state file a killed run left, under
    the GPU's lock (so never under a campaign that is measuring on it)."""
    from opcost.measure.nvml import Nvml

    nvml = Nvml(index, lib=lib)
    try:
        ctl = DeviceControl(nvml, f"cuda:{index}", state_dir, say)
        with device_lock(ctl.key or "", f"device cuda:{index} ({ctl.key})"):
            if not ctl.recover():
                return f"cuda:{index} ({ctl.key}): no saved state in {state_dir}; nothing to restore"
            return f"cuda:{index} ({ctl.key}): restored to the state saved in {ctl.state_file}"
    finally:
        nvml.close()
