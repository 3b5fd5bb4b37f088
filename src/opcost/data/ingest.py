"""Stage `ingest@<source>`: external measurements into the project's tables.

Outputs under data/ingested/<source>/: for logs of operations and networks (`thesis-logs`)
op_measurements.parquet, networks.parquet and operations.parquet (the parsed specs, in the same
table as extract writes); for sweeps (`zeus-power-limit`, `dvfs-conv`) sweeps.parquet; always
summary.json with the rows parsed and the lines skipped by kind, per file.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from opcost.config import IngestSource, Params, Paths
from opcost.data import sweeps, thesis
from opcost.errors import OpcostError
from opcost.io import write_parquet, write_report
from opcost.ops.catalog import operations_table
from opcost.schemas import NET_MEASUREMENTS, OP_MEASUREMENTS, SWEEPS, conform


def ingest_thesis(src: IngestSource, paths: Paths) -> dict[str, Any]:
    root = paths.root / src.path
    spec_cache: dict = {}
    op_rows: list[dict] = []
    net_rows: list[dict] = []
    files: dict[str, Any] = {}
    totals: Counter = Counter()
    for table, path, config, mode in thesis.thesis_logs(root):
        rel = str(path.relative_to(root))
        if table == "ops":
            res = thesis.parse_op_log(path, rel, config, mode, spec_cache)
            op_rows += res.rows
        else:
            res = thesis.parse_network_log(path, rel, config, mode)
            net_rows += res.rows
        files[rel] = {"parsed": res.parsed, "rows": len(res.rows), "skipped": dict(sorted(res.skipped.items()))}
        totals.update(res.skipped)
    ops = conform(pd.DataFrame(op_rows).assign(source=src.name), OP_MEASUREMENTS)
    nets = conform(pd.DataFrame(net_rows).assign(source=src.name), NET_MEASUREMENTS)
    specs = {s.op_id: s for s in spec_cache.values()}
    catalog = operations_table(specs)
    out = paths.ingested_dir(src.name)
    write_parquet(ops, out / "op_measurements.parquet")
    write_parquet(nets, out / "networks.parquet")
    write_parquet(catalog, out / "operations.parquet")
    return {
        "source": src.name,
        "kind": src.kind,
        "files": files,
        "skipped_lines": {k: totals.get(k, 0) for k in thesis.LINE_KINDS if k != "data"},
        "op_rows": len(ops),
        "network_rows": len(nets),
        "unique_ops": len(specs),
    }


def ingest_sweep(src: IngestSource, paths: Paths) -> dict[str, Any]:
    reader = sweeps.zeus if src.kind == "zeus-power-limit" else sweeps.dvfs
    df, info = reader(paths.root / src.path, src.name)
    table = conform(df, SWEEPS)
    write_parquet(table, paths.ingested_dir(src.name) / "sweeps.parquet")
    return {
        "source": src.name,
        "kind": src.kind,
        **info,
        "sweep_rows": len(table),
        "workloads": int(table[["device", "workload", "knob"]].drop_duplicates().shape[0]),
    }


def run_ingest_stage(paths: Paths, params: Params, name: str) -> dict[str, Any]:
    sources = params.ingest.sources
    if name not in sources:
        raise OpcostError(
            f"unknown ingest source {name!r}; sources in params.yaml: {', '.join(sorted(sources)) or 'none'}"
        )
    src = sources[name]
    if not (paths.root / src.path).exists():
        raise OpcostError(f"{src.path} not found: run `dvc pull` to fetch the external data")
    summary = ingest_thesis(src, paths) if src.kind == "thesis-logs" else ingest_sweep(src, paths)
    write_report(summary, paths.ingested_dir(name) / "summary.json")
    return summary
