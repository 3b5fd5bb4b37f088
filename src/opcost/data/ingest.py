"""Stage `ingest@<source>`: external measurements into the project's tables.

Outputs under data/ingested/<source>/: for logs of operations and networks (`thesis-logs`)
op_measurements.parquet, networks.parquet and operations.parquet (the parsed specs, in the same
table as extract writes); for NeuSight (`neusight`) those plus op_kernels.parquet and
network_nodes.parquet (data/neusight.py); for sweeps (every other kind, see `SWEEP_READERS`) sweeps.parquet;
always rejects.parquet (every line not taken, with file, line number and reason: schemas.REJECTS)
and summary.json with the rows parsed, the lines rejected by reason and skipped by kind, per file.

A bad line is counted and reported, never fatal and never silently accepted; a whole-file problem
(missing, empty, binary, a directory where a file belongs, a missing column) stops the stage with
a one-line error naming the file, before anything is written.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from opcost.data import crossclock, neusight, sweeps, thesis
from opcost.errors import OpcostError
from opcost.io import write_parquet, write_report
from opcost.ops.catalog import operations_table
from opcost.params.ingest import IngestSource
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import (
    NET_MEASUREMENTS,
    NETWORK_NODES,
    OP_KERNELS,
    OP_MEASUREMENTS,
    REJECT_REASONS,
    REJECTS,
    SWEEPS,
    conform,
)

SWEEP_READERS: dict[str, Callable[[Path, str], sweeps.SweepRead]] = {
    "zeus-power-limit": sweeps.zeus,
    "dvfs-conv": sweeps.dvfs,
    "perseus-stage-profiles": crossclock.perseus_stages,
    "perseus-power-limit": crossclock.perseus_power_limit,
    "nv-dvfs-kernels": crossclock.nv_dvfs,
    "gpu-frequency-dvfs": crossclock.gpu_frequency,
}


def rejects_table(rows: list[dict[str, Any]], source: str) -> pd.DataFrame:
    """The rejects of a source as a schemas.REJECTS table (empty, with its columns, if none)."""
    df = pd.DataFrame(rows, columns=[c for c in REJECTS.names if c != "source"]).assign(source=source)
    return conform(df, REJECTS)


def reject_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Rejected lines by reason, every reason listed (0 where none), for summary.json."""
    c = Counter(r["reason"] for r in rows)
    return {k: c.get(k, 0) for k in REJECT_REASONS}


def ingest_thesis(src: IngestSource, paths: Paths) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    root = paths.root / src.path
    spec_cache: dict = {}
    op_rows: list[dict] = []
    net_rows: list[dict] = []
    rejects: list[dict] = []
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
        rejects += res.rejects
        files[rel] = {
            "parsed": res.parsed,
            "rows": len(res.rows),
            "rejected": len(res.rejects),
            "skipped": dict(sorted(res.skipped.items())),
        }
        totals.update(res.skipped)
    ops = conform(pd.DataFrame(op_rows).assign(source=src.name), OP_MEASUREMENTS)
    nets = conform(pd.DataFrame(net_rows).assign(source=src.name), NET_MEASUREMENTS)
    used = set(ops["op_id"])
    built = [e for e in spec_cache.values() if not isinstance(e, str) and e[0].op_id in used]
    specs = {spec.op_id: spec for spec, _ in built}
    metrics = {spec.op_id: m for spec, m in built}
    summary = {
        "source": src.name,
        "kind": src.kind,
        "files": files,
        "skipped_lines": {k: totals.get(k, 0) for k in thesis.LINE_KINDS if k != "data"},
        "rejected_lines": len(rejects),
        "rejected_by_reason": reject_counts(rejects),
        "op_rows": len(ops),
        "network_rows": len(nets),
        "unique_ops": len(specs),
    }
    tables = {
        "op_measurements.parquet": ops,
        "networks.parquet": nets,
        "operations.parquet": operations_table(specs, metrics),
        "rejects.parquet": rejects_table(rejects, src.name),
    }
    return summary, tables


