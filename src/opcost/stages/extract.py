"""Stage `extract`: trace the model-input sets of params.yaml into unique operations and call counts.

Writes data/operations/{operations,occurrences}.parquet, the per-set coverage detail
(reports/extract/coverage.json) and the headline figures DVC shows as metrics
(reports/extract/summary.json).
"""

from __future__ import annotations

import sys
from typing import Any

from opcost.io import write_parquet, write_report
from opcost.ops.catalog import coverage_report, extract_sets, occurrences_frame, operations_frame
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute


def sets_where(paths: Paths) -> str:
    """How the extract sets are named in a message: the sets file's list, or params.yaml's inline one."""
    return f"{paths.extract_sets.name}: sets" if paths.extract_sets.is_file() else f"{paths.params.name}: extract.sets"


def run(paths: Paths, params: Params, show_progress: bool = True) -> dict[str, Any]:
    catalog = extract_sets(params.extract.sets, show_progress=show_progress, where=sets_where(paths))
    ops = operations_frame(catalog)
    occ = occurrences_frame(catalog)
    report = coverage_report(catalog.coverage_rows())
    headline = {
        "operations": len(ops),
        "occurrences": len(occ),
        "sets": len(params.extract.sets),
        **{k: report[k] for k in ("min_coverage", "max_coverage", "all_within_tolerance")},
    }
    write_parquet(ops, paths.operations)
    write_parquet(occ, paths.occurrences)
    write_report(report, paths.extract_coverage)
    write_report(headline, paths.extract_summary)
    return headline


def summary(s: dict[str, Any]) -> str:
    return (
        f"extract: {s['operations']} unique operations, {s['occurrences']} occurrence rows, "
        f"coverage {s['min_coverage']:.4f}..{s['max_coverage']:.4f}"
    )


def main(argv: list[str] | None = None) -> int:
    return execute(
        argv,
        __doc__.splitlines()[0],
        lambda p: p.add_argument("--no-progress", action="store_true", help="do not draw a progress bar"),
        lambda paths, params, a: run(paths, params, show_progress=not a.no_progress),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
