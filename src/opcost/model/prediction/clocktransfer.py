"""Clock transfer: answers at a core clock that no measured sweep covers, from the cross-clock model.

Why a module of its own: own bundles trained without a clock sweep and transferred GPUs
(model/prediction/xdevice_predict.py) move their op costs to another clock the same way, and widen their
intervals by the same error; one home keeps the two answers the same. Here: the clock model
(models/clock/, stage train-clock) loaded once; each op's compute-bound share of its roofline time
(what the clock model scales by 1/f); the clocks `recommend` sweeps over a device's supported range
(the number of points is the caller's: params clock.grid_points, read at the edge); and the
multiplicative widening of an interval by the clock model's leave-one-GPU-out error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from opcost.errors import OpcostError
from opcost.model.basis.features import OpRecord
from opcost.model.composition.compose import Costs

if TYPE_CHECKING:
    from opcost.devices import DeviceConfig
    from opcost.model.clocks.clock import ClockModel


def roofline_shares(records: Sequence[OpRecord], device: DeviceConfig) -> np.ndarray:
    """Each op's compute-bound share of its roofline time on the device config (model/clocks/clock.py's
    `roofline_share`, with the peak physics.peak_of gives its kind): what the clock model scales by 1/f."""
    from opcost.model.basis.physics import peak_of
    from opcost.model.clocks.clock import roofline_share

    dev, tf32 = device
    return np.array(
        [
            roofline_share(
                r.metrics.get("flops", 0.0),
                float(r.metrics.get("bytes_read", 0.0)) + float(r.metrics.get("bytes_written", 0.0)),
                peak_of(r.kind, dev, tf32),
                dev.bandwidth,
            )
            for r in records
        ],
        dtype=float,
    )


def transfer_device(device: DeviceConfig | None, name: str) -> DeviceConfig:
    """`device`, the resolved config the clock model is to move, checked: one line naming it (`name`, the
    config as asked) where the table lacks it (None)."""
    if device is None:
        raise OpcostError(
            f"{name} is not in the device table (opcost/devices.py): no clock range or TDP "
            "to transfer the clock model with; leave out --clock"
        )
    return device


def clock_grid(device: DeviceConfig | None, points: int) -> list[float]:
    """The clocks `recommend` sweeps for a device config without a measured sweep: `points` evenly over
    the device's supported range, its boost clock included; [] for a device the table lacks (None)."""
    if device is None:
        return []
    lo, hi = device.device.clock_range_mhz
    grid = {float(round(x)) for x in np.linspace(lo, hi, points)} | {float(device.device.boost_clock_mhz)}
    return sorted(grid)


def widen(interval: tuple[float, float], err: float) -> tuple[float, float]:
    """An interval widened by a relative error, multiplicatively both ways: a lower bound never reaches
    zero."""
    return (interval[0] / (1.0 + err), interval[1] * (1.0 + err))


def transfer_note(err_time: float, err_energy: float, device_config: str) -> str:
    """What an answer at a transferred clock says about where its clock behaviour comes from."""
    return (
        f"clock behaviour transferred from the cross-clock model (its leave-one-GPU-out error this far from "
        f"the reference clock, time {100 * err_time:.0f} %, energy {100 * err_energy:.0f} %, widens the intervals), "
        f"not measured on {device_config}"
    )


@dataclass
class ClockTransfer:
    """The cross-clock model of a project (`folder`: models/clock/), loaded on first use. `fetch`, where
    given, supplies the folder instead (`predict --registry`: the registry's verified `opcost-clock`)."""

    folder: Path
    fetch: Callable[[], Path] | None = None
    _model: ClockModel | None = None

    def available(self) -> bool:
        """Whether the clock model is there (a sweep over a grid needs it)."""
        from opcost.model.clocks.clock import CLOCK_MODEL_FILE

        if self.fetch is not None:
            try:
                self.model()
            except OpcostError:
                return False
            return True
        return (self.folder / CLOCK_MODEL_FILE).is_file()

    def model(self) -> ClockModel:
        """The transferred clock model, loaded once."""
        if self._model is None:
            from opcost.model.clocks.clock import ClockModel

            if self.fetch is not None:
                self.folder = self.fetch()
            self._model = ClockModel.load(self.folder)
        return self._model

    def costs(self, device: DeviceConfig, records: list[OpRecord], ref: Costs, clock: float) -> Costs:
        """Per-op costs at `clock` on `device` (`transfer_device`) from those at its boost clock (the reference
        the default-clock models stand for): each op's compute-bound share from its roofline split
        (model/clocks/clock.py)."""
        share = roofline_shares(records, device)
        t, p = self.model().at_clock(
            device.device, clock, np.asarray(ref.t_s, float), np.asarray(ref.p_w, float), share
        )
        return Costs(t, p, list(ref.source), list(ref.proxy))

    def errors(self, device: DeviceConfig, clock: float) -> tuple[float, float]:
        """The clock model's leave-one-GPU-out (time, energy) error at this distance from `device`'s boost clock."""
        return self.model().error_at(float(clock) / device.device.boost_clock_mhz)
