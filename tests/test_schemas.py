import pandas as pd
import pytest

from opcost.errors import SchemaError
from opcost.schemas import OCCURRENCES


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
