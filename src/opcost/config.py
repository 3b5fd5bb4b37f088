"""Parameters and paths: the one place that knows where things live and what params.yaml holds.

`params.yaml` is read into frozen dataclasses so stages get typed, validated values; every file
path a stage reads or writes is a property of `Paths`, so `dvc.yaml` and the code cannot drift
apart silently (tests compare them).

The repository root is found without relying on where the package is installed, because under
`dvc exp run --temp` and `--queue` the stage runs in a copy of the repository: inside a DVC stage
(`DVC_ROOT` set) the nearest parent of the stage's working directory that holds `dvc.yaml`; else
`OPCOST_ROOT`, then that same nearest parent, else the working directory. `DVC_ROOT` itself names
the user's workspace in temp and queued executors, never the copy, so it only locates the shared
MLflow store (model/tracking.py).

params.yaml is validated strictly, because a typo there silently changes what a stage does: an
unknown key at any level is an error naming the key, where it is and the closest valid key; a
value of the wrong type (a string or bool where a number goes), NaN, infinity, a non-positive
duration or count, a duplicated key, is a one-line error. Names that become paths (campaigns,
ingest sources, train targets, model names in set ids) use only `[A-Za-z0-9_.-]`, never `..` or a
leading dot, and a source's path stays inside data/external/.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Sequence

import yaml

from opcost.errors import OpcostError

MODES: tuple[str, ...] = ("inference", "training")


def check_mode(mode: str) -> str:
    """`mode` if it is one of MODES, else the one error every entry point gives."""
    if mode not in MODES:
        raise OpcostError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    return mode


# The measured phase an op model of each mode predicts: a training step runs forward and backward.
OP_PHASE: dict[str, str] = {"inference": "forward", "training": "forward_backward"}
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
INPUT_SHAPE_HELP = "B,C,H,W: four positive integers, e.g. 32,3,224,224"


# --------------------------------------------------------------------------------------------
# Strict checks of params.yaml values: one-line errors that say where, what and what is valid.
# --------------------------------------------------------------------------------------------

SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# A set id (ModelInputSet.set_id): a torchvision name or a user's `module:callable(args)`, the shape, options.
SET_ID = re.compile(
    r"(?P<model>[A-Za-z0-9_.-]+|[A-Za-z0-9_./-]+:[A-Za-z_][A-Za-z0-9_.]*(?:\([^()]*\))?)"
    r":[0-9]+(?:x[0-9]+)*(?::(?P<dtype>[a-z0-9]+))?(?::(?:input|vocab)=[a-z0-9]+)*"
)
OP_ID = re.compile(r"[0-9a-f]{16}")
EXTERNAL_DIR = ("data", "external")


def check_name(name: Any, where: str, what: str) -> str:
    """A name that becomes part of a path: `[A-Za-z0-9_.-]`, no leading dot, no `..`."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or name.startswith(".") or ".." in name:
        raise OpcostError(
            f"{where}: {what} {name!r} may use only letters, digits, '_', '.' and '-', without a leading dot "
            "or '..' (it becomes part of a file path)"
        )
    return name


def check_keys(raw: dict, valid: Sequence[str], where: str, notes: dict[str, str] | None = None) -> None:
    """Every key of `raw` is one of `valid`; the error names the closest valid key (difflib), and
    why the key is not taken where `notes` says."""
    for key in raw:
        if key not in valid:
            closest = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.0)
            hint = f"closest valid key: {closest[0]!r}; " if closest else ""
            note = f"; {notes[key]}" if notes and key in notes else ""
            raise OpcostError(f"{where}: unknown key {key!r} ({hint}valid keys: {', '.join(valid)}){note}")


