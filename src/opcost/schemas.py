"""The project's tables: their columns, dtypes, units and physical ranges, in one place.

Every stage validates what it reads and what it writes against these declarations, so a missing
column, a wrong dtype or an impossible value (negative FLOPs, zero calls) stops the stage with an
error that names the table and the column.

Times, energies and powers (and knob settings such as clocks and power limits) are `positive`:
finite and > 0, because a measurement of zero time or energy is a fault, not a fast op. Their
spreads (sigma, std, IQR) may be 0 but never negative. No float column holds NaN as a value (a
nullable column holds null, meaning "not measured") and none holds an infinity. The `time_col`,
`energy_col`, `power_col` and `spread_col` helpers declare these columns the same way everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from opcost.errors import SchemaError, some_of

KINDS = ("str", "int", "float", "bool", "list")


@dataclass(frozen=True)
class Col:
    name: str
    kind: str  # one of KINDS
    unit: str = ""
    doc: str = ""
    nullable: bool = False
    min: float | None = None
    max: float | None = None
    positive: bool = False  # numbers: finite and > 0; lists (shapes): every element an int > 0


# Physically possible bounds (refused where data enters; beyond them a value is a corrupted number,
# and e.g. 1e300 s overflows float32 in XGBoost far from the source): no measured duration is below
# a nanosecond or above ~4 months; no measured energy is below a picojoule or above 10 GJ.
TIME_RANGE_S = (1e-9, 1e7)
ENERGY_RANGE_J = (1e-12, 1e10)


def time_col(name: str, doc: str = "", nullable: bool = False, unit: str = "s") -> Col:
    """A duration: finite, > 0 and within TIME_RANGE_S."""
    lo, hi = TIME_RANGE_S
    return Col(name, "float", unit=unit, doc=doc, nullable=nullable, positive=True, min=lo, max=hi)


def energy_col(name: str, doc: str = "", nullable: bool = False) -> Col:
    """An energy in J: finite, > 0 and within ENERGY_RANGE_J."""
    lo, hi = ENERGY_RANGE_J
    return Col(name, "float", unit="J", doc=doc, nullable=nullable, positive=True, min=lo, max=hi)


def power_col(name: str, doc: str = "", nullable: bool = False) -> Col:
    """An average power in W: finite, > 0 and at most 2 kW (no single device draws more)."""
    return Col(name, "float", unit="W", doc=doc, nullable=nullable, positive=True, max=2000)


def spread_col(name: str, unit: str, doc: str = "") -> Col:
    """A sigma, standard deviation or IQR: finite and >= 0 (0 when all values agree); null if unknown."""
    return Col(name, "float", unit=unit, doc=doc, nullable=True, min=0)


@dataclass(frozen=True)
class RowRule:
    """A condition across columns that every row must meet; `bad` marks the rows that break it."""

    doc: str
    bad: Callable[[pd.DataFrame], pd.Series]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Col, ...]
    doc: str = ""
    extra_prefix: str | None = None  # further columns allowed if their names start with this
    rules: tuple[RowRule, ...] = ()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def validate(self, df: pd.DataFrame) -> pd.DataFrame:
        """Check `df` against the schema; return it with the declared columns first."""
        missing = [c.name for c in self.columns if c.name not in df.columns]
        if missing:
            raise SchemaError(f"table {self.name}: missing column(s) {some_of(missing)}")
        extra = [c for c in df.columns if c not in self.names]
        unexpected = [c for c in extra if not (self.extra_prefix and str(c).startswith(self.extra_prefix))]
        if unexpected:
            raise SchemaError(f"table {self.name}: unexpected column(s) {some_of(map(str, unexpected))}")
        for col in self.columns:
            _check_column(self.name, col, df[col.name])
        for rule in self.rules:
            bad = rule.bad(df).fillna(True).to_numpy(bool) if len(df) else np.zeros(0, bool)
            if bad.any():
                first = int(np.flatnonzero(bad)[0])
                raise SchemaError(
                    f"table {self.name}: {int(bad.sum())} row(s) break the rule: {rule.doc} (first: row {first})"
                )
        return df[self.names + extra]

    def row_problem(self, row: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why one row (a dict of some of this table's columns) would fail the numeric and shape rules:
        ("bad_number", message) for a non-finite or non-numeric value, ("out_of_range", message) for
        one outside its range, ("bad_shape", message) for a bad shape; None if the row is fine. Parsers
        call it per line, so a bad line becomes a counted reject instead of failing the whole table."""
        for col in self.columns:
            if col.name in row:
                problem = _value_problem(col, row[col.name])
                if problem:
                    return problem
        return None

    def bad_rows(self, df: pd.DataFrame) -> pd.DataFrame:
        """The rows of a whole table whose numbers break the same rules `row_problem` applies, one row each
        (index: df's, columns reason and message; the first broken column says why). Readers of written
        tables (a campaign's timings) drop these as counted rejects instead of failing on the first."""
        reason = pd.Series(None, index=df.index, dtype=object)
        message = pd.Series(None, index=df.index, dtype=object)
        for col in self.columns:
            if col.kind not in ("int", "float") or col.name not in df.columns:
                continue
            values = pd.to_numeric(df[col.name], errors="coerce").astype(float)
            unit = f" {col.unit}" if col.unit else ""
            missing = df[col.name].isna().to_numpy()
            nonfinite = ~np.isfinite(values.to_numpy()) & ~missing
            checks = [
                (missing & (not col.nullable), "bad_number", "is missing"),
                (nonfinite, "bad_number", "not a finite number"),
                ((values <= 0).to_numpy() if col.positive else None, "out_of_range", f"must be > 0{unit}"),
                (
                    (values < col.min).to_numpy() if col.min is not None else None,
                    "out_of_range",
                    f"below its minimum {col.min}{unit}",
                ),  # fmt: skip
                (
                    (values > col.max).to_numpy() if col.max is not None else None,
                    "out_of_range",
                    f"above its maximum {col.max}{unit}",
                ),  # fmt: skip
            ]
            for mask, why, text in checks:
                if mask is None:
                    continue
                new = mask & reason.isna().to_numpy()
                if new.any():
                    reason[new] = why
                    message[new] = [f"{col.name} = {v}, {text}" for v in df[col.name][new]]
        bad = reason.notna()
        return pd.DataFrame({"reason": reason[bad], "message": message[bad]})


