"""Issue 24.3: a tampered bundle is refused, and a forged one never becomes champion.

A bundle's `bundle_hash` is a field it declares about itself; what vouches for a folder is the md5
`dvc.lock` records for it (model/records/integrity.py), and values no trained bundle can hold are refused
at load whatever the hashes say.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from builders import clone_of, small_bundle
from opcost.errors import OpcostError
from opcost.io import read_npz, write_npz
from opcost.model.composition.bundle import Bundle
from opcost.model.records.integrity import dir_md5, locked_md5


def _edit_json(folder: Path, edit) -> None:
    meta = json.loads((folder / "bundle.json").read_text())
    edit(meta)
    (folder / "bundle.json").write_text(json.dumps(meta))  # json.dumps writes NaN/Infinity as Python does


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m["costing"].__setitem__("floor_s", float("nan")), "NaN"),
        (lambda m: m["costing"].__setitem__("charge_ratio", float("inf")), "Infinity"),
        (lambda m: m["costing"].__setitem__("floor_s", -1e-6), "costing.floor_s = -1e-06 is outside"),
        (lambda m: m["costing"].__setitem__("noop_s", 5.0), "costing.noop_s = 5.0 is outside"),
        (lambda m: m["costing"].__setitem__("median_power_w", -3.0), "median_power_w = -3.0 is outside"),
        (lambda m: m.__setitem__("clocks_mhz", [-1410]), "clocks_mhz = -1410.0 is outside"),
    ],
)
def test_impossible_values_are_refused_at_load(tmp_path, edit, message):
    small_bundle().save(tmp_path)
    _edit_json(tmp_path, edit)
    with pytest.raises(OpcostError, match=message):
        Bundle.load(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda cols: cols[:-1], "trained on [0-9]+ other feature columns"),  # a column added since it was trained
        (lambda cols: cols[1:] + cols[:1], "trained on [0-9]+ other feature columns"),  # same count, moved
        (lambda cols: None, "trained on unrecorded feature columns"),  # written before columns were recorded
    ],
)
def test_a_bundle_trained_on_another_column_layout_is_refused(tmp_path, edit, message):
    """Trees split on columns by position: loading a bundle whose encoding had other columns would read
    wrong features and answer silently wrong, so load compares the recorded layout with the code's."""
    small_bundle().save(tmp_path)
    Bundle.load(tmp_path)  # as saved: the layouts agree

    def change(meta):
        for m in meta["models"].values():
            cols = edit(m["encoding"]["columns"])
            if cols is None:
                del m["encoding"]["columns"]
            else:
                m["encoding"]["columns"] = cols

    _edit_json(tmp_path, change)
    with pytest.raises(OpcostError, match=message + ".*retrain"):
        Bundle.load(tmp_path)


def test_non_finite_measured_times_are_refused(tmp_path):
    b = small_bundle()
    b.lookup = {"0" * 16: (1e-3, 100.0, False)}
    b.save(tmp_path)
    arrays = read_npz(tmp_path / "trees.npz")
    arrays["lookup/p_w"] = np.array([np.inf])
    write_npz(arrays, tmp_path / "trees.npz")
    with pytest.raises(OpcostError, match="measured power of op 0000000000000000 = inf"):
        Bundle.load(tmp_path)


def test_content_md5_is_computed_from_the_files_and_checked(tmp_path):
    b = small_bundle()
    b.lookup = {"0" * 16: (1e-3, 100.0, False)}
    b.save(tmp_path)
    good = Bundle.load(tmp_path).content_md5
    assert good == dir_md5(tmp_path)
    arrays = read_npz(tmp_path / "trees.npz")
    arrays["lookup/t_s"] = arrays["lookup/t_s"] * 1000  # 1 ms -> 1 s: possible values, wrong content
    write_npz(arrays, tmp_path / "trees.npz")
    assert Bundle.load(tmp_path).lookup["0" * 16][0] == pytest.approx(1.0)  # nothing in range says it is wrong
    with pytest.raises(OpcostError, match=f"was modified: its content md5 is .*, dvc.lock records {good}; refused"):
        Bundle.load(tmp_path, expect_md5=good)


