"""Bundles load as data only; the MLflow registry survives concurrency and interrupts."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from builders import clone_of, small_bundle
from opcost.errors import OpcostError
from opcost.model.composition.bundle import Bundle

REPO = Path(__file__).resolve().parents[2]


class Payload:
    """Unpickling this runs `touch <marker>`: what a planted model file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_bundle_saves_deterministically_and_loads_the_same_model(tmp_path):
    b = small_bundle()
    b.save(tmp_path / "a")
    b.save(tmp_path / "b")
    for f in ("bundle.json", "trees.npz"):  # byte-identical: dvc repro -f leaves dvc.lock as it was
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    loaded = Bundle.load(tmp_path / "a")
    X = np.random.default_rng(1).normal(size=(20, len(b.models["time"].encoding.columns)))
    np.testing.assert_array_equal(loaded.models["time"].predict_matrix(X), b.models["time"].predict_matrix(X))


def test_a_planted_pickle_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "models" / "A30-inference"
    folder.mkdir(parents=True)
    (folder / "bundle.joblib").write_bytes(pickle.dumps(Payload(marker)))  # the old format's file name
    with pytest.raises(
        OpcostError, match=r"holds no bundle.json \(found bundle.joblib; other files are never loaded\)"
    ):
        Bundle.load(folder)
    # a valid bundle.json whose trees file is a pickle
    small_bundle().save(folder)
    (folder / "trees.npz").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(OpcostError, match="trees.npz is not a plain numeric .npz archive .*refused") as exc:
        Bundle.load(folder)
    assert "\n" not in str(exc.value)
    # an .npz holding an object array (numpy pickles it)
    np.savez(folder / "trees.npz", **{"time/feature": np.array([Payload(marker)], dtype=object)})
    with pytest.raises(OpcostError, match="refused"):
        Bundle.load(folder)
    assert not marker.exists()


@pytest.mark.slow
def test_the_cli_refuses_a_planted_pickle_in_one_line(tmp_path):
    marker = tmp_path / "pwned"
    root = tmp_path / "proj"
    (root / "models" / "A30-inference").mkdir(parents=True)
    (root / "dvc.yaml").write_text("stages: {}\n")
    (root / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": []}}))
    small_bundle().save(root / "models" / "A30-inference")
    (root / "models" / "A30-inference" / "trees.npz").write_bytes(pickle.dumps(Payload(marker)))
    env = {**os.environ, "OPCOST_ROOT": str(root)}
    cmd = [sys.executable, "-m", "opcost", "predict", "--model", "resnet18", "--input-shape", "1,3,32,32"]
    # --trust-unrecorded: no dvc.lock here, and the trees file, not the missing record, is under test
    r = subprocess.run([*cmd, "--device", "A30", "--trust-unrecorded"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "trees.npz is not a plain numeric" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda a: a.__setitem__("time/feature", a["time/feature"] + 10_000), "outside the encoding"),
        (lambda a: a.__setitem__("time/left", a["time/left"] - 10_000), "point outside their nodes"),
        (lambda a: a.__setitem__("time/value", a["time/value"].astype(np.float32)), "not a 2-D float64"),
        (lambda a: a.pop("time/threshold"), "time/threshold missing"),
    ],
)
def test_an_inconsistent_bundle_is_refused(tmp_path, tamper, message):
    from opcost.io import read_npz, write_npz

    small_bundle().save(tmp_path)
    arrays = read_npz(tmp_path / "trees.npz")
    tamper(arrays)
    write_npz(arrays, tmp_path / "trees.npz")
    with pytest.raises(OpcostError, match=message):
        Bundle.load(tmp_path)


