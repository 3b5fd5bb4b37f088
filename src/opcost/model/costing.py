"""Every op of a network gets a cost, and says where it came from.

Sources, in order of preference:
- `measured`: the op was measured on this device config and mode (at its default clock): the
  measurement itself, not a model's guess of it;
- `estimated`: a forward+backward row estimated from an inference measurement (data/targets.py);
- `floor`: a no-op (view, identity, eval-mode dropout) costs the device's launch floor;
- `predicted`: the per-op time and power models;
- `proxy`: a kind the models never saw, predicted as the known kind of its category (physics.py);
- `charged`: nothing stands in: the op's roofline time times the device's median measured
  efficiency (measured time over roofline time), scaled again by the composition layer.
A prediction is then never a partial sum presented as a total.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from opcost.model.features import OpRecord
from opcost.model.physics import is_noop, proxy_kind, roofline_s

SOURCES = ("measured", "estimated", "floor", "predicted", "proxy", "charged")


@dataclass
class Costs:
    """Per-op cost of one call, for a list of records."""

    t_s: np.ndarray
    p_w: np.ndarray  # NaN where the device has no power model
    source: list[str]
    proxy: list[str | None]

    def mask(self, *sources: str) -> np.ndarray:
        return np.array([s in sources for s in self.source], bool)


@dataclass
class OpCoster:
    mode: str
    device_config: str
    models: dict  # quantity -> bundle.QuantityModel
    kinds: tuple[str, ...]  # kinds the models were trained on
    floor_s: float
    noop_power_w: float
    charge_ratio: float  # median measured time / roofline time over the measured non-no-op rows
    median_power_w: float
    lookup: dict[str, tuple[float, float, bool]] = field(default_factory=dict)  # op_id -> (t, p, estimated)

    def cost(self, records: Sequence[OpRecord], clock_mhz: float | None = None, use_lookup: bool = True) -> Costs:
        n = len(records)
        t = np.full(n, np.nan)
        p = np.full(n, np.nan)
        source: list[str] = [""] * n
        proxy: list[str | None] = [None] * n
        known = set(self.kinds)
        to_model: list[int] = []
        model_records: list[OpRecord] = []
        for i, r in enumerate(records):
            hit = self.lookup.get(r.op_id) if use_lookup and clock_mhz is None else None
            if hit is not None:
                t[i], p[i] = hit[0], hit[1]
                source[i] = "estimated" if hit[2] else "measured"
            elif is_noop(r.kind, r.hp, r.metrics, self.mode):
                t[i], p[i], source[i] = self.floor_s, self.noop_power_w, "floor"
            elif r.kind in known:
                source[i] = "predicted"
                to_model.append(i)
                model_records.append(r)
            elif (k := proxy_kind(r.kind, known)) is not None:
                source[i], proxy[i] = "proxy", k
                to_model.append(i)
                model_records.append(dataclasses.replace(r, kind=k))
            else:
                t[i] = roofline_s(r.kind, r.metrics, self.device_config) * self.charge_ratio
                p[i] = self.median_power_w
                source[i] = "charged"
        if to_model:
            items = [(r, clock_mhz) for r in model_records]
            idx = np.array(to_model)
            t[idx] = self.models["time"].predict(items)
            if "power" in self.models:
                p[idx] = self.models["power"].predict(items)
        return Costs(t, p, source, proxy)
