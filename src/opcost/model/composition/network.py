"""Extraction: a network question (`NetSpec`) becomes its unique ops as records, their call counts
and the step's memory footprints.

Why a module of its own: extraction is the one job of a prediction that imports torch (it traces
the network on meta tensors, ops/catalog.py), and what it produces is plain data that the disk cache
(model/composition/netcache.py) stores and every costing reuses. Nothing here knows devices or models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opcost.errors import OpcostError
from opcost.model.basis.features import OpRecord
from opcost.modes import check_mode
from opcost.ops.footprint import Footprint
from opcost.ops.netspec import InputSpec, NetSpec
from opcost.shapes import parse_input_shape

# What `extract_network` imports: the cache key hashes their import closure (opcost.closure).
EXTRACTION_ENTRIES = ("opcost.ops.catalog", "opcost.ops.memory", "opcost.model.basis.features")


@dataclass
class Network:
    """An extracted network: its unique ops as records, calls per op, and its memory footprints."""

    records: dict[str, OpRecord]
    calls: dict[str, int]
    memory: dict[str, Footprint] = field(default_factory=dict)  # footprint_key -> footprint
    inputs: tuple[InputSpec, ...] = ()  # resolved (family defaults filled in)
    missing: list[dict[str, Any]] = field(default_factory=list)  # kind, calls, reason: not rebuildable
    notes: list[str] = field(default_factory=list)

    def to_json(self, key: Any) -> dict[str, Any]:
        return {
            "key": key,
            "records": [r.to_json() for r in self.records.values()],
            "calls": self.calls,
            "memory": {k: f.to_json() for k, f in self.memory.items()},
            "inputs": [i.to_json() for i in self.inputs],
            "missing": self.missing,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Network":
        return cls(
            {r["op_id"]: OpRecord.from_json(r) for r in d["records"]},
            d["calls"],
            {k: Footprint.from_json(f) for k, f in d.get("memory", {}).items()},
            tuple(InputSpec.from_json(i) for i in d.get("inputs", [])),
            d.get("missing", []),
            d.get("notes", []),
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """The first input's shape (the batch is its first figure): what answers report as input_shape."""
        return self.inputs[0].shape if self.inputs else ()


def as_netspec(model: "str | NetSpec", input_shape: Any = None, dtype: str = "float32") -> NetSpec:
    """A NetSpec as is, or the old form: a torchvision name with an image shape `B,C,H,W`."""
    if isinstance(model, NetSpec):
        return model
    if input_shape is None:
        return NetSpec.make(model, (), None, dtype)
    return NetSpec.make(model, [InputSpec(parse_input_shape(input_shape, "--input-shape"), dtype)], None, dtype)


def extract_network(spec: NetSpec, mode: str) -> Network:
    """Trace the network (imports torch) into records, call counts and memory footprints."""
    from opcost.model.basis.features import op_record
    from opcost.ops.catalog import extract_nets
    from opcost.ops.memory import network_memory
    from opcost.ops.nodynamo import dynamo_stub

    check_mode(mode)
    cat = extract_nets([(spec, mode)], show_progress=False)
    res = cat.results[0]
    records = {
        i: op_record(s, {**cat.metrics[i].as_dict(), "parts": cat.parts.get(i, [])}) for i, s in cat.built.items()
    }
    traced = res.traced
    if traced is None:  # extract_nets keeps every trace it makes; a guard, one line
        raise OpcostError(f"{spec.label} ({mode}): the extraction kept no trace of the network")
    with dynamo_stub():
        memory = network_memory(traced.loaded.module, traced.args, traced.kwargs, mode)
    missing = [{"kind": k, **v} for k, v in cat.missing(res).items()]
    calls = {i: n for i, n in res.calls.items() if i in records}
    return Network(records, calls, memory, traced.net.inputs, missing, traced.notes)