def _value_problem(col: Col, v: Any) -> tuple[str, str] | None:
    unit = f" {col.unit}" if col.unit else ""
    if v is None or (isinstance(v, float) and math.isnan(v) and col.nullable):
        return None if col.nullable else ("bad_number", f"{col.name} is missing")
    if col.kind == "list":
        if col.positive and (not isinstance(v, (list, tuple)) or not v or not all(_positive_int(x) for x in v)):
            return ("bad_shape", f"{col.name} = {v!r}, expected a shape of integers > 0")
        return None
    if col.kind not in ("int", "float"):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return ("bad_number", f"{col.name} = {v!r}, not a number")
    if col.kind == "int" and not isinstance(v, (int, np.integer)):
        return ("bad_number", f"{col.name} = {v!r}, not an integer")
    if col.kind == "int" and not -(2**63) <= int(v) < 2**63:
        return ("out_of_range", f"{col.name} = {v}, beyond a 64-bit integer")
    x = float(v)
    if not math.isfinite(x):
        return ("bad_number", f"{col.name} = {x}, not a finite number")
    if col.positive and x <= 0:
        return ("out_of_range", f"{col.name} = {v}, must be > 0{unit}")
    if col.min is not None and x < col.min:
        return ("out_of_range", f"{col.name} = {v}, below its minimum {col.min}{unit}")
    if col.max is not None and x > col.max:
        return ("out_of_range", f"{col.name} = {v}, above its maximum {col.max}{unit}")
    return None