def test_two_sync_registry_processes_on_a_fresh_store_leave_one_version_each(trained, tmp_path):
    from mlflow import MlflowClient

    root = clone_of(trained, tmp_path)
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    env = {**os.environ, "OPCOST_ROOT": str(root), "MLFLOW_TRACKING_URI": uri}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "opcost", "sync-registry"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    client = MlflowClient(tracking_uri=uri)
    for t in ("RTX2080Ti-training", "A30_no_tf32-training"):
        versions = client.search_model_versions(f"name='opcost-{t}'")
        assert len(versions) == 1, [v.version for v in versions]
        assert (
            versions[0].tags["bundle_hash"]
            == json.loads((root / "models" / t / "bundle.json").read_text())["bundle_hash"]
        )
        assert str(client.get_model_version_by_alias(f"opcost-{t}", "champion").version) == str(versions[0].version)
        # each run record replayed once (the write lock is held around the replay), not once per process
        exp = client.get_experiment_by_name("opcost-train")
        parents = client.search_runs([exp.experiment_id], filter_string=f"tags.mlflow.runName = 'train@{t}'")
        assert len(parents) == 1, [r.info.run_id for r in parents]


def test_sync_replays_the_training_runs_into_a_fresh_store(trained, tmp_path, monkeypatch):
    """A fresh clone's store gets the parent and nested runs, fold scores as steps and figures, and
    the champion version points at the replayed run."""
    import mlflow
    from mlflow import MlflowClient

    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    assert sync_registry(paths, load_params(paths.params)) == {"RTX2080Ti-training": "1", "A30_no_tf32-training": "1"}
    runs = mlflow.search_runs(experiment_names=["opcost-train"])
    parent = runs[runs["tags.mlflow.runName"] == "train@RTX2080Ti-training"].iloc[0]
    children = runs[runs["tags.mlflow.parentRunId"] == parent.run_id]
    # rf/xgb x (time: baseline/improved/physical; power: baseline/improved) x grouped/family split
    assert len(children) == 20
    assert set(runs["status"]) == {"FINISHED"}
    client = MlflowClient()
    nested = children[children["tags.mlflow.runName"] == "xgb-time-improved-grouped"].iloc[0]
    folds = load_params(paths.params).train.folds
    assert len(client.get_metric_history(nested.run_id, "fold_r2")) == folds
    assert [a.path for a in client.list_artifacts(nested.run_id)] == ["predicted_vs_measured_time.png"]
    champ = client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion")
    assert champ.run_id == parent.run_id
    assert parent["tags.replayed_from"] == "models/RTX2080Ti-training/run.json"
    rec = json.loads((root / "models" / "RTX2080Ti-training" / "run.json").read_text())
    cv = next(c for c in rec["children"] if c["name"] == "xgb-time-improved-grouped")["steps"]["fold_r2"]
    assert [m.value for m in client.get_metric_history(nested.run_id, "fold_r2")] == pytest.approx(cv)


