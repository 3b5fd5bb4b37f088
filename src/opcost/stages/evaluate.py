"""Stage `evaluate`: every measurement source into the evaluated tables.

Writes data/evaluated/{operations,networks,sweeps}.parquet; one folder per device config and mode
under data/evaluated/targets/ with exactly the rows a `train@<target>` stage learns from (so a new
CPU measurement leaves the GPU targets' files, and their trained models, untouched); the ingest
detail (reports/ingest/{summary,coverage}.json) and the headline figures DVC shows as metrics
(reports/evaluate/summary.json).
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import pandas as pd

from opcost.data.evaluate import (
    NET_KEYS,
    OP_KEYS,
    campaign_frames,
    coverage_of_networks,
    evaluate_logged,
    reject_summary,
)
from opcost.data.targets import target_tables
from opcost.errors import OpcostError
from opcost.io import write_parquet, write_report
from opcost.params.ingest import OP_SOURCE_KINDS
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import (
    EVALUATED_NETWORKS,
    EVALUATED_OPERATIONS,
    NET_MEASUREMENTS,
    OCCURRENCES,
    OP_MEASUREMENTS,
    SWEEPS,
    Table,
    conform,
)
from opcost.stages._run import execute
from opcost.tables import known_operations, read_table, require


def read_ingested(paths: Paths, params: Params) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"ops": [], "nets": [], "sweeps": [], "summaries": []}
    for name, src in params.ingest.sources.items():
        d = paths.ingested_dir(name)
        stage = f"ingest@{name}"
        out["summaries"].append(json.loads(require(d / "summary.json", stage).read_text()))
        if src.kind in OP_SOURCE_KINDS:
            out["ops"].append(read_table(d / "op_measurements.parquet", OP_MEASUREMENTS, stage))
            out["nets"].append(read_table(d / "networks.parquet", NET_MEASUREMENTS, stage))
        else:
            out["sweeps"].append(read_table(d / "sweeps.parquet", SWEEPS, stage))
    return out


def _finish(df: pd.DataFrame, table: Table) -> pd.DataFrame:
    if df.empty:
        return conform(pd.DataFrame({c: [] for c in table.names}), table)
    return conform(df.reset_index(drop=True), table)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run(paths: Paths, params: Params) -> dict[str, Any]:
    ing = read_ingested(paths, params)
    logged_ops, logged_nets = _concat(ing["ops"]), _concat(ing["nets"])
    parts_ops, parts_nets = [], []
    if len(logged_ops):
        parts_ops.append(evaluate_logged(logged_ops, OP_KEYS + ["kind"]))
    if len(logged_nets):
        e = evaluate_logged(logged_nets, NET_KEYS + ["model"])
        shapes = logged_nets.drop_duplicates("set_id").set_index("set_id")["input_shape"]
        e["input_shape"] = [list(shapes[i]) for i in e["set_id"]]
        parts_nets.append(e)
    refused: dict[str, list[dict[str, Any]]] = {}  # campaign rows with impossible numbers, by campaign
    flagged: dict[str, int] = {}  # campaign rows measured for time only: their energy was flagged
    c_ops, c_nets, c_sweeps = campaign_frames(paths, refused, flagged)
    ops = _finish(_concat([*parts_ops, c_ops]), EVALUATED_OPERATIONS)
    nets = _finish(_concat([*parts_nets, c_nets]), EVALUATED_NETWORKS)
    # public measurements (NeuSight) join the evaluated tables, named as theirs, and train no target
    public = [name for name, src in params.ingest.sources.items() if src.kind == "neusight"]
    for df in (ops, nets):
        df.loc[df["sources"].isin(public), "method"] = "neusight-log"
    # a source's rows at the device default (value unknown) stay in its ingested table
    at_knob = [s[~s["default_setting"].astype(bool)] for s in ing["sweeps"]]
    sweeps = _finish(_concat([*at_knob, c_sweeps]), SWEEPS)

    occurrences = read_table(paths.occurrences, OCCURRENCES, "extract")
    catalog = known_operations(paths, params).reset_index()
    missing = sorted(set(ops["op_id"]) - set(catalog["op_id"]))
    if missing:
        raise OpcostError(f"{len(missing)} evaluated ops have no spec in any operations table (e.g. {missing[0]})")
    coverage = coverage_of_networks(logged_nets, ops, occurrences, catalog) if len(logged_nets) else {"networks": []}
    targets = target_tables(
        ops[~ops["sources"].isin(public)], nets[~nets["sources"].isin(public)], occurrences, catalog
    )

    write_parquet(ops, paths.evaluated_operations)
    write_parquet(nets, paths.evaluated_networks)
    write_parquet(sweeps, paths.evaluated_sweeps)
    for target, tables in targets.items():
        write_parquet(tables["operations"], paths.target_operations(target))
        write_parquet(tables["networks"], paths.target_networks(target))
        write_parquet(tables["network_ops"], paths.target_network_ops(target))
    for stale in paths.evaluated_targets_dir.glob("*"):
        if stale.name not in targets:  # a device config that no longer has data
            shutil.rmtree(stale)
    write_report({s["source"]: s for s in ing["summaries"]}, paths.ingest_summary)
    write_report(coverage, paths.ingest_coverage)
    headline = {
        "operation_rows": len(ops),
        "network_rows": len(nets),
        "sweep_rows": len(sweeps),
        "target_rows": {t: len(tb["operations"]) for t, tb in targets.items()},
        # inference rows of dropout / stochastic depth with p > 0, timed in train mode (data/targets.py)
        "excluded_rows": {t: len(tb["excluded"]) for t, tb in targets.items() if len(tb["excluded"])},
        "mean_flops_share": coverage.get("mean_flops_share"),
        "min_flops_share": coverage.get("min_flops_share"),
        "campaign_rejects": reject_summary(refused),
        "energy_flagged_rows": flagged,
    }
    write_report(headline, paths.evaluate_summary)
    return headline


def summary(s: dict[str, Any]) -> str:
    share = s["mean_flops_share"]
    rejects = "".join(
        f"; campaign {name}: {r['rejected_rows']} row(s) refused ("
        + ", ".join(f"{k} {v}" for k, v in r["rejected_by_reason"].items() if v)
        + "; see reports/evaluate/summary.json)"
        for name, r in s.get("campaign_rejects", {}).items()
    )
    flagged = "".join(
        f"; campaign {name}: {k} row(s) with flagged energy (time kept, energy left out)"
        for name, k in s.get("energy_flagged_rows", {}).items()
    )
    head = (
        f"evaluate: {s['operation_rows']} op rows, {s['network_rows']} network rows, {s['sweep_rows']} sweep rows, "
        f"{len(s['target_rows'])} train targets; mean FLOP share of measured networks covered by measured ops: "
        f"{'n/a' if share is None else f'{share:.3f}'}"
    )
    return head + rejects + flagged


def main(argv: list[str] | None = None) -> int:
    return execute(argv, __doc__.splitlines()[0], lambda p: None, lambda paths, params, a: run(paths, params), summary)


if __name__ == "__main__":
    sys.exit(main())
