"""The project's tables: their columns, dtypes, units and physical ranges, in one place.

Every stage validates what it reads and what it writes against these declarations, so a missing
column, a wrong dtype or an impossible value (negative FLOPs, zero calls) stops the stage with an
error that names the table and the column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from opcost.errors import SchemaError

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


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Col, ...]
    doc: str = ""
    extra_prefix: str | None = None  # further columns allowed if their names start with this

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def validate(self, df: pd.DataFrame) -> pd.DataFrame:
        """Check `df` against the schema; return it with the declared columns first."""
        missing = [c.name for c in self.columns if c.name not in df.columns]
        if missing:
            raise SchemaError(f"table {self.name}: missing column(s) {', '.join(missing)}")
        extra = [c for c in df.columns if c not in self.names]
        unexpected = [c for c in extra if not (self.extra_prefix and str(c).startswith(self.extra_prefix))]
        if unexpected:
            raise SchemaError(f"table {self.name}: unexpected column(s) {', '.join(map(str, unexpected))}")
        for col in self.columns:
            _check_column(self.name, col, df[col.name])
        return df[self.names + extra]


def _kind_ok(kind: str, s: pd.Series) -> bool:
    dtype = s.dtype
    if kind == "str":
        if ptypes.is_string_dtype(dtype):
            return all(isinstance(v, str) for v in s.dropna())
        return False
    if kind == "int":
        return ptypes.is_integer_dtype(dtype) and not ptypes.is_bool_dtype(dtype)
    if kind == "float":
        return ptypes.is_float_dtype(dtype)
    if kind == "bool":
        return ptypes.is_bool_dtype(dtype)
    if kind == "list":
        return ptypes.is_object_dtype(dtype) and all(isinstance(v, (list, tuple, np.ndarray)) for v in s.dropna())
    raise ValueError(f"unknown column kind {kind!r}")


def _check_column(table: str, col: Col, s: pd.Series) -> None:
    if len(s) == 0:
        return
    if not _kind_ok(col.kind, s):
        raise SchemaError(f"table {table}: column {col.name} has dtype {s.dtype}, expected {col.kind}")
    if col.kind != "list" and not col.nullable and s.isna().any():
        raise SchemaError(f"table {table}: column {col.name} has missing values")
    if col.kind in ("int", "float") and (col.min is not None or col.max is not None):
        values = s.dropna().astype(float)
        if col.kind == "float" and not np.isfinite(values).all():
            raise SchemaError(f"table {table}: column {col.name} holds a non-finite value")
        if col.min is not None and (values < col.min).any():
            bad = values[values < col.min].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, below its minimum {col.min} {col.unit}")
        if col.max is not None and (values > col.max).any():
            bad = values[values > col.max].iloc[0]
            raise SchemaError(f"table {table}: column {col.name} holds {bad}, above its maximum {col.max} {col.unit}")


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
    ),
)

OCCURRENCES = Table(
    name="occurrences",
    doc="How often each operation is called in one forward pass of a model-input set in a mode.",
    columns=cols(
        Col("set_id", "str", doc="model:BxCxHxW[:dtype]"),
        Col("model", "str"),
        Col("input_shape", "list"),
        Col("dtype", "str"),
        Col("mode", "str", doc="inference or training"),
        Col("op_id", "str"),
        Col("calls", "int", min=1, doc="number of calls in one forward pass"),
        Col("first_call", "int", min=0, doc="position of the first call in the forward pass"),
    ),
)


# --- raw campaign tables (profile stage) ---------------------------------------------------

# What names a whole network in every network table.
_NETWORK_ID = cols(Col("set_id", "str", doc="model:BxCxHxW[:dtype]"), Col("model", "str"), Col("input_shape", "list"))

_MEASUREMENT = cols(
    Col("campaign", "str"),
    Col("mode", "str", doc="inference or training"),
    Col("variant", "str", doc="as-is, or out-of-place for in-place layers measured in training"),
    Col("setting", "str", doc="sweep point label: default, clk1410, pl250, clk1410-pl250"),
    Col("clock_mhz", "int", unit="MHz", nullable=True, min=1, doc="requested core clock (null: as found)"),
    Col("power_limit_w", "float", unit="W", nullable=True, min=1, doc="requested power limit (null: as found)"),
    Col("trial", "int", min=0),
    Col("seed", "int", min=0),
    Col("status", "str", doc="ok or failed"),
    Col("error", "str", nullable=True, doc="first line of the error for failed measurements"),
    Col("instances", "int", nullable=True, min=1, doc="ops per timed block (cycled copies)"),
    Col("number_per_run", "int", nullable=True, min=1, doc="blocks per timed run"),
    Col("runs", "int", nullable=True, min=1, doc="timed runs (block means)"),
    Col("iterations", "int", nullable=True, min=1, doc="iterations timed by benchmark.Timer"),
    Col("total_time_s", "float", unit="s", nullable=True, min=0),
    Col("mean_s", "float", unit="s", nullable=True, min=0, doc="per-iteration time, mean of block means"),
    Col("median_s", "float", unit="s", nullable=True, min=0),
    Col("iqr_s", "float", unit="s", nullable=True, min=0, doc="IQR of block means (per iteration)"),
    Col("std_s", "float", unit="s", nullable=True, min=0, doc="std of block means (per iteration)"),
    Col("window_iterations", "int", nullable=True, min=1, doc="iterations in the energy window"),
    Col("window_time_s", "float", unit="s", nullable=True, min=0),
    Col("window_energy_j", "float", unit="J", nullable=True, min=0, doc="null where the source gives no energy"),
    Col("time_per_iter_s", "float", unit="s", nullable=True, min=0, doc="window time / window iterations"),
    Col("energy_per_iter_j", "float", unit="J", nullable=True, min=0),
    Col("power_w", "float", unit="W", nullable=True, min=0, doc="window energy / window time"),
    Col("time_r2", "float", nullable=True, doc="R^2 of time vs iterations over the window's checkpoints"),
    Col("energy_r2", "float", nullable=True, doc="R^2 of energy vs iterations"),
    Col(
        "proportional", "bool", nullable=True, doc="time and energy linear in iterations (R^2 >= 0.99, small intercept)"
    ),
    Col("sm_clock_mhz", "float", unit="MHz", nullable=True, min=0, doc="mean core clock reached during the window"),
    Col("energy_source", "str"),
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
        Col("power_w", "float", unit="W", nullable=True, min=0),
        Col("power_kind", "str", nullable=True, doc="instant or average (NVML), null otherwise"),
        Col("energy_j", "float", unit="J", nullable=True, min=0, doc="energy counter reading"),
        Col("sm_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("mem_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("temperature_c", "float", unit="C", nullable=True, min=-50, max=150),
        Col("utilization_pct", "float", unit="%", nullable=True, min=0, max=100),
        Col("throttle_reasons", "int", nullable=True, min=0, doc="NVML clocks event reasons bitmask"),
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
    Col("power_limit_w", "float", unit="W", nullable=True, min=1, doc="null: the device's default limit"),
    Col("t_s", "float", unit="s", min=0, doc="time per iteration"),
    Col("sigma_t_s", "float", unit="s", nullable=True, min=0),
    Col("e_j", "float", unit="J", min=0, doc="energy per iteration (logged in mJ)"),
    Col("sigma_e_j", "float", unit="J", nullable=True, min=0, doc="thesis: sigma_P x t"),
    Col("e_sem_j", "float", unit="J", nullable=True, min=0, doc="the log's small error of e (v3)"),
    Col("p_w", "float", unit="W", min=0, max=2000, doc="mean power after the 3-sigma filter"),
    Col("sigma_p_w", "float", unit="W", nullable=True, min=0),
    Col("iterations", "int", nullable=True, min=1),
    Col("total_time_s", "float", unit="s", nullable=True, min=0),
    Col("total_energy_j", "float", unit="J", nullable=True, doc="as logged (v9; meaning unverified)"),
    Col("sigma_total_energy_j", "float", unit="J", nullable=True),
    Col("wall_time_per_iter_s", "float", unit="s", nullable=True, min=0, doc="v11, probably wall clock with overhead"),
    Col("start_time", "str", nullable=True, doc="ISO local time as logged"),
    Col("stop_time", "str", nullable=True),
)

OP_MEASUREMENTS = Table(
    name="op_measurements",
    doc="Ingested per-operation measurements: one row per data line (training lines give two).",
    columns=cols(Col("op_id", "str"), Col("kind", "str"), Col("input_shape", "list"), *_LOGGED),
)

NET_MEASUREMENTS = Table(
    name="net_measurements",
    doc="Ingested whole-network measurements.",
    columns=cols(*_NETWORK_ID, *_LOGGED),
)

SWEEPS = Table(
    name="sweeps",
    doc="Measurements along one knob (power limit, core or memory clock) per workload and device.",
    columns=cols(
        Col("source", "str"),
        Col("device", "str"),
        Col("workload", "str", doc="what ran; a 2-D clock grid gives one workload per slice"),
        Col("knob", "str", doc="power_limit_w, core_clock_mhz or mem_clock_mhz"),
        Col("value", "float", min=0, doc="the knob's setting, in the knob's unit"),
        Col("time_s", "float", unit="s", min=0, doc="time of one unit of work (epoch, call)"),
        Col("power_w", "float", unit="W", nullable=True, min=0, max=2000),
        Col("energy_j", "float", unit="J", nullable=True, min=0),
        Col("core_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("mem_clock_mhz", "float", unit="MHz", nullable=True, min=0),
        Col("power_limit_w", "float", unit="W", nullable=True, min=0),
        Col("detail", "str", nullable=True, doc="source-specific context as JSON"),
    ),
)


# --- evaluated tables (evaluate stage) ---------------------------------------------------------


def _stat_cols(prefix: str, doc: str) -> tuple[Col, ...]:
    return cols(
        Col(f"{prefix}t_s", "float", unit="s", nullable=bool(prefix), min=0, doc=f"time per iteration ({doc})"),
        Col(f"{prefix}sigma_t_s", "float", unit="s", nullable=True, min=0),
        Col(
            f"{prefix}e_j",
            "float",
            unit="J",
            nullable=True,
            min=0,
            doc=f"energy per iteration ({doc}); null without an energy source",
        ),
        Col(f"{prefix}sigma_e_j", "float", unit="J", nullable=True, min=0),
        Col(f"{prefix}p_w", "float", unit="W", nullable=True, min=0, max=2000),
        Col(f"{prefix}sigma_p_w", "float", unit="W", nullable=True, min=0),
    )


_EVALUATED = cols(
    Col("device_config", "str"),
    Col("mode", "str"),
    Col("phase", "str", doc="forward, forward_backward or train_step"),
    Col("clock_mhz", "int", unit="MHz", nullable=True, min=1),
    Col("power_limit_w", "float", unit="W", nullable=True, min=1),
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
TARGET_SPEC_COLUMNS = ("spec_json", "flops", "bytes_read", "bytes_written", "params", "is_view", "output_shapes")


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
    ),
)
