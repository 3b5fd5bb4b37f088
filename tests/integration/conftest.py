"""Integration tests against the running team stack (`make stack-up`, then `make test-integration`).

`make test-integration` sources .stack/env, which points SLURM (SLURM_CONF), MLflow
(MLFLOW_TRACKING_URI) and S3 (OPCOST_STACK_S3_ENDPOINT, AWS_*) at the stack. Every test works in its
own clone of this repository's HEAD commit, as a newcomer or a cluster user would, and runs the
public commands (`opcost`, `dvc`, `make`) in subprocesses; results are read back with MLflow's
client, boto3 and pandas. Nothing here mocks a service.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from stack_tools import dvc, make_clone

NEEDED = ("SLURM_CONF", "MLFLOW_TRACKING_URI", "OPCOST_STACK_S3_ENDPOINT", "OPCOST_STACK_S3_BUCKET")


@pytest.fixture(scope="session")
def stack() -> dict[str, str]:
    """The stack's settings; fails at once, saying what to do, when it is not running."""
    missing = [v for v in NEEDED if not os.environ.get(v)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: start the stack (`make stack-up`) and run `make test-integration`")
    return {v: os.environ[v] for v in NEEDED}


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh clone of this repository's HEAD commit, with the data of its in-repo DVC remote (what
    it holds: a commit whose stage outputs were not pushed yet lacks those, as `make repro` allows)."""
    c = make_clone(tmp_path / "clone")
    dvc(c, "pull", "--quiet", "--allow-missing")
    return c