def _kind_ok(kind: str, s: pd.Series) -> bool:
    dtype = s.dtype
    if kind == "str":
        if ptypes.is_string_dtype(dtype):
            return all(isinstance(v, str) for v in s.dropna())
        return False
    if kind == "int":
        return bool(ptypes.is_integer_dtype(dtype) and not ptypes.is_bool_dtype(dtype))
    if kind == "float":
        return bool(ptypes.is_float_dtype(dtype))
    if kind == "bool":
        return bool(ptypes.is_bool_dtype(dtype))
    if kind == "list":
        return ptypes.is_object_dtype(dtype) and all(isinstance(v, (list, tuple, np.ndarray)) for v in s.dropna())
    raise ValueError(f"unknown column kind {kind!r}")


def _check_column(table: str, col: Col, s: pd.Series) -> None:
    if len(s) == 0:
        return
    if not _kind_ok(col.kind, s):
        raise SchemaError(f"table {table}: column {col.name} has dtype {s.dtype}, expected {col.kind}")
    if col.kind != "list" and not col.nullable and s.isna().any():
        raise SchemaError(f"table {table}: column {col.name} has missing values (null or NaN)")
    unit = f" {col.unit}" if col.unit else ""
    if col.kind in ("int", "float"):
        values = s.dropna().astype(float)
        finite = np.isfinite(values.to_numpy())
        if not finite.all():
            bad = values[~finite].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, not a finite number")
        if col.positive and (values <= 0).any():
            bad = values[values <= 0].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, must be > 0{unit}")
        if col.min is not None and (values < col.min).any():
            bad = values[values < col.min].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, below its minimum {col.min}{unit}")
        if col.max is not None and (values > col.max).any():
            bad = values[values > col.max].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, above its maximum {col.max}{unit}")
    if col.kind == "list" and col.positive:
        for v in s.dropna():
            if len(v) == 0 or not all(_positive_int(x) for x in v):
                raise SchemaError(
                    f"table {table}: column {col.name} holds {list(v)!r}, expected a shape of integers > 0"
                )


def _positive_int(x: object) -> bool:
    return bool(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and x > 0)


def cols(*columns: Col) -> tuple[Col, ...]:
    return tuple(columns)


OPERATIONS = Table(
    name="operations",
    doc="One row per unique operation: spec, shapes and paper costs. Hyper-parameters as hp_<name> columns.",
    extra_prefix="hp_",
    columns=cols(
        Col("op_id", "str", doc="SHA-256 (16 hex digits) of the canonical key"),
        Col("kind", "str", doc="module class name (Conv2d) or normalised function name (add)"),
        Col("category", "str", doc="module or function"),
        Col("target", "str", doc="importable path used to rebuild the operation"),
        Col("dtype", "str", doc="compute dtype (first floating-point input)"),
        Col("input_shapes", "list", doc="shape of each input tensor"),
        Col("input_dtypes", "list", doc="dtype of each input tensor"),
        Col("output_shapes", "list", doc="shape of each output tensor"),
        Col("flops", "int", unit="FLOP", min=0, doc="forward FLOPs as FlopCounterMode counts them"),
        Col("bytes_read", "int", unit="B", min=0, doc="inputs and parameters, each read once"),
        Col("bytes_written", "int", unit="B", min=0, doc="outputs, each written once"),
        Col("params", "int", min=0, doc="parameter count of the module (0 for functions)"),
        Col("is_view", "bool", doc="output is a view of an input: no data moves"),
        Col("spec_json", "str", doc="the full spec (opcost.ops.spec.OpSpec.to_json) to rebuild the op"),
        Col("parts_json", "str", doc="kernels a composite op runs (opcost.ops.parts), JSON; [] for other ops"),
    ),
)

OCCURRENCES = Table(
    name="occurrences",
    doc="How often each operation is called in one forward pass of a model-input set in a mode.",
    columns=cols(
        Col("set_id", "str", doc="model:BxCxHxW[:dtype]"),
        Col("model", "str"),
        Col("input_shape", "list", positive=True),
        Col("dtype", "str"),
        Col("mode", "str", doc="inference or training"),
        Col("op_id", "str"),
        Col("calls", "int", min=1, doc="number of calls in one forward pass"),
        Col("first_call", "int", min=0, doc="position of the first call in the forward pass"),
    ),
)


