"""Inputs that used to be answered silently wrong are refused in one line (exit 2), naming what would work:
a model folder dvc.lock records but the checkout lacks, a bad or empty sets.yaml (before `dvc repro`
deletes anything), more folds than layers, a vocabulary beyond every embedding table, an optimizer for
inference, an empty `--devices` entry, a request for pretrained weights, a step that fits on no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from builders import record_in_lock, tiny_bundle
from opcost.cli import app
from opcost.errors import OpcostError
from opcost.model.prediction.predict import Predictor
from opcost.model.training.fit import grouped_folds
from opcost.ops.netspec import NetSpec, build_model
from opcost.params.load import load_params
from opcost.paths import Paths

REPO = Path(__file__).resolve().parents[1]


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, list(args), env={"OPCOST_ROOT": str(root)})


def one_line_error(res, *says: str) -> str:
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in res.output, res.output
    for s in says:
        assert s in line, line
    return line


# --- a model folder dvc.lock records, missing from the checkout ---------------------------------------


@pytest.fixture
def half_pulled(tmp_path: Path) -> Path:
    """dvc.lock records models/A30-inference; the checkout holds only models/A30-training."""
    tiny_bundle(tmp_path, "A30-training")
    record_in_lock(tmp_path, missing=("A30-inference",))
    return tmp_path


def test_a_model_folder_dvc_lock_records_but_the_checkout_lacks_is_refused(half_pulled):
    net = ["--model", "resnet18", "--input-shape", "2,3,32,32"]
    for device in ("A30", "NVIDIA A30"):  # a table key, and the NVML name of the same GPU
        res = cli(half_pulled, "predict", *net, "--device", device)
        one_line_error(res, "models/A30-inference", "dvc.lock", "`dvc pull models/A30-inference`", "dvc checkout")
    one_line_error(cli(half_pulled, "recommend", *net), "`dvc pull models/A30-inference`")
    with pytest.raises(OpcostError, match="dvc pull models/A30-inference"):
        Predictor(paths=Paths(half_pulled)).predict("resnet18", "2,3,32,32", "A30")
    # the folder that is there answers
    assert cli(half_pulled, "predict", *net, "--device", "A30", "--mode", "training").exit_code == 0


# --- sets.yaml, checked before `dvc repro` deletes anything -------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    return tmp_path


@pytest.mark.parametrize(
    "sets, says",
    [
        ("sets:\n  - {model: resnet19, input_shape: [2, 3, 32, 32]}\n", "sets.yaml: sets[0] (resnet19:2x3x32x32): "),
        ("sets:\n  - {model: mynet.py:buld, input_shape: [2, 8]}\n", "mynet.py has no callable 'buld'"),
        ("sets: []\n", "sets.yaml: sets lists no model-input set"),
        ("", "sets.yaml: sets lists no model-input set"),
    ],
    ids=["torchvision typo", "user callable typo", "empty list", "empty file"],
)
def test_check_params_refuses_a_bad_sets_yaml(project, sets, says):
    (project / "mynet.py").write_text("from torch import nn\n\n\ndef build():\n    return nn.Linear(8, 4)\n")
    (project / "sets.yaml").write_text(sets)
    line = one_line_error(cli(project, "check-params"), says)
    if "resnet19" in sets:
        assert "closest: resnet18" in line


def test_check_params_passes_the_repository_files_and_the_extract_stage_refuses_no_sets(project):
    ok = CliRunner().invoke(app, ["check-params", "--params", str(REPO / "params.yaml")])  # its sets.yaml too
    assert ok.exit_code == 0 and "valid (" in ok.stdout and "extract sets" in ok.stdout, ok.output
    from opcost.stages.extract import run

    (project / "sets.yaml").write_text("sets: []\n")
    with pytest.raises(OpcostError, match="lists no model-input set"):
        run(Paths(project), load_params(project / "params.yaml"), show_progress=False)
    assert not (project / "data").exists()  # refused before writing anything


# --- folds --------------------------------------------------------------------------------------------


def test_more_folds_than_layers_is_refused_not_capped(project):
    layers = np.array(["a", "a", "b", "c", "c", "d"])
    assert len(grouped_folds(layers, k=4, seed=0)) == 4  # one layer held out per fold: as many as there are
    with pytest.raises(OpcostError, match="train.folds is 100000, but the training data hold only 4 distinct layers"):
        grouped_folds(layers, k=100000, seed=0)
    # check-params reads the layers of each target's training data in the checkout
    (project / "sets.yaml").write_text("sets:\n  - {model: resnet18, input_shape: [2, 3, 32, 32]}\n")
    target = load_params(project / "params.yaml").train.targets[0]
    table = Paths(project).target_operations(target)
    table.parent.mkdir(parents=True)
    pd.DataFrame({"layer_id": ["l1", "l2", "l2", "l3"]}).to_parquet(table)
    folds = load_params(project / "params.yaml").train.folds
    assert folds > 3
    one_line_error(cli(project, "check-params"), f"train.folds is {folds}", "only 3 distinct layers", target)


# --- inputs of a question ---------------------------------------------------------------------------

EMBEDDING = "from torch import nn\n\n\ndef emb():\n    return nn.Sequential(nn.Embedding(1000, 16), nn.Linear(16, 4))\n"


def test_a_vocabulary_beyond_every_embedding_table_is_refused(tmp_path):
    (tmp_path / "emb.py").write_text(EMBEDDING)
    model = f"{tmp_path / 'emb.py'}:emb"
    with pytest.raises(OpcostError, match=r"token ids up to 4999, but its largest nn.Embedding has 1000 rows"):
        build_model(NetSpec.make(model, ["int64:8,64:vocab=5000"]))
    assert build_model(NetSpec.make(model, ["int64:8,64:vocab=1000"])).inputs[0].vocab == 1000


@pytest.mark.parametrize("arg", ["weights=DEFAULT", "weights=IMAGENET1K_V1", "weights_backbone=DEFAULT"])
def test_pretrained_weights_are_refused_nothing_is_downloaded(arg):
    model = "fasterrcnn_mobilenet_v3_large_320_fpn" if arg.startswith("weights_backbone") else "resnet18"
    key, _, value = arg.partition("=")
    with pytest.raises(OpcostError, match=f"--model-arg {key}='{value}' for {model}: .*downloads nothing"):
        build_model(NetSpec.make(model, ["float32:1,3,64,64"], {key: value}))
    assert build_model(NetSpec.make("resnet18", ["float32:1,3,32,32"], {"weights": None})).family == "classification"


@pytest.fixture
def trained_a30(tmp_path: Path) -> Path:
    for t in ("A30-inference", "A30-training"):
        tiny_bundle(tmp_path, t)
    record_in_lock(tmp_path)
    return tmp_path


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_an_optimizer_given_for_inference_is_refused(trained_a30, optimizer):
    net = ["--model", "resnet18", "--input-shape", "2,3,32,32"]
    says = "unknown optimizer 'adamw'" if optimizer == "adamw" else "--optimizer adam goes with --mode training"
    for verb in (["predict", *net, "--device", "A30"], ["recommend", *net]):
        one_line_error(cli(trained_a30, *verb, "--mode", "inference", "--optimizer", optimizer), says)
    ok = cli(trained_a30, "predict", *net, "--device", "A30", "--mode", "training", "--optimizer", "adam")
    assert ok.exit_code == 0 and "memory (training, adam)" in ok.stdout, ok.output


@pytest.mark.parametrize("devices, entry", [("H100,,L4", 2), ("H100,", 2), (",", 1)])
def test_an_empty_devices_entry_is_refused(trained_a30, devices, entry):
    res = cli(trained_a30, "recommend", "--model", "resnet18", "--input-shape", "2,3,32,32", "--devices", devices)
    one_line_error(res, f"--devices {devices!r}", f"entry {entry} is empty")


def test_a_step_that_fits_on_no_gpu_gets_its_memory_and_no_time(trained_a30):
    net = ["--model", "resnet50", "--input-shape", "100000,3,224,224", "--device", "A30"]
    line = one_line_error(cli(trained_a30, "predict", *net), "cannot run", "more than any GPU", "TiB")
    assert "time" not in line.replace("no time is given", "")
    res = cli(trained_a30, "predict", *net, "--json")
    doc = json.loads(res.stdout)
    # the input alone is 100000 x 3 x 224 x 224 float32 = 60.2 GB; the step needs about a terabyte
    assert res.exit_code == 2 and doc["details"]["memory"]["inputs"] == 100000 * 3 * 224 * 224 * 4
    assert doc["details"]["memory"]["needed_bytes"] > 0.5 * 2**40 and not any(doc["details"]["memory"]["fits"].values())
    assert cli(trained_a30, "predict", *net[:2], "--input-shape", "8,3,224,224", "--device", "A30").exit_code == 0