def test_a_half_registered_version_is_removed_on_the_next_registration(trained, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    from opcost.model.records import tracking

    tracking.setup(root)
    client = MlflowClient()
    client.create_registered_model("opcost-RTX2080Ti-training")
    client.create_model_version("opcost-RTX2080Ti-training", source=str(tmp_path), run_id=None)  # no hash tag
    sync_registry(paths, load_params(paths.params))
    versions = client.search_model_versions("name='opcost-RTX2080Ti-training'")
    assert [str(v.version) for v in versions] == ["2"] and versions[0].tags["bundle_hash"]


RUN_SCRIPT = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    from opcost.model.records import tracking
    # Ctrl-C as in a terminal: a shell that starts pytest in the background hands its children
    # SIGINT ignored, and Python then never raises KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mlflow = tracking.setup(Path(sys.argv[1]), experiment="interrupts")
    with tracking.tracked_run(mlflow, "long"):
        print(mlflow.active_run().info.run_id, flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize(
    "sig, status", [(signal.SIGTERM, "KILLED"), (signal.SIGINT, "KILLED"), (signal.SIGKILL, "KILLED")]
)
@pytest.mark.slow
def test_an_interrupted_run_never_stays_running(tmp_path, sig, status):
    from mlflow import MlflowClient

    from opcost.model.records import tracking

    uri = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    p = subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
    run_id = p.stdout.readline().strip()
    time.sleep(0.3)
    p.send_signal(sig)
    p.wait(timeout=60)
    assert p.returncode != 0
    client = MlflowClient(tracking_uri=uri)
    if sig == signal.SIGKILL:  # no chance to say so: the next setup on this host finds the dead process
        assert client.get_run(run_id).info.status == "RUNNING"
        os.environ["MLFLOW_TRACKING_URI"], old = uri, os.environ.get("MLFLOW_TRACKING_URI")
        try:
            tracking.setup(tmp_path, experiment="interrupts")
        finally:
            if old is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = old
    assert client.get_run(run_id).info.status == status


def test_champion_moves_only_from_committed_main_or_by_promote(trained, tmp_path, monkeypatch):
    """An experiment (or a branch, or uncommitted parameters) registers but leaves `champion` alone;
    `opcost promote` moves it explicitly."""
    from mlflow import MlflowClient

    from opcost.model.store.registry import promote, sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    monkeypatch.setenv("DVC_EXP_NAME", "exp-folds5")
    paths = Paths(root)
    assert sync_registry(paths, load_params(paths.params))["RTX2080Ti-training"] == "1"
    client = MlflowClient()
    with pytest.raises(Exception, match="alias champion not found"):
        client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion")
    v = client.get_model_version("opcost-RTX2080Ti-training", "1")
    assert v.tags["split"] == "grouped-k3-seed0" and v.tags["dvc_experiment"] == "exp-folds5"
    monkeypatch.delenv("DVC_EXP_NAME")
    (root / "params.yaml").write_text((root / "params.yaml").read_text() + "# edited\n")
    sync_registry(paths, load_params(paths.params))  # uncommitted parameters: still no champion
    with pytest.raises(Exception, match="alias champion not found"):
        client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion")
    assert promote(paths, "RTX2080Ti-training") == "1"
    assert str(client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion").version) == "1"
    with pytest.raises(OpcostError, match="has no version '7'"):
        promote(paths, "RTX2080Ti-training", "7")


@pytest.mark.slow
def test_a_fold_without_a_score_is_left_out_of_the_replayed_run(tmp_path, monkeypatch):
    """A fold with too few rows has no R2 (None in run.json); MLflow refuses a metric without a
    value, so replaying such a record once stopped `sync-registry` on every store. The other folds
    keep their step numbers."""
    import mlflow
    from mlflow import MlflowClient

    from opcost.model.records import runlog

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'runs.db'}")
    kid = runlog.child(
        "xgb-time", {}, {"folds": 3}, {"r2": float("nan"), "mape": 12.5}, {"fold_r2": [0.9, None, 0.7]}, []
    )
    record = {**runlog.child("train@X", {"target": "X"}, {}, {"twe": None}, {}, []), "children": [kid]}
    with runlog.replayed(mlflow, record) as parent:
        parent_id = parent.info.run_id
    client = MlflowClient()
    nested = mlflow.search_runs(experiment_ids=[client.get_run(parent_id).info.experiment_id])
    kid_id = nested[nested["tags.mlflow.runName"] == "xgb-time"].iloc[0].run_id
    assert [(m.step, m.value) for m in client.get_metric_history(kid_id, "fold_r2")] == [(0, 0.9), (2, 0.7)]
    # the latest step, no r2, and the mean and spread over the folds that have a score
    assert client.get_run(kid_id).data.metrics == pytest.approx(
        {"mape": 12.5, "fold_r2": 0.7, "cv_r2_mean": 0.8, "cv_r2_std": 0.1}
    )
    assert client.get_run(parent_id).data.metrics == {}


def test_a_bundle_scores_the_same_fitted_and_loaded(tmp_path):
    """train registers the bundle it just fitted, sync-registry the one it loads from bundle.json
    (scores rounded there): both must score alike, or the champion hops between equal bundles."""
    from opcost.model.store.registry import bundle_score

    b = small_bundle()
    b.scores = {"time": {"twe": 0.25051154973960327}, "power": {"mape": 0.1234567890123}}
    b.save(tmp_path / "b")
    assert bundle_score(b) == bundle_score(Bundle.load(tmp_path / "b")) == -(0.2505115497 + 0.1234567890)