def mapping(raw: Any, where: str, what: str = "a mapping") -> dict:
    """A YAML mapping (None, an empty section, counts as empty)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise OpcostError(f"{where}: expected {what}, got {type(raw).__name__} {raw!r}")
    return raw


def as_int(v: Any, where: str, lo: int | None = None) -> int:
    """An integer (not a bool, not a float, not a string), at least `lo`."""
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo):
        bound = f" >= {lo}" if lo is not None else ""
        raise OpcostError(f"{where}: expected an integer{bound}, got {v!r}")
    return v


def as_number(
    v: Any,
    where: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite number (int or float, not a bool or string) in [lo, hi] (open ends where asked)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v < hi if hi_open else v <= hi
    if not ok:
        left = "" if lo is None else f"{'>' if lo_open else '>='} {lo:g}"
        right = "" if hi is None else f"{'<' if hi_open else '<='} {hi:g}"
        rng = " and ".join(x for x in (left, right) if x)
        raise OpcostError(f"{where}: expected a finite number{' ' + rng if rng else ''}, got {v!r}")
    return float(v)


def as_positive(v: Any, where: str) -> float:
    """A duration, size or rate: finite and > 0."""
    return as_number(v, where, lo=0, lo_open=True)


def as_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise OpcostError(f"{where}: expected true or false, got {v!r}")
    return v


def as_str(v: Any, where: str, choices: Sequence[str] | None = None) -> str:
    if not isinstance(v, str) or not v or (choices is not None and v not in choices):
        valid = f"one of {', '.join(choices)}" if choices is not None else "a non-empty string"
        raise OpcostError(f"{where}: expected {valid}, got {v!r}")
    return v


def as_list(v: Any, where: str, item: Callable[[Any, str], Any]) -> tuple:
    """A list (a single value counts as a list of one), each item checked by `item`."""
    items = v if isinstance(v, (list, tuple)) else [v]
    return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(items))


def check_external_path(v: Any, where: str) -> str:
    """A source path: relative, inside data/external/, made of safe names (no `..`, no leading dot)."""
    if not isinstance(v, str) or not v or "\\" in v:
        raise OpcostError(f"{where}: expected a path inside data/external/, got {v!r}")
    p = PurePosixPath(v)
    parts = p.parts
    if p.is_absolute() or parts[:2] != EXTERNAL_DIR or len(parts) < 3:
        raise OpcostError(f"{where}: path {v!r} must lie inside data/external/ (e.g. data/external/<source>)")
    for part in parts[2:]:
        check_name(part, where, "path component")
    return str(p)


def find_root(start: Path | None = None) -> Path:
    """The repository root (see module docstring for the order of precedence). Inside a DVC stage
    the working directory decides: `DVC_ROOT` (and an inherited `OPCOST_ROOT`) may name the user's
    workspace while the stage runs in an experiment's copy."""
    if os.environ.get("OPCOST_ROOT") and not os.environ.get("DVC_ROOT"):
        return Path(os.environ["OPCOST_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").is_file():
            return candidate
    return here


@dataclass(frozen=True)
class Paths:
    """Every path a stage reads or writes, relative to one root."""

    root: Path

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def extract_sets(self) -> Path:
        """The model-input sets extract traces (a dependency of extract, not a params file: exp show stays narrow)."""
        return self.root / "sets.yaml"

    @property
    def operations_dir(self) -> Path:
        return self.root / "data" / "operations"

    @property
    def operations(self) -> Path:
        return self.operations_dir / "operations.parquet"

    @property
    def occurrences(self) -> Path:
        return self.operations_dir / "occurrences.parquet"

    @property
    def extract_report_dir(self) -> Path:
        return self.root / "reports" / "extract"

    @property
    def extract_coverage(self) -> Path:
        """Per-set coverage detail (not a DVC metrics file: too many columns)."""
        return self.extract_report_dir / "coverage.json"

    @property
    def extract_summary(self) -> Path:
        """Headline figures of extract (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.extract_report_dir / "summary.json"

    def raw_dir(self, campaign: str) -> Path:
        """DVC output of `profile@<campaign>`: timings, power samples, networks, campaign.json."""
        return self.root / "data" / "raw" / campaign

    def ingested_dir(self, source: str) -> Path:
        """DVC output of `ingest@<source>`."""
        return self.root / "data" / "ingested" / source

    @property
    def raw_root(self) -> Path:
        return self.root / "data" / "raw"

    @property
    def ingested_root(self) -> Path:
        return self.root / "data" / "ingested"

    @property
    def evaluated_dir(self) -> Path:
        return self.root / "data" / "evaluated"

    @property
    def evaluated_operations(self) -> Path:
        return self.evaluated_dir / "operations.parquet"

    @property
    def evaluated_networks(self) -> Path:
        return self.evaluated_dir / "networks.parquet"

    @property
    def evaluated_sweeps(self) -> Path:
        return self.evaluated_dir / "sweeps.parquet"

    @property
    def evaluated_targets_dir(self) -> Path:
        return self.evaluated_dir / "targets"

    def target_operations(self, target: str) -> Path:
        """What `train@<target>` reads: that device config and mode's rows, specs joined in."""
        return self.evaluated_targets_dir / target / "operations.parquet"

    def target_networks(self, target: str) -> Path:
        """The networks measured on that device config and mode (composition layer)."""
        return self.evaluated_targets_dir / target / "networks.parquet"

    def target_network_ops(self, target: str) -> Path:
        """Every op those networks call, with calls and spec."""
        return self.evaluated_targets_dir / target / "network_ops.parquet"

    @property
    def evaluate_summary(self) -> Path:
        """Headline figures of evaluate (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.root / "reports" / "evaluate" / "summary.json"

    @property
    def ingest_report_dir(self) -> Path:
        return self.root / "reports" / "ingest"

    @property
    def ingest_summary(self) -> Path:
        return self.ingest_report_dir / "summary.json"

    @property
    def ingest_coverage(self) -> Path:
        return self.ingest_report_dir / "coverage.json"

    def model_dir(self, target: str) -> Path:
        """DVC output of `train@<target>`: the bundle and its summary."""
        return self.root / "models" / target

    def train_metrics(self, target: str | None = None) -> Path:
        """Per-target metrics of one train stage, or (None) all targets' headline figures (a plain output)."""
        base = self.root / "reports" / "train"
        return base / "metrics.json" if target is None else base / "targets" / f"{target}.json"

    @property
    def headline_metrics(self) -> Path:
        """The one DVC metrics file (stage views): a few headline figures, fits a terminal."""
        return self.root / "reports" / "metrics.json"

    @property
    def plots_dir(self) -> Path:
        """Image plots (stage views) that `dvc plots show` embeds without loading anything."""
        return self.root / "reports" / "plots"

    @property
    def clock_model_dir(self) -> Path:
        """DVC output of `train-clock`: the transferred clock model (JSON) and its run record."""
        return self.root / "models" / "clock"

    @property
    def xdevice_model_dir(self) -> Path:
        """DVC output of `train-xdevice`: the cross-device op model (JSON + npz) and its run record."""
        return self.root / "models" / "xdevice"

    @property
    def xdevice_report_dir(self) -> Path:
        """logo_ops.csv, logo_networks.csv and metrics.json of `train-xdevice`."""
        return self.root / "reports" / "xdevice"

    @property
    def xdevice_metrics(self) -> Path:
        """Headline leave-one-GPU-out figures of the cross-device model, declared as DVC metrics."""
        return self.xdevice_report_dir / "metrics.json"

    def xdevice_table(self, name: str) -> Path:
        """logo_ops (per held-out GPU x op group) and logo_networks (every held-out network), CSV."""
        return self.xdevice_report_dir / f"{name}.csv"

    @property
    def clock_report_dir(self) -> Path:
        return self.root / "reports" / "clock"

    @property
    def clock_metrics(self) -> Path:
        """Headline leave-one-GPU-out figures of the clock model (a plain output, condensed by stage views)."""
        return self.clock_report_dir / "metrics.json"

    def clock_table(self, name: str) -> Path:
        """Detail beside the clock metrics, CSV: logo, loko (per GPU x source), curves (per curve) and
        logo_points (every measured clock point with its leave-one-GPU-out prediction)."""
        return self.clock_report_dir / f"{name}.csv"

    @property
    def clock_detail(self) -> Path:
        return self.clock_report_dir / "detail.json"

    @property
    def clock_figures(self) -> Path:
        return self.clock_report_dir / "figures"

    @property
    def xpower_model_dir(self) -> Path:
        """DVC output of `train-clock`: the cross-device power model (JSON, model/xpower.py) and its run record."""
        return self.root / "models" / "xpower"

    @property
    def xpower_report_dir(self) -> Path:
        """Leave-one-GPU-out power and energy of the power model: metrics.json (DVC metrics), logo.csv."""
        return self.root / "reports" / "xpower"

    def train_networks(self, target: str) -> Path:
        """The target's measured networks predicted leave-one-network-out and -family-out (CSV)."""
        return self.root / "reports" / "train" / "networks" / f"{target}.csv"

    @property
    def train_report_dir(self) -> Path:
        return self.root / "reports" / "train"

    @property
    def validate_dir(self) -> Path:
        return self.root / "reports" / "validate"

    @property
    def validate_figures(self) -> Path:
        return self.validate_dir / "figures"

    @property
    def validate_metrics(self) -> Path:
        """Headline figures of validate (a plain output; the DVC metrics file is reports/metrics.json)."""
        return self.validate_dir / "metrics.json"

    @property
    def validate_detail(self) -> Path:
        """Every summary validate computes (not DVC metrics: too many columns)."""
        return self.validate_dir / "detail.json"

    @property
    def predictor_latency(self) -> Path:
        """Written by bench/predictor_latency.py; an input of validate."""
        return self.root / "reports" / "bench" / "predictor_latency.json"

    @property
    def report_index(self) -> Path:
        return self.root / "reports" / "index.md"

    def parts_dir(self, campaign: str) -> Path:
        """Per-unit results of a running campaign (git- and DVC-ignored), what a restart resumes from."""
        return self.root / ".opcost" / "parts" / campaign

    def slurm_record(self, campaign: str) -> Path:
        """What `opcost submit` sent to SLURM for a campaign (job ids, shards, times); read by `opcost status`."""
        return self.root / ".opcost" / "slurm" / f"{campaign}.json"

    def slurm_dir(self, campaign: str) -> Path:
        """A campaign's job scripts, task logs and task job ids (on the file system the nodes share)."""
        return self.root / ".opcost" / "slurm" / campaign


def parse_input_shape(value: str | Sequence[Any], what: str = "input shape") -> tuple[int, ...]:
    """Parse `32,3,224,224` (or a list of ints) into a 4-tuple of positive ints, or fail clearly."""
    raw = value
    if isinstance(value, str):
        parts = [p.strip() for p in value.replace("x", ",").split(",")]
        if any(p == "" for p in parts):
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
        try:
            items: list[Any] = [int(p) for p in parts]
        except ValueError:
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}") from None
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    if len(items) != 4 or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in items):
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    return tuple(items)