def _forge(folder: Path) -> None:
    """Times x1000 in the trees and the measured lookup, and a new self-declared bundle_hash (what a
    forger writes so the registry sees a new bundle); scores improved so it would win."""
    arrays = read_npz(folder / "trees.npz")
    for k in list(arrays):
        if k == "lookup/t_s":
            arrays[k] = arrays[k] * 1000
    write_npz(arrays, folder / "trees.npz")

    def edit(m):
        m["bundle_hash"] = "f" * 16
        m["scores"]["time"]["twe"] = 0.0001

    _edit_json(folder, edit)


def test_sync_registry_refuses_a_forged_bundle_and_keeps_the_champion(trained, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    params = load_params(paths.params)
    assert sync_registry(paths, params)["RTX2080Ti-training"] == "1"
    folder = root / "models" / "RTX2080Ti-training"
    _forge(folder)
    subprocess.run(
        ["git", "commit", "-qam", "x", "--allow-empty"],
        cwd=root,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    )
    with pytest.raises(OpcostError, match=r"models/RTX2080Ti-training was modified after `train-RTX2080Ti-training`"):
        sync_registry(paths, params)
    client = MlflowClient()
    versions = client.search_model_versions("name='opcost-RTX2080Ti-training'")
    assert [str(v.version) for v in versions] == ["1"]
    assert str(client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion").version) == "1"
    # predict from models/ refuses it too (the same dvc.lock record)
    with pytest.raises(OpcostError, match="was modified"):
        Bundle.load(folder, expect_md5=locked_md5(root, folder))


def test_sync_registry_never_promotes_what_dvc_status_reports_changed(trained, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from opcost.model.store.registry import sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    dvc_yaml = yaml.safe_load((root / "dvc.yaml").read_text())
    dvc_yaml["stages"]["train-RTX2080Ti-training"]["cmd"] = "echo retrained-differently"
    (root / "dvc.yaml").write_text(yaml.safe_dump(dvc_yaml))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "a new command: the model is stale"], cwd=root, check=True)
    paths = Paths(root)
    done = sync_registry(paths, load_params(paths.params))
    assert done["RTX2080Ti-training"] == "1" and done["A30_no_tf32-training"] == "1"
    client = MlflowClient()
    with pytest.raises(Exception, match="alias champion not found"):
        client.get_model_version_by_alias("opcost-RTX2080Ti-training", "champion")
    assert str(client.get_model_version_by_alias("opcost-A30_no_tf32-training", "champion").version) == "1"


def test_registry_load_checks_the_registered_md5(trained, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from opcost.model.records.integrity import BUNDLE_MD5_TAG
    from opcost.model.store.registry import champion_bundle, sync_registry
    from opcost.params.load import load_params
    from opcost.paths import Paths

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    sync_registry(paths, load_params(paths.params))
    assert champion_bundle(paths, "RTX2080Ti-training").target == "RTX2080Ti-training"
    client = MlflowClient()
    client.set_model_version_tag("opcost-RTX2080Ti-training", "1", BUNDLE_MD5_TAG, "0" * 32)
    with pytest.raises(OpcostError, match=f"{BUNDLE_MD5_TAG} of version 1 records 0{{32}}; refused"):
        champion_bundle(paths, "RTX2080Ti-training")


def test_json_output_never_holds_nan():
    """`--json` goes through outputs.finite_json: NaN and infinities (numpy's too) become null, and
    the text parses under a strict JSON parser."""
    from opcost.outputs import finite_json

    doc = {"time_s": float("nan"), "rows": [np.float64("inf"), np.float32(1.5), -float("inf"), 2], "ok": "x"}
    text = finite_json(doc)
    assert "NaN" not in text and "Infinity" not in text

    def strict(name):
        raise ValueError(name)

    assert json.loads(text, parse_constant=strict) == {"time_s": None, "rows": [None, 1.5, None, 2], "ok": "x"}


def test_predict_json_prints_no_nan(monkeypatch):
    """The CLI's predict --json path, with a prediction whose energy is not known (NaN)."""
    from typer.testing import CliRunner

    from opcost.cli import app
    from opcost.model.prediction import predict

    class Answer:  # the shape cli.predict prints with --json; the numbers are not under test here
        warnings: list[str] = []
        memory = None  # no footprint: nothing to refuse for memory

        def to_json(self):
            return {"time_s": 0.01, "energy_j": float("nan"), "power_w": np.float64("nan")}

    monkeypatch.setattr(predict.Predictor, "predict", lambda self, *a, **k: Answer())
    args = ["predict", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "NaN" not in r.stdout
    assert json.loads(r.stdout) == {"time_s": 0.01, "energy_j": None, "power_w": None}