# --- raw campaign tables (profile stage) ---------------------------------------------------

# What names a whole network in every network table.
_NETWORK_ID = cols(
    Col("set_id", "str", doc="model:BxCxHxW[:dtype]"),
    Col("model", "str"),
    Col("input_shape", "list", positive=True),
)

_MEASUREMENT = cols(
    Col("campaign", "str"),
    Col("mode", "str", doc="inference or training"),
    Col("variant", "str", doc="as-is, or out-of-place for in-place layers measured in training"),
    Col("setting", "str", doc="sweep point label: default, clk1410, pl250, clk1410-pl250"),
    Col("clock_mhz", "int", unit="MHz", nullable=True, min=1, doc="requested core clock (null: as found)"),
    Col(
        "power_limit_w",
        "float",
        unit="W",
        nullable=True,
        positive=True,
        min=1,
        doc="requested power limit (null: as found)",
    ),
    Col("trial", "int", min=0),
    Col("seed", "int", min=0),
    Col("status", "str", doc="ok or failed"),
    Col("error", "str", nullable=True, doc="first line of the error for failed measurements"),
    Col("instances", "int", nullable=True, min=1, doc="ops per timed block (cycled copies)"),
    Col("number_per_run", "int", nullable=True, min=1, doc="blocks per timed run"),
    Col("runs", "int", nullable=True, min=1, doc="timed runs (block means)"),
    Col("iterations", "int", nullable=True, min=1, doc="iterations timed by benchmark.Timer"),
    time_col("total_time_s", nullable=True),
    time_col("mean_s", "per-iteration time, mean of block means", nullable=True),
    time_col("median_s", nullable=True),
    spread_col("iqr_s", "s", "IQR of block means (per iteration)"),
    spread_col("std_s", "s", "std of block means (per iteration)"),
    Col("window_iterations", "int", nullable=True, min=1, doc="iterations in the energy window"),
    time_col("window_time_s", nullable=True),
    energy_col("window_energy_j", "null where the source gives no energy", nullable=True),
    time_col("time_per_iter_s", "window time / window iterations", nullable=True),
    energy_col("energy_per_iter_j", nullable=True),
    power_col("power_w", "window energy / window time", nullable=True),
    Col("time_r2", "float", nullable=True, doc="R^2 of time vs iterations over the window's checkpoints"),
    Col("energy_r2", "float", nullable=True, doc="R^2 of energy vs iterations"),
    Col(
        "proportional", "bool", nullable=True, doc="time and energy linear in iterations (R^2 >= 0.99, small intercept)"
    ),
    Col("sm_clock_mhz", "float", unit="MHz", nullable=True, min=0, doc="mean core clock reached during the window"),
    Col("energy_source", "str"),
    Col(
        "energy_flag",
        "str",
        nullable=True,
        doc="why the window's energy is not its counter's difference (measure/timing.window_energy); null: it is",
    ),
    Col(
        "energy_bound",
        "float",
        nullable=True,
        min=0,
        doc="relative error bound of the window's energy from the counter's update instants (measure/counter.py)",
    ),
    time_col("energy_span_s", "time between the first and last counter change the energy rests on", nullable=True),
    Col("counter_updates", "int", nullable=True, min=0, doc="counter changes seen inside the energy window"),
    time_col("energy_window_needed_s", "the window that would meet the energy bound", nullable=True),
    time_col("gpu_time_per_call_s", "the GPU's own time per call: CUDA events around a held burst (gputime.py)", True),
    time_col("host_time_per_call_s", "the host's cost of issuing one call (the held burst's enqueue time)", True),
    Col("timing_warnings", "bool", nullable=True, doc="torch.utils.benchmark flagged the timed runs (has_warnings)"),
    Col("started_at", "float", unit="s since epoch", min=0),
    Col("ended_at", "float", unit="s since epoch", min=0),
)

TIMINGS = Table(
    name="timings",
    doc="One row per op x mode x setting x trial of a campaign.",
    columns=cols(Col("op_id", "str"), Col("kind", "str"), *_MEASUREMENT),
)