def shape_text(shape: Iterable[int]) -> str:
    """`(32, 3, 224, 224)` -> `32x3x224x224`, the spelling used in set ids and file names."""
    return "x".join(str(int(s)) for s in shape)


@dataclass(frozen=True)
class ModelInputSet:
    """A network at one input shape and dtype, extracted for one or more modes.

    `model` is a torchvision model name, or a user's network as `opcost predict --model` takes it:
    `package.module:callable` or `path/to/file.py:callable` (ops/netspec.py builds both, one home),
    with `model_args` as its builder's keyword arguments. A torchvision image model takes a 4-D
    input; a user's network any N-D one (`[batch, time, features]` for a batch-first LSTM), and an
    integer-token model says so with `input_dtype` (and `vocab`, the bound token ids stay below).
    """

    model: str
    input_shape: tuple[int, ...]
    dtype: str = "float32"  # the parameters' dtype (and the input's, unless input_dtype says otherwise)
    modes: tuple[str, ...] = ("inference",)
    model_args: tuple[tuple[str, Any], ...] = ()
    input_dtype: str | None = None  # None: the same as dtype
    vocab: int | None = None

    @property
    def is_user(self) -> bool:
        """A user's network (`module:callable`, `file.py:callable`), not a torchvision name."""
        return ":" in self.model

    @property
    def label(self) -> str:
        """The model and its builder's arguments: `networks/recurrent.py:lstm(layers=2)`."""
        if not self.model_args:
            return self.model
        args = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in self.model_args)
        return f"{self.model}({args})"

    @property
    def set_id(self) -> str:
        """Stable, readable id: `resnet18:32x3x224x224`, then the dtype unless float32, the input's dtype
        where it differs (`input=int64`) and its token bound (`vocab=N`)."""
        extra = [self.dtype] if self.dtype != "float32" else []
        if self.input_dtype is not None and self.input_dtype != self.dtype:
            extra.append(f"input={self.input_dtype}")
        if self.vocab is not None:
            extra.append(f"vocab={self.vocab}")
        return ":".join([f"{self.label}:{shape_text(self.input_shape)}", *extra])

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ModelInputSet":
        if not isinstance(raw, dict) or "model" not in raw or "input_shape" not in raw:
            raise OpcostError(f"{where}: expected a mapping with 'model' and 'input_shape', got {raw!r}")
        check_keys(raw, SET_KEYS, where)
        model = raw["model"]
        if not isinstance(model, str) or not model:
            raise OpcostError(f"{where}: 'model' must be a torchvision model name or module:callable, got {model!r}")
        user = ":" in model
        if user:
            check_user_model(model, where)
        else:
            check_name(model, where, "model")
        shape = _set_shape(raw["input_shape"], f"{where} input_shape", any_rank=user)
        dtype = raw.get("dtype", "float32")
        if dtype not in DTYPES:
            raise OpcostError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        input_dtype = raw.get("input_dtype")
        vocab = raw.get("vocab")
        if input_dtype is not None or vocab is not None:
            if not user:
                raise OpcostError(f"{where}: input_dtype and vocab are for a user's network (module:callable)")
            if input_dtype is not None and input_dtype not in DTYPES + INT_DTYPES:
                raise OpcostError(
                    f"{where}: input_dtype {input_dtype!r} is not one of {', '.join(DTYPES + INT_DTYPES)}"
                )
            if vocab is not None and (input_dtype not in INT_DTYPES or input_dtype == "bool"):
                raise OpcostError(f"{where}: vocab applies to an integer input: give input_dtype: int64 with it")
            if vocab is not None:
                as_int(vocab, f"{where}.vocab", lo=1)
        args = mapping(raw.get("model_args"), f"{where}.model_args", "a mapping of the builder's keyword arguments")
        if args and not user:
            raise OpcostError(f"{where}: model_args are for a user's network (module:callable)")
        for k, v in args.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise OpcostError(f"{where}.model_args: {k!r} is not a keyword argument name")
            _check_arg_value(v, f"{where}.model_args.{k}")
        modes = raw.get("modes", ["inference"])
        if isinstance(modes, str):
            modes = [modes]
        if not isinstance(modes, list) or not modes or any(m not in MODES for m in modes):
            raise OpcostError(f"{where}: modes {modes!r} must be a non-empty list of {', '.join(MODES)}")
        return cls(
            model=model,
            input_shape=shape,
            dtype=dtype,
            modes=tuple(dict.fromkeys(modes)),
            model_args=tuple(sorted(args.items())),
            input_dtype=None if input_dtype in (None, dtype) else input_dtype,
            vocab=vocab,
        )


