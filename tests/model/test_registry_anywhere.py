"""The registry from any machine and MLflow a user can read (issue 23).

A fresh temporary directory (no repository, no models/) and a temporary SQLite store: the champion
predicts what the local bundle predicts; errors say where the root came from; registered models carry
a signature, an input example and descriptions; runs carry cv_r2_mean/std, the training commit
apart from the replaying clone's, and the validate report is replayed too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import clone_of
from opcost.errors import OpcostError

GIT = ["git", "-c", "user.name=opcost-tests", "-c", "user.email=tests@opcost.invalid"]
ARGS = ["--model", "resnet18", "--input-shape", "32,3,32,32", "--device", "RTX2080Ti", "--mode", "training"]


def head(root) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def synced(trained, tmp_path, monkeypatch):
    """A clone whose run records say they were trained at commit A, synced from commit B into a fresh store."""
    import shutil

    from opcost.model.records import runlog
    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    # `dvc pull` brings data/ too: the operations table the input example is taken from
    ops = Paths(root).operations
    ops.parent.mkdir(parents=True)
    shutil.copy(trained[0].operations, ops)
    trained_at = head(root)
    folder = root / "models" / "RTX2080Ti-training"  # A30_no_tf32's record stays as older code wrote it
    runlog.save(runlog.load(folder), folder)  # the record gets the commit it is trained (saved) at: A
    # models/ are DVC outputs (clone_of): record the new content in dvc.lock, as `dvc repro` would
    dvc = [str(Path(sys.executable).with_name("dvc")), "--quiet"]
    subprocess.run([*dvc, "commit", "--force"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qam", "trained"], cwd=root, check=True)
    # the validate report as `dvc pull` brings it
    (root / "reports" / "validate" / "figures").mkdir(parents=True)
    (root / "reports" / "validate" / "detail.json").write_text(
        json.dumps(
            {
                "summed_vs_measured": {"A30-inference": {"time_mape_pct": 12.0, "energy_mape_pct": None}},
                "predicted_in_sample": {},
            }
        )  # fmt: skip
    )
    (root / "reports" / "validate" / "figures" / "scatter.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "README.txt").write_text("a later commit replays")
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "later"], cwd=root, check=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    sync_registry(paths, load_params(paths.params))
    return paths, trained_at, head(root)


def test_predict_registry_from_an_empty_directory(synced, tmp_path, monkeypatch):
    from opcost.cli import app
    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    paths, _, _ = synced
    local = Predictor(paths=paths).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    reg = Predictor(paths=Paths(elsewhere), registry=True).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")
    assert reg.time_s == local.time_s and reg.energy_j == local.energy_j
    res = CliRunner().invoke(app, ["predict", *ARGS, "--registry", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["time_s"] == local.time_s
    assert not (elsewhere / "models").exists()


def test_outside_the_repository_the_error_says_so(tmp_path, monkeypatch):
    from opcost.cli import app

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    res = CliRunner().invoke(app, ["predict", *ARGS])
    assert res.exit_code == 2
    assert f"{empty} is not an opcost checkout (no dvc.yaml; root from the working directory" in res.stderr
    assert "dvc pull" not in res.stderr
    res = CliRunner().invoke(app, ["predict", *ARGS], env={"OPCOST_ROOT": str(tmp_path / "nowhere")})
    assert res.exit_code == 2 and f"root from OPCOST_ROOT={tmp_path / 'nowhere'}" in res.stderr
    # --registry with no store named and none here: says so instead of creating an empty store
    res = CliRunner().invoke(app, ["predict", *ARGS, "--registry"], env={"MLFLOW_TRACKING_URI": ""})
    assert res.exit_code == 2 and "no MLflow store at" in res.stderr and "set MLFLOW_TRACKING_URI" in res.stderr
    assert not (empty / "mlflow.db").exists()


def test_a_missing_bundle_json_is_named(trained, tmp_path):
    from opcost.model.prediction.predict import Predictor
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    (root / "models" / "RTX2080Ti-training" / "bundle.json").unlink()
    with pytest.raises(OpcostError, match=r"RTX2080Ti-training holds no bundle.json"):
        Predictor(paths=Paths(root)).predict("resnet18", "32,3,32,32", "RTX2080Ti", "training")


def test_registered_models_carry_a_signature_an_example_and_descriptions(synced):
    import mlflow
    import pandas as pd
    from mlflow import MlflowClient

    from opcost.model.records import tracking

    paths, _, _ = synced
    client = MlflowClient()
    name = "opcost-RTX2080Ti-training"
    v = client.get_model_version_by_alias(name, "champion")
    assert "RTX2080Ti in training mode" in v.description and "grouped-k" in v.description and "MAPE" in v.description
    assert "composition layer" in v.description and "data version" in v.description
    assert "RTX2080Ti-training" in client.get_registered_model(name).description
    exp = client.get_experiment_by_name(tracking.EXPERIMENT)
    assert "cv_r2_mean" in exp.tags["mlflow.note.content"]
    info = mlflow.models.get_model_info(f"models:/{name}@champion")
    assert info.signature is not None and "spec_json" in info.signature.inputs.input_names()
    assert [c.name for c in info.signature.outputs.inputs] == ["t_s", "p_w", "e_j", "source"]
    model = mlflow.pyfunc.load_model(f"models:/{name}@champion")
    example = model.input_example
    assert isinstance(example, pd.DataFrame) and len(example) >= 1
    out = model.predict(example)
    assert list(out.columns) == ["t_s", "p_w", "e_j", "source"] and (out["t_s"] > 0).all()


def test_runs_carry_cv_r2_and_the_training_commit_apart_from_the_replay(synced):
    import mlflow

    paths, trained_at, replayed_at = synced
    assert trained_at != replayed_at
    runs = mlflow.search_runs(experiment_names=["opcost-train"])
    parent = runs[runs["tags.mlflow.runName"] == "train@RTX2080Ti-training"].iloc[0]
    assert parent["tags.git_commit"] == trained_at and parent["tags.training_commit"] == trained_at
    assert parent["tags.replayed_from_commit"] == replayed_at
    kids = runs[runs["tags.mlflow.parentRunId"] == parent.run_id]
    nested = kids[kids["tags.mlflow.runName"] == "xgb-time-improved-grouped"].iloc[0]
    rec = json.loads((paths.root / "models" / "RTX2080Ti-training" / "run.json").read_text())
    kid = next(c for c in rec["children"] if c["name"] == "xgb-time-improved-grouped")
    folds = [x for x in kid["steps"]["fold_r2"] if x is not None]
    mean = sum(folds) / len(folds)
    assert nested["metrics.cv_r2_mean"] == pytest.approx(mean)
    assert nested["metrics.cv_r2_std"] == pytest.approx((sum((x - mean) ** 2 for x in folds) / len(folds)) ** 0.5)
    v = mlflow.MlflowClient().get_model_version_by_alias("opcost-RTX2080Ti-training", "champion")
    assert v.tags["git_commit"] == trained_at and v.tags["replayed_from_commit"] == replayed_at
    # a record without a training commit: the replaying clone's commit is never passed off as it
    old = runs[runs["tags.mlflow.runName"] == "train@A30_no_tf32-training"].iloc[0]
    assert not isinstance(old["tags.git_commit"], str) and old["tags.replayed_from_commit"] == replayed_at
    w = mlflow.MlflowClient().get_model_version_by_alias("opcost-A30_no_tf32-training", "champion")
    assert "git_commit" not in w.tags and w.tags["replayed_from_commit"] == replayed_at


def test_sync_replays_the_validate_report_once(synced):
    from mlflow import MlflowClient

    from opcost.model.records import tracking
    from opcost.validate.replay import sync_validate

    paths, _, _ = synced
    run_id = sync_validate(paths)
    assert run_id is not None
    client = MlflowClient()
    run = client.get_run(run_id)
    assert run.data.metrics == {"summed_vs_measured.A30-inference.time_mape_pct": 12.0}
    assert [a.path for a in client.list_artifacts(run_id, "figures")] == ["figures/scatter.png"]
    assert sync_validate(paths) is None  # the same report: nothing new
    exp = client.get_experiment_by_name(tracking.VALIDATE_EXPERIMENT)
    assert len(client.search_runs([exp.experiment_id])) == 1