def ingest_neusight(src: IngestSource, paths: Paths) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """NeuSight's ops, networks and FX nodes (data/neusight.py), with how they were measured."""
    res = neusight.read_neusight(paths.root / src.path)
    ops = conform(pd.DataFrame(res.rows).assign(source=src.name), OP_MEASUREMENTS)
    nets = conform(pd.DataFrame(res.nets, columns=NET_MEASUREMENTS.names).assign(source=src.name), NET_MEASUREMENTS)
    nodes = conform(pd.DataFrame(res.nodes, columns=NETWORK_NODES.names).assign(source=src.name), NETWORK_NODES)
    kernels = conform(pd.DataFrame(res.kernels).assign(source=src.name), OP_KERNELS)
    specs = {i: s for i, (s, _) in res.specs.items()}
    metrics = {i: m for i, (_, m) in res.specs.items()}
    summary = {
        "source": src.name,
        "kind": src.kind,
        "files": res.files,
        "skipped_lines": dict(sorted(res.skipped.items())),
        "rejected_lines": len(res.rejects),
        "rejected_by_reason": reject_counts(res.rejects),
        "op_rows": len(ops),
        "network_rows": len(nets),
        "unique_ops": len(specs),
        **neusight.summary_counts(res),
    }
    tables = {
        "op_measurements.parquet": ops,
        "networks.parquet": nets,
        "network_nodes.parquet": nodes,
        "op_kernels.parquet": kernels,
        # the nine kinds have no composite parts: operations_table would trace each op for none
        "operations.parquet": operations_table(specs, metrics, {}),
        "rejects.parquet": rejects_table(res.rejects, src.name),
    }
    return summary, tables


def ingest_sweep(src: IngestSource, paths: Paths) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    read = SWEEP_READERS[src.kind](paths.root / src.path, src.name)
    columns = SWEEPS.names
    table = conform(pd.DataFrame(read.rows, columns=columns), SWEEPS)
    summary = {
        "source": src.name,
        "kind": src.kind,
        "files": read.files,
        "rows_per_file": read.rows_per_file,
        **read.info,
        "skipped_lines": dict(sorted(read.skipped.items())),
        "rejected_lines": len(read.rejects),
        "rejected_by_reason": reject_counts(read.rejects),
        "sweep_rows": len(table),
        "default_setting_rows": int(table["default_setting"].sum()),
        "workloads": int(table[["device", "workload", "knob"]].drop_duplicates().shape[0]),
        "devices": sorted(set(table["device"])),
    }
    return summary, {"sweeps.parquet": table, "rejects.parquet": rejects_table(read.rejects, src.name)}


def refuse_empty(src: IngestSource, summary: dict[str, Any], rejects: pd.DataFrame) -> None:
    """A source that yields no row at all is an error, not an empty table: every line rejected (say
    why, with the first), or no data line found (line endings, wrong files)."""
    rows = summary.get("sweep_rows", summary.get("op_rows", 0) + summary.get("network_rows", 0))
    if rows:
        return
    if len(rejects):
        first = rejects.iloc[0]
        by = ", ".join(f"{k} {v}" for k, v in summary["rejected_by_reason"].items() if v)
        raise OpcostError(
            f"{src.path}: every one of its {len(rejects)} data lines was rejected ({by}; first: "
            f"{first['source_file']}:{first['line']} {first['message']}); nothing written"
        )
    raise OpcostError(f"{src.path}: no data line found in {len(summary.get('files', {}))} file(s); nothing written")


def run_ingest_stage(paths: Paths, params: Params, name: str) -> dict[str, Any]:
    sources = params.ingest.sources
    if name not in sources:
        raise OpcostError(
            f"unknown ingest source {name!r}; sources in params.yaml: {', '.join(sorted(sources)) or 'none'}"
        )
    src = sources[name]
    if not (paths.root / src.path).exists():
        raise OpcostError(f"{src.path} not found: run `dvc pull` to fetch the external data")
    ingest = {"thesis-logs": ingest_thesis, "neusight": ingest_neusight}.get(src.kind, ingest_sweep)
    summary, tables = ingest(src, paths)
    refuse_empty(src, summary, tables["rejects.parquet"])
    # everything is parsed and validated before the first file is written
    out = paths.ingested_dir(name)
    for fname, df in tables.items():
        write_parquet(df, out / fname)
    write_report(summary, out / "summary.json")
    return summary