# Keys of one extract set; integer inputs a user's network may take (ops/netspec.py builds the tensors).
SET_KEYS = ("model", "input_shape", "dtype", "modes", "model_args", "input_dtype", "vocab")
INT_DTYPES: tuple[str, ...] = ("int64", "int32", "int16", "int8", "uint8", "bool")
USER_MODEL = re.compile(r"[A-Za-z0-9_./-]+:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_user_model(model: str, where: str) -> str:
    """`package.module:callable` or `path/to/file.py:callable` (relative: a set file travels with the repository)."""
    if not USER_MODEL.fullmatch(model) or model.startswith("/"):
        raise OpcostError(
            f"{where}: model {model!r} is neither a torchvision name nor package.module:callable or "
            "path/to/file.py:callable (a relative path)"
        )
    return model


def _check_arg_value(v: Any, where: str) -> None:
    """A builder argument: a YAML scalar (finite number, string, bool, null) or a list of them."""
    items = v if isinstance(v, list) else [v]
    for x in items:
        if x is not None and not isinstance(x, (str, bool, int, float)):
            raise OpcostError(f"{where}: expected a number, string, true/false or a list of them, got {v!r}")
        if isinstance(x, float) and not math.isfinite(x):
            raise OpcostError(f"{where}: expected a finite number, got {v!r}")


def _set_shape(value: Any, what: str, any_rank: bool) -> tuple[int, ...]:
    """An image model's B,C,H,W (parse_input_shape), or for a user's network any 1..8 positive ints."""
    if not any_rank:
        return parse_input_shape(value, what)
    items = list(value) if isinstance(value, (list, tuple)) else None
    if (
        items is None
        or not 1 <= len(items) <= 8
        or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in items)
    ):
        raise OpcostError(f"malformed {what} {value!r}: expected a list of 1 to 8 positive integers, e.g. [16, 8, 32]")
    return tuple(items)


