"""The models stored as plain files (models/clock, models/xdevice, models/xpower) in the registry, and what
`predict --registry` reads from it.

A temporary SQLite store and a temporary project holding small folder models built here (a clean clone, as
CI checks out, has no DVC outputs to copy): each registers as a pyfunc model (MLmodel, signature,
`bundle_md5` and `data_version` tags) that `mlflow.pyfunc.load_model` loads and runs; `predict --registry
--clock` takes the clock model from the registry, verified by its tag; a store path that names no store is
refused before MLflow creates one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import FAST_XDEVICE, SYNTH_GPUS, pyfunc_row, synthetic_xdevice_rows
from opcost.errors import OpcostError
from subproc_env import src_dir

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"opcost-clock": "clock", "opcost-xdevice": "xdevice", "opcost-xpower": "xpower"}
STAGES = {"opcost-clock": "train-clock", "opcost-xdevice": "train-xdevice", "opcost-xpower": "train-clock"}


def write_folder_models(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """models/clock, models/xdevice and models/xpower as the train stages write them, small: a clock model,
    a cross-device model fitted on synthetic roofline rows relabelled as real table GPUs, a power model."""
    from opcost.devices import DEVICES
    from opcost.model.clocks.clock import ClockModel
    from opcost.model.clocks.xpower import PowerModel
    from opcost.model.crossdevice import xdevice
    from opcost.paths import Paths

    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)
    rng = np.random.default_rng(4)
    rows = synthetic_xdevice_rows(rng, n=15)
    rows = pd.concat(
        [
            rows[rows["device_config"] == "SYN0"].assign(device_config=cfg)
            for cfg in ("V100_no_tf32", "A30", "RTX2080Ti")
        ],
        ignore_index=True,
    )
    comp = {"host_floor_s": 5e-6, "scale": 1.0, "bw_ratio": {"linear": 2.0}}
    paths = Paths(root)
    xdevice.XdeviceModel(xdevice.fit(rows, FAST_XDEVICE), comp, {"a": 0.2, "b": 0.05}).save(paths.xdevice_model_dir)
    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(paths.clock_model_dir)
    PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0, rel_err90=0.1).save(paths.xpower_model_dir)


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """A project with small folder models, each registered (and made champion) in a fresh store."""
    from mlflow import MlflowClient

    from opcost.model.records import tracking
    from opcost.model.store import registry

    root = tmp_path / "project"
    write_folder_models(root, monkeypatch)
    assert all((root / "models" / folder).is_dir() for folder in FOLDERS.values())
    (root / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    (tmp_path / "store").mkdir()
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    mlflow = tracking.setup(root)
    versions = {}
    for name, folder in FOLDERS.items():
        with tracking.tracked_run(mlflow, f"register {name}"):
            versions[name] = registry.register_folder(
                root, mlflow, name, root / "models" / folder, f"hash-{folder}", -1.0, "split-a", {}, f"data-{folder}"
            )
        MlflowClient().set_registered_model_alias(name, tracking.CHAMPION, versions[name])  # not a main checkout
    return root, versions


def test_folder_models_are_loadable_pyfunc_models_with_tags_and_real_stage_names(registered):
    import mlflow
    from mlflow import MlflowClient
    from mlflow.models import Model

    from opcost.model.records.integrity import dir_md5

    root, versions = registered
    client = MlflowClient()
    for name, folder in FOLDERS.items():
        v = client.get_model_version(name, versions[name])
        assert v.tags["bundle_md5"] == dir_md5(root / "models" / folder)
        assert v.tags["data_version"] == f"data-{folder}"
        uri = f"models:/{name}/{versions[name]}"
        model = mlflow.pyfunc.load_model(uri)
        assert model.metadata.signature is not None and model.metadata.signature.inputs.input_names()
        example = Model.load(uri).load_input_example(mlflow.artifacts.download_artifacts(uri))
        if name == "opcost-xdevice":  # its example comes from the operations table (absent here)
            assert example is None
        else:
            out = model.predict(example)
            assert len(out) == len(example) and out.notna().all().all()
        doc = client.get_registered_model(name).description
        assert f"stage {STAGES[name]})" in doc and "train@" not in doc, doc


def test_the_cross_device_pyfunc_costs_an_op_on_a_table_gpu(registered):
    import mlflow
    import pandas as pd

    _, versions = registered
    model = mlflow.pyfunc.load_model(f"models:/opcost-xdevice/{versions['opcost-xdevice']}")
    row = pd.DataFrame([pyfunc_row(nn.Linear(256, 512), (64, 256))])
    t = model.predict(row.assign(device_config="H100"))["t_s"]
    assert len(t) == 1 and 0 < float(t.iloc[0]) < 1


def test_predict_registry_takes_the_clock_model_from_the_registry(registered, tmp_path, monkeypatch):
    """No models/clock where the prediction runs: the registry's verified opcost-clock answers."""
    from opcost.model.clocks.clock import ClockModel
    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    root, _ = registered
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pr = Predictor(paths=Paths(elsewhere), registry=True, disk_cache=False)
    assert pr.clock_model().to_json() == ClockModel.load(root / "models" / "clock").to_json()
    assert pr.clocks.available()


def test_a_modified_registered_clock_model_is_refused(registered, tmp_path):
    """The downloaded folder must match the version's bundle_md5 tag."""
    from mlflow import MlflowClient

    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    _, versions = registered
    MlflowClient().set_model_version_tag("opcost-clock", versions["opcost-clock"], "bundle_md5", "0" * 32)
    with pytest.raises(OpcostError, match=r"models:/opcost-clock@champion .* was modified after it was registered"):
        Predictor(paths=Paths(tmp_path), registry=True, disk_cache=False).clock_model()


def test_a_transferred_gpu_with_registry_is_refused_with_advice_that_can_be_followed(registered, tmp_path):
    """H100 has no registered model of its own: not `dvc repro train@H100-inference` (no such stage)."""
    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    with pytest.raises(OpcostError) as exc:
        Predictor(paths=Paths(tmp_path), registry=True, disk_cache=False).bundle("H100", "inference")
    line = str(exc.value)
    assert "\n" not in line and "train@H100" not in line
    assert "holds no model of H100 in inference mode" in line
    assert "leave out --registry in the repository after `dvc pull models/xdevice" in line


def _opcost(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "OPCOST_ROOT", "DVC_ROOT")}
    environ.update(PYTHONPATH=src_dir(), **env)
    return subprocess.run(
        [sys.executable, "-m", "opcost", *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("command", ["predict", "promote"])
def test_a_store_uri_naming_no_store_is_refused_and_nothing_is_created(tmp_path, command):
    import sqlite3

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")  # a project (promote reads params.yaml's targets)
    for name in ("params.yaml", "sets.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    con = sqlite3.connect(tmp_path / "mlflow.db")  # the store that exists
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    typo = tmp_path / "mlfow.db"
    args = {
        "predict": ["predict", "--registry", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30"],
        "promote": ["promote", "--target", "A30-inference", "--version", "1"],
    }[command]
    r = _opcost(args, tmp_path, MLFLOW_TRACKING_URI=f"sqlite:///{typo}")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"names no MLflow store ({typo} does not exist)" in r.stderr
    assert f"sqlite:///{tmp_path / 'mlflow.db'}" in r.stderr and "`opcost sync-registry`" in r.stderr
    assert not typo.exists() and not typo.with_name("mlfow.db.lock").exists()
