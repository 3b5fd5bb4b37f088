"""Stage `ingest@<source>`: parse external measurements (data/external/<source>) into the project's
tables under data/ingested/<source>/.

Outputs: for logs of operations and networks (`thesis-logs`) op_measurements.parquet, networks.parquet
and operations.parquet (the parsed specs, in the same table as extract writes); for NeuSight
(`neusight`) those plus op_kernels.parquet and network_nodes.parquet; for sweeps sweeps.parquet;
always rejects.parquet and summary.json with the rows parsed, the lines rejected by reason and
skipped by kind, per file. Reading and checking is opcost.data.ingest's: a whole-file problem stops
the stage with a one-line error naming the file, before anything is written.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from opcost.data.ingest import read_source
from opcost.errors import OpcostError
from opcost.io import atomic_path, report_text
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute


def run(paths: Paths, params: Params, source: str) -> dict[str, Any]:
    """Ingest params.yaml source `source` into data/ingested/<source>/; its summary."""
    sources = params.ingest.sources
    if source not in sources:
        raise OpcostError(
            f"unknown ingest source {source!r}; sources in params.yaml: {', '.join(sorted(sources)) or 'none'}"
        )
    src = sources[source]
    if not (paths.root / src.path).exists():
        raise OpcostError(f"{src.path} not found: run `dvc pull` to fetch the external data")
    summary, tables = read_source(src, paths.root)
    # everything is parsed and validated before the first file is written, and every file is written
    # before the first is renamed into place: a full disk leaves the folder as it was, not half new
    out = paths.ingested_dir(source)
    with contextlib.ExitStack() as stack:
        for fname, df in tables.items():
            df.to_parquet(stack.enter_context(atomic_path(out / fname)), index=False)
        stack.enter_context(atomic_path(out / "summary.json")).write_text(report_text(summary))
    return summary


def summary(s: dict[str, Any]) -> str:
    """One line: rows taken per table, lines rejected (by reason) and lines skipped (by kind)."""
    counts = {k: v for k, v in s.items() if k.endswith("_rows")}
    by = ", ".join(f"{k} {v}" for k, v in s.get("rejected_by_reason", {}).items() if v)
    rejected = f"; rejected lines {s.get('rejected_lines', 0)}" + (f" ({by})" if by else "")
    return f"ingest {s['source']}: {counts}{rejected}; skipped lines {s.get('skipped_lines', {})}"


def main(argv: list[str] | None = None) -> int:
    return execute(
        argv,
        __doc__.splitlines()[0],
        lambda p: p.add_argument("--source", required=True, help="an ingest source of params.yaml"),
        lambda paths, params, a: run(paths, params, a.source),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