NETWORKS = Table(
    name="networks",
    doc="Whole networks measured the same way: one row per set x mode x setting x trial.",
    columns=cols(*_NETWORK_ID, *_MEASUREMENT),
)

POWER_SAMPLES = Table(
    name="power_samples",
    doc="The raw power log: one row per sample, with the measurement it belongs to.",
    columns=cols(
        Col("campaign", "str"),
        Col("item_type", "str", doc="op or network"),
        Col("item_id", "str", doc="op_id or set_id"),
        Col("mode", "str"),
        Col("setting", "str"),
        Col("trial", "int", min=0),
        Col("source", "str", doc="nvml, nvidia-smi or rapl"),
        Col("timestamp", "float", unit="s since epoch", min=0),
        power_col("power_w", nullable=True),
        Col("power_kind", "str", nullable=True, doc="instant or average (NVML), null otherwise"),
        Col(
            "energy_j",
            "float",
            unit="J",
            nullable=True,
            min=0,
            doc="energy counter reading (a counter, not the energy of work: may start at 0)",
        ),
        Col("sm_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("mem_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("temperature_c", "float", unit="C", nullable=True, min=-50, max=150),
        Col("utilization_pct", "float", unit="%", nullable=True, min=0, max=100),
        Col("throttle_reasons", "int", nullable=True, min=0, doc="NVML clocks event reasons bitmask"),
        time_col("counter_period_s", "the energy counter's median update period at this setting", True),
        Col(  # 0 where the counter is perfectly regular, or never moved (then the period is null)
            "counter_jitter_s",
            "float",
            unit="s",
            doc="half the 10th-90th percentile range of that period",
            nullable=True,
            min=0.0,
            max=TIME_RANGE_S[1],
        ),
    ),
)


# --- ingested external measurements ------------------------------------------------------------

_LOGGED = cols(
    Col("source", "str", doc="ingest source name (nicolai-thesis)"),
    Col("source_file", "str", doc="file inside data/external/<source>/"),
    Col("line", "int", min=1, doc="1-based line number in that file"),
    Col("device_config", "str", doc="A30, A30_no_tf32, RTX2080Ti, ..."),
    Col("mode", "str", doc="inference or training"),
    Col("phase", "str", doc="forward, forward_backward (ops) or train_step (networks)"),
    Col("clock_mhz", "int", unit="MHz", nullable=True, min=1, doc="null: the device's default clocks"),
    Col(
        "power_limit_w", "float", unit="W", nullable=True, positive=True, min=1, doc="null: the device's default limit"
    ),
    time_col("t_s", "time per iteration"),
    spread_col("sigma_t_s", "s"),
    energy_col("e_j", "energy per iteration (logged in mJ); null where a source has no energy (NeuSight)", True),
    spread_col("sigma_e_j", "J", "thesis: sigma_P x t"),
    spread_col("e_sem_j", "J", "the log's small error of e (v3)"),
    power_col("p_w", "mean power after the 3-sigma filter; null without power (NeuSight)", nullable=True),
    spread_col("sigma_p_w", "W"),
    Col("iterations", "int", nullable=True, min=1),
    time_col("total_time_s", nullable=True),
    energy_col("total_energy_j", "as logged (v9; meaning unverified)", nullable=True),
    spread_col("sigma_total_energy_j", "J"),
    time_col("wall_time_per_iter_s", "v11, probably wall clock with overhead", nullable=True),
    Col("start_time", "str", nullable=True, doc="ISO local time as logged"),
    Col("stop_time", "str", nullable=True),
)

OP_MEASUREMENTS = Table(
    name="op_measurements",
    doc="Ingested per-operation measurements: one row per data line (training lines give two).",
    columns=cols(Col("op_id", "str"), Col("kind", "str"), Col("input_shape", "list", positive=True), *_LOGGED),
)

NET_MEASUREMENTS = Table(
    name="net_measurements",
    doc="Ingested whole-network measurements.",
    columns=cols(*_NETWORK_ID, *_LOGGED),
)

OP_KERNELS = Table(
    name="op_kernels",
    doc="The kernel an ingested op measurement launched (NeuSight): one row per op_measurements row, keyed "
    "by source file and line.",
    columns=cols(
        Col("source", "str"),
        Col("source_file", "str"),
        Col("line", "int", min=1),
        Col("device_config", "str"),
        Col("op_id", "str"),
        Col("kernel_name", "str", doc="the main kernel, as the profiler named it"),
        Col("kernels", "str", nullable=True, doc="every kernel launched, ';'-separated (null: not recorded)"),
        Col("n_kernels", "int", nullable=True, min=0),
        Col("warps_per_sm", "float", min=0),
        Col("blocks_per_sm", "float", min=0),
        *(Col(f"{w}_{a}", "int", min=1) for w in ("grid", "block") for a in ("x", "y", "z")),
    ),
)

NETWORK_NODES = Table(
    name="network_nodes",
    doc="One FX node of an ingested network (NeuSight: one transformer layer plus embeddings and head; the "
    "model is that layer repeated num_layer times), each node timed on its own.",
    columns=cols(
        Col("source", "str", nullable=True),
        Col("source_file", "str"),
        Col("line", "int", min=1),
        Col("device_config", "str"),
        Col("mode", "str", doc="inference or training"),
        Col("set_id", "str", doc="the networks row this node belongs to"),
        Col("model", "str"),
        Col("num_layer", "int", min=0, doc="how often the transformer layer repeats in the whole model"),
        Col("node_index", "int", min=0, doc="position in the graph (0-based)"),
        Col("name", "str", doc="FX node name"),
        Col("op", "str", doc="placeholder, get_attr, call_module, call_function, call_method or output"),
        Col("target", "str", doc="module path, function or method name"),
        Col("module_class", "str", nullable=True, doc="class of a call_module node's module"),
        Col("args", "str", doc="the node's positional arguments as recorded (at most 500 characters)"),
        Col("kwargs", "str"),
        Col("input_shapes", "str", doc="JSON list of the input tensors' shapes"),
        Col("output_shape", "str", doc="JSON shape of the output"),
        Col("dtype", "str", nullable=True, doc="output dtype (float32, int64, bool); null for non-tensors"),
        time_col("latency_s", "fw + bw + acc; null: not timed (NeuSight writes 0)", nullable=True),
        time_col("fw_s", "forward time; null: not timed (placeholders, attributes)", nullable=True),
        time_col("bw_s", "backward time of the node's autograd node; null: none (inference, no grad)", nullable=True),
        time_col("acc_s", "gradient accumulation time; null: none", nullable=True),
    ),
)

REJECT_REASONS = (
    "undecodable",  # bytes that are not UTF-8
    "nul_byte",  # a NUL character inside the line
    "bad_repr",  # the module repr does not parse or does not build with today's PyTorch
    "bad_shape",  # the input shape is not a list of integers > 0
    "value_count",  # a data line with the wrong number of values or fields
    "bad_number",  # a value that is not a finite number (text, nan, inf) or not an integer where one goes
    "out_of_range",  # a number outside its physical range: zero or negative time, energy or power, ...
    "bad_timestamp",  # a start or stop time that is not YYYY-MM-DD_HH-MM-SS
    "unpaired",  # a network measurement without its model-name line, or with another shape
    "bad_value",  # a field outside its allowed set (an unknown instruction, a name with a slash, ...)
    "duplicate",  # a row whose key an earlier row already holds
    "inconsistent",  # values of one line that disagree with its own arithmetic (total runtime != N x t, ...)
    "unterminated",  # a file's last line, without a line end, whose last value cannot be checked (cut short?)
)

REJECTS = Table(
    name="rejects",
    doc="Lines of an external source that ingest did not take, one row each, with why (rejects.parquet).",
    columns=cols(
        Col("source", "str", doc="ingest source name"),
        Col("source_file", "str", doc="file inside data/external/<source>/"),
        Col("line", "int", min=1, doc="1-based line number in that file"),
        Col("reason", "str", doc="one of " + ", ".join(REJECT_REASONS)),
        Col("message", "str", doc="what was wrong, naming the value"),
        Col("text", "str", doc="the line as read (at most 300 characters; undecodable bytes as \\x escapes)"),
    ),
    rules=(RowRule("reason is one of " + ", ".join(REJECT_REASONS), lambda df: ~df["reason"].isin(REJECT_REASONS)),),
)


SWEEPS_KNOBS = ("power_limit_w", "core_clock_mhz", "mem_clock_mhz")


def _dcgm(name: str, field_id: int, what: str) -> Col:
    return Col(name, "float", nullable=True, min=0, max=1, doc=f"DCGM {what} (field {field_id}), ratio 0..1")


SWEEPS = Table(
    name="sweeps",
    doc=(
        "Measurements along one knob (power limit, core or memory clock) per workload and device. Time, "
        "energy and power are per unit of work (epoch, iteration, stage instruction, kernel call; `detail` "
        "says which); a row with default_setting left the knob at the device's default, value unknown."
    ),
    columns=cols(
        Col("source", "str"),
        Col("device", "str"),
        Col("workload", "str", doc="what ran; a 2-D clock grid gives one workload per slice"),
        Col("knob", "str", doc=" or ".join(SWEEPS_KNOBS)),
        Col(
            "value",
            "float",
            nullable=True,
            positive=True,
            doc="the knob's setting, in the knob's unit; null exactly where default_setting is true",
        ),
        Col(
            "default_setting",
            "bool",
            doc="the knob left at the device's default (unlocked clocks): its value, and the clocks, unknown",
        ),
        time_col("time_s", "time of one unit of work (epoch, iteration, stage instruction, kernel call)"),
        power_col("power_w", "average power over the unit of work", nullable=True),
        energy_col("energy_j", "energy of one unit of work", nullable=True),
        Col("core_clock_mhz", "float", unit="MHz", nullable=True, positive=True, doc="core clock it ran at"),
        Col("mem_clock_mhz", "float", unit="MHz", nullable=True, positive=True, doc="memory clock it ran at"),
        Col("power_limit_w", "float", unit="W", nullable=True, positive=True, doc="power limit it ran under"),
        Col("phase", "str", nullable=True, doc="forward or backward (Perseus stage instructions); else null"),
        _dcgm("sm_active", 1002, "SM activity"),
        _dcgm("sm_occupancy", 1003, "SM occupancy"),
        _dcgm("tensor_active", 1004, "tensor pipe activity"),
        _dcgm("dram_active", 1005, "DRAM activity"),
        _dcgm("fp64_active", 1006, "FP64 pipe activity"),
        _dcgm("fp32_active", 1007, "FP32 pipe activity"),
        _dcgm("fp16_active", 1008, "FP16 pipe activity"),
        Col("detail", "str", nullable=True, doc="source-specific context as JSON (always `unit`)"),
    ),
    rules=(
        RowRule(
            "value is null exactly where default_setting is true",
            lambda df: df["value"].isna() != df["default_setting"].astype(bool),
        ),
        RowRule(f"knob is one of {', '.join(SWEEPS_KNOBS)}", lambda df: ~df["knob"].isin(SWEEPS_KNOBS)),
    ),
)


# --- evaluated tables (evaluate stage) ---------------------------------------------------------


def _stat_cols(prefix: str, doc: str) -> tuple[Col, ...]:
    return cols(
        time_col(f"{prefix}t_s", f"time per iteration ({doc})", nullable=bool(prefix)),
        spread_col(f"{prefix}sigma_t_s", "s"),
        energy_col(f"{prefix}e_j", f"energy per iteration ({doc}); null without an energy source", nullable=True),
        spread_col(f"{prefix}sigma_e_j", "J"),
        power_col(f"{prefix}p_w", nullable=True),
        spread_col(f"{prefix}sigma_p_w", "W"),
    )


_EVALUATED = cols(
    Col("device_config", "str"),
    Col("mode", "str"),
    Col("phase", "str", doc="forward, forward_backward or train_step"),
    Col("clock_mhz", "int", unit="MHz", nullable=True, min=1),
    Col("power_limit_w", "float", unit="W", nullable=True, positive=True, min=1),
    *_stat_cols("", "best figures: trial-based for campaigns, thesis figures for its logs"),
    Col("n_measurements", "int", min=1, doc="measurements combined (trials, or logged re-runs)"),
    Col("n_trials", "int", min=0, doc="independent measurements behind the trials_* columns"),
    Col("method", "str", doc="trials or thesis-log"),
    Col("sources", "str", doc="ingest sources or campaigns, comma-separated"),
    *_stat_cols("thesis_", "thesis method: 3-sigma-filtered power, sigma_e = sigma_P x t"),
    *_stat_cols("trials_", "mean and std across independent measurements"),
    Col("proportional_share", "float", nullable=True, min=0, max=1, doc="share of trials flagged proportional"),
)

EVALUATED_OPERATIONS = Table(
    name="evaluated_operations",
    doc="One row per device config, mode, phase, clock, power limit and op.",
    columns=cols(Col("op_id", "str"), Col("kind", "str"), *_EVALUATED),
)

EVALUATED_NETWORKS = Table(
    name="evaluated_networks",
    doc="One row per device config, mode, phase, clock, power limit and model-input set.",
    columns=cols(*_NETWORK_ID, *_EVALUATED),
)


# The columns of the operations table a train target needs beside the measurements.
TARGET_SPEC_COLUMNS = (
    "spec_json", "parts_json", "flops", "bytes_read", "bytes_written", "params", "is_view", "output_shapes",
)  # fmt: skip


def conform(df: pd.DataFrame, table: Table) -> pd.DataFrame:
    """Give `df` (built from dict rows) the schema's columns and nullable dtypes, then validate."""
    out = pd.DataFrame(index=df.index)
    for col in table.columns:
        s = df[col.name] if col.name in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)
        if col.kind == "str":
            s = s.astype("string")
        elif col.kind == "int":
            s = s.astype("Int64") if (col.nullable or s.isna().any()) else s.astype("int64")
        elif col.kind == "float":
            s = pd.to_numeric(s, errors="coerce").astype("float64")
        elif col.kind == "bool":
            s = s.astype("boolean") if col.nullable else s.astype(bool)
        out[col.name] = s
    return table.validate(out)