@dataclass(frozen=True)
class ExtractParams:
    """The model-input sets extract traces. They live in their own file (Paths.extract_sets, not a DVC
    params file), so `dvc exp show` lists one dependency for them instead of a column per set."""

    sets: tuple[ModelInputSet, ...] = field(default_factory=tuple)

    @classmethod
    def load(cls, sets_file: Path, inline: Any, params_name: str) -> "ExtractParams":
        """The sets of `sets_file` (a mapping with `sets:`), else (a small test root without one) the
        `extract.sets` of params.yaml; both at once is an error, so no set is silently ignored."""
        ex = mapping(inline, f"{params_name}: extract")
        check_keys(ex, ("sets",), f"{params_name}: extract")
        if sets_file.is_file():
            if "sets" in ex:
                raise OpcostError(
                    f"{params_name}: extract.sets is given, and so is {sets_file.name}: keep the sets in "
                    f"{sets_file.name} only"
                )
            f = sets_file.name
            try:
                raw = yaml.load(sets_file.read_text(), Loader=_StrictLoader)
            except OpcostError as exc:
                raise OpcostError(f"{f}: {exc}") from None
            except (yaml.YAMLError, UnicodeDecodeError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise OpcostError(f"{f} is not valid YAML: {first}") from None
            raw = mapping(raw, f, "a mapping with 'sets'")
            check_keys(raw, ("sets",), f"{f} (top level)")
            raw_sets, where = raw.get("sets") or [], f"{f}: sets"
        else:
            raw_sets, where = ex.get("sets") or [], f"{params_name}: extract.sets"
        if not isinstance(raw_sets, list):
            raise OpcostError(f"{where} must be a list of model-input sets")
        sets = tuple(ModelInputSet.from_dict(s, f"{where}[{i}]") for i, s in enumerate(raw_sets))
        ids = [s.set_id for s in sets]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise OpcostError(f"{where} lists {', '.join(dupes)} more than once; merge their modes")
        return cls(sets=sets)


ENERGY_SOURCES: tuple[str, ...] = ("auto", "nvml", "nvidia-smi", "rapl", "none")
DEVICE = re.compile(r"cpu|cuda(?::(?:[0-9]|[1-5][0-9]|6[0-3]))?")


@dataclass(frozen=True)
class CampaignParams:
    """One profiling campaign: where, what, which settings, how long and how often."""

    name: str
    device: str = "cpu"
    modes: tuple[str, ...] = ("inference",)
    sets: tuple[str, ...] = ()  # model-input set ids from extract (their ops)
    op_ids: tuple[str, ...] = ()  # single ops from operations.parquet
    networks: bool = True  # also measure the sets' whole networks
    clocks_mhz: tuple[int, ...] = ()
    power_limits_w: tuple[float, ...] = ()
    trials: int = 3
    min_time_s: float = 0.2  # benchmark.Timer.blocked_autorange(min_run_time)
    window_s: float = 2.0  # energy window per trial
    chunks: int = 5  # checkpoints in the window for the proportionality fit
    energy_source: str = "auto"
    sample_interval_s: float = 0.02
    seed: int = 0
    max_instances: int = 16
    instance_budget_mb: float = 256.0

    @classmethod
    def from_dict(cls, name: str, raw: Any, where: str) -> "CampaignParams":
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: a campaign must be a mapping of its settings, got {raw!r}")
        check_keys(raw, [f.name for f in fields(cls) if f.name != "name"], where)
        kw: dict[str, Any] = {key: CAMPAIGN_FIELDS[key](v, f"{where}.{key}") for key, v in raw.items()}
        c = cls(name=name, **kw)
        c.check(where)
        for i, s in enumerate(c.sets):
            m = SET_ID.fullmatch(s)
            if not m or (m.group("dtype") and m.group("dtype") not in DTYPES):
                raise OpcostError(
                    f"{where}.sets[{i}]: {s!r} is not a model-input set id such as resnet18:32x3x224x224[:dtype] "
                    "or networks/recurrent.py:lstm:16x8x32"
                )
            if ":" not in m.group("model"):  # a torchvision name; a user's network is checked against extract's sets
                check_name(m.group("model"), f"{where}.sets[{i}]", "model")
        for i, op in enumerate(c.op_ids):
            if not OP_ID.fullmatch(op):
                raise OpcostError(f"{where}.op_ids[{i}]: {op!r} is not an op id (16 lowercase hex digits)")
        return c

    def check(self, where: str) -> None:
        """Values that make a campaign impossible (also for ad-hoc campaigns from the command line,
        whose numbers come from typer and may be NaN or infinite)."""
        if not isinstance(self.device, str) or not DEVICE.fullmatch(self.device):
            raise OpcostError(f"{where}: device {self.device!r} must be cpu or cuda:N")
        if not self.modes or any(m not in MODES for m in self.modes):
            raise OpcostError(f"{where}: modes {list(self.modes)!r} must be a non-empty list of {', '.join(MODES)}")
        if self.energy_source not in ENERGY_SOURCES:
            raise OpcostError(
                f"{where}: energy_source {self.energy_source!r} is not one of {', '.join(ENERGY_SOURCES)}"
            )
        if not 1 <= self.trials <= CAMPAIGN_LIMITS["trials"] or self.chunks < 3:
            raise OpcostError(
                f"{where}: trials must be 1..{CAMPAIGN_LIMITS['trials']:g} and chunks >= 3 (got {self.trials}, "
                f"{self.chunks})"
            )
        for key in ("min_time_s", "window_s", "sample_interval_s", "instance_budget_mb"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise OpcostError(f"{where}: {key} must be a finite number > 0, got {v!r}")
            if key in CAMPAIGN_LIMITS and v > CAMPAIGN_LIMITS[key]:
                raise OpcostError(f"{where}: {key} = {v!r} is more than the {CAMPAIGN_LIMITS[key]:g} allowed")
        if self.max_instances < 1 or self.seed < 0:
            raise OpcostError(
                f"{where}: max_instances must be >= 1 and seed >= 0 (got {self.max_instances}, {self.seed})"
            )
        if not self.sets and not self.op_ids:
            raise OpcostError(f"{where}: name the operations to measure: sets (model-input set ids) and/or op_ids")
        if any(not (isinstance(c, int) and c > 0) for c in self.clocks_mhz) or any(
            not (isinstance(p, (int, float)) and math.isfinite(p) and p > 0) for p in self.power_limits_w
        ):
            raise OpcostError(f"{where}: clocks_mhz and power_limits_w must be positive finite numbers")

    def fingerprint_fields(self) -> dict[str, Any]:
        """What makes two measurements of one unit comparable; resumed parts must agree on it."""
        return {
            k: getattr(self, k)
            for k in (
                "device",
                "trials",
                "min_time_s",
                "window_s",
                "chunks",
                "energy_source",
                "sample_interval_s",
                "seed",
                "max_instances",
                "instance_budget_mb",
            )
        }


def _str_item(v: Any, where: str) -> str:
    return as_str(v, where)


# How each campaign setting in params.yaml is checked and converted; a test checks that every
# field of CampaignParams has an entry, so a new setting cannot arrive unchecked.
CAMPAIGN_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "device": as_str,
    "modes": lambda v, w: as_list(v, w, lambda x, w2: as_str(x, w2, MODES)),
    "sets": lambda v, w: as_list(v, w, _str_item),
    "op_ids": lambda v, w: as_list(v, w, _str_item),
    "networks": as_bool,
    "clocks_mhz": lambda v, w: as_list(v, w, lambda x, w2: as_int(x, w2, lo=1)),
    "power_limits_w": lambda v, w: as_list(v, w, as_positive),
    "trials": lambda v, w: as_int(v, w, lo=1),
    "min_time_s": as_positive,
    "window_s": as_positive,
    "chunks": lambda v, w: as_int(v, w, lo=3),
    "energy_source": lambda v, w: as_str(v, w, ENERGY_SOURCES),
    "sample_interval_s": as_positive,
    "seed": lambda v, w: as_int(v, w, lo=0),
    "max_instances": lambda v, w: as_int(v, w, lo=1),
    "instance_budget_mb": as_positive,
}

_SLURM_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}(:\d{2})?)?|\d+(:\d{2}(:\d{2})?)?)$")
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")
_SLURM_GRES = re.compile(r"^[A-Za-z][\w.-]*(:[\w.-]+)?(:\d+)?$")


