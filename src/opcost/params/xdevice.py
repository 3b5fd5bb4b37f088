"""Section `xdevice` of params.yaml: the cross-device op-time model (model/crossdevice/xdevice.py, stage
train-xdevice)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opcost.errors import OpcostError
from opcost.validation import Check, as_int, as_list, as_positive, as_str, check_external_path, checked_fields


@dataclass(frozen=True)
class XdeviceParams:
    """The cross-device op-time model (model/crossdevice/xdevice.py, stage train-xdevice)."""

    neusight: str = "data/external/neusight"  # NeuSight's measurements (ops/, networks/)
    op_targets: tuple[str, ...] = ("A30-inference", "A30_no_tf32-inference", "RTX2080Ti-inference")
    net_targets: tuple[str, ...] = ("A30-inference", "RTX2080Ti-inference", "A30-training")
    floor_s: float = 2e-6  # anchors the target: log(t / (roofline + floor))
    host_plateau_factor: float = 2.0  # wall-clock rows at most this x their kind's plateau time the host
    # host profile name -> campaigns whose per-call enqueue times (host_time_per_call_s) measured that host
    host_campaigns: tuple[tuple[str, tuple[str, ...]], ...] = (("h200-visit", ("visit-h200", "visit-h200-more")),)
    n_estimators: int = 150
    max_depth: int = 8
    learning_rate: float = 0.1
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    min_child_weight: float = 5.0
    seed: int = 0
    threads: int = 2

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "XdeviceParams":
        """The `xdevice` section (absent: the defaults)."""
        return cls(**checked_fields(raw, where, XDEVICE_FIELDS))


def _host_campaigns(v: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """{host name: [campaign, ...]}: each host a name calibrate-host could also write, each list non-empty."""
    if not isinstance(v, dict):
        raise OpcostError(f"{where}: expected a mapping of host name to campaigns, e.g. {{h200-visit: [visit-h200]}}")
    out = []
    for name, camps in v.items():
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "._-" for c in name):
            raise OpcostError(f"{where}: host name {name!r}: expected letters, digits, '.', '_' or '-'")
        items = as_list(camps, f"{where}.{name}", as_str)
        if not items:
            raise OpcostError(f"{where}.{name}: expected at least one campaign")
        out.append((name, tuple(items)))
    return tuple(out)


# In the order of the fields (the order an unknown key's error lists them in).
XDEVICE_FIELDS: dict[str, Check] = {
    "neusight": check_external_path,
    "op_targets": lambda v, w: as_list(v, w, as_str),
    "net_targets": lambda v, w: as_list(v, w, as_str),
    "floor_s": as_positive,
    "host_plateau_factor": as_positive,
    "host_campaigns": lambda v, w: _host_campaigns(v, w),
    "n_estimators": lambda v, w: as_int(v, w, lo=1),
    "max_depth": lambda v, w: as_int(v, w, lo=1),
    "learning_rate": as_positive,
    "subsample": as_positive,
    "colsample_bytree": as_positive,
    "min_child_weight": as_positive,
    "seed": lambda v, w: as_int(v, w, lo=0),
    "threads": lambda v, w: as_int(v, w, lo=1),
}
