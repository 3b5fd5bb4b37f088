"""The `opcost` command line: one Typer app, one thin verb per stage or question.

Each verb parses its options, calls one library function and prints the result. Errors the user
can fix (`OpcostError`) are printed on one line and exit with status 2; nothing is half-written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, NoReturn, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opcost.deadline import DEFAULT_TIMEOUT_S
from opcost.errors import OpcostError
from opcost.modes import check_mode
from opcost.outputs import finite_json
from opcost.params.extract import ModelInputSet
from opcost.params.load import load_params
from opcost.params.profile import CampaignParams
from opcost.paths import Paths, find_root
from opcost.shapes import parse_input_shape

if TYPE_CHECKING:
    from opcost.measure.records import (
        CampaignMeta,
        LandResult,
        PlanSummary,
        ShardPlanSummary,
        ShardResult,
        VisitResult,
    )


class _NoCudaRuntimeLine(logging.Filter):
    """Drops torch's "No CUDA runtime is found, using CUDA_HOME=..." warning. torch logs it on importing
    `torch.utils.cpp_extension` (our timing imports torch.utils.benchmark) only where no GPU is usable:
    opcost compiles no extension, so on such a machine the line concerns nobody and teaches users to skip
    warnings. Installed here, at the command line's edge, before anything imports torch."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaRuntimeLine())


app = typer.Typer(
    help="opcost: what a neural network costs in time and energy on a GPU, without running it there.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
    out = Console(width=160)  # piped or logged: do not squeeze tables to 80 columns (COLUMNS, where set, wins)
err = Console(stderr=True)

T = TypeVar("T")


def _run(fn: Callable[[], T], as_json: bool = False) -> T:
    """`fn()`, with an error the user can fix as one line and exit 2. Under `--json` stdout holds JSON
    only: what `fn` prints (a user's model builder saying "built!") goes to stderr, and an error is
    also a JSON object on stdout (`{"error": ..., "exit_code": 2}`), so a script reading stdout sees it."""
    try:
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            return fn()
    except OpcostError as exc:
        _fail(str(exc), as_json, getattr(exc, "details", None))
    except Exception as exc:  # MLflow's server or database died mid-command: one line, not its tracebacks
        from opcost.stages._run import service_down_line

        line = service_down_line(exc)
        if line is None:
            raise
        _fail(line, as_json)


def _fail(message: str, as_json: bool, details: Any = None) -> NoReturn:
    """Exit 2 with `message` on stderr, and under `--json` as a JSON object on stdout too."""
    if as_json:
        doc: dict[str, Any] = {"error": message, "exit_code": 2}
        if details:
            doc["details"] = details
        sys.stdout.write(finite_json(doc) + "\n")
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2) from None


def _stage(fn: Callable[[Paths, Any], T], as_json: bool = False) -> T:
    """Run `fn(paths, params)` for the project around the working directory, errors as one line."""

    def go() -> T:
        paths = Paths(find_root())
        return fn(paths, load_params(paths.params))

    return _run(go, as_json)


@app.command()
def extract(
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """Stage `extract`: trace the model-input sets of params.yaml into operations and call counts.

    Writes data/operations/{operations,occurrences}.parquet, reports/extract/coverage.json (per set)
    and reports/extract/summary.json (headline metrics).
    """
    from opcost.stages import extract as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params, show_progress=not no_progress))))


MODEL_HELP = (
    "torchvision model (any of torchvision.models.list_models()), package.module:callable, "
    "path/to/file.py:callable, or hf:<model_type> / hf:<TransformersClass> (e.g. hf:gpt2)."
)
INPUT_OPTION_HELP = (
    "An input DTYPE:SHAPE[:vocab=N], repeat for several (passed in order): float32:32,3,224,224, "
    "int64:8,512:vocab=50257. Default: the model family's input."
)
MODEL_ARG_HELP = "Keyword argument of the model builder or HF config, key=value (JSON values), repeatable."


def _netspec(model: str, input_shape: str | None, inputs: List[str], model_args: List[str]) -> Any:
    """The network a verb is asked about (ops/netspec.py), from --model/--input-shape/--input/--model-arg."""
    from opcost.ops.netspec import NetSpec, image_input, parse_input, parse_model_args

    if input_shape and inputs:
        raise OpcostError("give either --input-shape (one image input) or --input (typed inputs), not both")
    specs = [image_input(parse_input_shape(input_shape, "--input-shape"))] if input_shape else []
    specs += [parse_input(i) for i in inputs]
    return NetSpec.make(model, specs, parse_model_args(model_args))


def _check_top(top: int) -> None:
    """A negative --top would drop rows from the end (`head(-3)`), 0 would show none: refuse both."""
    if top < 1:
        raise OpcostError(f"--top {top}: expected a positive number of rows, e.g. --top 10")


def _optimizer(mode: str, optimizer: str | None) -> str:
    """The optimizer whose state the training memory holds: sgd unless given. Given with inference it
    would change nothing, so it is refused rather than ignored."""
    from opcost.ops.footprint import footprint_key

    check_mode(mode)
    if optimizer is None:
        return "sgd"
    footprint_key("training", optimizer)  # an unknown name: one line naming the valid ones
    if mode != "training":
        raise OpcostError(
            f"--optimizer {optimizer} goes with --mode training (its state is training memory); "
            f"--mode {mode} has no optimizer: drop --optimizer"
        )
    return optimizer


