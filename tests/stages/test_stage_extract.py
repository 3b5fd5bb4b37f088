"""The extract stage end to end on small sets, and its CLI verbs."""

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from opcost.cli import app
from opcost.errors import OpcostError
from opcost.params.load import load_params
from opcost.paths import Paths
from opcost.schemas import OCCURRENCES, OPERATIONS
from opcost.stages.extract import run as run_extract_stage

runner = CliRunner()


def write_params(root, sets):
    (root / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": sets}}))
    return Paths(root)


SMALL = [
    {"model": "resnet18", "input_shape": [2, 3, 32, 32], "modes": ["inference", "training"]},
    {"model": "squeezenet1_1", "input_shape": [2, 3, 64, 64]},
]


def test_stage_writes_valid_tables_and_coverage(tmp_root):
    paths = write_params(tmp_root, SMALL)
    summary = run_extract_stage(paths, load_params(paths.params), show_progress=False)
    ops = OPERATIONS.validate(pd.read_parquet(paths.operations))
    occ = OCCURRENCES.validate(pd.read_parquet(paths.occurrences))
    assert summary["operations"] == len(ops) == ops["op_id"].nunique()
    # every occurrence refers to a catalogued op, and resnet18 makes 69 calls per forward pass
    assert set(occ["op_id"]) == set(ops["op_id"])
    per_set = occ.groupby(["set_id", "mode"])["calls"].sum().to_dict()
    assert per_set[("resnet18:2x3x32x32", "inference")] == 69
    assert per_set[("resnet18:2x3x32x32", "training")] == 69
    assert set(per_set) == {
        ("resnet18:2x3x32x32", "inference"),
        ("resnet18:2x3x32x32", "training"),
        ("squeezenet1_1:2x3x64x64", "inference"),
    }
    # hyper-parameters as typed columns
    assert str(ops["hp_in_channels"].dtype) == "Int64"
    assert str(ops["hp_bias"].dtype) == "boolean"
    assert str(ops["hp_eps"].dtype) == "Float64"
    conv = ops[ops["kind"] == "Conv2d"].iloc[0]
    assert list(conv["hp_kernel_size"]) in ([3, 3], [7, 7], [1, 1])
    # functional args are named by their schema: torch.flatten(x, 1) -> start_dim
    flat = ops[ops["kind"] == "flatten"].iloc[0]
    assert flat["hp_start_dim"] == 1
    report = json.loads(paths.extract_coverage.read_text())
    assert report["all_within_tolerance"] is True
    assert report["sets"]["resnet18:2x3x32x32"]["training"]["calls"] == 69


@pytest.mark.slow
def test_stage_is_deterministic(tmp_root):
    paths = write_params(tmp_root, SMALL[:1])
    run_extract_stage(paths, load_params(paths.params), show_progress=False)
    first = paths.operations.read_bytes(), paths.occurrences.read_bytes()
    run_extract_stage(paths, load_params(paths.params), show_progress=False)
    assert (paths.operations.read_bytes(), paths.occurrences.read_bytes()) == first


def test_unknown_model_writes_nothing_and_lists_closest(tmp_root):
    paths = write_params(tmp_root, [*SMALL, {"model": "resnet181", "input_shape": [1, 3, 32, 32]}])
    with pytest.raises(OpcostError, match="unknown model 'resnet181'; closest: resnet18"):
        run_extract_stage(paths, load_params(paths.params), show_progress=False)
    assert not (tmp_root / "data").exists() and not (tmp_root / "reports").exists()


@pytest.mark.slow
def test_model_that_rejects_the_shape_writes_nothing(tmp_root):
    paths = write_params(tmp_root, [*SMALL, {"model": "vit_b_16", "input_shape": [1, 3, 32, 32]}])
    with pytest.raises(OpcostError, match="cannot run on input shape 1x3x32x32"):
        run_extract_stage(paths, load_params(paths.params), show_progress=False)
    assert not (tmp_root / "data").exists()


def test_cli_extract(tmp_root):
    write_params(tmp_root, SMALL[1:])
    res = runner.invoke(app, ["extract", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "unique operations" in res.output and (tmp_root / "data/operations/operations.parquet").is_file()


def test_cli_coverage_json():
    res = runner.invoke(
        app, ["coverage", "resnet18", "alexnet", "--input-shape", "1,3,224,224", "--json", "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["model"] for r in rows] == ["resnet18", "alexnet"]
    assert all(r["within_tolerance"] and r["input_shape"] == [1, 3, 224, 224] for r in rows)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["coverage", "resnet181"], "unknown model 'resnet181'; closest: resnet18"),
        (["coverage", "resnet18", "--input-shape", "2,3,224"], "malformed --input-shape '2,3,224'"),
        (["coverage", "resnet18", "--mode", "train"], "unknown mode 'train'"),
        (["coverage"], "name at least one model"),
    ],
)
def test_cli_bad_input_is_one_clear_line(argv, message):
    res = runner.invoke(app, argv)
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0]


def test_every_verb_has_help():
    for verb in (["--help"], ["extract", "--help"], ["coverage", "--help"]):
        res = runner.invoke(app, verb)
        assert res.exit_code == 0 and "Usage" in res.output
