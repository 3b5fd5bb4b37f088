"""The MLflow model registry: register a bundle once, keep exactly one version per content hash,
and move the `champion` alias.

Registration is idempotent and safe with several processes at once:
- on SQLite every write happens under `tracking.write_lock`;
- the content hash is set in the same call that creates the version (no window in which a version
  exists without it);
- on any store, after creating a version the process looks for other versions with the same hash;
  the oldest survives and a newer one deletes itself, so two processes racing on a tracking server
  (where no file lock reaches) still end with one version;
- a version without a hash tag (left by an interrupted older run) is removed on the next
  registration, and so is a version whose model artifact cannot be found.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from opcost.config import Params, Paths
from opcost.errors import OpcostError
from opcost.model import tracking
from opcost.model.bundle import BUNDLE_FILE, Bundle
from opcost.model.pyfunc import LOADER_MODULE

SCORE_TAG = "score"


def bundle_score(bundle: Bundle) -> float:
    """What champions are compared on: the sum of the chosen models' mean CV R^2."""
    return float(sum(bundle.scores[q]["cv_r2_mean"] for q in bundle.scores))


def version_tags(bundle: Bundle) -> dict[str, str]:
    tags = {
        "bundle_hash": bundle.bundle_hash,
        "data_version": bundle.data_version,
        SCORE_TAG: repr(bundle_score(bundle)),
    }
    for q, s in bundle.scores.items():
        for k in ("cv_r2_mean", "cv_mape_mean", "test_r2", "test_mape"):
            if k in s:
                tags[f"{q}_{k}"] = repr(s[k])
    for q, m in bundle.models.items():
        tags[f"{q}_model"] = m.name
    return tags


def repair(client: Any, name: str) -> list[str]:
    """Delete versions of `name` that carry no bundle hash (half-registered). Returns their numbers."""
    try:
        versions = client.search_model_versions(f"name='{name}'")
    except Exception:
        return []
    removed = []
    for v in versions:
        if not v.tags.get("bundle_hash"):
            client.delete_model_version(name, v.version)
            removed.append(str(v.version))
    return removed


def register_bundle(root: Path, mlflow: Any, bundle: Bundle) -> str | None:
    """Register `bundle` from the active run unless a version with its hash exists; move `champion`
    to it if its score is at least the champion's. Returns the new version, or None."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    name = tracking.registered_name(bundle.target)
    client = MlflowClient()
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("register_bundle needs an active MLflow run")
    with tracking.write_lock(root):
        repair(client, name)
        if tracking.find_version(client, name, bundle.bundle_hash) is not None:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "bundle"
            bundle.save(data)
            info = mlflow.pyfunc.log_model(
                name="bundle", loader_module=LOADER_MODULE, data_path=str(data), pip_requirements=[]
            )
        try:
            client.create_registered_model(name)
        except MlflowException:
            pass  # exists already
        mv = client.create_model_version(name, source=info.model_uri, run_id=run.info.run_id, tags=version_tags(bundle))
        version = str(mv.version)
        winner = tracking.find_version(client, name, bundle.bundle_hash)
        if winner is not None and str(winner.version) != version:
            client.delete_model_version(name, version)  # another process registered the same bundle first
            return None
        champ = tracking.champion_version(client, name)
        if champ is None or bundle_score(bundle) >= float(champ.tags.get(SCORE_TAG, "-inf")):
            client.set_registered_model_alias(name, tracking.CHAMPION, version)
    mlflow.log_metric("bundle_score", bundle_score(bundle))
    return version


def sync_registry(paths: Paths, params: Params) -> dict[str, str | None]:
    """Register the bundles under models/ that this tracking store lacks. A fresh clone's `dvc pull`
    brings models without their MLflow runs: each bundle's run record (run.json) is replayed, so the
    store gets the same parent and nested runs, fold scores and figures the training machine logged."""
    from mlflow import MlflowClient

    from opcost.model import runlog

    mlflow = tracking.setup(paths.root)
    client = MlflowClient()
    done: dict[str, str | None] = {}
    for target in params.train.targets:
        folder = paths.model_dir(target)
        if not (folder / BUNDLE_FILE).is_file():
            raise OpcostError(f"{folder} has no {BUNDLE_FILE}: run `dvc pull` or `dvc repro train@{target}`")
        bundle = Bundle.load(folder)
        if tracking.find_version(client, tracking.registered_name(target), bundle.bundle_hash) is not None:
            done[target] = None
            continue
        record = runlog.load(folder)
        extra = {**tracking.source_tags(paths.root), "replayed_from": f"models/{target}/{runlog.RUN_FILE}"}
        with runlog.replayed(mlflow, record, extra):
            done[target] = register_bundle(paths.root, mlflow, bundle)
    return done


def champion_bundle(paths: Paths, target: str) -> Bundle:
    """The `champion` of `opcost-<target>` from the registry, loaded as data from its artifact."""
    mlflow = tracking.setup(paths.root)
    uri = f"models:/{tracking.registered_name(target)}@{tracking.CHAMPION}"
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    except Exception as exc:
        raise OpcostError(
            f"cannot load {uri} from {tracking.tracking_uri(paths.root)}: run `dvc repro train@{target}` "
            f"or `opcost sync-registry` ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    return Bundle.load(local / "data" / "bundle")
