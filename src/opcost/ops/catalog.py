"""Model-input sets -> the operations catalogue, call counts and FLOP coverage (library of `extract`).

Coverage of a set is sum(FLOPs(op) x calls) / FLOPs of the whole forward pass counted by
`FlopCounterMode`. Per-op FLOPs come from rebuilding each op from its spec, so a coverage of 1.00
says both that no work was missed and that every spec rebuilds the layer the network ran.

An op that cannot be rebuilt from its spec (a call that took an object no spec can hold, or one
whose rebuilt form fails) has no FLOPs, bytes or output shapes: it is kept out of the operations
and occurrences tables, and coverage names its kind, its calls, its share of the network's calls
and why, instead of the extraction failing.

A set is a `ModelInputSet` of params.yaml or any `NetSpec` (ops/netspec.py): both name the network
with `set_id`, `model`, `input_shape` and `dtype`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from opcost.errors import OpcostError
from opcost.modes import check_mode
from opcost.ops.extract import Trace, one_line
from opcost.ops.features import OpMetrics, op_metrics
from opcost.ops.hparams import hyperparameters, typed_hp_columns
from opcost.ops.models import check_model_name
from opcost.ops.netspec import NetSpec, TracedNetwork, resolve_builder, trace_network
from opcost.ops.nodynamo import dynamo_stub
from opcost.ops.parts import op_parts, parts_json
from opcost.ops.spec import OpSpec, canonical_json
from opcost.params.extract import ModelInputSet
from opcost.progress import progress_bar

if TYPE_CHECKING:  # the tables (pandas, schemas) only for the extract stage: a prediction never imports them
    import pandas as pd

COVERAGE_TOLERANCE = 0.01


@dataclass
class SetResult:
    """One model-input set traced in one mode."""

    set: ModelInputSet | NetSpec
    mode: str
    trace: Trace
    calls: Counter[str] = field(default_factory=Counter)  # op_id -> calls
    first_call: dict[str, int] = field(default_factory=dict)
    traced: TracedNetwork | None = None

    @property
    def n_calls(self) -> int:
        return sum(self.calls.values())

    def ident(self) -> dict[str, Any]:
        """The columns that name this set and mode in the occurrences and coverage rows."""
        return {
            "set_id": self.set.set_id,
            "model": self.set.label,
            "input_shape": list(self.set.input_shape),
            "dtype": self.set.dtype,
            "mode": self.mode,
        }


@dataclass
class Catalog:
    specs: dict[str, OpSpec] = field(default_factory=dict)
    metrics: dict[str, OpMetrics] = field(default_factory=dict)
    parts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # op_id -> kernels of a composite
    results: list[SetResult] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # op_id -> why it cannot be rebuilt

    def add(self, mis: ModelInputSet | NetSpec, mode: str, tr: Trace) -> SetResult:
        res = SetResult(mis, mode, tr)
        for i, call in enumerate(tr.calls):
            op_id = call.spec.op_id
            if op_id not in self.specs:
                self.specs[op_id] = call.spec
                try:
                    self.metrics[op_id] = op_metrics(call.spec)
                    self.parts[op_id] = op_parts(call.spec)
                except Exception as exc:  # noqa: BLE001 - any failure to rebuild is reported, not raised
                    self.failed[op_id] = one_line(exc)[:200]
            res.calls[op_id] += 1
            res.first_call.setdefault(op_id, i)
        self.results.append(res)
        return res

    @property
    def built(self) -> dict[str, OpSpec]:
        """The ops that could be rebuilt from their specs (those with metrics)."""
        return {i: s for i, s in self.specs.items() if i in self.metrics}

    def missing(self, r: SetResult) -> dict[str, dict[str, Any]]:
        """Kinds of `r` that could not be rebuilt: calls, share of the set's calls, and one reason."""
        out: dict[str, dict[str, Any]] = {}
        for op_id, n in r.calls.items():
            if op_id in self.failed:
                kind = self.specs[op_id].kind
                m = out.setdefault(kind, {"calls": 0, "reason": self.failed[op_id]})
                m["calls"] += n
        for m in out.values():
            m["calls_share"] = m["calls"] / r.n_calls if r.n_calls else 0.0
        return dict(sorted(out.items()))

    def coverage_rows(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.results:
            flops_ops = sum(self.metrics[o].flops * n for o, n in r.calls.items() if o in self.metrics)
            total = r.trace.total_flops
            ratio = flops_ops / total if total else (1.0 if flops_ops == 0 else float("inf"))
            missing = self.missing(r)
            rows.append(
                {
                    **r.ident(),
                    "calls": r.n_calls,
                    "unique_ops": len(r.calls),
                    "flops_ops": int(flops_ops),
                    "flops_total": int(total),
                    "coverage": ratio,
                    "within_tolerance": abs(ratio - 1.0) <= COVERAGE_TOLERANCE,
                    "missing_kinds": missing,
                    "missing_calls_share": sum(m["calls_share"] for m in missing.values()),
                    "traced_on": r.traced.device if r.traced is not None else "meta",
                }
            )
        return rows


def validate_sets(sets: Sequence[ModelInputSet], where: str = "sets") -> None:
    """Fail before any work if there is no set, or a set names an unknown model or a user's callable
    that is not there (nothing gets written; `opcost check-params` runs this before `dvc repro`
    deletes the extract stage's outputs). `where`: how the list is named in the message."""
    if not sets:
        raise OpcostError(
            f"{where} lists no model-input set, so there is nothing to extract; "
            "add one, e.g. `- {model: resnet18, input_shape: [32, 3, 32, 32]}`"
        )
    with dynamo_stub():  # torchvision's import asks for TorchDynamo, which a name check does not need
        for i, s in enumerate(sets):
            try:
                if s.is_user:
                    resolve_builder(NetSpec.from_set(s))
                else:
                    check_model_name(s.model)
            except OpcostError as exc:
                raise OpcostError(f"{where}[{i}] ({s.set_id}): {exc}") from None


def extract_sets(sets: Sequence[ModelInputSet], show_progress: bool = True, where: str = "sets") -> Catalog:
    """Trace every set in each of its modes; rebuild and measure every unique operation once."""
    validate_sets(sets, where)
    return extract_nets([(s, m) for s in sets for m in s.modes], show_progress)


def extract_nets(jobs: Sequence[tuple[ModelInputSet | NetSpec, str]], show_progress: bool = True) -> Catalog:
    """Trace each (network, mode); rebuild and measure every unique operation once.

    A NetSpec without inputs is traced on its family's default inputs; its row names them.
    """
    catalog = Catalog()
    with progress_bar(show_progress) as progress, dynamo_stub():
        task = progress.add_task("extracting", total=len(jobs))
        for net, mode in jobs:
            progress.update(task, description=f"{net.set_id} {mode}")
            spec = NetSpec.from_set(net) if isinstance(net, ModelInputSet) else net
            check_mode(mode)
            traced = trace_network(spec, mode)
            res = catalog.add(net if isinstance(net, ModelInputSet) else traced.net, mode, traced.trace)
            res.traced = traced
            progress.advance(task)
    return catalog


def operations_frame(catalog: Catalog) -> "pd.DataFrame":
    return operations_table(catalog.built, catalog.metrics, catalog.parts)


def operations_table(
    specs: dict[str, OpSpec],
    metrics: dict[str, OpMetrics] | None = None,
    parts: dict[str, list[dict[str, Any]]] | None = None,
) -> "pd.DataFrame":
    """The operations table (schemas.OPERATIONS) of `specs` by op_id; paper costs and the kernels of
    composites computed where not given."""
    import pandas as pd

    from opcost.schemas import OPERATIONS

    metrics = metrics if metrics is not None else {i: op_metrics(s) for i, s in specs.items()}
    parts = parts if parts is not None else {i: op_parts(s) for i, s in specs.items()}
    ids = sorted(specs)
    rows = []
    for op_id in ids:
        spec, m = specs[op_id], metrics[op_id]
        rows.append(
            {
                "op_id": op_id,
                "kind": spec.kind,
                "category": spec.category,
                "target": spec.target,
                "dtype": spec.dtype,
                "input_shapes": [list(i.shape) for i in spec.inputs],
                "input_dtypes": [i.dtype for i in spec.inputs],
                "output_shapes": [list(s) for s in m.output_shapes],
                "flops": m.flops,
                "bytes_read": m.bytes_read,
                "bytes_written": m.bytes_written,
                "params": m.params,
                "is_view": m.is_view,
                "spec_json": canonical_json(spec.to_json()),
                "parts_json": parts_json(parts.get(op_id, [])),
            }
        )
    base = pd.DataFrame(rows, columns=OPERATIONS.names)
    for col, dtype in (("flops", "int64"), ("bytes_read", "int64"), ("bytes_written", "int64"), ("params", "int64")):
        base[col] = base[col].astype(dtype)
    base["is_view"] = base["is_view"].astype(bool)
    for col in ("op_id", "kind", "category", "target", "dtype", "spec_json", "parts_json"):
        base[col] = base[col].astype("string")
    hp = typed_hp_columns([hyperparameters(specs[i]) for i in ids])
    return OPERATIONS.validate(pd.concat([base, hp], axis=1))


def occurrences_frame(catalog: Catalog) -> "pd.DataFrame":
    import pandas as pd

    from opcost.schemas import OCCURRENCES

    rows = []
    for r in catalog.results:
        for op_id, n in sorted(r.calls.items(), key=lambda kv: r.first_call[kv[0]]):
            if op_id in catalog.failed:
                continue  # not in the operations table; coverage names it
            rows.append(
                {
                    **r.ident(),
                    "op_id": op_id,
                    "calls": n,
                    "first_call": r.first_call[op_id],
                }
            )
    df = pd.DataFrame(rows, columns=OCCURRENCES.names)
    for col in ("set_id", "model", "dtype", "mode", "op_id"):
        df[col] = df[col].astype("string")
    df["calls"] = df["calls"].astype("int64")
    df["first_call"] = df["first_call"].astype("int64")
    return OCCURRENCES.validate(df)


def coverage_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The coverage detail JSON: per set and mode, plus the extremes."""
    ratios = [r["coverage"] for r in rows]
    sets: dict[str, dict[str, Any]] = {}
    for r in rows:
        sets.setdefault(r["set_id"], {})[r["mode"]] = {
            k: r[k] for k in ("coverage", "flops_ops", "flops_total", "calls", "unique_ops", "missing_kinds") if k in r
        }
    return {
        "tolerance": COVERAGE_TOLERANCE,
        "all_within_tolerance": all(r["within_tolerance"] for r in rows),
        "min_coverage": min(ratios) if ratios else None,
        "max_coverage": max(ratios) if ratios else None,
        "sets": sets,
    }
