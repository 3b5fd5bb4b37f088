"""Table schemas: columns, dtypes, ranges; times, energies and powers finite and > 0 everywhere."""

import math

import numpy as np
import pandas as pd
import pytest

from opcost import schemas
from opcost.errors import SchemaError
from opcost.schemas import OCCURRENCES, REJECTS, SWEEPS, Col, Table


def good() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "set_id": pd.Series(["resnet18:1x3x32x32"], dtype="string"),
            "model": pd.Series(["resnet18"], dtype="string"),
            "input_shape": [[1, 3, 32, 32]],
            "dtype": pd.Series(["float32"], dtype="string"),
            "mode": pd.Series(["inference"], dtype="string"),
            "op_id": pd.Series(["0123456789abcdef"], dtype="string"),
            "calls": pd.Series([3], dtype="int64"),
            "first_call": pd.Series([0], dtype="int64"),
        }
    )


def test_valid_table_passes():
    assert list(OCCURRENCES.validate(good()).columns) == OCCURRENCES.names


def test_missing_column_is_named():
    with pytest.raises(SchemaError, match="table occurrences: missing column\\(s\\) calls"):
        OCCURRENCES.validate(good().drop(columns=["calls"]))


def test_wrong_dtype_is_named():
    df = good()
    df["calls"] = df["calls"].astype(float)
    with pytest.raises(SchemaError, match="column calls has dtype float64, expected int"):
        OCCURRENCES.validate(df)


def test_out_of_range_is_named():
    df = good()
    df["calls"] = 0
    with pytest.raises(SchemaError, match="column calls holds 0.0, below its minimum 1"):
        OCCURRENCES.validate(df)


def test_unexpected_column_is_named():
    df = good()
    df["hp_x"] = 1
    with pytest.raises(SchemaError, match="unexpected column\\(s\\) hp_x"):
        OCCURRENCES.validate(df)


# --- times, energies and powers: finite and > 0 at every stage boundary ------------------------------

TABLES = [t for t in vars(schemas).values() if isinstance(t, Table)]


def one_row(table: Table) -> pd.DataFrame:
    """A valid one-row table built from the declarations (numbers at 1 or inside their range)."""
    data = {}
    for c in table.columns:
        if c.kind == "str":
            v = {"reason": "bad_number", "knob": "core_clock_mhz"}.get(c.name, "x")
            data[c.name] = pd.Series([v], dtype="string")
        elif c.kind == "int":
            data[c.name] = pd.Series([max(1, int(c.min or 0))], dtype="int64")
        elif c.kind == "float":
            lo = 0.0 if c.min is None else c.min
            data[c.name] = pd.Series([min(lo + 0.5, c.max) if c.max is not None else lo + 1.0], dtype="float64")
        elif c.kind == "bool":
            data[c.name] = pd.Series([False], dtype=bool)
        else:
            data[c.name] = [[1, 2]]
    return pd.DataFrame(data)


def positive_columns(table: Table) -> list[Col]:
    return [c for c in table.columns if c.kind == "float" and c.positive]


def test_every_table_has_a_valid_row():
    for t in TABLES:
        assert len(t.validate(one_row(t))) == 1, t.name


# The time, energy and power columns the issue names, in the tables that hold them.
NAMED = {
    "op_measurements": {"t_s", "e_j", "p_w", "total_time_s", "total_energy_j", "wall_time_per_iter_s"},
    "net_measurements": {"t_s", "e_j", "p_w"},
    "timings": {"mean_s", "median_s", "total_time_s", "time_per_iter_s", "energy_per_iter_j", "window_energy_j"},
    "networks": {"mean_s", "time_per_iter_s", "energy_per_iter_j", "power_w", "window_time_s"},
    "power_samples": {"power_w"},
    "sweeps": {"time_s", "energy_j", "power_w", "value", "core_clock_mhz", "power_limit_w"},
    "evaluated_operations": {"t_s", "e_j", "p_w", "trials_t_s", "trials_e_j", "trials_p_w", "thesis_t_s", "thesis_p_w"},
    "evaluated_networks": {"t_s", "e_j", "p_w", "thesis_e_j", "trials_p_w"},
}


