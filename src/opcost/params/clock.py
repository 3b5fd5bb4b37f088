"""Section `clock` of params.yaml: the transferred clock model (model/clocks/clock.py) and its clock grids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opcost.validation import Check, as_int, checked_fields


@dataclass(frozen=True)
class ClockParams:
    """The transferred clock model (model/clocks/clock.py) and its clock grids."""

    min_points: int = 3  # clocks a sweep curve needs (its reference and at least two more)
    seed: int = 0  # the comparison tree learner's
    tree_iterations: int = 100  # boosting rounds of the comparison tree learner
    grid_points: int = 16  # clocks per device that `recommend` sweeps over the supported range

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ClockParams":
        return cls(**checked_fields(raw, where, CLOCK_FIELDS))


CLOCK_FIELDS: dict[str, Check] = {
    "min_points": lambda v, w: as_int(v, w, lo=3),
    "seed": lambda v, w: as_int(v, w, lo=0),
    "tree_iterations": lambda v, w: as_int(v, w, lo=1),
    "grid_points": lambda v, w: as_int(v, w, lo=2),
}