TARGET_OPERATIONS = Table(
    name="target_operations",
    doc="What one train target learns from: the evaluated rows of one device config and mode in the phase "
    "its models predict (forward for inference, forward_backward for training), with each op's spec and "
    "paper costs joined in, so a train stage reads this file and nothing else.",
    columns=cols(
        *EVALUATED_OPERATIONS.columns,
        *(c for c in OPERATIONS.columns if c.name in TARGET_SPEC_COLUMNS),
        Col("layer_id", "str", doc="the op without its input shapes (opcost.ops.keys.layer_id): grouped CV unit"),
        Col("families", "list", doc="architecture families of the extracted networks that call this op"),
        Col("models", "list", doc="models of the extracted networks of this mode that call this op"),
        Col("estimated", "bool", doc="not measured: forward+backward estimated from inference x a reference ratio"),
    ),
)

TARGET_NETWORKS = Table(
    name="target_networks",
    doc="Whole networks measured on one device config and mode (default clock and limit): what the "
    "composition layer is fitted and judged on.",
    columns=cols(
        *_NETWORK_ID,
        Col("family", "str", doc="architecture family (opcost.ops.families)"),
        *(c for c in _EVALUATED if c.name in ("t_s", "sigma_t_s", "e_j", "sigma_e_j", "p_w", "sigma_p_w", "sources")),
    ),
)

TARGET_NETWORK_OPS = Table(
    name="target_network_ops",
    doc="Every op the target's measured networks call, measured or not, with its calls and spec.",
    columns=cols(
        Col("set_id", "str"),
        Col("op_id", "str"),
        Col("calls", "int", min=1),
        Col("kind", "str"),
        *(c for c in OPERATIONS.columns if c.name in TARGET_SPEC_COLUMNS),
    ),
)