class CannotRun(OpcostError):
    """A step that fits on no GPU: refused, with its memory as `details` (the JSON error carries it)."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


def _runnable(p: Any) -> Any:
    """The prediction, unless its step fits on no GPU of the device table: then no time is given for a
    step nothing can run, only what it needs (a batch of 100000 images asks for a terabyte)."""
    m = p.memory
    if m is None or not m["fits"] or any(m["fits"].values()):
        return p
    from opcost.devices import DEVICES

    largest = max(DEVICES, key=lambda k: DEVICES[k].memory_bytes)
    what = m["mode"] + (f" with {m['optimizer']}" if m["optimizer"] else "")
    raise CannotRun(
        f"{p.model} {' '.join(p.inputs)} ({what}) needs {_gib(m['needed_bytes'])} (peak {_gib(m['peak_bytes'])} in "
        f"{m['peak_phase']}), more than any GPU of the device table holds (largest: {largest}, "
        f"{_gib(DEVICES[largest].memory_bytes)}): it cannot run, so no time is given; use a smaller batch",
        {"memory": m},
    )


def _gib(n: float) -> str:
    if n >= 2**40:
        return f"{n / 2**40:.2f} TiB"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


@app.command()
def coverage(
    models: Optional[List[str]] = typer.Argument(None, help="Models: " + MODEL_HELP),
    all_models: bool = typer.Option(False, "--all", help="Every classification model torchvision ships."),
    input_shape: Optional[str] = typer.Option(
        None, "--input-shape", help="B,C,H,W image input for every model (default: each model family's input)."
    ),
    inputs: List[str] = typer.Option([], "--input", help=INPUT_OPTION_HELP),
    model_args: List[str] = typer.Option([], "--model-arg", help=MODEL_ARG_HELP),
    mode: str = typer.Option("inference", "--mode", help="inference (eval) or training (train mode forward)."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON instead of a table."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """FLOPs of the extracted operations x calls over FlopCounterMode's count of the whole forward pass.

    Ops that cannot be rebuilt from their spec are listed by kind with their share of calls.
    Exits 1 when any model is outside 1.00 +/- 0.01.
    """
    from opcost.ops.catalog import COVERAGE_TOLERANCE, extract_nets
    from opcost.ops.models import classification_models

    def go() -> list[dict[str, Any]]:
        check_mode(mode)
        names = list(classification_models()) if all_models else list(models or [])
        if not names:
            raise OpcostError("name at least one model (e.g. `opcost coverage resnet18`) or pass --all")
        nets = [_netspec(n, input_shape, inputs, model_args) for n in names]
        return extract_nets([(n, mode) for n in nets], show_progress=not no_progress).coverage_rows()

    rows = _run(go, as_json)
    if as_json:
        sys.stdout.write(finite_json(rows) + "\n")
    else:
        table = Table(title=f"FLOP coverage ({mode}), tolerance {COVERAGE_TOLERANCE:.2f}")
        cols = ("model", "input", "calls", "unique ops", "GFLOP ops", "GFLOP total", "coverage", "", "not rebuildable")
        for col in cols:
            table.add_column(col, justify="left" if col in ("model", "input", cols[-1]) else "right", no_wrap=True)
        for r in rows:
            miss = ", ".join(f"{k} ({v['calls_share']:.1%} of calls)" for k, v in r["missing_kinds"].items())
            table.add_row(
                escape(r["model"]),
                "x".join(map(str, r["input_shape"])),
                str(r["calls"]),
                str(r["unique_ops"]),
                f"{r['flops_ops'] / 1e9:.3f}",
                f"{r['flops_total'] / 1e9:.3f}",
                f"{r['coverage']:.4f}",
                "ok" if r["within_tolerance"] else "[red]OUT[/]",
                escape(miss or "-"),
            )
        out.print(table)
        bad = sum(not r["within_tolerance"] for r in rows)
        out.print(f"{len(rows) - bad}/{len(rows)} within 1.00 +/- {COVERAGE_TOLERANCE:.2f}")
        for r in rows:
            for k, v in r["missing_kinds"].items():
                out.print(f"{escape(r['model'])}: {k} not rebuildable from its spec: {escape(v['reason'])}")
            if r["traced_on"] != "meta":
                out.print(f"{escape(r['model'])}: traced on {r['traced_on']} (meta tensors cannot run it)")
    if any(not r["within_tolerance"] for r in rows):
        raise typer.Exit(1)


@app.command()
def ingest(
    source: str = typer.Option(..., "--source", help="An ingest source of params.yaml (ingest.sources)."),
) -> None:
    """Stage `ingest@SOURCE`: parse external measurements (data/external/) into the project's tables.

    Writes data/ingested/SOURCE/: op_measurements, networks and operations tables for thesis logs,
    a sweeps table for sweep sources, and summary.json (rows parsed, lines skipped by kind).
    """
    from opcost.stages import ingest as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params, source))))


@app.command()
def evaluate() -> None:
    """Stage `evaluate`: every source into data/evaluated/{operations,networks,sweeps}.parquet.

    Also writes data/evaluated/targets/<device>-<mode>/operations.parquet (what each train target
    reads), reports/ingest/{summary,coverage}.json and reports/evaluate/summary.json (headline metrics).
    """
    from opcost.stages import evaluate as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params))))


@app.command()
def train(
    target: str = typer.Option(
        ..., "--target", help="<device config>-<mode>, e.g. A30-inference (params.yaml train.targets)."
    ),
    no_mlflow: bool = typer.Option(
        False, "--no-mlflow", help="Do not log to MLflow or register (scores and models/ only)."
    ),
) -> None:
    """Stage `train@TARGET`: time and power models (RF, XGBoost; baseline and improved features).

    Writes models/TARGET/ (bundle.json, trees.npz, run.json) and reports/train/targets/TARGET.json;
    replays the run into MLflow and registers the bundle as opcost-TARGET with alias champion.
    """
    from opcost.stages import train as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params, target, not no_mlflow))))


@app.command()
def validate(
    no_mlflow: bool = typer.Option(False, "--no-mlflow", help="Do not log the figures and metrics to MLflow."),
) -> None:
    """Stage `validate`: summed and predicted vs measured networks, tensor cores, sweeps, latency.

    Writes reports/validate/ (CSV tables, figures, metrics.json, detail.json) and reports/index.md.
    """
    from opcost.stages import validate as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params, log_to_mlflow=not no_mlflow))))


@app.command("check-params")
def check_params(
    params_file: Optional[Path] = typer.Option(None, "--params", help="The file to check (default: params.yaml)."),
) -> None:
    """Validate params.yaml and sets.yaml and exit 2 with one line if either is wrong. `make repro` runs
    this before `dvc repro`, which deletes a stage's outputs before its command can refuse a typo.

    Beyond the files' own rules: every extract set names a model that exists (a torchvision name, or a
    user's callable that imports), there is at least one set, and `train.folds` is no more than the
    distinct layers of each target's training data where that data is in the checkout."""

    def go() -> str:
        from opcost.ops.catalog import validate_sets
        from opcost.stages.extract import sets_where

        f = params_file or Paths(find_root()).params
        p = load_params(f)
        paths = Paths(f.parent)
        validate_sets(p.extract.sets, sets_where(paths))
        _check_folds(paths, p)
        return f"{f}: valid ({len(p.extract.sets)} extract sets, {len(p.train.targets)} train targets)"

    out.print(_run(go), highlight=False)


def _check_folds(paths: Paths, params: Any) -> None:
    """`train.folds` against the distinct layers of each target's training data that is in the checkout
    (after `dvc pull` or `dvc repro evaluate`; without it the train stage refuses when it reads it)."""
    from opcost.model.training.fit import check_folds

    for target in params.train.targets:
        table = paths.target_operations(target)
        if table.is_file():
            import pyarrow.parquet as pq

            layers = pq.read_table(table, columns=["layer_id"]).column("layer_id").to_pylist()
            check_folds(params.train.folds, len(set(layers)), f"{target}'s training data ({table.name})")


