"""The JSON model files (clock, power, cross-device) are read by one function (io.read_json_model):
a missing, non-JSON, binary or non-object file is one line naming it, never a traceback."""

from __future__ import annotations

import pytest

from opcost.errors import OpcostError
from opcost.model.clocks.clock import CLOCK_MODEL_FILE, ClockModel
from opcost.model.clocks.xpower import XPOWER_MODEL_FILE, PowerModel
from opcost.model.crossdevice.xdevice import MODEL_FILE, XdeviceModel

LOADERS = [
    (ClockModel, CLOCK_MODEL_FILE, "clock model", "train-clock"),
    (PowerModel, XPOWER_MODEL_FILE, "power model", "train-clock"),
    (XdeviceModel, MODEL_FILE, "cross-device model", "train-xdevice"),
]
IDS = [c.__name__ for c, *_ in LOADERS]


@pytest.mark.parametrize(("cls", "name", "what", "stage"), LOADERS, ids=IDS)
def test_missing_file_names_the_stage_that_writes_it(cls, name, what, stage, tmp_path):
    with pytest.raises(OpcostError) as exc:
        cls.load(tmp_path)
    assert str(exc.value) == f"no {what} at {tmp_path / name}: run `dvc pull` or `dvc repro {stage}`"


@pytest.mark.parametrize(("cls", "name", "what", "stage"), LOADERS, ids=IDS)
@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe\x00binary", b""], ids=["broken", "binary", "empty"])
def test_a_file_that_is_not_json_is_refused(cls, name, what, stage, content, tmp_path):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(OpcostError) as exc:
        cls.load(tmp_path)
    assert str(exc.value) == f"{tmp_path / name} is not JSON; refused"


@pytest.mark.parametrize(("cls", "name", "what", "stage"), LOADERS, ids=IDS)
@pytest.mark.parametrize("content", ["[1, 2]", '"clock"', "null", "3"])
def test_json_that_is_not_an_object_is_refused_in_one_line(cls, name, what, stage, content, tmp_path):
    """Before: the cross-device model called .get on it (AttributeError, a traceback)."""
    (tmp_path / name).write_text(content)
    with pytest.raises(OpcostError, match=rf"is not a {what} \(a JSON \w+, not an object\); refused"):
        cls.load(tmp_path)