@dataclass(frozen=True)
class SlurmParams:
    """How `opcost submit` runs a campaign on a SLURM cluster: a job array of `shards` tasks, at most
    `throttle` at once, then a merge job. Not a measuring parameter: DVC's profile stages do not depend
    on it, so moving a campaign to another partition re-measures nothing."""

    shards: int = 4
    throttle: int | None = None  # the array's %N; None: as many at once as the cluster allows
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    time: str = "02:00:00"  # per task, any sbatch --time format (MM, HH:MM:SS, D-HH:MM, ...)
    gres: str | None = "gpu:1"  # per task of a CUDA campaign; CPU campaigns request no GRES
    cpus_per_task: int = 4
    mem: str | None = None  # per task, e.g. 16G; None: the cluster's default
    setup: tuple[str, ...] = ()  # shell lines each job runs first (module load ..., source .venv/bin/activate)

    @classmethod
    def from_dict(cls, raw: Any, where: str, base: "SlurmParams | None" = None) -> "SlurmParams":
        """`raw` over `base` (the profile-level defaults), checked."""
        if not isinstance(raw, dict):
            raise OpcostError(f"{where}: expected a mapping of SLURM settings, got {raw!r}")
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise OpcostError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {', '.join(sorted(known))}")
        kw = {**(base or cls()).__dict__, **raw}
        if isinstance(kw["setup"], str):
            kw["setup"] = (kw["setup"],)
        kw["setup"] = tuple(kw["setup"] or ())
        s = cls(**kw)
        s.check(where)
        return s

    def check(self, where: str) -> None:
        def positive(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 1

        if not positive(self.shards) or not positive(self.cpus_per_task):
            raise OpcostError(f"{where}: shards and cpus_per_task must be integers >= 1")
        if self.throttle is not None and not positive(self.throttle):
            raise OpcostError(f"{where}: throttle must be an integer >= 1 (tasks at once) or null for no limit")
        if not isinstance(self.time, str) or not _SLURM_TIME.match(self.time):
            raise OpcostError(
                f'{where}: time {self.time!r} must be a quoted SLURM time such as "30", "02:00:00" or '
                f'"1-12:00" (YAML reads an unquoted 02:00:00 as a number)'
            )
        if self.mem is not None and not _SLURM_MEM.match(str(self.mem)):
            raise OpcostError(f"{where}: mem {self.mem!r} must be a size such as 16G or 4000M, or null")
        if self.gres is not None and not _SLURM_GRES.match(str(self.gres)):
            raise OpcostError(f"{where}: gres {self.gres!r} must look like gpu:1 or gpu:a100:1, or be null")
        for key in ("partition", "account"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, str) or not re.match(r"^[\w.,-]+$", v)):
                raise OpcostError(f"{where}: {key} {v!r} must be a SLURM name (letters, digits, _ . , -) or null")
        if not all(isinstance(line, str) and "\n" not in line for line in self.setup):
            raise OpcostError(f"{where}: setup must be a list of single-line shell commands")


@dataclass(frozen=True)
class ProfileParams:
    campaigns: dict[str, CampaignParams] = field(default_factory=dict)
    slurm: SlurmParams = field(default_factory=SlurmParams)  # defaults for every campaign
    slurm_campaigns: dict[str, SlurmParams] = field(default_factory=dict)  # per campaign, defaults filled in

    def slurm_for(self, campaign: str) -> SlurmParams:
        return self.slurm_campaigns.get(campaign, self.slurm)


def _slurm_params(raw: Any, campaigns: dict[str, CampaignParams], where: str) -> tuple[SlurmParams, dict]:
    """`profile.slurm`: defaults, plus `campaigns: {NAME: overrides}` for campaigns of profile.campaigns."""
    if raw is None:
        return SlurmParams(), {}
    if not isinstance(raw, dict):
        raise OpcostError(f"{where}: expected a mapping of SLURM settings, got {raw!r}")
    raw = dict(raw)
    per = raw.pop("campaigns", None) or {}
    defaults = SlurmParams.from_dict(raw, where)
    if not isinstance(per, dict):
        raise OpcostError(f"{where}.campaigns: must map campaign names to SLURM settings")
    unknown = sorted(set(map(str, per)) - set(campaigns))
    if unknown:
        valid = ", ".join(sorted(campaigns)) or "none defined"
        raise OpcostError(f"{where}.campaigns: {', '.join(unknown)} not in profile.campaigns ({valid})")
    return defaults, {str(n): SlurmParams.from_dict(v, f"{where}.campaigns.{n}", defaults) for n, v in per.items()}


# Parsers in src/opcost/data/: thesis.py (thesis-logs), neusight.py (neusight), sweeps.py and crossclock.py
# (the rest).
INGEST_KINDS: tuple[str, ...] = (
    "thesis-logs",
    "zeus-power-limit",
    "dvfs-conv",
    "perseus-stage-profiles",
    "perseus-power-limit",
    "nv-dvfs-kernels",
    "gpu-frequency-dvfs",
    "neusight",
)
# Kinds whose ingest writes op_measurements, networks and operations tables (the rest write sweeps).
OP_SOURCE_KINDS: tuple[str, ...] = ("thesis-logs", "neusight")


# Upper bounds of a campaign's knobs: beyond them a campaign measures for years (--trials 1e20) or
# overflows (--window 1e308); a real campaign stays far below.
CAMPAIGN_LIMITS: dict[str, float] = {"trials": 1000, "min_time_s": 600.0, "window_s": 3600.0, "sample_interval_s": 60.0}


@dataclass(frozen=True)
class IngestSource:
    """External measurements in data/external/: where they are and which parser reads them."""

    name: str
    path: str
    kind: str


@dataclass(frozen=True)
class IngestParams:
    sources: dict[str, IngestSource] = field(default_factory=dict)


