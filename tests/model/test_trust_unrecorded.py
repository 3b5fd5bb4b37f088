"""The content check of a model folder has no way around it.

`predict` checks a folder's md5 against `dvc.lock`. A bundle with every tree value x1000 (times x1000)
must never be served silently: not through a symbolic link to a folder outside the project, not
through a linked `models/`, not from a folder `dvc.lock` does not record (a renamed one), not when
`dvc.lock` is gone, and not as a registry champion whose `bundle_md5` tag is missing. A folder nothing
vouches for is served only with `--trust-unrecorded`, and the answer says so.

The projects here are real DVC projects: `dvc commit` writes the md5 `dvc.lock` records, so the
expected value comes from DVC, not from opcost's own digest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from builders import small_bundle
from opcost.errors import OpcostError
from opcost.io import read_npz, write_npz
from opcost.model.store.bundlestore import BundleStore
from opcost.paths import Paths

TARGET = "A30-inference"
PREDICT = ["predict", "--model", "resnet18", "--input-shape", "1,3,32,32", "--device", "A30", "--json"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A DVC project whose dvc.lock records models/A30-inference (a small real bundle), as a clone's does."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "dvc.yaml").write_text(
        yaml.safe_dump({"stages": {f"train-{TARGET}": {"cmd": "true", "outs": [f"models/{TARGET}"]}}})
    )
    (root / "params.yaml").write_text(yaml.safe_dump({"extract": {"sets": []}}))
    replace(small_bundle(), target=TARGET, device_config="A30").save(root / "models" / TARGET)
    dvc = [str(Path(sys.executable).with_name("dvc")), "--quiet"]
    subprocess.run([*dvc, "init", "--no-scm"], cwd=root, check=True)
    subprocess.run([*dvc, "commit", "--force"], cwd=root, check=True)
    assert f"path: models/{TARGET}" in (root / "dvc.lock").read_text()
    return root


def times_1000(folder: Path) -> None:
    """Every leaf of the time trees x1000: possible values, wrong content (nothing in range says so)."""
    arrays = read_npz(folder / "trees.npz")
    arrays["time/value"] = arrays["time/value"] * 1000
    write_npz(arrays, folder / "trees.npz")


def load(root: Path, trust_unrecorded: bool = False, device: str = "A30"):
    store = BundleStore(Paths(root), trust_unrecorded=True) if trust_unrecorded else BundleStore(Paths(root))
    return store.bundle(device, "inference")


def test_a_recorded_folder_is_served_and_a_modified_one_refused(project):
    assert load(project).unvouched == ""
    times_1000(project / "models" / TARGET)
    with pytest.raises(OpcostError, match=f"models/{TARGET} was modified"):
        load(project)


def test_a_model_folder_linked_to_outside_the_project_is_checked(project, tmp_path):
    outside = tmp_path / "store" / TARGET
    shutil.move(project / "models" / TARGET, outside)
    (project / "models" / TARGET).symlink_to(outside)
    assert load(project).unvouched == ""  # the same content through the link: what dvc.lock records
    times_1000(outside)
    with pytest.raises(OpcostError, match=f"models/{TARGET} was modified") as exc:
        load(project)
    assert "\n" not in str(exc.value)
    with pytest.raises(OpcostError, match="was modified"):  # the flag trusts unrecorded folders, not modified ones
        load(project, trust_unrecorded=True)


def test_a_linked_models_folder_is_checked(project, tmp_path):
    """models/ itself a link (a shared model store)."""
    store = tmp_path / "shared-store"
    shutil.move(project / "models", store)
    (project / "models").symlink_to(store)
    times_1000(store / TARGET)
    with pytest.raises(OpcostError, match=f"models/{TARGET} was modified"):
        load(project)


def test_a_folder_dvc_lock_does_not_record_is_refused_unless_trusted(project):
    shutil.copytree(project / "models" / TARGET, project / "models" / "H100-inference")  # a renamed folder
    with pytest.raises(OpcostError) as exc:
        load(project, device="H100")
    msg = str(exc.value)
    assert "dvc.lock records no output at models/H100-inference, so nothing vouches for its content" in msg
    assert "--trust-unrecorded" in msg and msg.endswith("refused") and "\n" not in msg
    b = load(project, trust_unrecorded=True, device="H100")
    assert b.unvouched == "dvc.lock records no output at models/H100-inference, so nothing vouches for its content"


def test_a_deleted_dvc_lock_vouches_for_nothing(project):
    (project / "dvc.lock").unlink()
    with pytest.raises(OpcostError, match=r"dvc.lock is missing, so nothing vouches for the content of models/A30-"):
        load(project)
    assert load(project, trust_unrecorded=True).unvouched.startswith("dvc.lock is missing")


def test_the_cli_refuses_an_unvouched_folder_in_one_line_and_says_when_it_trusts_one(project, monkeypatch):
    from opcost.cli import app

    monkeypatch.setenv("OPCOST_ROOT", str(project))
    recorded = CliRunner().invoke(app, PREDICT)
    assert recorded.exit_code == 0 and json.loads(recorded.stdout)["warnings"] == [], recorded.output
    (project / "dvc.lock").unlink()
    r = CliRunner().invoke(app, PREDICT)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "dvc.lock is missing" in r.stderr and "--trust-unrecorded" in r.stderr
    r = CliRunner().invoke(app, [*PREDICT, "--trust-unrecorded"])
    assert r.exit_code == 0, r.output
    said = "nothing vouches for the content of models/A30-inference; served as it is because of --trust-unrecorded"
    assert said in r.stderr  # the warning line
    got, want = json.loads(r.stdout), json.loads(recorded.stdout)
    assert said in got["warnings"][0]  # and the answer itself
    assert (got["time_s"], got["time_interval_s"]) == (want["time_s"], want["time_interval_s"])  # nothing widened


def test_recommend_says_which_models_nothing_vouches_for(project, monkeypatch):
    from opcost.cli import app

    monkeypatch.setenv("OPCOST_ROOT", str(project))
    (project / "dvc.lock").unlink()
    args = ["recommend", "--model", "resnet18", "--input-shape", "1,3,32,32", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "dvc.lock is missing" in r.stderr, r.output
    r = CliRunner().invoke(app, [*args, "--trust-unrecorded"])
    assert r.exit_code == 0, r.output
    assert "served as it is because of --trust-unrecorded" in r.stderr
    assert json.loads(r.stdout)["unvouched_models"] == [f"{TARGET}: " + load(project, True).unvouched]


def test_an_import_of_the_api_serves_nothing_unvouched(project):
    """The Python API is a way in too: a fresh process, no flag, the same refusal."""
    code = "from opcost.api import predict; predict('resnet18', (1, 3, 32, 32), 'A30')"
    (project / "dvc.lock").unlink()
    env = {**os.environ, "OPCOST_ROOT": str(project)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "OpcostError: dvc.lock is missing" in r.stderr


def test_a_champion_without_its_md5_tag_is_refused_until_sync_registry_restores_it(trained, tmp_path, monkeypatch):
    """Versions registered before the tag existed, or whose tag was lost, carry none: nothing vouches for them."""
    from mlflow import MlflowClient

    from builders import clone_of
    from opcost.model.records.integrity import BUNDLE_MD5_TAG
    from opcost.model.store.registry import champion_bundle, sync_registry
    from opcost.params.load import load_params

    root = clone_of(trained, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh.db'}")
    paths = Paths(root)
    params = load_params(paths.params)
    sync_registry(paths, params)
    name, target = "opcost-RTX2080Ti-training", "RTX2080Ti-training"
    client = MlflowClient()
    registered = client.get_model_version(name, "1").tags[BUNDLE_MD5_TAG]
    client.delete_model_version_tag(name, "1", BUNDLE_MD5_TAG)
    with pytest.raises(OpcostError) as exc:
        champion_bundle(paths, target)
    msg = str(exc.value)
    assert f"version 1 of {name} carries no {BUNDLE_MD5_TAG} tag, so nothing vouches for its content" in msg
    assert "opcost sync-registry" in msg and "--trust-unrecorded" in msg and "\n" not in msg
    assert "carries no bundle_md5 tag" in champion_bundle(paths, target, trust_unrecorded=True).unvouched
    sync_registry(paths, params)  # the folder matches dvc.lock: its md5 goes back on the version
    assert client.get_model_version(name, "1").tags[BUNDLE_MD5_TAG] == registered
    assert champion_bundle(paths, target).unvouched == ""
