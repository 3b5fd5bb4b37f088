"""A Parquet input that is no regular file is one line naming it, not pyarrow's traceback.

pyarrow calls a link to /dev/zero (or a folder where a file belongs) "not found" and raises
FileNotFoundError, which the readers let through as "missing" for real files only.
"""

from __future__ import annotations

import os

import pytest

from opcost.errors import OpcostError
from opcost.schemas import OPERATIONS
from opcost.tables import read_table


@pytest.mark.parametrize("make", ["dev-zero", "folder"])
def test_a_parquet_path_that_is_no_file_is_one_line(tmp_path, make):
    path = tmp_path / "operations.parquet"
    if make == "dev-zero":
        os.symlink("/dev/zero", path)
    else:
        path.mkdir()
    with pytest.raises(OpcostError) as exc:
        read_table(path, OPERATIONS, "extract")
    msg = str(exc.value)
    what = "a device, pipe or socket" if make == "dev-zero" else "a folder"
    assert msg == f"{path} is {what}, not a Parquet file: `dvc repro extract` (or `dvc checkout`) restores it"