def _optional(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    return lambda v, w: None if v is None else check(v, w)


def _max_features(v: Any, where: str) -> Any:
    """scikit-learn max_features: a share in (0, 1], a count >= 1, sqrt, log2 or null (all)."""
    if v is None or v in ("sqrt", "log2"):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return as_int(v, where, lo=1)
    if isinstance(v, float):
        return as_number(v, where, lo=0, hi=1, lo_open=True)
    raise OpcostError(f"{where}: expected a share in (0, 1], a count >= 1, sqrt, log2 or null, got {v!r}")


def _share(v: Any, where: str) -> float:
    return as_number(v, where, lo=0, hi=1, lo_open=True)


def _non_negative(v: Any, where: str) -> float:
    return as_number(v, where, lo=0)


# The keyword arguments of RandomForestRegressor and XGBRegressor that params.yaml may set, with
# their checks. Only these pass through to the estimators (model/train.py): random_state, n_jobs,
# tree_method, objective and booster are set by the code, and model/trees.py compiles only
# single-output forests and squared-error gbtree boosters with numerical splits.
RANDOM_FOREST_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "n_estimators": lambda v, w: as_int(v, w, lo=1),
    "criterion": lambda v, w: as_str(v, w, ("squared_error", "absolute_error", "friedman_mse")),
    "max_depth": _optional(lambda v, w: as_int(v, w, lo=1)),
    "min_samples_split": lambda v, w: as_int(v, w, lo=2),
    "min_samples_leaf": lambda v, w: as_int(v, w, lo=1),
    "max_features": _max_features,
    "max_leaf_nodes": _optional(lambda v, w: as_int(v, w, lo=2)),
    "min_impurity_decrease": _non_negative,
    "bootstrap": as_bool,
    "max_samples": _optional(_share),
    "ccp_alpha": _non_negative,
}
XGBOOST_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "n_estimators": lambda v, w: as_int(v, w, lo=1),
    "max_depth": lambda v, w: as_int(v, w, lo=1),
    "max_leaves": lambda v, w: as_int(v, w, lo=0),
    "max_bin": lambda v, w: as_int(v, w, lo=2),
    "learning_rate": _share,
    "subsample": _share,
    "colsample_bytree": _share,
    "colsample_bylevel": _share,
    "colsample_bynode": _share,
    "min_child_weight": _non_negative,
    "gamma": _non_negative,
    "reg_alpha": _non_negative,
    "reg_lambda": _non_negative,
}


SET_BY_THE_CODE = {
    "random_state": "the seed comes from train.seed",
    "n_jobs": "model/train.py sets the thread count",
    "tree_method": "model/train.py uses hist",
    "objective": "model/trees.py compiles squared-error models only",
    "booster": "model/trees.py compiles gbtree models only",
}


def estimator_settings(raw: Any, keys: dict[str, Callable[[Any, str], Any]], where: str) -> dict[str, Any]:
    raw = mapping(raw, where)
    check_keys(raw, list(keys), where, SET_BY_THE_CODE)
    return {k: keys[k](v, f"{where}.{k}") for k, v in raw.items()}


@dataclass(frozen=True)
class TrainParams:
    """Per device config and mode (`targets`, e.g. A30-inference): algorithms' settings and seeds."""

    targets: tuple[str, ...] = ()
    folds: int = 15
    seed: int = 0
    random_forest: dict[str, Any] = field(default_factory=dict)
    xgboost: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def split_target(target: str) -> tuple[str, str]:
        """`A30_no_tf32-inference` -> ("A30_no_tf32", "inference")."""
        device, _, mode = target.rpartition("-")
        if not device or mode not in MODES:
            raise OpcostError(f"train target {target!r} must be <device config>-<mode>, mode one of {', '.join(MODES)}")
        return device, mode


@dataclass(frozen=True)
class ClockParams:
    """The transferred clock model (model/clock.py) and its clock grids."""

    min_points: int = 3  # clocks a sweep curve needs (its reference and at least two more)
    seed: int = 0  # the comparison tree learner's
    tree_iterations: int = 100  # boosting rounds of the comparison tree learner
    grid_points: int = 16  # clocks per device that `recommend` sweeps over the supported range


CLOCK_KEYS = ("min_points", "seed", "tree_iterations", "grid_points")


@dataclass(frozen=True)
class XdeviceParams:
    """The cross-device op-time model (model/xdevice.py, stage train-xdevice)."""

    neusight: str = "data/external/neusight"  # NeuSight's measurements (ops/, networks/)
    op_targets: tuple[str, ...] = ("A30-inference", "A30_no_tf32-inference", "RTX2080Ti-inference")
    net_targets: tuple[str, ...] = ("A30-inference", "RTX2080Ti-inference", "A30-training")
    floor_s: float = 2e-6  # anchors the target: log(t / (roofline + floor))
    n_estimators: int = 150
    max_depth: int = 8
    learning_rate: float = 0.1
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    min_child_weight: float = 5.0
    seed: int = 0
    threads: int = 2


XDEVICE_KEYS = tuple(XdeviceParams.__dataclass_fields__)


