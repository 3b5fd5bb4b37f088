"""The `opcost` command line: one Typer app, one thin verb per stage or question.

Each verb parses its options, calls one library function and prints the result. Errors the user
can fix (`OpcostError`) are printed on one line and exit with status 2; nothing is half-written.
"""

from __future__ import annotations

import json
import sys
from typing import Callable, List, Optional, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from opcost.config import MODES, ModelInputSet, Paths, find_root, load_params, parse_input_shape
from opcost.errors import OpcostError

app = typer.Typer(
    help="opcost: what a neural network costs in time and energy on a GPU, without running it there.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
if not out.is_terminal:
    out = Console(width=160)  # piped or logged: do not squeeze tables to 80 columns
err = Console(stderr=True)

T = TypeVar("T")


def _run(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except OpcostError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def extract(
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """Stage `extract`: trace the model-input sets of params.yaml into operations and call counts.

    Writes data/operations/{operations,occurrences}.parquet and reports/extract/coverage.json.
    """
    from opcost.ops.catalog import run_extract_stage

    def go() -> dict:
        paths = Paths(find_root())
        return run_extract_stage(paths, load_params(paths.params), show_progress=not no_progress)

    summary = _run(go)
    out.print(
        f"extract: {summary['operations']} unique operations, {summary['occurrences']} occurrence rows, "
        f"coverage {summary['min_coverage']:.4f}..{summary['max_coverage']:.4f}"
    )


@app.command()
def coverage(
    models: Optional[List[str]] = typer.Argument(None, help="torchvision model names (e.g. resnet18 vit_b_16)."),
    all_models: bool = typer.Option(False, "--all", help="Every classification model torchvision ships."),
    input_shape: Optional[str] = typer.Option(
        None, "--input-shape", help="B,C,H,W for every model (default 2,3,224,224; 2,3,299,299 for inception_v3)."
    ),
    mode: str = typer.Option("inference", "--mode", help="inference (eval) or training (train mode forward)."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON instead of a table."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """FLOPs of the extracted operations x calls over FlopCounterMode's count of the whole forward pass.

    Exits 1 when any model is outside 1.00 +/- 0.01.
    """
    from opcost.ops.catalog import COVERAGE_TOLERANCE, extract_sets
    from opcost.ops.models import check_model_name, classification_models, default_input_shape

    def go() -> list[dict]:
        if mode not in MODES:
            raise OpcostError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
        names = list(classification_models()) if all_models else list(models or [])
        if not names:
            raise OpcostError("name at least one model (e.g. `opcost coverage resnet18`) or pass --all")
        for n in names:
            check_model_name(n)
        shape = parse_input_shape(input_shape, "--input-shape") if input_shape else None
        sets = [ModelInputSet(n, shape or default_input_shape(n), modes=(mode,)) for n in names]
        return extract_sets(sets, show_progress=not no_progress).coverage_rows()

    rows = _run(go)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        table = Table(title=f"FLOP coverage ({mode}), tolerance {COVERAGE_TOLERANCE:.2f}")
        for col in ("model", "input", "calls", "unique ops", "GFLOP ops", "GFLOP total", "coverage", ""):
            table.add_column(col, justify="left" if col in ("model", "input") else "right", no_wrap=True)
        for r in rows:
            table.add_row(
                r["model"],
                "x".join(map(str, r["input_shape"])),
                str(r["calls"]),
                str(r["unique_ops"]),
                f"{r['flops_ops'] / 1e9:.3f}",
                f"{r['flops_total'] / 1e9:.3f}",
                f"{r['coverage']:.4f}",
                "ok" if r["within_tolerance"] else "[red]OUT[/]",
            )
        out.print(table)
        bad = sum(not r["within_tolerance"] for r in rows)
        out.print(f"{len(rows) - bad}/{len(rows)} within 1.00 +/- {COVERAGE_TOLERANCE:.2f}")
    if any(not r["within_tolerance"] for r in rows):
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
