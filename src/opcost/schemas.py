"""The project's tables: their columns, dtypes, units and physical ranges, in one place.

Every stage validates what it reads and what it writes against these declarations, so a missing
column, a wrong dtype or an impossible value (negative FLOPs, zero calls) stops the stage with an
error that names the table and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

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
        return dtype == object and all(isinstance(v, (list, tuple, np.ndarray)) for v in s.dropna())
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


def empty_frame(table: Table, extra: Iterable[str] = ()) -> pd.DataFrame:
    return pd.DataFrame({name: [] for name in [*table.names, *extra]})
