"""The profile stage: a params.yaml campaign over extract outputs, into data/raw/<campaign>/."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from opcost.cli import app
from opcost.errors import OpcostError
from opcost.locks import file_lock
from opcost.measure.campaign import TABLE_FILES, Campaign, measure_part, part_name
from opcost.measure.power import NoEnergy
from opcost.params.load import load_params
from opcost.paths import Paths
from opcost.schemas import NETWORKS, POWER_SAMPLES, TIMINGS
from opcost.slurm.submit import shard_progress
from opcost.stages.extract import run as run_extract_stage
from opcost.stages.profile import merge as merge_stage
from opcost.stages.profile import run as run_stage
from opcost.stages.profile import run_shard as run_shard_stage
from opcost.stages.profile import stage_campaign

PARAMS = {
    "extract": {
        "sets": [{"model": "squeezenet1_1", "input_shape": [2, 3, 32, 32], "modes": ["inference", "training"]}]
    },
    "profile": {
        "campaigns": {
            "tiny": {
                "device": "cpu",
                "modes": ["inference"],
                "sets": ["squeezenet1_1:2x3x32x32"],
                "networks": True,
                "trials": 2,
                "min_time_s": 0.005,
                "window_s": 0.01,
                "energy_source": "none",
                "max_instances": 2,
                "instance_budget_mb": 4,
            }
        }
    },
}


@pytest.fixture
def paths(tmp_root):
    (tmp_root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    p = Paths(tmp_root)
    run_extract_stage(p, load_params(p.params), show_progress=False)
    return p


@pytest.mark.slow
def test_profile_stage_writes_raw_tables(paths):
    params = load_params(paths.params)
    meta = run_stage(paths, params, "tiny", show_progress=False)
    raw = paths.raw_dir("tiny")
    t = TIMINGS.validate(pd.read_parquet(raw / "timings.parquet"))
    n = NETWORKS.validate(pd.read_parquet(raw / "networks.parquet"))
    POWER_SAMPLES.validate(pd.read_parquet(raw / "power_samples.parquet"))
    occ = pd.read_parquet(paths.occurrences)
    n_ops = occ[(occ["set_id"] == "squeezenet1_1:2x3x32x32") & (occ["mode"] == "inference")]["op_id"].nunique()
    assert len(t) == 2 * n_ops and set(t["trial"]) == {0, 1}
    assert (t["status"] == "ok").all() and (t["mean_s"] > 0).all() and (t["iterations"] > 0).all()
    assert t["window_energy_j"].isna().all() and (t["energy_source"] == "none").all()
    assert list(n["set_id"]) == ["squeezenet1_1:2x3x32x32"] * 2 and (n["status"] == "ok").all()
    saved = json.loads((raw / "campaign.json").read_text())
    assert saved["parameters"]["trials"] == 2 and saved["rows"]["timings"] == len(t)
    env = saved["environment"]
    for key in (
        "host",
        "torch",
        "cuda_runtime",
        "tf32_matmul",
        "tf32_cudnn",
        "cudnn_benchmark",
        "energy_source",
        "device_name",
    ):
        assert key in env
    assert saved["energy_note"].startswith("no energy source")
    assert saved["planned_parts"]["count"] == n_ops + 1 and len(saved["code_hash"]) == 12
    assert meta["failed_rows"] == 0
    assert not any(paths.parts_dir("tiny").rglob("*.parquet"))  # finished: no parts left to resume
    assert sorted(p.name for p in raw.iterdir()) == sorted(TABLE_FILES)


@pytest.mark.slow
def test_profile_stage_errors_name_what_is_valid(paths):
    params = load_params(paths.params)
    with pytest.raises(OpcostError, match="unknown campaign 'big'; campaigns in params.yaml: tiny"):
        run_stage(paths, params, "big", dry_run=True)
    bad = yaml.safe_load(paths.params.read_text())
    bad["profile"]["campaigns"]["tiny"]["sets"] = ["resnet18:2x3x32x32"]
    paths.params.write_text(yaml.safe_dump(bad))
    with pytest.raises(OpcostError, match="set\\(s\\) resnet18:2x3x32x32 not in extract.sets"):
        run_stage(paths, load_params(paths.params), "tiny", dry_run=True)


def test_campaign_params_are_validated(tmp_path):
    bad = {**PARAMS, "profile": {"campaigns": {"x": {"device": "tpu", "sets": ["a"]}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(OpcostError, match="profile.campaigns.x: device 'tpu' must be cpu or cuda:N"):
        load_params(tmp_path / "params.yaml")
    bad["profile"]["campaigns"]["x"] = {"sets": ["a"], "trails": 3}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(OpcostError, match=r"unknown key 'trails' \(closest valid key: 'trials'"):
        load_params(tmp_path / "params.yaml")
    for key, value in (("min_time_s", ".nan"), ("window_s", ".inf"), ("sample_interval_s", "0")):
        (tmp_path / "params.yaml").write_text(f"profile:\n  campaigns:\n    x: {{sets: [a], {key}: {value}}}\n")
        with pytest.raises(OpcostError, match=f"campaigns.x.{key}: expected a finite number > 0, got "):
            load_params(tmp_path / "params.yaml")


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def add_campaign(paths, name: str, n_ops: int, **settings) -> None:
    """A campaign of the first `n_ops` extracted ops (no networks), like `tiny` unless `settings` say."""
    ops = pd.read_parquet(paths.operations)
    raw = yaml.safe_load(paths.params.read_text())
    base = {**raw["profile"]["campaigns"]["tiny"], "sets": [], "networks": False}
    raw["profile"]["campaigns"][name] = {**base, "op_ids": list(ops["op_id"][:n_ops]), **settings}
    paths.params.write_text(yaml.safe_dump(raw))


@pytest.mark.slow
def test_complete_campaign_is_not_measured_again(paths):
    add_campaign(paths, "small", 3)
    params = load_params(paths.params)
    run_stage(paths, params, "small", show_progress=False)
    raw = paths.raw_dir("small")
    before = {f: (raw / f).read_bytes() for f in TABLE_FILES}
    mtimes = {f: (raw / f).stat().st_mtime_ns for f in TABLE_FILES}
    again = run_stage(paths, params, "small", show_progress=False)
    assert again["complete"] is True and again["fingerprint"] == json.loads(before["campaign.json"])["fingerprint"]
    assert {f: (raw / f).stat().st_mtime_ns for f in TABLE_FILES} == mtimes  # not even rewritten
    r = cli("profile", "--campaign", "small", "--no-progress")
    assert r.exit_code == 0 and "profile small: complete (3 parts" in r.stdout and "nothing to measure" in r.stdout
    assert {f: (raw / f).read_bytes() for f in TABLE_FILES} == before
    # --remeasure measures afresh
    r = cli("profile", "--campaign", "small", "--no-progress", "--remeasure")
    assert r.exit_code == 0 and "parts resumed" in r.stdout
    remeasured = pd.read_parquet(raw / "timings.parquet")
    assert (remeasured["started_at"] > json.loads(before["campaign.json"])["ended_at"]).all()
    # a different plan (one more trial) is measured again too
    changed = yaml.safe_load(paths.params.read_text())
    changed["profile"]["campaigns"]["small"]["trials"] = 3
    paths.params.write_text(yaml.safe_dump(changed))
    meta = run_stage(paths, load_params(paths.params), "small", show_progress=False)
    assert "complete" not in meta and set(pd.read_parquet(raw / "timings.parquet")["trial"]) == {0, 1, 2}
    assert stage_campaign(paths, load_params(paths.params), "small").completed() is not None
    (raw / "networks.parquet").write_bytes(b"")  # and a damaged output is not "complete"
    assert stage_campaign(paths, load_params(paths.params), "small").completed() is None


@pytest.mark.slow
def test_gpu_campaign_outputs_reproduce_on_a_machine_without_the_gpu(paths):
    """What `dvc pull` + `dvc repro profile@<gpu campaign>` (persisted output) meets on a laptop: the
    parts come from the GPU nodes' shards, the merge and the stage need no GPU; a changed plan does."""
    add_campaign(paths, "gpu", 3, device="cuda:0", energy_source="nvml")
    params = load_params(paths.params)
    camp = stage_campaign(paths, params, "gpu")
    camp.parts_dir.mkdir(parents=True)
    on_cpu = replace(camp.c, device="cpu")  # stands in for the GPU node that measured the parts
    for setting, unit in camp.pending():
        camp.write_part(part_name(setting, unit), unit, *measure_part(on_cpu, unit, setting, NoEnergy()))
    if not __import__("torch").cuda.is_available():
        r = cli("profile", "--campaign", "gpu", "--merge")
        assert r.exit_code == 0, r.output
        r = cli("profile", "--campaign", "gpu", "--no-progress")
        assert r.exit_code == 0 and "profile gpu: complete (3 parts" in r.stdout, r.output
        add_campaign(paths, "gpu", 3, device="cuda:0", energy_source="nvml", trials=3)
        r = cli("profile", "--campaign", "gpu", "--no-progress")
        assert r.exit_code == 2 and "run `dvc repro profile@gpu` on a node with that GPU" in r.stderr