@app.command("sync-registry")
def sync_registry() -> None:
    """Register the bundles under models/ that the MLflow store lacks, replaying their training runs
    (after `dvc pull` on a fresh clone), and the validate report as a run of the validate experiment."""
    from opcost.model.store.registry import sync_registry as sync
    from opcost.validate.replay import sync_validate

    done = _stage(lambda paths, params: sync(paths, params))
    for t, v in done.items():
        out.print(f"{t}: {'registered version ' + v if v else 'already registered'}")
    run_id = _stage(lambda paths, params: sync_validate(paths) if paths.validate_detail.is_file() else "")
    if run_id != "":
        out.print(f"validate: {'replayed as run ' + run_id if run_id else 'already in the store'}")


def _host_unused(host: str | None, own: list[str]) -> list[str]:
    """A warning where `--host` was given for answers that do not use it: a GPU with its own models answers
    from its own measurements, whose host is in them (the host model serves transferred answers only)."""
    if host is None or not own:
        return []
    return [
        f"--host {host} is not used for {', '.join(own)}: answered from its own measurements, which include the "
        "host they were measured with; --host applies to GPUs answered by transfer"
    ]


@app.command("calibrate-host")
def calibrate_host(
    name: str = typer.Option(..., "--name", help="A name for this host (letters, digits, '.', '_', '-')."),
    seconds: float = typer.Option(0.3, "--seconds", help="Measuring time per op kind."),
    out_file: Optional[Path] = typer.Option(
        None, "--out", help="Where to write the profile (default hosts/NAME.json)."
    ),
) -> None:
    """Measure this machine's CPU as the host of a GPU: its cost per call of each op kind (model/crossdevice/hosts.py),
    for
    `predict --host NAME` and `recommend --host NAME`. Needs no GPU."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from opcost.model.crossdevice import hosts
    from opcost.paths import Paths, find_root

    def go() -> Path:
        hosts.check_name(name)
        if not (0.01 <= seconds <= 60):
            raise OpcostError(f"--seconds {seconds:g}: expected 0.01 to 60 seconds per op kind")
        target = out_file if out_file is not None else Paths(find_root()).host_file(name)
        if out_file is not None:
            from opcost.outputs import check_output_file

            check_output_file(out_file, "--out")
        kinds = hosts.KINDS
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(), console=err) as bar:
            task = bar.add_task("calibrating host", total=len(kinds))
            profile = hosts.calibrate(name, seconds, progress=lambda k: bar.update(task, advance=1, description=k))
        hosts.save(profile, target)
        return target

    target = _run(go)
    out.print(f"host {name}: wrote {target}; use it with `opcost predict --host {name}`")


@app.command()
def promote(
    target: str = typer.Option(..., "--target", help="<device config>-<mode>, e.g. A30-inference."),
    version: Optional[str] = typer.Option(None, "--version", help="Registry version (default: models/TARGET's)."),
) -> None:
    """Move the registry's `champion` alias explicitly (automatic moves happen only from committed main)."""
    from opcost.model.store.registry import promote as do_promote

    v = _stage(lambda paths, params: do_promote(paths, target, version, params.train.targets))
    out.print(f"opcost-{target}: champion is version {v}")


@app.command("train-report")
def train_report() -> None:
    """Stage `train-report`: the headline scores of every target into reports/train/metrics.json."""
    from opcost.stages import train_report as stage

    out.print(stage.summary(_stage(lambda paths, params: stage.run(paths, params))))


def _memory_lines(p: Any) -> list[str]:
    m = p.memory
    if m is None:
        return []
    what = m["mode"] + (f", {m['optimizer']}" if m["optimizer"] else "")
    parts = [
        f"parameters {_gib(m['parameters'])}",
        f"buffers {_gib(m['buffers'])}",
        f"inputs {_gib(m['inputs'])}",
    ]
    if m["mode"] == "training":
        parts += [
            f"gradients {_gib(m['gradients'])}",
            f"optimizer state {_gib(m['optimizer_state'])}",
            f"activations saved for backward {_gib(m['activations'])}",
        ]
    else:
        parts.append(f"activations {_gib(m['activations'])}")
    parts.append(f"largest transient {_gib(m['workspace'])}")
    fit = {True: "fits", False: "does NOT fit", None: "fit unknown (device not in the table)"}[p.fits]
    yes = [d for d, ok in m["fits"].items() if ok]
    no = [d for d, ok in m["fits"].items() if not ok]
    return [
        f"memory ({what}): peak {_gib(m['peak_bytes'])} allocated in {m['peak_phase']} ({', '.join(parts)})",
        f"needs {_gib(m['needed_bytes'])} with allocator segments and {_gib(m['cuda_context_bytes'])} CUDA context: "
        f"{fit} on {p.device_config}",
        f"fits on: {', '.join(yes) or 'none'}" + (f"; too small: {', '.join(no)}" if no else ""),
    ]


HOST_HELP = (
    "The host CPU that drives a transferred GPU: a profile the cross-device model learnt (h200-visit, the default; "
    "thesis-A30, thesis-RTX2080Ti) or one `opcost calibrate-host --name NAME` measured (hosts/NAME.json)."
)
EXPLAIN_HELP = (
    "Also print how the answer was derived (every term, rule and source); --json always carries it as `note`."
)
TRUST_UNRECORDED_HELP = (
    "Use a model that nothing vouches for (no dvc.lock record, or a registered version without its bundle_md5 "
    "tag) as it is; the answer says so. Without it such a model is refused."
)


