"""Every op of a network gets a cost, and says where it came from.

Sources, in order of preference: `measured`, `estimated`, `floor` (no-ops), `predicted`,
`decomposed` (a composite costed as its kernels), `proxy` (an unseen kind as the known kind of its
category) and `charged` (launch floor plus roofline time at what similar measured ops cost), so a
prediction is never a partial sum presented as a total. The labels of an answer (`MEASURED`,
`PREDICTED`, `TRANSFERRED`, `FITTED`) live here too, one home for every module that sets or reads them.
Design: docs/composition.md#where-each-ops-cost-comes-from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from opcost.model.basis.features import OpRecord, part_record, with_kind
from opcost.model.basis.physics import is_noop, proxy_kind, roofline_s
from opcost.model.composition.compose import Costs
from opcost.ops.recurrent import recurrent_steps

if TYPE_CHECKING:
    from opcost.devices import DeviceConfig

MEASURED, PREDICTED, TRANSFERRED, FITTED = "measured", "predicted", "transferred", "fitted"  # module docstring
SOURCES = (MEASURED, "estimated", "floor", PREDICTED, "decomposed", "proxy", "charged")  # an own bundle's op costs
# a cross-device answer's op costs (model/prediction/xdevice_predict.py)
CROSS_DEVICE_SOURCES = (MEASURED, FITTED, TRANSFERRED)
CLOCK_SOURCES = (MEASURED, TRANSFERRED)  # where an answer's clock behaviour came from (`clock_source`)


@dataclass
class OpCoster:
    mode: str
    device: DeviceConfig | None  # resolved once at the edge (Bundle.device); None: the table lacks it, nominal figures
    models: dict[str, Any]  # quantity -> bundle.QuantityModel
    kinds: tuple[str, ...]  # kinds the models were trained on
    floor_s: float
    noop_power_w: float
    charge_ratio: float  # cost above the floor per roofline second (model/training/netval.charge_ratio)
    median_power_w: float
    lookup: dict[str, tuple[float, float, bool]] = field(default_factory=dict)  # op_id -> (t, p, estimated)
    noop_s: float | None = None  # a no-op's time; None: the launch floor

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
                source[i] = "estimated" if hit[2] else MEASURED
            elif is_noop(r.kind, r.hp, r.metrics, self.mode):
                t[i], p[i], source[i] = self.floor_s if self.noop_s is None else self.noop_s, self.noop_power_w, "floor"
            elif r.kind in known:
                source[i] = PREDICTED
                to_model.append(i)
                model_records.append(r)
            elif r.metrics.get("parts"):
                source[i] = "decomposed"
                proxy[i] = f"{len(r.metrics['parts'])} kernels"
            elif (k := proxy_kind(r.kind, known)) is not None:
                source[i], proxy[i] = "proxy", k
                to_model.append(i)
                model_records.append(with_kind(r, k))  # keeps its cached rows (features.py)
            else:
                t[i] = self.floor_s + roofline_s(r.kind, r.metrics, self.device) * self.charge_ratio
                p[i] = self.median_power_w
                source[i] = "charged"
        if to_model:
            items = [(r, clock_mhz) for r in model_records]
            idx = np.array(to_model)
            t[idx] = self.models["time"].predict(items)
            if "power" in self.models:
                p[idx] = self.models["power"].predict(items)
        composite = [i for i, s in enumerate(source) if s == "decomposed"]
        if composite:
            t[composite], p[composite] = self._sum_of_parts([records[i] for i in composite], clock_mhz)
        return Costs(t, p, source, proxy)

    def _sum_of_parts(self, records: Sequence[OpRecord], clock_mhz: float | None) -> tuple[np.ndarray, np.ndarray]:
        """Time (floor + sum of (kernel - floor)+) and time-weighted power of composites from their kernels.

        A part with a `count` (a recurrent layer's kernel, ops/parts.compact_steps) runs that many
        times, in sequence: its excess is charged `count` times, and the composite keeps one launch
        floor per sequential step (ops/recurrent.recurrent_steps), not one for the whole layer."""
        parts = [(j, part_record(r, k, p)) for j, r in enumerate(records) for k, p in enumerate(r.metrics["parts"])]
        costs = self.cost([pr for _, pr in parts], clock_mhz, use_lookup=False)
        owner = np.array([j for j, _ in parts])
        count = np.array([float(p.get("count", 1)) for r in records for p in r.metrics["parts"]])
        steps = np.array([float(recurrent_steps(r.kind, r.hp, r.input_shape)) for r in records])
        excess = np.clip(costs.t_s - self.floor_s, 0.0, None) * count
        t = self.floor_s * steps + np.bincount(owner, weights=excess, minlength=len(records))
        pt = np.nan_to_num(costs.p_w, nan=0.0) * costs.t_s * count
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.bincount(owner, weights=pt, minlength=len(records)) / np.bincount(
                owner, weights=costs.t_s * count, minlength=len(records)
            )
        if not np.isfinite(costs.p_w).all():
            p = np.full(len(records), np.nan)
        return t, p


# One op's cost of one call: (time s, power W, source, proxy kind).
OpCost = tuple[float, float, str, "str | None"]


def reference_clock_mhz(device: DeviceConfig | None) -> float | None:
    """The clock a device config's default-clock answers stand for: its boost clock (None where the table lacks
    the device). An own bundle trained without a clock sweep answers there from its own measurements, as at the
    default clock: nothing of the cross-clock model enters (`cost_groups` in model/prediction/predict.py,
    model/prediction/answer.py). Here, not in devices.py: ingest and evaluate, which import the device table, do
    not rerun for it."""
    return None if device is None else float(device.device.boost_clock_mhz)
