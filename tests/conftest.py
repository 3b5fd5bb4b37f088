"""Shared fixtures. Tests run real code on small inputs; nothing here fakes the core."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Nothing the tests start sends telemetry (set before anything imports MLflow or runs DVC).
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"
os.environ["DVC_NO_ANALYTICS"] = "1"
# Device locks are machine-wide: keep this test run's apart from real campaigns and other test runs.
os.environ["OPCOST_LOCK_DIR"] = tempfile.mkdtemp(prefix="opcost-test-locks-")

# tests/integration/ runs against the team stack (`make test-integration`), never in plain `make test`.
collect_ignore = [] if os.environ.get("OPCOST_INTEGRATION") else ["integration"]
os.environ["HF_HUB_OFFLINE"] = "1"  # Hugging Face models are built from configs: nothing may be downloaded
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = REPO / "data" / "external"


@pytest.fixture(autouse=True)
def _fresh_row_cache() -> None:
    """Each test starts with an empty encoded-row cache (model/basis/features.ROW_CACHE): a test that patches
    the physics sees rows encoded under its patch, never one an earlier test left."""
    from opcost.model.basis.features import ROW_CACHE

    ROW_CACHE.clear()


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root for stage runs; OPCOST_ROOT points there."""
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session")
def external_data() -> Path:
    """data/external/ as DVC tracks it; pulled from the in-repo remote when a fresh clone lacks it."""
    import fcntl

    targets = sorted(EXTERNAL.glob("*.dvc"))
    # pytest-xdist workers share this checkout: one pulls while the others wait (DVC's own repo lock would
    # fail a second `dvc pull` rather than wait)
    lock = Path(tempfile.gettempdir()) / f"opcost-tests-pull-{abs(hash(str(REPO)))}.lock"
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if not all((EXTERNAL / t.stem).is_dir() for t in targets):
            dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
            subprocess.run([dvc, "pull", *map(str, targets)], cwd=REPO, check=True, capture_output=True)
    return EXTERNAL


@pytest.fixture(scope="session")
def pipeline_root(tmp_path_factory, external_data):
    """A small project run end to end (extract, a tiny CPU campaign, ingest, evaluate) in a temp root.

    Extract sets are small; the thesis data is the real one, so evaluated tables hold real rows.
    """
    import os

    import yaml

    from opcost.params.load import load_params
    from opcost.paths import Paths
    from opcost.stages.evaluate import run as run_evaluate_stage
    from opcost.stages.extract import run as run_extract_stage
    from opcost.stages.ingest import run as run_ingest_stage
    from opcost.stages.profile import run as run_stage

    root = tmp_path_factory.mktemp("pipeline")
    (root / "data").mkdir()
    os.symlink(external_data, root / "data" / "external")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["extract"] = {  # inline sets: the temp root has no sets.yaml
        "sets": [
            {"model": "resnet18", "input_shape": [32, 3, 32, 32], "modes": ["inference", "training"]},
            {"model": "squeezenet1_1", "input_shape": [2, 3, 32, 32]},
        ]
    }
    params["profile"] = {
        "campaigns": {
            "tiny": {
                "device": "cpu",
                "modes": ["inference"],
                "sets": ["squeezenet1_1:2x3x32x32"],
                "trials": 2,
                "min_time_s": 0.005,
                "window_s": 0.01,
                "energy_source": "none",
                "max_instances": 2,
                "instance_budget_mb": 4,
            }
        }
    }
    params["train"].update({"folds": 3, "random_forest": {"n_estimators": 10}, "xgboost": {"n_estimators": 20}})
    params["train"]["targets"] = ["RTX2080Ti-training", "A30_no_tf32-training"]  # what `trained` trains
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    old = os.environ.get("OPCOST_ROOT")
    os.environ["OPCOST_ROOT"] = str(root)
    paths = Paths(root)
    p = load_params(paths.params)
    run_extract_stage(paths, p, show_progress=False)
    run_stage(paths, p, "tiny", show_progress=False)
    for src in p.ingest.sources:
        run_ingest_stage(paths, p, src)
    run_evaluate_stage(paths, p)
    yield paths
    if old is None:
        os.environ.pop("OPCOST_ROOT", None)
    else:
        os.environ["OPCOST_ROOT"] = old


@pytest.fixture(scope="session")
def trained(pipeline_root, tmp_path_factory):
    """Two train targets of the pipeline root trained (real thesis data, small forests), logged and
    registered in a store of their own. Tests that check registry semantics use a fresh store."""
    from opcost.params.load import load_params
    from opcost.stages.train import run as run_train_stage

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{db}"
    params = load_params(pipeline_root.params)
    first = {t: run_train_stage(pipeline_root, params, t) for t in params.train.targets}
    yield pipeline_root, params, first
    if old is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = old


# Tests that build the small project end to end (extract, a CPU campaign, ingest, evaluate, train) take
# minutes: every test using one of these fixtures is `slow`, so `pytest -m "not slow"` (make test-fast)
# leaves them out without a mark on each. Other slow tests (a second or more: campaigns, subprocesses, whole
# networks traced) carry @pytest.mark.slow themselves.
SLOW_FIXTURES = frozenset({"pipeline_root", "trained", "external_data"})
PIPELINE_FIXTURES = frozenset({"pipeline_root", "trained", "synced"})  # session fixtures built once per worker


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own collection hook (it appends the group
# to each node id, which `--dist loadgroup` schedules by); run after it, the marks came too late and every worker
# built the small project itself (CI's two workers each spent ~200 s on it)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        if PIPELINE_FIXTURES & fixtures:  # `make test` runs under pytest-xdist --dist loadgroup: one worker builds
            item.add_marker(pytest.mark.xdist_group("pipeline"))  # the small project once and runs its tests