@pytest.mark.slow
def test_shards_then_merge_give_what_a_local_run_gives(paths, tmp_path):
    params = load_params(paths.params)
    plan = stage_campaign(paths, params, "tiny").plan
    assert [len(plan.shard(i, 3).units) for i in range(3)] == [len(plan.units[i::3]) for i in range(3)]
    progress = shard_progress(paths, params, "tiny", 3)
    assert [p["parts_done"] for p in progress] == [0, 0, 0] and all(p["state"] is None for p in progress)
    results = [run_shard_stage(paths, params, "tiny", i, 3, show_progress=False) for i in (0, 1)]
    r = cli("profile", "--campaign", "tiny", "--shard", "2/3", "--no-progress")
    assert r.exit_code == 0 and "profile tiny shard 2/3:" in r.stdout and "--merge" in r.stdout, r.output
    assert not paths.raw_dir("tiny").exists()  # shards write parts only
    assert sum(x["parts"] for x in results) + len(plan.units[2::3]) == plan.parts
    progress = shard_progress(paths, params, "tiny", 3)
    assert [p["parts_done"] for p in progress] == [p["parts_total"] for p in progress]
    assert [p["parts_total"] for p in progress] == [len(plan.units[i::3]) for i in range(3)]
    assert all(p["state"] == "done" and p["failed_rows"] == 0 and p["last_error"] is None for p in progress)
    keep = tmp_path / "parts-copy"
    shutil.copytree(paths.parts_dir("tiny"), keep)

    r = cli("profile", "--campaign", "tiny", "--merge")
    assert r.exit_code == 0, r.output
    raw = paths.raw_dir("tiny")
    t = pd.read_parquet(raw / "timings.parquet")
    n = pd.read_parquet(raw / "networks.parquet")
    expected = {(u.item_id, u.mode, s.label, k) for s in plan.settings for u in plan.units for k in (0, 1)}
    got = {(r.op_id, r.mode, r.setting, r.trial) for r in t.itertuples()}
    got |= {(r.set_id, r.mode, r.setting, r.trial) for r in n.itertuples()}
    assert got == expected and len(t) + len(n) == len(expected)  # same rows, no duplicates, none missing
    meta = json.loads((raw / "campaign.json").read_text())
    assert sorted(x["name"] for x in meta["runs"]) == ["shard-0-of-3", "shard-1-of-3", "shard-2-of-3"]
    assert meta["environment"]["device_name"] and meta["parts_resumed"] == plan.parts
    assert all(p["merged"] and p["parts_done"] == p["parts_total"] for p in shard_progress(paths, params, "tiny", 3))
    assert not paths.parts_dir("tiny").joinpath(meta["fingerprint"]).exists()

    # a local run consolidating the same parts writes the same bytes
    local = Campaign(plan, tmp_path / "local", keep.parent / "parts-copy", state_dir=tmp_path / "state")
    local.run(show_progress=False)
    for f in ("timings.parquet", "networks.parquet", "power_samples.parquet"):
        assert (tmp_path / "local" / f).read_bytes() == (raw / f).read_bytes(), f


