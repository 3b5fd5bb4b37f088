"""Every error a user meets is ONE line a terminal shows whole (under errors.MAX_LINE columns): a list of
valid values is cut to the closest few, and the line says where the whole list lives. Checked over many bad
inputs to the command line and over the builders whose lines carry paths or pyarrow's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import record_in_lock, tiny_bundle
from opcost.cli import app
from opcost.errors import MAX_LINE, OpcostError

NET = ["--model", "resnet18", "--input-shape", "1,3,32,32"]
BAD = [
    ["predict", *NET, "--device", "H1000"],
    ["predict", *NET, "--device", "a30x"],
    ["predict", *NET, "--device", "NVIDIA GeForce RTX 9090 Ultra Super Founders Edition"],
    ["predict", "--model", "resnet1800", "--input-shape", "1,3,32,32", "--device", "A30"],
    ["predict", "--model", "nosuch.py:f", "--device", "A30"],
    ["predict", "--model", "resnet18", "--input-shape", "1,3,a,32", "--device", "A30"],
    ["predict", "--model", "resnet18", "--input", "float99:1,3", "--device", "A30"],
    ["predict", *NET, "--device", "A30", "--mode", "train"],
    ["predict", *NET, "--device", "A30", "--optimizer", "lion", "--mode", "training"],
    ["predict", *NET, "--device", "A30", "--model-arg", "foo"],
    ["predict", *NET, "--device", "A30", "--top", "0"],
    ["recommend", *NET, "--devices", "H100,H1000"],
    ["recommend", *NET, "--devices", "H100,,L4"],
    ["recommend", *NET, "--max-slowdown", "0.5"],
    ["profile", "--models", "resnet18:1,3", "--dry-run"],
    ["profile", "--models", "resnet18:1,3,32,32", "--energy-source", "foo", "--dry-run"],
    ["restore-device", "--device", "H1000"],
    ["calibrate-host", "--name", "../x"],
]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with one own bundle: the questions reach the device table, not "no models here"."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    tiny_bundle(tmp_path, "A30-inference")
    record_in_lock(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    return tmp_path


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a)[:70])
def test_every_command_line_error_is_one_short_line(project, args):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = error_lines(res.stderr)
    assert len(lines) == 1, res.stderr
    assert len(lines[0]) < MAX_LINE, lines[0]


def test_an_unknown_device_names_the_closest_and_where_the_list_is(project):
    res = CliRunner().invoke(app, ["predict", *NET, "--device", "H1000"])
    (line,) = error_lines(res.stderr)
    assert re.match(r"error: unknown device 'H1000'; closest: H100\b", line), line
    assert "`opcost devices` lists all" in line and len(line) < 160


def test_builders_with_paths_stay_short(tmp_path, monkeypatch):
    """A tampered model folder and a corrupt Parquet deep inside a checkout: the path as a user types it
    (relative to here), no md5s and no pyarrow paragraph."""
    from opcost.devices import resolve_device_config
    from opcost.model.records.integrity import check_locked
    from opcost.schemas import OPERATIONS
    from opcost.tables import read_table
    from opcost.validation import check_keys

    root = tmp_path / ("a-rather-long-folder-name-of-a-checkout" * 2)
    folder = root / "models" / "A30_no_tf32-training"
    folder.mkdir(parents=True)
    (folder / "bundle.json").write_text("{}")
    record_in_lock(root)
    monkeypatch.chdir(root)
    messages = []
    with pytest.raises(OpcostError) as e:
        check_locked(root, folder, "0" * 32)
    messages.append(str(e.value))
    assert "`dvc checkout models/A30_no_tf32-training` restores it" in messages[-1]
    bad = root / "data" / "evaluated" / "targets" / "A30_no_tf32-training" / "operations.parquet"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"PAR1" + b"\x00" * 4096 + b"not parquet at all" * 50)
    with pytest.raises(OpcostError) as e:
        read_table(bad, OPERATIONS, "evaluate")
    messages.append(str(e.value))
    assert messages[-1].startswith("data/evaluated/targets/A30_no_tf32-training/operations.parquet is not a readable")
    with pytest.raises(OpcostError) as e:
        resolve_device_config("Radeon Instinct MI300X Accelerator")
    messages.append(str(e.value))
    with pytest.raises(OpcostError) as e:
        check_keys({"shard": 1}, [f"setting_{i}" for i in range(40)], "profile.slurm")
    messages.append(str(e.value))
    for m in messages:
        assert "\n" not in m and len("error: " + m) < MAX_LINE, m
