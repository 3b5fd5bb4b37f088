"""MLflow: the only module that knows tracking URIs, experiment, run and registered-model names.

Tracking URI: `MLFLOW_TRACKING_URI` if set, else `sqlite:///<repo root>/mlflow.db` (MLflow 3
refuses the file store unless forced). The root comes from `config.find_root`, which honours
`DVC_ROOT`, so `dvc exp run --temp` logs into the repository's database, not the temporary copy's.
Numbers that decide things live in DVC metrics files; MLflow mirrors them for browsing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

EXPERIMENT = "opcost-train"
VALIDATE_EXPERIMENT = "opcost-validate"
VALIDATE_RUN = "validate"
CHAMPION = "champion"


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def registered_name(target: str) -> str:
    """`A30-inference` -> `opcost-A30-inference`."""
    return f"opcost-{target}"


def stage_run_name(target: str) -> str:
    return f"train@{target}"


def nested_run_name(algorithm: str, quantity: str, feature_set: str) -> str:
    return f"{algorithm}-{quantity}-{feature_set}"


def setup(root: Path, experiment: str = EXPERIMENT) -> Any:
    """Point MLflow at the project's store and experiment; returns the mlflow module."""
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    mlflow.set_tracking_uri(tracking_uri(root))
    mlflow.set_experiment(experiment)
    return mlflow


def find_version(client: Any, name: str, bundle_hash: str) -> Any | None:
    """The registered version of `name` whose bundle has this content hash, if any."""
    try:
        versions = client.search_model_versions(f"name='{name}'")
    except Exception:  # no such registered model yet
        return None
    for v in versions:
        if v.tags.get("bundle_hash") == bundle_hash:
            return v
    return None


def champion_version(client: Any, name: str) -> Any | None:
    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except Exception:
        return None