@pytest.mark.slow
def test_merge_with_a_missing_shard_names_it(paths):
    add_campaign(paths, "small", 7)
    params = load_params(paths.params)
    for i in (0, 2):
        run_shard_stage(paths, params, "small", i, 3, show_progress=False)
    for extra in ([], ["--shards", "3"]):
        r = cli("profile", "--campaign", "small", "--merge", *extra)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
        # units 1 and 4 of 7 are shard 1's
        assert "campaign small: 2 of 7 parts missing, in shard(s) 1 of 3: run `opcost profile" in r.stderr
    assert not paths.raw_dir("small").exists()
    progress = shard_progress(paths, params, "small", 3)
    assert [p["parts_done"] for p in progress] == [3, 0, 2] and [p["parts_total"] for p in progress] == [3, 2, 2]
    assert [p["state"] for p in progress] == ["done", None, "done"]
    with pytest.raises(OpcostError, match=r"2 of 7 parts missing, in shard\(s\) 0, 1 of 4"):
        merge_stage(paths, params, "small", 4)  # told another count, it names that count's shards (1, 4)
    r = cli("profile", "--campaign", "tiny", "--shard", "3/3")
    assert r.exit_code == 2 and "malformed --shard '3/3': expected I/N with 0 <= I < N" in r.stderr
    r = cli("profile", "--campaign", "tiny", "--shard", "0/3", "--merge")
    assert r.exit_code == 2 and "give one of the two" in r.stderr


