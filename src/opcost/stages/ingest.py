"""Stage `ingest@<source>`: parse external measurements (data/external/<source>) into the project's
tables under data/ingested/<source>/. A thin entry point over `opcost.data.ingest`."""

from __future__ import annotations

import sys
from typing import Any

from opcost.data.ingest import run_ingest_stage
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute


def run(paths: Paths, params: Params, source: str) -> dict[str, Any]:
    return run_ingest_stage(paths, params, source)


def summary(s: dict[str, Any]) -> str:
    counts = {k: v for k, v in s.items() if k.endswith("_rows")}
    return f"ingest {s['source']}: {counts}; skipped lines {s.get('skipped_lines', {})}"


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
