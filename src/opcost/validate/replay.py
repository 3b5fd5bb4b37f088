"""Replay the validate report into an MLflow store (a fresh clone has no validate experiment).

`dvc pull` brings reports/validate/ (detail.json and the figures) but no MLflow runs; `opcost
sync-registry` calls `sync_validate` after replaying the train runs, so the validate experiment,
its network errors and figures appear on every machine. One run per content of detail.json (its
md5 is tagged), so replaying twice adds nothing. Kept out of model/store/registry.py: the train stages
import that module, and must not depend on the validate report code.
"""

from __future__ import annotations

from opcost.paths import Paths


def sync_validate(paths: Paths) -> str | None:
    """Replay the pulled validate report (reports/validate/detail.json and its figures) into this store
    unless a validate run of the same content is there. Returns the new run's id, or None."""
    import json

    from mlflow import MlflowClient

    from opcost.model.records import runlog, tracking
    from opcost.model.store.registry import json_hash
    from opcost.validate.report import DETAIL_HASH_TAG, log_mlflow

    tracking.setup(paths.root, experiment=tracking.VALIDATE_EXPERIMENT)
    client = MlflowClient()
    dhash = json_hash(paths.validate_detail)
    exp = client.get_experiment_by_name(tracking.VALIDATE_EXPERIMENT)
    done = f"tags.{DETAIL_HASH_TAG} = '{dhash}' and attributes.status = 'FINISHED'"  # a run cut short is no replay
    if exp is not None and client.search_runs([exp.experiment_id], filter_string=done, max_results=1):
        return None
    detail = json.loads(paths.validate_detail.read_text())
    fig_dir = paths.validate_figures
    figures = sorted(p for p in fig_dir.glob("*") if p.is_file()) if fig_dir.is_dir() else []
    log_mlflow(paths, detail, figures, runlog.replay_tags(paths.root, "reports/validate/detail.json"))
    exp = client.get_experiment_by_name(tracking.VALIDATE_EXPERIMENT)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=done, max_results=1)
    return runs[0].info.run_id if runs else None
