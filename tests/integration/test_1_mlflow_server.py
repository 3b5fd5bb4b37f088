"""Training logged to the MLflow server (PostgreSQL, artifacts in S3), the champion registered and read
back from other processes; the content hash keeps a bundle from being registered twice.

Runs first (file order) on a freshly started stack, so the versions it registers are the only ones
of its target when it checks the champion."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
from stack_tools import dvc, opcost, run, set_params, small_training, training_inputs

TARGET = "RTX2080Ti-training"  # the smallest training set of the thesis data (256 rows)
NAME = f"opcost-{TARGET}"

READ_BACK = r"""
import json, sys
import pandas as pd
from mlflow import MlflowClient
import mlflow.pyfunc

name, version, ops = sys.argv[1], sys.argv[2], sys.argv[3]
client = MlflowClient()
champion = client.get_model_version_by_alias(name, "champion")
versions = client.search_model_versions(f"name='{name}'")
out = {
    "champion": champion.version,
    "scores": {v.version: float(v.tags["score"]) for v in versions},
    "hashes": {v.version: v.tags.get("bundle_hash") for v in versions},
}
if version != "-":
    model = mlflow.pyfunc.load_model(f"models:/{name}/{version}")
    out["t_s"] = model.predict(pd.read_parquet(ops).head(40))["t_s"].tolist()
print(json.dumps(out))
"""

LOCAL = r"""
import json, sys
from pathlib import Path
import pandas as pd
from opcost.model.composition.bundle import Bundle
from opcost.model.basis.features import record_of

bundle = Bundle.load(Path(sys.argv[1]))
rows = pd.read_parquet(sys.argv[2]).head(40)
# the pyfunc model costs ops as predictions do (measured, floor, predicted, ...): compare like with like
print(json.dumps(bundle.coster().cost([record_of(r) for _, r in rows.iterrows()], None).t_s.tolist()))
"""


def test_training_logs_to_the_server_and_the_champion_reads_back_elsewhere(clone, stack):
    set_params(clone, small_training)
    training_inputs(clone, TARGET)
    first = opcost(clone, "train", "--target", TARGET).stdout
    again = opcost(clone, "train", "--target", TARGET).stdout
    assert "registry: nothing new to register" in again  # same data, parameters and code: same content hash
    # trained outside `dvc repro`: record the folder in dvc.lock, or local predictions refuse it (issue 24.3)
    dvc(clone, "commit", "--force", f"train@{TARGET}")
    bundle = json.loads((clone / "models" / TARGET / "bundle.json").read_text())

    # Read everything back from another process, through the server (and S3 for the model itself).
    ops = clone / "data" / "operations" / "operations.parquet"
    # the registered version of this bundle: the one train printed, found again by its hash
    probe = run([sys.executable, "-c", READ_BACK, NAME, "-", str(ops)], clone)
    got = json.loads(probe.stdout)
    mine = [v for v, h in got["hashes"].items() if h == bundle["bundle_hash"]]
    assert len(mine) == 1, got["hashes"]  # registered once, though trained twice
    version = mine[0]
    if "registered version" in first:
        assert f"registered version {version}" in first
    got = json.loads(run([sys.executable, "-c", READ_BACK, NAME, version, str(ops)], clone).stdout)
    # the champion is the best-scored version (the only one on a fresh stack)
    assert got["scores"][got["champion"]] == max(got["scores"].values())

    # The same predictions from the registry's copy as from models/: the artifact went through S3 intact.
    local = run(
        [sys.executable, "-c", LOCAL, str(clone / "models" / TARGET), str(ops)],
        clone,
        env={**os.environ, "PYTHONPATH": str(clone / "src")},
    )
    assert got["t_s"] == json.loads(local.stdout)

    # `opcost predict --registry` in yet another process answers from the champion.
    args = ["predict", "--model", "resnet18", "--input-shape", "8,3,32,32", "--device", "RTX2080Ti", "--mode"]
    reg = json.loads(opcost(clone, *args, "training", "--registry", "--json").stdout)
    assert reg["time_s"] > 0
    if got["champion"] == version:
        assert reg == json.loads(opcost(clone, *args, "training", "--json").stdout)

    # The runs: one parent per stage run, nested runs per algorithm x quantity x feature set x split,
    # the grouped split's fold scores as steps.
    runs = run(
        [
            sys.executable,
            "-c",
            "import json, mlflow; "
            "df = mlflow.search_runs(experiment_names=['opcost-train'], "
            f"filter_string=\"tags.dvc_stage = 'train@{TARGET}'\"); "
            "c = mlflow.MlflowClient(); "
            "nested = df[df['tags.mlflow.parentRunId'].notna()]; "
            "print(json.dumps({'parents': int(df['tags.mlflow.parentRunId'].isna().sum()), "
            "'nested': sorted(set(nested['tags.mlflow.runName'])), "
            "'steps': len(c.get_metric_history("
            "nested[nested['tags.mlflow.runName'] == 'xgb-time-improved-grouped']['run_id'].iloc[0], 'fold_r2'))}))",
        ],
        clone,
    )
    r = json.loads(runs.stdout)
    assert r["parents"] >= 2  # the two train runs above
    assert r["nested"] == sorted(
        f"{a}-{q}-{f}-{s}"
        for a in ("rf", "xgb")
        for q in ("time", "power")
        for f in ("baseline", "improved", "physical")
        for s in ("grouped", "family")
        if q == "time" or f != "physical"
    )
    assert r["steps"] == 3  # folds: 3

    # The artifacts are objects in the S3 bucket behind the server, not files on this machine.
    s3 = boto3.client("s3", endpoint_url=stack["OPCOST_STACK_S3_ENDPOINT"])
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket=stack["OPCOST_STACK_S3_BUCKET"], Prefix="mlartifacts/")["Contents"]
    ]
    assert any(k.endswith("/trees.npz") for k in keys), keys
    assert not (clone / "mlruns").exists() and not (clone / "mlflow.db").exists()


def test_concurrent_registrations_of_one_bundle_leave_one_version(clone, stack):
    """Two processes registering the same bundle at once (two `opcost sync-registry` on a shared
    server): exactly one version with that content hash survives."""
    target = "RTX2080Ti-inference"
    set_params(clone, lambda raw: (small_training(raw), raw["train"].update({"targets": [target]})))
    training_inputs(clone, target)
    opcost(clone, "train", "--target", target, "--no-mlflow")  # models/ only, nothing registered yet
    dvc(clone, "commit", "--force", f"train@{target}")  # sync-registry registers only what dvc.lock records
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "opcost", "sync-registry"], cwd=clone, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    bundle_hash = json.loads((clone / "models" / target / "bundle.json").read_text())["bundle_hash"]
    count = run(
        [
            sys.executable,
            "-c",
            "import sys; from mlflow import MlflowClient; "
            f"vs = MlflowClient().search_model_versions(\"name='opcost-{target}'\"); "
            "print(sum(v.tags.get('bundle_hash') == sys.argv[1] for v in vs))",
            bundle_hash,
        ],
        clone,
    )
    assert count.stdout.strip() == "1", outs