@dataclass(frozen=True)
class Params:
    extract: ExtractParams
    profile: ProfileParams = field(default_factory=ProfileParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    train: TrainParams = field(default_factory=TrainParams)
    clock: ClockParams = field(default_factory=ClockParams)
    xdevice: XdeviceParams = field(default_factory=XdeviceParams)


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last)."""


def _no_duplicate_keys(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise OpcostError(f"key {key!r} given twice (line {key_node.start_mark.line + 1})")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)

TOP_KEYS = ("extract", "profile", "ingest", "train", "clock", "xdevice")
TRAIN_KEYS = ("targets", "folds", "seed", "random_forest", "xgboost")


def load_params(path: Path) -> Params:
    """Read and validate params.yaml; every problem names the entry and what would be valid."""
    if not path.is_file():
        raise OpcostError(f"parameter file {path} not found: run from the repository root or set OPCOST_ROOT")
    try:
        raw = yaml.load(path.read_text(), Loader=_StrictLoader)
    except OpcostError as exc:
        raise OpcostError(f"{path.name}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OpcostError(f"{path.name} is not valid YAML: {first}") from None
    f = path.name
    raw = mapping(raw, f, "a mapping of sections")
    check_keys(raw, TOP_KEYS, f"{f} (top level)")

    extract = ExtractParams.load(Paths(path.parent).extract_sets, raw.get("extract"), f)

    prof = mapping(raw.get("profile"), f"{f}: profile")
    check_keys(prof, ("campaigns", "slurm"), f"{f}: profile")
    raw_campaigns = mapping(
        prof.get("campaigns"), f"{f}: profile.campaigns", "a mapping of campaign names to their settings"
    )
    campaigns = {}
    for name, c in raw_campaigns.items():
        check_name(name, f"{f}: profile.campaigns", "campaign name")
        campaigns[name] = CampaignParams.from_dict(name, c, f"{f}: profile.campaigns.{name}")
    slurm, slurm_campaigns = _slurm_params(prof.get("slurm"), campaigns, f"{f}: profile.slurm")

    ing = mapping(raw.get("ingest"), f"{f}: ingest")
    check_keys(ing, ("sources",), f"{f}: ingest")
    raw_sources = mapping(ing.get("sources"), f"{f}: ingest.sources", "a mapping of source names to path and kind")
    sources = {}
    for name, src in raw_sources.items():
        check_name(name, f"{f}: ingest.sources", "source name")
        where = f"{f}: ingest.sources.{name}"
        src = mapping(src, where, "a mapping with 'path' and 'kind'")
        check_keys(src, ("path", "kind"), where)
        missing = [k for k in ("path", "kind") if k not in src]
        if missing:
            raise OpcostError(f"{where}: missing {' and '.join(missing)}; a source needs a path and a kind")
        kind = src["kind"]
        if kind not in INGEST_KINDS:
            closest = difflib.get_close_matches(str(kind), INGEST_KINDS, n=1, cutoff=0.0)
            raise OpcostError(
                f"{where}: kind {kind!r} is not one of {', '.join(INGEST_KINDS)} (closest: {closest[0]!r})"
            )
        sources[name] = IngestSource(name, check_external_path(src["path"], f"{where}.path"), kind)

    tr = mapping(raw.get("train"), f"{f}: train")
    check_keys(tr, TRAIN_KEYS, f"{f}: train")
    targets = as_list(tr.get("targets") or [], f"{f}: train.targets", lambda v, w: check_name(v, w, "train target"))
    for i, t in enumerate(targets):
        try:
            TrainParams.split_target(t)
        except OpcostError as exc:
            raise OpcostError(f"{f}: train.targets[{i}]: {exc}") from None
    if len(set(targets)) != len(targets):
        raise OpcostError(f"{f}: train.targets lists a target more than once")
    train = TrainParams(
        targets=targets,
        folds=as_int(tr.get("folds", TrainParams.folds), f"{f}: train.folds", lo=2),
        seed=as_int(tr.get("seed", 0), f"{f}: train.seed", lo=0),
        random_forest=estimator_settings(tr.get("random_forest"), RANDOM_FOREST_KEYS, f"{f}: train.random_forest"),
        xgboost=estimator_settings(tr.get("xgboost"), XGBOOST_KEYS, f"{f}: train.xgboost"),
    )
    ck = mapping(raw.get("clock"), f"{f}: clock")
    check_keys(ck, CLOCK_KEYS, f"{f}: clock")
    clock = ClockParams(
        min_points=as_int(ck.get("min_points", ClockParams.min_points), f"{f}: clock.min_points", lo=3),
        seed=as_int(ck.get("seed", 0), f"{f}: clock.seed", lo=0),
        tree_iterations=as_int(ck.get("tree_iterations", 100), f"{f}: clock.tree_iterations", lo=1),
        grid_points=as_int(ck.get("grid_points", 16), f"{f}: clock.grid_points", lo=2),
    )
    return Params(
        extract=extract,
        profile=ProfileParams(campaigns=campaigns, slurm=slurm, slurm_campaigns=slurm_campaigns),
        ingest=IngestParams(sources=sources),
        train=train,
        clock=clock,
        xdevice=_xdevice_params(raw.get("xdevice"), f),
    )


def _xdevice_params(raw: Any, f: str) -> XdeviceParams:
    """The `xdevice` section (absent: the defaults)."""
    xd = mapping(raw, f"{f}: xdevice")
    check_keys(xd, XDEVICE_KEYS, f"{f}: xdevice")
    d = XdeviceParams()
    w = f"{f}: xdevice"
    return XdeviceParams(
        neusight=check_external_path(xd.get("neusight", d.neusight), f"{w}.neusight"),
        op_targets=tuple(as_list(xd.get("op_targets", list(d.op_targets)), f"{w}.op_targets", as_str)),
        net_targets=tuple(as_list(xd.get("net_targets", list(d.net_targets)), f"{w}.net_targets", as_str)),
        floor_s=as_positive(xd.get("floor_s", d.floor_s), f"{w}.floor_s"),
        n_estimators=as_int(xd.get("n_estimators", d.n_estimators), f"{w}.n_estimators", lo=1),
        max_depth=as_int(xd.get("max_depth", d.max_depth), f"{w}.max_depth", lo=1),
        learning_rate=as_positive(xd.get("learning_rate", d.learning_rate), f"{w}.learning_rate"),
        subsample=as_positive(xd.get("subsample", d.subsample), f"{w}.subsample"),
        colsample_bytree=as_positive(xd.get("colsample_bytree", d.colsample_bytree), f"{w}.colsample_bytree"),
        min_child_weight=as_positive(xd.get("min_child_weight", d.min_child_weight), f"{w}.min_child_weight"),
        seed=as_int(xd.get("seed", d.seed), f"{w}.seed", lo=0),
        threads=as_int(xd.get("threads", d.threads), f"{w}.threads", lo=1),
    )