@app.command()
def predict(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    input_shape: Optional[str] = typer.Option(None, "--input-shape", help="B,C,H,W image input, e.g. 32,3,224,224."),
    inputs: List[str] = typer.Option([], "--input", help=INPUT_OPTION_HELP),
    model_args: List[str] = typer.Option([], "--model-arg", help=MODEL_ARG_HELP),
    device: str = typer.Option(
        ...,
        "--device",
        help="Device config with a trained model (e.g. A30), or any table GPU or NVML name "
        "(answered by the cross-device model: transferred).",
    ),
    mode: str = typer.Option("inference", "--mode", help="inference or training."),
    optimizer: Optional[str] = typer.Option(
        None, "--optimizer", help="Training memory (--mode training only): sgd with momentum (the default) or adam."
    ),
    clock: Optional[float] = typer.Option(
        None,
        "--clock",
        help="Core clock in MHz, within the device's supported range: measured where the model was trained on a "
        "clock sweep, else transferred by the clock model (models/clock).",
    ),
    registry: bool = typer.Option(False, "--registry", help="Use the MLflow registry's champion instead of models/."),
    trust_unrecorded: bool = typer.Option(False, "--trust-unrecorded", help=TRUST_UNRECORDED_HELP),
    host: Optional[str] = typer.Option(None, "--host", help=HOST_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    explain: bool = typer.Option(False, "--explain", help=EXPLAIN_HELP),
    top: int = typer.Option(10, "--top", help="Operations shown in the breakdown table."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S, "--timeout", help="Give up after this many seconds (a builder that never returns); 0: none."
    ),
) -> None:
    """Predict a whole network's time, energy, average power and peak memory from its operations."""
    from opcost.deadline import deadline
    from opcost.model.prediction.predict import Predictor

    def go() -> Any:
        _check_top(top)
        net = _netspec(model, input_shape, inputs, model_args)
        with deadline(timeout, f"predicting {net.label}"):
            opt = _optimizer(mode, optimizer)
            pr = Predictor(registry=registry, trust_unrecorded=trust_unrecorded, host=host)
            return _runnable(pr.predict(net, None, device, mode, clock, optimizer=opt))

    p = _run(go, as_json)
    unused = [] if host is None or p.host is not None else _host_unused(host, [p.device_config])
    for w in p.warnings + unused:
        err.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
    if as_json:
        # non-finite hyper-parameters are encoded in the specs ({"float": "-inf"}); a non-finite result is null
        sys.stdout.write(finite_json(p.to_json()) + "\n")
        return
    lo, hi = p.time_interval_s
    e = "n/a"
    if p.energy_j is not None and p.energy_interval_j is not None:
        e = f"{p.energy_j:.4g} J (90 %: {p.energy_interval_j[0]:.4g}-{p.energy_interval_j[1]:.4g})"
    pw = f"{p.avg_power_w:.1f} W" if p.avg_power_w is not None else "n/a"
    at = "default clock" if p.clock_mhz is None else f"{p.clock_mhz:g} MHz, clock_source {p.clock_source}"
    on = p.device_config if p.device_config == device else f"{p.device_config} (asked as {device})"
    out.print(
        f"{escape(p.model)} {' '.join(p.inputs)} on {escape(on)} ({mode}, {at}): "
        f"time {p.time_s * 1e3:.4g} ms (90 %: {lo * 1e3:.4g}-{hi * 1e3:.4g}), energy {e}, average power {pw}",
        highlight=False,
    )
    table = Table(title=f"top {top} operations by time")
    for col in ("kind", "op_id", "calls", "t per call [ms]", "e per call [mJ]", "time share", "source"):
        table.add_column(escape(col), justify="left" if col in ("kind", "op_id", "source") else "right", no_wrap=True)
    for r in p.operations()[:top]:
        table.add_row(
            r["kind"],
            r["op_id"],
            str(r["calls"]),
            f"{r['t_s'] * 1e3:.4f}",
            "n/a" if r["e_j"] is None else f"{r['e_j'] * 1e3:.4f}",
            f"{r['time_share']:.1%}",
            r["source"] + (f" ({r['proxy']})" if r["proxy"] else ""),
        )
    out.print(table)
    cov = p.coverage()
    out.print(
        "cost sources, share of calls / of estimated time: "
        + ", ".join(f"{s} {cov['calls'][s]:.0%} / {cov['time'][s]:.0%}" for s in cov["calls"])
    )
    for u in p.unbuildable:
        out.print(f"not costed (cannot be rebuilt from its spec): {u['kind']}, {u['calls']} calls", highlight=False)
    for line in _memory_lines(p):
        out.print(line, highlight=False)
    _print_basis(p, explain)


def _print_basis(p: Any, explain: bool) -> None:
    """What an answer stands on: one plain sentence, and under --explain the whole derivation."""
    if p.summary:
        hint = "" if explain or not p.note else " (--explain: how)"
        out.print(f"note: {escape(p.summary)}{hint}", highlight=False)
    if explain and p.note:
        out.print(f"derivation: {escape(p.note)}", highlight=False)


@app.command()
def recommend(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    input_shape: Optional[str] = typer.Option(None, "--input-shape", help="B,C,H,W image input."),
    inputs: List[str] = typer.Option([], "--input", help=INPUT_OPTION_HELP),
    model_args: List[str] = typer.Option([], "--model-arg", help=MODEL_ARG_HELP),
    mode: str = typer.Option("inference", "--mode", help="inference or training."),
    optimizer: Optional[str] = typer.Option(
        None, "--optimizer", help="Training memory (--mode training only): sgd with momentum (the default) or adam."
    ),
    max_slowdown: Optional[float] = typer.Option(
        None, "--max-slowdown", help="Keep configs at most X times slower than the fastest."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    explain: bool = typer.Option(False, "--explain", help=EXPLAIN_HELP),
    top: int = typer.Option(15, "--top", help="Rows of the sweep table (best energy first)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the U-curves (time, energy, EDP vs clock) here."),
    trust_unrecorded: bool = typer.Option(False, "--trust-unrecorded", help=TRUST_UNRECORDED_HELP),
    host: Optional[str] = typer.Option(None, "--host", help=HOST_HELP),
    devices: Optional[str] = typer.Option(
        None,
        "--devices",
        help="GPUs to rank, e.g. H100,A100,L4,T4 (table keys or NVML names; transferred "
        "where a GPU has no own models). Default: every device config with its own models.",
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S, "--timeout", help="Give up after this many seconds (a builder that never returns); 0: none."
    ),
) -> None:
    """Rank device configs x core clocks by time, energy and energy-delay product.

    Each device config is swept over its measured clocks, else over a grid of its supported range with
    the transferred clock model (models/clock), and the optimum per objective is printed. Device configs
    whose memory is too small for the step are dropped, and said so.
    """
    from opcost.model.prediction.predict import Predictor

    def go() -> Any:
        from opcost.deadline import deadline

        _check_top(top)
        if plot is not None:  # before the sweep: a bad path is one line, not a traceback afterwards
            from opcost.outputs import check_output_file

            check_output_file(plot, "--plot")
        net = _netspec(model, input_shape, inputs, model_args)
        with deadline(timeout, f"recommending for {net.label}"):
            from opcost.api import clock_grid_points  # params clock.grid_points, read here at the edge

            pr = Predictor(clock_grid_points=clock_grid_points(), trust_unrecorded=trust_unrecorded, host=host)
            df = pr.recommend(net, None, mode, max_slowdown, _optimizer(mode, optimizer), devices)
            unvouched = [f"{t}: {b.unvouched}" for t, b in sorted(pr.bundles.loaded.items()) if b.unvouched]
            return net, df, unvouched

    net, df, unvouched = _run(go, as_json)
    from opcost.model.prediction.recommend import summary_lines

    for u in unvouched:  # served only because of --trust-unrecorded: said before any number
        err.print(f"[yellow]warning:[/] {escape(u)}; served as it is because of --trust-unrecorded", soft_wrap=True)
    own = df["device_config"][df["source"] == "own models"] if len(df) and "source" in df else []
    for w in _host_unused(host, list(dict.fromkeys(own))):
        err.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)

    dropped = df.attrs.get("dropped", [])
    optima = _optima(df)
    if plot is not None:
        _run(lambda: _plot_sweeps(df, plot, f"{net.label} {net.input_text} ({mode})"), as_json)
    if as_json:
        rows = json.loads(df.to_json(orient="records"))
        doc = {
            "configs": rows,
            "optima": optima,
            "ties": df.attrs.get("ties", {}),
            "interval_level": 0.9,
            "removed_by_max_slowdown": df.attrs.get("removed_by_max_slowdown", 0),
            "dropped_for_memory": dropped,
            "unvouched_models": unvouched,
        }
        sys.stdout.write(finite_json(doc) + "\n")
        return
    ties = df.attrs.get("ties", {})
    for objective, r in optima.items():
        clk = "default clock" if r["clock_mhz"] is None else f"{r['clock_mhz']:g} MHz ({r['clock_source']})"
        tied = len(ties.get(objective, []))
        out.print(
            f"best {objective}: {r['device_config']} at {clk}: {r['time_s'] * 1e3:.4g} ms, "
            + ("energy n/a" if r["energy_j"] is None else f"{r['energy_j']:.4g} J")
            + f", slowdown {r['slowdown']:.2f}"
            + (
                ""
                if not tied
                else "; a tie with every other setting"
                if tied == len(df) - 1
                else f"; a tie with {tied} others"
            ),
            highlight=False,
        )
    if plot is not None:
        out.print(f"U-curves written to {plot}", highlight=False)
    out.print(_settings_table(df, top, f"{net.label} {net.input_text} ({mode})"))
    for line in summary_lines(df):
        out.print(line, highlight=False)
    if explain:  # the derivation of each best setting's answer, once per setting
        seen = set()
        for r in optima.values():
            row = df[(df["device_config"] == r["device_config"]) & _same_clock(df, r["clock_mhz"])].iloc[0]
            label = f"{r['device_config']}" + ("" if r["clock_mhz"] is None else f" at {r['clock_mhz']:g} MHz")
            if label not in seen and row.get("note"):
                seen.add(label)
                out.print(f"derivation ({label}): {escape(str(row['note']))}", highlight=False)


def _same_clock(df: Any, clock: float | None) -> Any:
    return df["clock_mhz"].isna() if clock is None else df["clock_mhz"] == clock


def _settings_table(df: Any, top: int, what: str) -> Table:
    """recommend's table of the `top` settings, made to fit 120 columns: a tie with the best is a `*` on the
    objective's rank, and what holds for every setting (a tie on an objective, a mark, fitting in memory) is
    said once under the table (recommend.summary_lines) rather than on each row."""
    from opcost.model.prediction.recommend import OBJECTIVES as OBJECTIVE_COLUMNS
    from opcost.model.prediction.recommend import TIE_COLUMNS, all_tied, common_marks, row_marks

    shown = df.head(top)
    everywhere = set(all_tied(df))
    common = set(common_marks(df))
    fits = [r is True for r in shown["fits_memory"]]  # else None: a device the table lacks
    unknown_memory = not all(fits) and any(fits)  # a column only where the settings differ
    memory = ", all fit in memory" if all(fits) else "" if unknown_memory else ", memory fit unknown"
    table = Table(title=escape(f"{what}: {len(shown)} of {len(df)} settings{memory}, 90 % intervals"))
    cols = ["device", "clock", "time [ms]", "energy [J]", "EDP [J s]", "slowdown"]
    cols += ["memory"] * unknown_memory + ["ranks t/E/EDP"]
    # time and energy as `value (low-high)`: the 90 % interval; EDP's interval is in --json and --plot
    for col in cols:
        table.add_column(escape(col), no_wrap=True, min_width=len(col))
    marks = [[m for m in row_marks(v) if m not in common] for v in shown["marks"]]
    if any(marks):
        table.add_column("marks")  # the one column that may wrap

    def iv(v: Any, lo: Any, hi: Any, scale: float, fmt: str) -> str:
        if v is None or v != v:
            return "n/a"
        if lo is None or lo != lo:
            return format(v * scale, fmt)
        return f"{format(v * scale, fmt)} ({format(lo * scale, fmt)}-{format(hi * scale, fmt)})"

    def rank(r: Any, objective: str) -> str:
        tie = objective not in everywhere and bool(r.get(TIE_COLUMNS[objective], False))
        return f"{r[OBJECTIVE_COLUMNS[objective][3]]}" + "*" * tie

    for (_, r), m in zip(shown.iterrows(), marks):
        cells = [
            r["device_config"],
            "default" if r["clock_mhz"] is None or r["clock_mhz"] != r["clock_mhz"] else f"{r['clock_mhz']:g}",
            iv(r["time_s"], r["time_lo_s"], r["time_hi_s"], 1e3, ".3g"),
            iv(r["energy_j"], r["energy_lo_j"], r["energy_hi_j"], 1.0, ".3g"),
            "n/a" if r["edp_js"] is None or r["edp_js"] != r["edp_js"] else f"{r['edp_js']:.3g}",  # interval: --json
            f"{r['slowdown']:.2f}",
        ]
        if unknown_memory:
            cells.append("fits" if r["fits_memory"] is True else "unknown")
        cells.append("/".join(rank(r, o) for o in ("time", "energy", "EDP")))
        if any(marks):
            cells.append(", ".join(m) or "-")
        table.add_row(*(escape(c) for c in cells))
    return table


OBJECTIVES = {"time": "rank_time", "energy": "rank_energy", "EDP": "rank_edp"}


def _optima(df: Any) -> dict[str, dict[str, Any]]:
    """The best device x clock per objective (within --max-slowdown), as plain JSON values."""
    out = {}
    for objective, rank in OBJECTIVES.items():
        if df.empty or (objective != "time" and df["energy_j"].isna().all()):
            continue
        r = df.sort_values([rank, "time_s"]).iloc[0]
        clock = r["clock_mhz"]
        out[objective] = {
            "device_config": str(r["device_config"]),
            "clock_mhz": None if clock is None or clock != clock else float(clock),
            "clock_source": r["clock_source"],
            "time_s": float(r["time_s"]),
            "energy_j": None if r["energy_j"] is None or r["energy_j"] != r["energy_j"] else float(r["energy_j"]),
            "slowdown": float(r["slowdown"]),
        }
    return out


def _plot_sweeps(df: Any, target: Path, title: str) -> None:
    """Time, energy and EDP against the core clock, one line per device config (the U-curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from opcost.io import atomic_path

    if target.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise OpcostError(f"--plot {target}: the file name must end in .png, .pdf or .svg")
    swept = df[df["clock_mhz"].notna()]
    if swept.empty:
        raise OpcostError("--plot: no device config has clocks to sweep (no clock model and no measured sweep)")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for dev, g in swept.sort_values("clock_mhz").groupby("device_config"):
        for ax, col, scale in zip(axes, ("time_s", "energy_j", "edp_js"), (1e3, 1.0, 1.0)):
            (line,) = ax.plot(g["clock_mhz"], g[col].astype(float) * scale, "o-", ms=3, label=str(dev))
            lo, hi = {"time_s": ("time_lo_s", "time_hi_s"), "energy_j": ("energy_lo_j", "energy_hi_j")}.get(
                col, ("edp_lo_js", "edp_hi_js")
            )
            if lo in g and g[lo].notna().all():
                ax.fill_between(
                    g["clock_mhz"], g[lo].astype(float) * scale, g[hi].astype(float) * scale,
                    color=line.get_color(), alpha=0.15, lw=0,
                )  # fmt: skip
    for ax, label in zip(axes, ("time [ms]", "energy [J]", "EDP [J s]")):
        ax.set_xlabel("core clock [MHz]")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{title}; shaded: 90 % intervals", fontsize=9)
    fig.tight_layout()
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format=target.suffix.lower().lstrip("."))
    plt.close(fig)


def _parse_model_arg(text: str) -> ModelInputSet:
    """`resnet18:1,3,32,32` -> ModelInputSet."""
    from opcost.ops.models import check_model_name

    if ":" not in text:
        raise OpcostError(f"malformed --models {text!r}: expected MODEL:B,C,H,W, e.g. resnet18:1,3,32,32")
    name, shape = text.split(":", 1)
    return ModelInputSet(check_model_name(name), parse_input_shape(shape, f"--models {text!r} shape"))


def _parse_shard(text: str) -> tuple[int, int]:
    """`1/4` -> (1, 4): shard 1 of 4, 0-based."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise OpcostError(f"malformed --shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(m.group(1)), int(m.group(2))


@app.command()
def profile(
    campaign: Optional[str] = typer.Option(None, "--campaign", help="A campaign of params.yaml (profile.campaigns)."),
    device: str = typer.Option("cpu", "--device", help="Ad hoc: cpu or cuda:N."),
    mode: List[str] = typer.Option(["inference"], "--mode", help="Ad hoc: inference and/or training (repeat)."),
    models: List[str] = typer.Option([], "--models", help="Ad hoc: MODEL:B,C,H,W (repeat for several)."),
    min_time: float = typer.Option(0.2, "--min-time", help="Ad hoc: seconds per benchmark.Timer autorange."),
    window: Optional[float] = typer.Option(
        None, "--window", help="Ad hoc: seconds of the energy window (default 4 x --min-time)."
    ),
    trials: int = typer.Option(3, "--trials", help="Ad hoc: independent trials per op and setting."),
    energy_source: str = typer.Option("auto", "--energy-source", help="Ad hoc: auto, nvml, nvidia-smi, rapl or none."),
    clocks: List[int] = typer.Option([], "--clock", help="Ad hoc: core clock to sweep in MHz (repeat)."),
    power_limits: List[float] = typer.Option([], "--power-limit", help="Ad hoc: power limit to sweep in W (repeat)."),
    networks: bool = typer.Option(True, "--networks/--no-networks", help="Ad hoc: also measure the whole networks."),
    seed: int = typer.Option(0, "--seed"),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Ad hoc: CPU threads to measure on (default: as the process finds them)."
    ),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Ad hoc: output folder."),
    shard: Optional[str] = typer.Option(
        None, "--shard", help="With --campaign: measure only shard I/N (0-based) into parts; merge with --merge."
    ),
    merge: bool = typer.Option(False, "--merge", help="With --campaign: consolidate the shards' parts."),
    wait_for_device: bool = typer.Option(
        False,
        "--wait-for-device",
        help="With --shard: queue behind another process measuring on the same device (SLURM tasks on one node).",
    ),
    shards: Optional[int] = typer.Option(
        None, "--shards", help="With --merge: the shard count, to name missing shards (else from the shards' records)."
    ),
    remeasure: bool = typer.Option(False, "--remeasure", help="Measure again even if the output is complete."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its estimated duration; touch nothing."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """Measure operations (and whole networks): time, energy and the raw power log.

    Stage `profile@NAME` runs `opcost profile --campaign NAME` into data/raw/NAME/; a campaign
    already complete there (same plan, same measuring code) is not measured again. Without
    --campaign the options describe an ad-hoc campaign written to --out. Interrupted campaigns
    resume where they stopped. Exits 1 when every measurement failed; 130/143 on SIGINT/SIGTERM.
    """
    from opcost.cputhreads import pinned_threads
    from opcost.measure import profile as prof
    from opcost.measure.interrupts import RESUME_HINT, Interrupted
    from opcost.stages import profile as stage

    def check_flags() -> tuple[int, int] | None:
        if campaign is None and (shard is not None or merge or shards is not None):
            raise OpcostError("--shard and --merge work on a params.yaml campaign: add --campaign NAME")
        if shard is not None and merge:
            raise OpcostError("--shard measures one shard, --merge consolidates them: give one of the two")
        if shards is not None and not merge:
            raise OpcostError("--shards N goes with --merge (a shard run names its count in --shard I/N)")
        if shards is not None and shards < 1:
            raise OpcostError(f"--shards {shards}: expected a positive shard count")
        if wait_for_device and shard is None:
            raise OpcostError(
                "--wait-for-device goes with --shard I/N (a whole campaign fails at once on a busy device)"
            )
        if remeasure and (shard is not None or merge):
            raise OpcostError("--remeasure measures a whole campaign afresh; it does not go with --shard or --merge")
        return _parse_shard(shard) if shard is not None else None

    def adhoc() -> CampaignMeta | PlanSummary:
        if not models:
            raise OpcostError("give --campaign NAME, or --models MODEL:B,C,H,W (with --out DIR) for an ad-hoc campaign")
        sets = [_parse_model_arg(m) for m in models]
        if out_dir is None and not dry_run:
            raise OpcostError("an ad-hoc campaign needs --out DIR for its results")
        if out_dir is not None:
            from opcost.outputs import check_output_dir

            check_output_dir(out_dir, "--out")
        c = CampaignParams(
            name=(out_dir.name if out_dir else "adhoc"),
            device=device,
            modes=tuple(dict.fromkeys(mode)),
            sets=tuple(s.set_id for s in sets),
            networks=networks,
            clocks_mhz=tuple(clocks),
            power_limits_w=tuple(power_limits),
            trials=trials,
            min_time_s=min_time,
            window_s=window if window is not None else 4 * min_time,
            energy_source=energy_source,
            seed=seed,
            threads=threads,
        )
        c.check("command line")
        with pinned_threads(c.threads):  # a campaign's `threads`, as the profile stage applies it
            return prof.run_adhoc(c, sets, out_dir or Path("."), dry_run, not no_progress, remeasure)

    def staged(paths: Paths, params: Any) -> CampaignMeta | PlanSummary | ShardResult | ShardPlanSummary:
        assert campaign is not None
        which = check_flags()
        if which is not None:
            return stage.run_shard(paths, params, campaign, *which, dry_run, not no_progress, wait_for_device)
        if merge and not dry_run:
            return stage.merge(paths, params, campaign, shards)
        return stage.run(paths, params, campaign, dry_run, not no_progress, remeasure)

    try:
        if campaign is not None:
            result = _stage(staged)
        else:
            _run(check_flags)
            result = _run(adhoc)
    except Interrupted as exc:  # clocks are back, finished parts kept
        err.print(RESUME_HINT, highlight=False, markup=False)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:  # Ctrl-C before or after the measuring loop
        err.print(RESUME_HINT, highlight=False, markup=False)
        raise typer.Exit(130) from None
    if dry_run:
        out.print_json(data=result)
        return
    assert "rows" in result  # a measuring run's result, not a dry run's plan
    _profile_outcome(result)


def _profile_outcome(result: CampaignMeta | ShardResult | VisitResult, *extra: str) -> None:
    """A finished profile or visit: its summary line (and `extra` lines), then exit 1 where it failed."""
    from opcost.stages import profile as stage

    out.print(stage.summary(result), highlight=False, soft_wrap=True)
    for line in extra:
        out.print(line, highlight=False, soft_wrap=True)
    failure = stage.failure(result)
    if failure is not None:
        err.print(f"[bold red]error:[/] {escape(failure)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command()
def visit(
    campaign: str = typer.Option(..., "--campaign", help="A CUDA campaign of params.yaml, e.g. visit-h200."),
    archive: Path = typer.Option(..., "--out", help="The archive to write (.tar.gz, at most 16 MB)."),
    work: Optional[Path] = typer.Option(
        None, "--work", help="Where the campaign runs and resumes (default: ARCHIVE's folder/.visit)."
    ),
    check_seconds: float = typer.Option(10.0, "--check-seconds", help="Seconds of the energy-counter check."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its estimated duration; touch nothing."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw a progress bar."),
) -> None:
    """A GPU visit in one command: check the environment, run the 10 s energy-counter check, run the campaign,
    pack everything into one archive for `opcost land` on the DVC machine. Needs neither DVC nor MLflow.

    Resumes where it stopped when run again with the same --out. Exits 1 when every measurement failed or
    every energy row is flagged (the line says which window would have met the bound)."""
    from opcost.measure import visit as v
    from opcost.measure.interrupts import RESUME_HINT, Interrupted

    def go(paths: Paths, params: Any) -> VisitResult | PlanSummary:
        if campaign not in params.profile.campaigns:
            valid = ", ".join(sorted(params.profile.campaigns)) or "none defined"
            raise OpcostError(f"unknown campaign {campaign!r}; campaigns in params.yaml: {valid}")
        if not archive.name.endswith(".tar.gz"):
            raise OpcostError(f"--out {archive}: a visit archive is a .tar.gz file, e.g. {campaign}.tar.gz")
        c = params.profile.campaigns[campaign]
        extracted = (paths.operations, paths.occurrences)
        if dry_run:
            return v.visit_plan(c, list(params.extract.sets), extracted).summary()
        from opcost.outputs import check_output_file

        check_output_file(archive, "--out")  # before the campaign: /proc/x.tar.gz is one line, not a lost visit
        folder = work or archive.parent / ".visit"
        return v.run_visit(
            c, list(params.extract.sets), archive, folder, check_seconds, not no_progress, out.print, extracted
        )

    try:
        result = _stage(go)
    except Interrupted as exc:
        err.print(RESUME_HINT, highlight=False, markup=False)
        raise typer.Exit(exc.exit_code) from None
    if dry_run:
        out.print_json(data=result)
        return
    assert "rows" in result  # a measuring run's result, not a dry run's plan
    _profile_outcome(
        result,
        f"wrote {result['archive']} ({result['archive_bytes'] / 2**20:.1f} MB) in {result['visit_seconds']:.0f} s",
    )


@app.command()
def land(
    source: Path = typer.Argument(..., help="A visit archive (.tar.gz) or a campaign folder measured elsewhere."),
    campaign: Optional[str] = typer.Option(
        None, "--campaign", help="The params.yaml campaign it lands as (default: the one it was measured as)."
    ),
) -> None:
    """Land a campaign measured elsewhere as data/raw/CAMPAIGN/, checked against its params.yaml entry, so that
    `dvc repro profile@CAMPAIGN` records it as complete (then `dvc push` and commit dvc.lock)."""
    from opcost.measure.land import land as do_land
    from opcost.measure.land import read_source
    from opcost.stages import profile as stage

    def go(paths: Paths, params: Any) -> LandResult:
        name = campaign
        if name is None:
            files, _ = read_source(source)
            try:
                name = str(json.loads(files["campaign.json"]).get("campaign"))
            except (ValueError, AttributeError):
                raise OpcostError(f"{source}: campaign.json is not a JSON object") from None
        if name not in params.profile.campaigns:
            valid = ", ".join(sorted(params.profile.campaigns)) or "none defined"
            raise OpcostError(
                f"{source} is campaign {name!r}, which params.yaml does not define (give --campaign NAME): {valid}"
            )
        plan = stage.stage_plan(paths, params, name) if paths.operations.is_file() else None
        return do_land(source, paths.raw_dir(name), params.profile.campaigns[name], plan)

    r = _stage(go)
    note = f"; on landing: {', '.join(r['landed']['rederived'])}" if r["landed"]["rederived"] else ""
    out.print(
        f"landed {r['campaign']} in {r['folder']}: {r['rows']} energy rows, {r['flagged']} flagged{note}; next: "
        f"dvc repro profile@{r['campaign']}, dvc push, git commit dvc.lock",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def devices(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The device table: each GPU's specs, what the project measured on it (ops, networks, clock sweeps,
    power data) and how its predictions are made (own measurements, transferred, none yet)."""
    from opcost.devicelist import device_list

    rows = _run(lambda: device_list(Paths(find_root())), as_json)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    spec = Table(title=f"{len(rows)} GPUs (opcost/devices.py): dense peaks at boost, TFLOP/s FP32 / TF32 / FP16")
    for col in ("key", "arch", "CC", "SMs", "boost MHz", "TFLOP/s", "GiB", "GB/s", "L2 MiB", "TDP W"):
        spec.add_column(escape(col), no_wrap=True)
    held = Table(title="what the project holds per GPU, and how it predicts for it")
    for col in ("key", "ops", "networks", "sweep rows", "power rows", "predictions"):
        held.add_column(escape(col), no_wrap=True)
    for r in rows:
        tf32 = "-" if r["tf32_tflops"] is None else f"{r['tf32_tflops']:.3g}"
        spec.add_row(
            r["key"], r["architecture"], r["compute_capability"], str(r["sms"]), f"{r['boost_clock_mhz']:g}",
            f"{r['fp32_tflops']:.3g} / {tf32} / {r['fp16_tflops']:.3g}", f"{r['memory_gib']:.0f}",
            f"{r['bandwidth_gbs']:g}", f"{r['l2_mib']:g}", f"{r['tdp_w']:g}",
        )  # fmt: skip
        counts = ("measured_ops", "measured_networks", "clock_sweep_rows", "power_rows")
        held.add_row(r["key"], *("n/a" if r[k] is None else str(r[k]) for k in counts), r["predictions"])
    out.print(spec)
    out.print(held)


@app.command("restore-device")
def restore_device(
    device: str = typer.Option("cuda:0", "--device", help="The GPU to restore: cuda:N."),
) -> None:
    """Put back the clocks and power limit that a killed campaign left changed on a GPU.

    Campaigns save a GPU's original state machine-wide (beside the device locks) before changing it and restore
    it themselves, even on SIGINT/SIGTERM; only SIGKILL (or a crash) leaves it changed. The next
    campaign on that GPU restores it first; this verb does it now. Takes the GPU's lock, so it never
    runs under a campaign that is measuring.
    """
    from opcost.locks import device_state_dir
    from opcost.measure.clocks import restore_device as restore

    def go() -> str:
        m = re.fullmatch(r"cuda(?::(\d+))?", device)
        if not m:
            raise OpcostError(f"--device {device!r}: expected cuda:N, e.g. cuda:0 (only GPUs have clocks to restore)")
        return restore(device_state_dir(), int(m.group(1) or 0))

    out.print(_run(go), highlight=False, soft_wrap=True)


@app.command()
def submit(
    campaign: str = typer.Option(..., "--campaign", help="A campaign of params.yaml (profile.campaigns)."),
    shards: Optional[int] = typer.Option(None, "--shards", help="Array tasks the campaign is split into."),
    throttle: Optional[int] = typer.Option(None, "--throttle", help="At most this many tasks at once (%N)."),
    partition: Optional[str] = typer.Option(None, "--partition", help="SLURM partition."),
    account: Optional[str] = typer.Option(None, "--account", help="SLURM account."),
    time_limit: Optional[str] = typer.Option(None, "--time", help="Time limit per task, e.g. 02:00:00."),
    gres: Optional[str] = typer.Option(None, "--gres", help="GRES per task of a CUDA campaign (default gpu:1)."),
    cpus: Optional[int] = typer.Option(None, "--cpus", help="CPUs per task."),
    mem: Optional[str] = typer.Option(None, "--mem", help="Memory per task, e.g. 16G."),
    python: Optional[str] = typer.Option(None, "--python", help="Python the jobs run (default: this one)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the job scripts; submit nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run a campaign on a SLURM cluster: a job array (one shard of ops per task) and a merge job after it.

    Options default to params.yaml `profile.slurm` (and its `campaigns.NAME` overrides). Submitting
    again measures only what is missing. `opcost status --campaign NAME` follows the shards.
    """
    from opcost.slurm.submit import submit as do_submit

    flags = {
        "shards": shards,
        "throttle": throttle,
        "partition": partition,
        "account": account,
        "time": time_limit,
        "gres": gres,
        "cpus_per_task": cpus,
        "mem": mem,
    }
    r = _stage(lambda paths, params: do_submit(paths, params, campaign, flags, python, dry_run), as_json)
    if as_json:
        sys.stdout.write(finite_json(r) + "\n")
    elif r["complete"]:
        out.print(f"campaign {campaign} is complete in data/raw/{campaign}: nothing to submit")
    elif dry_run:
        for kind, text in r["scripts"].items():
            out.print(f"# --- {kind} job ---", highlight=False)
            out.print(escape(text), highlight=False, end="")
    else:
        done = f"; shards {', '.join(map(str, r['done_shards']))} already measured" if r["done_shards"] else ""
        array = (
            f"array job {r['array_job']} (shards {', '.join(map(str, r['tasks']))} of {r['shards']})"
            if (r["array_job"])
            else "no array job (every shard is measured)"
        )
        out.print(f"campaign {campaign}: {array}, merge job {r['merge_job']}{done}", highlight=False)


@app.command()
def status(
    campaign: str = typer.Option(..., "--campaign", help="A campaign of params.yaml (profile.campaigns)."),
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Per shard of a submitted campaign: pending, running, done or failed (with the error), and the merge job."""
    from opcost.slurm.submit import status as get_status

    s = _stage(lambda paths, params: get_status(paths, params, campaign), as_json)
    if as_json:
        sys.stdout.write(finite_json(s) + "\n")
        return
    table = Table(title=f"campaign {campaign}: {s['shards']} shards, {s['submissions']} submission(s)")
    for col in ("shard", "state", "parts", "failed rows", "job", "error"):
        table.add_column(col, no_wrap=col != "error")
    colour = {"done": "green", "failed": "red", "running": "cyan", "pending": "yellow"}
    for r in s["rows"]:
        st = r["state"]
        table.add_row(
            str(r["shard"]),
            f"[{colour[st]}]{st}[/]" if st in colour else st,
            f"{r['parts_done']}/{r['parts_total']}",
            str(r["failed_rows"]),
            r["job"] or "",
            escape(r["error"] or ""),
        )
    out.print(table)
    m = s["merge"]
    if s["complete"]:
        out.print(f"merged: data/raw/{campaign} is complete")
    elif m:
        err = f": {escape(m['error'])}" if m["error"] else ""
        out.print(f"merge job {m['job']}: {m['detail'] or m['state']}{err}", highlight=False)
    else:
        out.print(f"not submitted: `opcost submit --campaign {campaign}`")


def main() -> None:
    from opcost.numerics import pin_numpy_kernels

    pin_numpy_kernels()  # before anything imports numpy: the same numbers as the stages on any CPU
    app()


if __name__ == "__main__":
    main()
