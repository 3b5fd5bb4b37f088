"""External measurements (data/external/<source>) read into the project's tables, in memory.

`read_source` reads one ingest source by its kind: logs of operations and networks (`thesis-logs`,
data/thesis.py), NeuSight (`neusight`, data/neusight.py) or a sweep (every other kind, see
`SWEEP_READERS`), and returns its summary and its tables by file name, every table conformed to its
schema and the rejects (every line not taken, with file, line number and reason: schemas.REJECTS)
among them. Where they are written is the ingest stage's (opcost.stages.ingest).

A bad line is counted and reported, never fatal and never silently accepted; a whole-file problem
(missing, empty, binary, a directory where a file belongs, a missing column) or a source that yields
no row at all raises a one-line error naming the file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypedDict

import pandas as pd

from opcost.data import crossclock, neusight, sweeps, thesis
from opcost.data.textfile import Reject
from opcost.errors import OpcostError
from opcost.ops.catalog import operations_table
from opcost.ops.features import OpMetrics
from opcost.ops.spec import OpSpec
from opcost.params.ingest import IngestSource
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


class LogFileCounts(TypedDict):
    """What one thesis log gave, as summary.json lists it under `files`."""

    parsed: int  # data lines turned into rows
    rows: int
    rejected: int
    skipped: dict[str, int]  # lines skipped, by kind


def rejects_table(rows: list[Reject], source: str) -> pd.DataFrame:
    """The rejects of a source as a schemas.REJECTS table (empty, with its columns, if none)."""
    df = pd.DataFrame(rows, columns=[c for c in REJECTS.names if c != "source"]).assign(source=source)
    return conform(df, REJECTS)


def reject_counts(rows: Sequence[Mapping[str, object]]) -> dict[str, int]:
    """Rejected lines by reason, every reason listed (0 where none), for summary.json."""
    c = Counter(r["reason"] for r in rows)
    return {k: c.get(k, 0) for k in REJECT_REASONS}


def measurement_tables(
    src: IngestSource,
    op_rows: list[dict[str, Any]],
    net_rows: list[dict[str, Any]],
    specs: Mapping[str, tuple[OpSpec, OpMetrics]],
    rejects: list[Reject],
    files: Mapping[str, LogFileCounts] | Mapping[str, neusight.FileCounts],
    skipped_lines: dict[str, int],
    parts: dict[str, list[dict[str, Any]]] | None = None,
    more_tables: Mapping[str, pd.DataFrame] | None = None,
) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """The summary and tables of a source of measured ops and networks (thesis logs, NeuSight): its
    op and network rows conformed, the operations table of the parsed `specs` (with `parts` where the
    reader knows them: None traces each composite), the rejects, and `more_tables` of its own."""
    ops = conform(pd.DataFrame(op_rows).assign(source=src.name), OP_MEASUREMENTS)
    nets = conform(pd.DataFrame(net_rows, columns=NET_MEASUREMENTS.names).assign(source=src.name), NET_MEASUREMENTS)
    summary = {
        "source": src.name,
        "kind": src.kind,
        "files": files,
        "skipped_lines": skipped_lines,
        "rejected_lines": len(rejects),
        "rejected_by_reason": reject_counts(rejects),
        "op_rows": len(ops),
        "network_rows": len(nets),
        "unique_ops": len(specs),
    }
    operations = operations_table({i: s for i, (s, _) in specs.items()}, {i: m for i, (_, m) in specs.items()}, parts)
    tables = {
        "op_measurements.parquet": ops,
        "networks.parquet": nets,
        **(more_tables or {}),
        "operations.parquet": operations,
        "rejects.parquet": rejects_table(rejects, src.name),
    }
    return summary, tables


def ingest_thesis(src: IngestSource, root: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """The thesis' logs of operations and networks (data/thesis.py); specs of the ops measured only."""
    root = root / src.path
    spec_cache: thesis.SpecCache = {}
    op_rows: list[dict[str, Any]] = []
    net_rows: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    files: dict[str, LogFileCounts] = {}
    totals: Counter[str] = Counter()
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
    used = {r["op_id"] for r in op_rows}
    specs = {e[0].op_id: e for e in spec_cache.values() if not isinstance(e, str) and e[0].op_id in used}
    skipped = {k: totals.get(k, 0) for k in thesis.LINE_KINDS if k != "data"}
    return measurement_tables(src, op_rows, net_rows, specs, rejects, files, skipped)


def ingest_neusight(src: IngestSource, root: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """NeuSight's ops, networks and FX nodes (data/neusight.py), with how they were measured."""
    res = neusight.read_neusight(root / src.path)
    nodes = conform(pd.DataFrame(res.nodes, columns=NETWORK_NODES.names).assign(source=src.name), NETWORK_NODES)
    kernels = conform(pd.DataFrame(res.kernels).assign(source=src.name), OP_KERNELS)
    summary, tables = measurement_tables(
        src,
        res.rows,
        res.nets,
        res.specs,
        res.rejects,
        res.files,
        dict(sorted(res.skipped.items())),
        parts={},  # the nine kinds have no composite parts: operations_table would trace each op for none
        more_tables={"network_nodes.parquet": nodes, "op_kernels.parquet": kernels},
    )
    return {**summary, **neusight.summary_counts(res)}, tables


def ingest_sweep(src: IngestSource, root: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    read = SWEEP_READERS[src.kind](root / src.path, src.name)
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
    why, with the first), or no data line found (line endings, wrong files). So is a source of ops and
    networks whose every op line was rejected: its network rows alone would train nothing, and the
    stage would pass with every op measurement gone."""
    rows = summary.get("sweep_rows", summary.get("op_rows", 0) + summary.get("network_rows", 0))
    op_rejects = rejects[rejects["source_file"].str.startswith("ops/")] if "op_rows" in summary else rejects[:0]
    if rows and not (summary.get("op_rows") == 0 and len(op_rejects)):
        return
    if len(rejects):
        which, bad = ("op lines", op_rejects) if rows else ("data lines", rejects)
        first = bad.iloc[0]
        by = ", ".join(f"{k} {v}" for k, v in reject_counts(bad.to_dict("records")).items() if v)
        kept = f" ({summary['network_rows']} network rows taken)" if rows else ""
        raise OpcostError(
            f"{src.path}: every one of its {len(bad)} {which} was rejected{kept} ({by}; first: "
            f"{first['source_file']}:{first['line']} {first['message']}); nothing written"
        )
    raise OpcostError(f"{src.path}: no data line found in {len(summary.get('files', {}))} file(s); nothing written")


def read_source(src: IngestSource, root: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """Source `src` (its path relative to the project `root`) read whole by its kind's reader: its
    summary and its tables by file name (rejects.parquet always among them). Everything is parsed and
    validated here, so a caller writes nothing when this raises."""
    ingest = {"thesis-logs": ingest_thesis, "neusight": ingest_neusight}.get(src.kind, ingest_sweep)
    summary, tables = ingest(src, root)
    refuse_empty(src, summary, tables["rejects.parquet"])
    return summary, tables