def test_every_time_energy_and_power_column_is_declared_positive():
    by = {t.name: t for t in TABLES}
    for name, cols in NAMED.items():
        assert cols <= {c.name for c in positive_columns(by[name])}, name
    # and structurally: a float in s, J or W is positive unless it is a spread, a timestamp or a counter
    for t in TABLES:
        for c in t.columns:
            if c.kind == "float" and c.unit in ("s", "J", "W"):
                spread = c.name.startswith(("sigma", "std", "iqr", "e_sem")) or "_sigma_" in c.name
                spread = spread or c.name.endswith("_jitter_s")  # a spread of the counter's update period: 0 is one
                counter = t.name == "power_samples" and c.name == "energy_j"
                assert c.positive != (spread or counter), (t.name, c.name)


CASES = [(t, c) for t in TABLES for c in positive_columns(t)]


@pytest.mark.parametrize("table, col", CASES, ids=[f"{t.name}.{c.name}" for t, c in CASES])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.5])
def test_non_finite_and_non_positive_values_are_refused_naming_table_and_column(table, col, bad):
    df = one_row(table)
    df[col.name] = bad
    if math.isnan(bad) and col.nullable:
        # NaN in a float column is null: allowed where the column may be "not measured" ...
        if table is SWEEPS and col.name == "value":
            df["default_setting"] = True  # (a null setting is the device's default)
        assert len(table.validate(df)) == 1
        return
    with pytest.raises(SchemaError) as exc:
        table.validate(df)
    msg = str(exc.value)
    assert msg.startswith(f"table {table.name}: column {col.name} ") and "\n" not in msg
    if math.isnan(bad):
        assert "missing values" in msg  # ... and never a value where it may not be null
    elif math.isinf(bad):
        assert "not a finite number" in msg
    else:
        assert "must be > 0" in msg


SPREADS = [(t, c) for t in TABLES for c in t.columns if c.kind == "float" and c.min == 0 and not c.positive]


@pytest.mark.parametrize("table, col", SPREADS, ids=[f"{t.name}.{c.name}" for t, c in SPREADS])
def test_spreads_may_be_zero_but_not_negative_or_infinite(table, col):
    df = one_row(table)
    df[col.name] = 0.0
    assert len(table.validate(df)) == 1
    for bad, words in ((-1e-9, "below its minimum 0"), (np.inf, "not a finite number")):
        df[col.name] = bad
        with pytest.raises(SchemaError, match=f"table {table.name}: column {col.name} holds .*{words}"):
            table.validate(df)


@pytest.mark.slow
def test_no_float_column_anywhere_holds_an_infinity():
    for t in TABLES:
        for c in (c for c in t.columns if c.kind == "float"):
            df = one_row(t)
            df[c.name] = -np.inf
            with pytest.raises(SchemaError, match=f"table {t.name}: column {c.name} holds -inf, not a finite number"):
                t.validate(df)


def test_shapes_must_be_positive_integers():
    df = one_row(OCCURRENCES)
    df["input_shape"] = [[32, 0, 56, 56]]
    with pytest.raises(SchemaError, match=r"table occurrences: column input_shape holds \[32, 0, 56, 56\], expected"):
        OCCURRENCES.validate(df)


def test_row_rules_name_the_table():
    df = one_row(SWEEPS)
    df["value"] = np.nan  # a null setting that does not say it is the default
    with pytest.raises(SchemaError, match="table sweeps: 1 row.* value is null exactly where default_setting is true"):
        SWEEPS.validate(df)
    df = one_row(REJECTS)
    df["reason"] = pd.Series(["it felt wrong"], dtype="string")
    with pytest.raises(SchemaError, match="table rejects: 1 row.* reason is one of undecodable, nul_byte"):
        REJECTS.validate(df)


def test_row_problem_checks_one_row_like_the_table():
    assert SWEEPS.row_problem({"time_s": 1.0, "power_w": 100.0, "value": 1410.0}) is None
    assert SWEEPS.row_problem({"time_s": 0.0}) == ("out_of_range", "time_s = 0.0, must be > 0 s")
    assert SWEEPS.row_problem({"energy_j": math.inf}) == ("bad_number", "energy_j = inf, not a finite number")
    assert SWEEPS.row_problem({"power_w": 2500.0}) == ("out_of_range", "power_w = 2500.0, above its maximum 2000 W")
    assert SWEEPS.row_problem({"time_s": None}) == ("bad_number", "time_s is missing")
    assert SWEEPS.row_problem({"power_w": None, "sm_active": 1.5})[0] == "out_of_range"
