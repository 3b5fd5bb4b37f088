"""`make repro` in a fresh clone with MLFLOW_TRACKING_URI pointing at the stack's server.

With a reduced params.yaml (see docs/testing.md, "The local stack and the integration tests"): 3 folds and
small forests for the six train stages, and a time-only cpu-smoke campaign, so the whole pipeline reruns in
minutes on 2 cores. The full parameters take far longer and test nothing more about the server.

The clone's .venv is made by this test as the Makefile would, except that it sees the packages of
the environment running the tests (a path file) instead of downloading them again; `make repro`
then installs the clone itself into it and runs as on a newcomer's machine.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig

from stack_tools import dvc, run, set_params

TARGETS = (
    "A30-inference",
    "A30_no_tf32-inference",
    "RTX2080Ti-inference",
    "A30-training",
    "A30_no_tf32-training",
    "RTX2080Ti-training",
)

READ_BACK = r"""
import json, sys
import mlflow
from mlflow import MlflowClient

client = MlflowClient()
out = {}
for target, bundle_hash in json.loads(sys.argv[1]).items():
    name = f"opcost-{target}"
    versions = client.search_model_versions(f"name='{name}'")
    champion = client.get_model_version_by_alias(name, "champion")
    out[target] = {
        "mine": [v.version for v in versions if v.tags.get("bundle_hash") == bundle_hash],
        "champion_score": float(champion.tags["score"]),
        "best_score": max(float(v.tags["score"]) for v in versions),
    }
runs = mlflow.search_runs(experiment_names=["opcost-validate"])
out["validate_runs"] = len(runs)
print(json.dumps(out))
"""


def reduce(raw: dict) -> None:
    raw["train"].update({"folds": 3, "random_forest": {"n_estimators": 10}, "xgboost": {"n_estimators": 20}})
    raw["profile"]["campaigns"]["cpu-smoke"].update(
        {"modes": ["inference"], "trials": 1, "min_time_s": 0.005, "window_s": 0.01, "energy_source": "none"}
    )


def clone_venv(clone) -> None:
    """clone/.venv as `make` makes it, seeing this environment's packages instead of downloading them."""
    venv = clone / ".venv"
    run([sys.executable, "-m", "venv", str(venv)], clone)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "_opcost_test_shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    here = os.path.dirname(sys.executable)
    for tool in ("dvc", "ruff"):  # console scripts of packages pip now sees as installed
        os.symlink(os.path.join(here, tool), venv / "bin" / tool)


def test_make_repro_logs_and_registers_on_the_server(clone, stack):
    set_params(clone, reduce)  # committed: the champion moves only from committed main
    clone_venv(clone)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPCOST_ROOT", "VIRTUAL_ENV")}
    run(["make", "repro"], clone, env=env, timeout=2400)

    assert "up to date" in dvc(clone, "status", env=env).stdout
    assert not (clone / "mlflow.db").exists()  # everything went to the server
    hashes = {t: json.loads((clone / "models" / t / "bundle.json").read_text())["bundle_hash"] for t in TARGETS}
    got = json.loads(run([sys.executable, "-c", READ_BACK, json.dumps(hashes)], clone, env=env).stdout)
    for t in TARGETS:
        assert len(got[t]["mine"]) == 1, (t, got[t])  # each trained bundle registered once, by its hash
        assert got[t]["champion_score"] == got[t]["best_score"], (t, got[t])
    assert got["validate_runs"] >= 1
