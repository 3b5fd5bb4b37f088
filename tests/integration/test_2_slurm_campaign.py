"""Campaigns on the stack's SLURM: a job array of shards merged like a local run and recorded by
`dvc repro`; a task killed mid-run and resubmitted; a GPU campaign's failures shown by `opcost status`.

The campaigns are tiny CPU campaigns (resnet18's inference ops at 32x3x32x32, time only), so each
shard measures for seconds."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from stack_tools import dvc, opcost, run, set_params, wait_for

SET = "resnet18:32x3x32x32"  # in extract.sets of params.yaml
KEYS = ["op_id", "mode", "setting", "trial"]
NET_KEYS = ["set_id", "mode", "setting", "trial"]


def add_campaign(clone: Path, name: str, shards: int, **settings) -> None:
    campaign = {
        "device": "cpu",
        "modes": ["inference"],
        "sets": [SET],
        "networks": True,
        "trials": 2,
        "min_time_s": 0.01,
        "window_s": 0.02,
        "energy_source": "none",
        "seed": 0,
        "max_instances": 2,
        "instance_budget_mb": 8,
        **settings,
    }

    def edit(raw: dict) -> None:
        raw["profile"]["campaigns"][name] = campaign
        slurm = raw["profile"].setdefault("slurm", {})
        slurm.setdefault("campaigns", {})[name] = {
            "shards": shards,
            "throttle": 4,
            "cpus_per_task": 1,
            "mem": "1G",
            "time": "00:10:00",
        }

    set_params(clone, edit)


def status(clone: Path, name: str) -> dict:
    return json.loads(opcost(clone, "status", "--campaign", name, "--json").stdout)


def finished(s: dict) -> bool:
    """Every shard is done or failed, and the merge job (if any) has ended."""
    return all(r["state"] in ("done", "failed") for r in s["rows"]) and (
        s["complete"] or (s["merge"] is not None and s["merge"]["state"] == "finished")
    )


def wait_finished(clone: Path, name: str, timeout: float = 300) -> dict:
    last: dict = {}

    def check() -> bool:
        last.update(status(clone, name))
        return finished(last)

    wait_for(f"campaign {name} on SLURM", check, timeout, every=1.0)
    return last


def plan_parts(clone: Path, name: str) -> int:
    return json.loads(opcost(clone, "profile", "--campaign", name, "--dry-run").stdout)["parts"]


def tables(clone: Path, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    raw = clone / "data" / "raw" / name
    return pd.read_parquet(raw / "timings.parquet"), pd.read_parquet(raw / "networks.parquet")


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_job_array_is_merged_like_a_local_run_and_recorded_by_dvc(clone, stack, tmp_path):
    name = "slurm-tiny"
    add_campaign(clone, name, shards=4)
    local = tmp_path / "local"
    shutil.copytree(clone, local, symlinks=True)  # the same project, measured without SLURM

    sub = json.loads(opcost(clone, "submit", "--campaign", name, "--json").stdout)
    assert sub["tasks"] == [0, 1, 2, 3] and sub["array_job"] and sub["merge_job"]
    script = (clone / ".opcost" / "slurm" / name).glob("array-*.sh")
    assert "#SBATCH --array=0-3%4" in next(script).read_text()
    s = wait_finished(clone, name)
    assert s["complete"], s
    assert [r["state"] for r in s["rows"]] == ["done"] * 4
    record = json.loads((clone / ".opcost" / "slurm" / f"{name}.json").read_text())
    assert [x["array_job"] for x in record["submissions"]] == [sub["array_job"]]

    ops, nets = tables(clone, name)
    opcost(local, "profile", "--campaign", name, "--no-progress")
    local_ops, local_nets = tables(local, name)
    # The same rows as a local run (the measured numbers differ, the measurements do not), each once.
    for merged, alone, keys in ((ops, local_ops, KEYS), (nets, local_nets, NET_KEYS)):
        assert list(merged.columns) == list(alone.columns)
        assert (merged.dtypes == alone.dtypes).all()
        assert not merged.duplicated(keys).any()
    assert sorted(map(tuple, ops[KEYS].values)) == sorted(map(tuple, local_ops[KEYS].values))
    assert sorted(nets["set_id"]) == sorted(local_nets["set_id"]) == [SET, SET]  # 2 trials
    assert (ops["status"] == "ok").all()
    assert len(ops.drop_duplicates(["op_id", "mode"])) + 1 == plan_parts(clone, name)
    meta = json.loads((clone / "data" / "raw" / name / "campaign.json").read_text())
    assert meta["rows"]["timings"] == len(ops)

    # On the login node, `dvc repro` records the merged campaign without measuring it again.
    before = md5(clone / "data" / "raw" / name / "timings.parquet")
    dvc(clone, "repro", "--single-item", f"profile@{name}")
    assert md5(clone / "data" / "raw" / name / "timings.parquet") == before
    assert f"profile@{name}" in (clone / "dvc.lock").read_text()
    assert "up to date" in dvc(clone, "status", f"profile@{name}").stdout
    # Submitting a complete campaign submits nothing.
    again = json.loads(opcost(clone, "submit", "--campaign", name, "--json").stdout)
    assert again == {"campaign": name, "complete": True, "submitted": False}


def units_started_after(ops: pd.DataFrame, nets: pd.DataFrame, t: float) -> int:
    """Units (op or network, per mode) whose first trial started after `t`."""
    first_ops = ops.groupby(["op_id", "mode"])["started_at"].min()
    first_nets = nets.groupby(["set_id", "mode"])["started_at"].min()
    return int((first_ops > t).sum() + (first_nets > t).sum())


def test_killed_tasks_are_resubmitted_and_nothing_is_missing_or_twice(clone, stack):
    name = "slurm-kill"
    # slower parts (about 2 s each), so a task can be stopped with some parts written and some not
    add_campaign(clone, name, shards=4, min_time_s=0.2, window_s=0.5)
    total = plan_parts(clone, name)
    sub = json.loads(opcost(clone, "submit", "--campaign", name, "--json").stdout)

    def partly_done(shard: int) -> bool:
        row = status(clone, name)["rows"][shard]
        return row["state"] == "running" and 1 <= row["parts_done"] < row["parts_total"]

    wait_for("shard 1 running with a part written", lambda: partly_done(1), 120, every=0.2)
    run(["scancel", f"{sub['array_job']}_1"], clone)  # SIGTERM, then SIGKILL after KillWait: a time limit
    wait_for("shard 2 running with a part written", lambda: partly_done(2), 120, every=0.2)
    run(["scancel", "--full", "--signal=KILL", f"{sub['array_job']}_2"], clone)  # SIGKILL: no clean-up at all
    s = wait_finished(clone, name)
    assert not s["complete"]
    rows = s["rows"]
    assert rows[1]["state"] == "failed" and rows[1]["error"].startswith("CANCELLED"), rows[1]
    assert rows[2]["state"] == "failed", rows[2]
    assert rows[0]["state"] == rows[3]["state"] == "done"
    assert s["merge"]["slurm_state"] == "CANCELLED"  # its dependency can never be satisfied
    for shard in (1, 2):
        assert 1 <= rows[shard]["parts_done"] < rows[shard]["parts_total"], rows[shard]
    missing = sum(rows[i]["parts_total"] - rows[i]["parts_done"] for i in (1, 2))

    table = opcost(clone, "status", "--campaign", name).stdout
    assert "failed" in table and "CANCELLED" in table

    resubmitted = time.time()
    again = json.loads(opcost(clone, "submit", "--campaign", name, "--json").stdout)
    assert again["tasks"] == [1, 2] and again["done_shards"] == [0, 3]  # only the shards with parts missing
    s = wait_finished(clone, name)
    assert s["complete"], s

    ops, nets = tables(clone, name)
    assert not ops.duplicated(KEYS).any() and not nets.duplicated(NET_KEYS).any()
    assert len(ops.drop_duplicates(["op_id", "mode"])) + len(nets.drop_duplicates(["set_id", "mode"])) == total
    assert len(ops) + len(nets) == 2 * total  # 2 trials of every part: nothing missing, nothing twice
    # the resubmitted tasks measured exactly the parts the killed ones had not written
    assert units_started_after(ops, nets, resubmitted) == missing


def test_gpu_campaign_tasks_get_a_gpu_and_their_failure_is_shown(clone, stack):
    name = "slurm-gpu"
    add_campaign(clone, name, shards=2, device="cuda:0")
    set_params(clone, lambda raw: raw["profile"]["slurm"]["campaigns"][name].update({"gres": "gpu:1"}))
    sub = json.loads(opcost(clone, "submit", "--campaign", name, "--json").stdout)
    script = next((clone / ".opcost" / "slurm" / name).glob("array-*.sh")).read_text()
    assert "#SBATCH --gres=gpu:1" in script
    s = wait_finished(clone, name)
    assert [r["state"] for r in s["rows"]] == ["failed", "failed"]
    for r in s["rows"]:  # the task ran (SLURM gave it one of the 2 fake GPUs) and opcost said why it stopped
        assert "which this machine does not have" in r["error"], r
    assert s["merge"]["slurm_state"] == "CANCELLED"
    log = (clone / ".opcost" / "slurm" / name / "logs" / f"{sub['array_job']}_0.out").read_text()
    assert "error:" in log


@pytest.fixture(autouse=True)
def _cancel_leftovers(clone):
    """A failing test leaves no job of its clone queued on the shared stack."""
    yield
    rec = clone / ".opcost" / "slurm"
    ids = []
    for f in rec.glob("*.json") if rec.is_dir() else []:
        for s in json.loads(f.read_text())["submissions"]:
            ids += [x for x in (s["array_job"], s["merge_job"]) if x]
    if ids:
        subprocess.run(["scancel", *ids], env=os.environ.copy(), capture_output=True)
