"""Model-input sets -> the operations catalogue, call counts and FLOP coverage (library of `extract`).

Coverage of a set is sum(FLOPs(op) x calls) / FLOPs of the whole forward pass counted by
`FlopCounterMode`. Per-op FLOPs come from rebuilding each op from its spec, so a coverage of 1.00
says both that no work was missed and that every spec rebuilds the layer the network ran.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import pandas as pd

from opcost.config import ModelInputSet
from opcost.ops.extract import Trace, trace
from opcost.ops.features import OpMetrics, op_metrics
from opcost.ops.hparams import hyperparameters, typed_hp_columns
from opcost.ops.models import check_model_name, meta_model
from opcost.ops.spec import OpSpec, canonical_json
from opcost.progress import progress_bar
from opcost.schemas import OCCURRENCES, OPERATIONS

COVERAGE_TOLERANCE = 0.01


@dataclass
class SetResult:
    """One model-input set traced in one mode."""

    set: ModelInputSet
    mode: str
    trace: Trace
    calls: Counter = field(default_factory=Counter)  # op_id -> calls
    first_call: dict[str, int] = field(default_factory=dict)

    @property
    def n_calls(self) -> int:
        return sum(self.calls.values())

    def ident(self) -> dict[str, Any]:
        """The columns that name this set and mode in the occurrences and coverage rows."""
        return {
            "set_id": self.set.set_id,
            "model": self.set.model,
            "input_shape": list(self.set.input_shape),
            "dtype": self.set.dtype,
            "mode": self.mode,
        }


@dataclass
class Catalog:
    specs: dict[str, OpSpec] = field(default_factory=dict)
    metrics: dict[str, OpMetrics] = field(default_factory=dict)
    results: list[SetResult] = field(default_factory=list)

    def add(self, mis: ModelInputSet, mode: str, tr: Trace) -> SetResult:
        res = SetResult(mis, mode, tr)
        for i, call in enumerate(tr.calls):
            op_id = call.spec.op_id
            if op_id not in self.specs:
                self.specs[op_id] = call.spec
                self.metrics[op_id] = op_metrics(call.spec)
            res.calls[op_id] += 1
            res.first_call.setdefault(op_id, i)
        self.results.append(res)
        return res

    def coverage_rows(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.results:
            flops_ops = sum(self.metrics[o].flops * n for o, n in r.calls.items())
            total = r.trace.total_flops
            ratio = flops_ops / total if total else (1.0 if flops_ops == 0 else float("inf"))
            rows.append(
                {
                    **r.ident(),
                    "calls": r.n_calls,
                    "unique_ops": len(r.calls),
                    "flops_ops": int(flops_ops),
                    "flops_total": int(total),
                    "coverage": ratio,
                    "within_tolerance": abs(ratio - 1.0) <= COVERAGE_TOLERANCE,
                }
            )
        return rows


def validate_sets(sets: Iterable[ModelInputSet]) -> None:
    """Fail before any work if a set names an unknown model (nothing gets written)."""
    for s in sets:
        check_model_name(s.model)


def extract_sets(sets: Sequence[ModelInputSet], show_progress: bool = True) -> Catalog:
    """Trace every set in each of its modes; rebuild and measure every unique operation once."""
    validate_sets(sets)
    jobs = [(s, m) for s in sets for m in s.modes]
    catalog = Catalog()
    with progress_bar(show_progress) as progress:
        task = progress.add_task("extracting", total=len(jobs))
        for mis, mode in jobs:
            progress.update(task, description=f"{mis.set_id} {mode}")
            model = meta_model(mis.model, mis.dtype)
            tr = trace(model, mis.input_shape, mis.dtype, training=(mode == "training"))
            catalog.add(mis, mode, tr)
            progress.advance(task)
    return catalog


def operations_frame(catalog: Catalog) -> pd.DataFrame:
    return operations_table(catalog.specs, catalog.metrics)


def operations_table(specs: dict[str, OpSpec], metrics: dict[str, OpMetrics] | None = None) -> pd.DataFrame:
    """The operations table (schemas.OPERATIONS) of `specs` by op_id; paper costs computed if not given."""
    metrics = metrics if metrics is not None else {i: op_metrics(s) for i, s in specs.items()}
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
            }
        )
    base = pd.DataFrame(rows, columns=OPERATIONS.names)
    for col, dtype in (("flops", "int64"), ("bytes_read", "int64"), ("bytes_written", "int64"), ("params", "int64")):
        base[col] = base[col].astype(dtype)
    base["is_view"] = base["is_view"].astype(bool)
    for col in ("op_id", "kind", "category", "target", "dtype", "spec_json"):
        base[col] = base[col].astype("string")
    hp = typed_hp_columns([hyperparameters(specs[i]) for i in ids])
    return OPERATIONS.validate(pd.concat([base, hp], axis=1))


def occurrences_frame(catalog: Catalog) -> pd.DataFrame:
    rows = []
    for r in catalog.results:
        for op_id, n in sorted(r.calls.items(), key=lambda kv: r.first_call[kv[0]]):
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
            k: r[k] for k in ("coverage", "flops_ops", "flops_total", "calls", "unique_ops")
        }
    return {
        "tolerance": COVERAGE_TOLERANCE,
        "all_within_tolerance": all(r["within_tolerance"] for r in rows),
        "min_coverage": min(ratios) if ratios else None,
        "max_coverage": max(ratios) if ratios else None,
        "sets": sets,
    }