def test_every_op_failed_exits_non_zero(paths):
    from torch import nn

    from builders import BROKEN, module_spec
    from opcost.ops.catalog import operations_table
    from opcost.ops.features import op_metrics

    good = module_spec(nn.Linear(5, 4), (2, 5))  # paper costs of a sound op: BROKEN has none
    ops = pd.read_parquet(paths.operations)
    extra = operations_table({BROKEN.op_id: BROKEN}, {BROKEN.op_id: op_metrics(good)})
    pd.concat([ops, extra], ignore_index=True).to_parquet(paths.operations, index=False)
    raw = yaml.safe_load(paths.params.read_text())
    raw["profile"]["campaigns"]["broken"] = {
        **raw["profile"]["campaigns"]["tiny"],
        "sets": [],
        "op_ids": [BROKEN.op_id],
    }
    paths.params.write_text(yaml.safe_dump(raw))
    r = cli("profile", "--campaign", "broken", "--no-progress")
    assert r.exit_code == 1, r.output
    assert r.stderr.count("\n") == 1
    assert "every measurement of campaign broken failed (2 rows); most frequent error: RuntimeError" in r.stderr
    r = cli("profile", "--campaign", "broken", "--no-progress")  # complete, and still all failed
    assert r.exit_code == 1 and "complete" in r.stdout
    r = cli("profile", "--campaign", "broken", "--shard", "0/1", "--no-progress", "--remeasure")
    assert r.exit_code == 2 and "--remeasure" in r.stderr


def test_a_held_lock_stops_a_second_campaign_with_one_line(paths):
    camp = stage_campaign(paths, load_params(paths.params), "tiny")
    with file_lock(camp.output_lock, "another campaign"):
        r = cli("profile", "--campaign", "tiny", "--no-progress")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert f"campaign output {paths.raw_dir('tiny')} is in use by another process (pid {os.getpid()})" in r.stderr
    with file_lock(camp.shard_lock(1, 2), "another shard"):
        r = cli("profile", "--campaign", "tiny", "--shard", "1/2", "--no-progress")
    assert r.exit_code == 2 and "shard 1/2 of campaign tiny is in use by another process" in r.stderr


@pytest.mark.slow
def test_no_temporary_file_goes_into_the_dvc_output(paths, monkeypatch):
    """Inside a project the atomic writes' temporary files live in .opcost/tmp, never in data/raw/."""
    import opcost.io

    (paths.root / "dvc.yaml").write_text("stages: {}\n")
    made = []
    real = opcost.io.tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        made.append(name)
        return fd, name

    add_campaign(paths, "small", 3)
    monkeypatch.setattr(opcost.io.tempfile, "mkstemp", spy)
    run_stage(paths, load_params(paths.params), "small", show_progress=False)
    assert len(made) >= 3 * 2 + 4  # every part's two files, the three tables and campaign.json at least
    assert all(os.path.dirname(m) == str(paths.root / ".opcost" / "tmp") for m in made), made[:3]
    assert sorted(p.name for p in paths.raw_dir("small").iterdir()) == sorted(TABLE_FILES)


def _start_slow_campaign(paths):
    add_campaign(paths, "slow", 8, min_time_s=0.02, window_s=0.2)
    cmd = [sys.executable, "-m", "opcost", "profile", "--campaign", "slow", "--no-progress"]
    env = {**os.environ, "OPCOST_ROOT": str(paths.root)}
    return cmd, env


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_campaign_says_how_to_resume_and_keeps_its_parts(paths, sig):
    cmd, env = _start_slow_campaign(paths)
    proc = subprocess.Popen(cmd, env=env, cwd=paths.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parts = paths.parts_dir("slow")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and len(list(parts.glob("*/*.timings.parquet"))) < 2:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr
    assert stderr.splitlines()[-1] == "interrupted; run the same command again to resume"
    assert "Traceback" not in stderr
    kept = list(parts.glob("*/*.timings.parquet"))
    assert len(kept) >= 2 and not paths.raw_dir("slow").exists()
    record = json.loads(next(parts.glob("*/local.run.json")).read_text())
    assert record["status"] == "interrupted" and record["error"] == f"interrupted by {signal.Signals(sig).name}"
    meta = run_stage(paths, load_params(paths.params), "slow", show_progress=False)  # the same command, again
    assert meta["parts_resumed"] == len(kept)
    t = pd.read_parquet(paths.raw_dir("slow") / "timings.parquet")
    assert not t.duplicated(["op_id", "trial"]).any() and (t["status"] == "ok").all()


@pytest.fixture
def one_thread():
    """The test process on one torch thread (a machine's default may be 2, the count the campaigns ask for);
    its own count back afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _thread_spy(monkeypatch) -> list[tuple[int, str | None]]:
    """The real measure loop, noting the torch thread count (and OMP_NUM_THREADS) each part is measured on."""
    import torch

    import opcost.measure.campaign as campaign_module

    seen: list[tuple[int, str | None]] = []

    def spy(*args, **kwargs):
        seen.append((torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")))
        return measure_part(*args, **kwargs)

    monkeypatch.setattr(campaign_module, "measure_part", spy)
    return seen


@pytest.mark.slow
def test_campaign_threads_pin_the_measuring_process(paths, monkeypatch, one_thread):
    """threads: 2 measures every part on 2 torch threads, locally and in a shard, records 2 in campaign.json,
    and gives the process its own count back; a changed count measures afresh, the same count is kept."""
    import torch

    seen = _thread_spy(monkeypatch)
    omp = os.environ.get("OMP_NUM_THREADS")
    add_campaign(paths, "two", 2, threads=2)
    run_stage(paths, load_params(paths.params), "two", show_progress=False)
    assert seen == [(2, "2")] * 2
    assert torch.get_num_threads() == 1 and os.environ.get("OMP_NUM_THREADS") == omp
    meta = json.loads((paths.raw_dir("two") / "campaign.json").read_text())
    assert meta["environment"]["cpu_threads"] == 2 and meta["parameters"]["threads"] == 2
    assert run_stage(paths, load_params(paths.params), "two", show_progress=False)["complete"] is True
    assert len(seen) == 2

    # threads changed: not "complete" any more (the fingerprint leaves threads out), measured afresh on 1
    add_campaign(paths, "two", 2, threads=1)
    again = run_stage(paths, load_params(paths.params), "two", show_progress=False)
    assert "complete" not in again and again["environment"]["cpu_threads"] == 1 and seen[2:] == [(1, "1")] * 2
    t = pd.read_parquet(paths.raw_dir("two") / "timings.parquet")
    assert (t["started_at"] > meta["ended_at"]).all()
    assert run_stage(paths, load_params(paths.params), "two", show_progress=False)["complete"] is True

    # a shard (its own interpreter on a cluster, the same stage code) pins itself too
    seen.clear()
    add_campaign(paths, "sharded", 3, threads=2)
    for i in (0, 1):
        run_shard_stage(paths, load_params(paths.params), "sharded", i, 2, show_progress=False)
    assert seen == [(2, "2")] * 3 and torch.get_num_threads() == 1
    # parts measured on 2 threads are not resumed or merged under threads: 1; the error names them
    add_campaign(paths, "sharded", 3, threads=1)
    params = load_params(paths.params)
    parts = stage_campaign(paths, params, "sharded").parts_dir
    for go in (lambda: run_shard_stage(paths, params, "sharded", 0, 2), lambda: merge_stage(paths, params, "sharded")):
        with pytest.raises(OpcostError, match=f"{parts} was measured with 2 CPU thread.s., but profile.campaigns"):
            go()
    assert not paths.raw_dir("sharded").exists() and len(seen) == 3


def test_campaign_without_threads_leaves_the_process_as_it_is(paths, monkeypatch, one_thread):
    seen = _thread_spy(monkeypatch)
    add_campaign(paths, "asis", 1)
    meta = run_stage(paths, load_params(paths.params), "asis", show_progress=False)
    assert seen == [(1, os.environ.get("OMP_NUM_THREADS"))] and meta["environment"]["cpu_threads"] == 1
    assert meta["parameters"]["threads"] is None


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", r"campaigns.tiny.threads: expected an integer >= 1, got 0$"),
        ("-2", r"campaigns.tiny.threads: expected an integer >= 1, got -2$"),
        ("2.5", r"campaigns.tiny.threads: expected an integer >= 1, got 2.5$"),
        ("'2'", r"campaigns.tiny.threads: expected an integer >= 1, got '2'$"),
        ("true", r"campaigns.tiny.threads: expected an integer >= 1, got True$"),
        ("null", r"campaigns.tiny.threads: expected an integer >= 1, got None$"),
        ("5000", r"campaigns.tiny: threads 5000 must be a whole number of CPU threads, 1..1024, or absent$"),
    ],
)
def test_bad_threads_are_refused_before_anything_is_written(paths, value, message):
    text = paths.params.read_text().replace("trials: 2\n", f"trials: 2\n      threads: {value}\n")
    assert f"threads: {value}" in text
    paths.params.write_text(text)
    with pytest.raises(OpcostError, match=message):
        load_params(paths.params)
    r = cli("profile", "--campaign", "tiny", "--no-progress")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "threads" in r.stderr, r.output
    assert not paths.raw_dir("tiny").exists() and not paths.parts_dir("tiny").exists()


@pytest.mark.slow
def test_adhoc_campaign_threads_pin_the_measuring_process(tmp_path, monkeypatch, one_thread):
    """`opcost profile --models ... --threads 2`: an ad-hoc campaign pins its threads as a params.yaml one does."""
    import torch

    seen = _thread_spy(monkeypatch)
    args = ["profile", "--models", "squeezenet1_1:1,3,32,32", "--no-networks", "--trials", "1", "--min-time", "0.005"]
    args += ["--window", "0.01", "--energy-source", "none", "--no-progress"]
    r = cli(*args, "--threads", "0", "--out", str(tmp_path / "bad"))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "threads 0 must be a whole number" in r.stderr, r.output
    assert not (tmp_path / "bad").exists() and not seen
    r = cli(*args, "--threads", "2", "--out", str(tmp_path / "two"))
    assert r.exit_code == 0, r.output
    assert seen and set(seen) == {(2, "2")} and torch.get_num_threads() == 1
    meta = json.loads((tmp_path / "two" / "campaign.json").read_text())
    assert meta["environment"]["cpu_threads"] == 2 and meta["parameters"]["threads"] == 2
