"""SLURM layer: job scripts, sbatch/squeue/sacct parsing on output captured from a real slurmctld
(tests/fixtures/slurm/README.md says how), per-shard status, and the `profile.slurm` parameters.

Submitting to a running cluster is tested in tests/integration/ against the local stack."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from opcost.errors import OpcostError
from opcost.params.load import load_params
from opcost.params.profile import CampaignParams, SlurmParams
from opcost.paths import Paths
from opcost.slurm import scheduler
from opcost.slurm.scheduler import JobState
from opcost.slurm.submit import (
    array_script,
    array_spec,
    is_merged,
    log_tail,
    merge_script,
    read_record,
    resolve_options,
    shard_rows,
)

DATA = Path(__file__).parents[1] / "fixtures" / "slurm"


def sample(name: str) -> str:
    return (DATA / name).read_text()


# ---- parsing ----------------------------------------------------------------------------------------


def test_parse_sbatch_parsable():
    assert scheduler.parse_sbatch(sample("sbatch_parsable.txt")) == "1"
    assert scheduler.parse_sbatch("4242;cluster-a\n") == "4242"  # federated clusters append the cluster
    with pytest.raises(OpcostError, match="not a job id"):
        scheduler.parse_sbatch("Submitted batch job 5\n")


def test_parse_squeue_while_running():
    s = scheduler.parse_squeue(sample("squeue_running.txt"))
    assert {k: (v.raw_id, v.state, v.reason) for k, v in s.items()} == {
        "1_0": ("3", "COMPLETED", "None"),
        "1_1": ("4", "FAILED", "NonZeroExitCode"),
        "1_4": ("1", "PENDING", "Resources"),
        "2": ("2", "PENDING", "Dependency"),
        "1_2": ("5", "RUNNING", "None"),
        "1_3": ("6", "RUNNING", "None"),
    }
    assert {k: v.phase for k, v in s.items()} == {
        "1_0": "finished",
        "1_1": "finished",
        "1_4": "pending",
        "2": "pending",
        "1_2": "running",
        "1_3": "running",
    }


def test_parse_squeue_after_cancel_and_failed_dependency():
    s = scheduler.parse_squeue(sample("squeue_finished.txt"))
    assert s["1_2"].state == "CANCELLED"
    assert s["2"].describe() == "CANCELLED (DependencyNeverSatisfied)"
    assert s["1_1"].describe() == "FAILED (NonZeroExitCode)"
    assert s["1_0"].describe() == "COMPLETED"
    assert all(v.phase == "finished" for v in s.values())


def test_parse_squeue_skips_unsplit_array_ranges_and_other_lines():
    text = "7_[2-9%2]|7|PENDING|JobArrayTaskLimit\n8|8|RUNNING|None\nnot a squeue line\n"
    assert list(scheduler.parse_squeue(text)) == ["8"]


def test_parse_sacct_c_maps_own_ids_back_to_array_tasks():
    ids = dict(line.split()[::-1] for line in sample("task_job_ids.txt").splitlines())  # own id -> 1_k
    ids["2"] = "2"  # the merge job is a plain job
    s = scheduler.parse_sacct(sample("sacct_c.txt"), ids)
    assert {k: (v.state, v.exit_code) for k, v in s.items()} == {
        "1_0": ("COMPLETED", "0:0"),
        "1_1": ("FAILED", "3:0"),
        "1_2": ("CANCELLED", "0:0"),
        "1_3": ("COMPLETED", "0:0"),
        "1_4": ("COMPLETED", "0:0"),
        "2": ("CANCELLED", "0:0"),
    }
    assert s["1_1"].describe() == "FAILED (exit 3:0)"


def test_parse_sacct_with_accounting_keeps_array_ids_and_skips_steps():
    # the JobID column of sacct with slurmdbd names array tasks itself; steps have a dot
    text = "12_0|13|COMPLETED|0:0\n12_0.batch|13.batch|COMPLETED|0:0\n12_1|14|CANCELLED by 0|0:15\n"
    s = scheduler.parse_sacct(text)
    assert sorted(s) == ["12_0", "12_1"]
    assert s["12_1"].state == "CANCELLED" and s["12_1"].exit_code == "0:15"


def test_no_accounting_message_is_recognised():
    # what sacct says on a cluster without slurmdbd, where scheduler.sacct falls back to `sacct -c`
    assert scheduler.NO_ACCOUNTING in sample("sacct_no_accounting.stderr").lower()
    assert sample("sacct_no_accounting.stdout") == ""


def test_missing_slurm_tools_give_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, squeue or sacct here
    with pytest.raises(OpcostError, match="`squeue` not found: run this on a SLURM login node"):
        scheduler.squeue(["5"])
    with pytest.raises(OpcostError, match="`sbatch` not found"):
        scheduler.sbatch(tmp_path / "x.sh")


# ---- job scripts ------------------------------------------------------------------------------------


def test_array_spec_compresses_ranges_and_adds_throttle():
    assert array_spec([0, 1, 2, 3], None) == "0-3"
    assert array_spec([3, 0, 1, 5, 7, 8], 2) == "0-1,3,5,7-8%2"
    assert array_spec([4], 1) == "4%1"
    with pytest.raises(ValueError):
        array_spec([], None)


def campaign(device: str) -> CampaignParams:
    return CampaignParams(name="a100 asis", device=device, sets=("resnet50:32x3x224x224",))


def test_array_script_for_a_gpu_campaign(tmp_path):
    opts = SlurmParams(shards=8, throttle=2, partition="gpu", account="proj1", time="01:30:00", mem="16G")
    text = array_script(
        campaign("cuda:0"), opts, [0, 1, 5], tmp_path / "repo", "/opt/py/bin/python", tmp_path, tmp_path
    )
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=opcost-a100 asis",
        "#SBATCH --array=0-1,5%2",
        "#SBATCH --time=01:30:00",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj1",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16G",
        "#SBATCH --gres=gpu:1",
        f"#SBATCH --output={tmp_path}/logs/%A_%a.out",
    ]
    assert lines[-1] == (
        "exec /opt/py/bin/python -m opcost profile --campaign 'a100 asis' "
        '--shard "$SLURM_ARRAY_TASK_ID/8" --wait-for-device --no-progress'
    )
    assert f"cd {tmp_path}/repo" in lines and f"export OPCOST_ROOT={tmp_path}/repo" in lines


def test_cpu_campaign_requests_no_gpu_and_runs_setup_lines(tmp_path):
    opts = SlurmParams(shards=4, setup=("module load cuda/12", "source /x/.venv/bin/activate"))
    text = array_script(campaign("cpu"), opts, [0, 1, 2, 3], tmp_path, "python", tmp_path, tmp_path)
    assert "--gres" not in text and "--partition" not in text and "--mem" not in text
    assert "#SBATCH --array=0-3" in text
    assert text.index("module load cuda/12") < text.index("source /x/.venv/bin/activate") < text.index("exec ")


def test_merge_script_waits_for_the_array_and_is_cancelled_if_a_task_fails(tmp_path):
    opts = SlurmParams(shards=4, partition="gpu", gres="gpu:a100:1")
    text = merge_script(campaign("cuda:0"), opts, "77", tmp_path, "python", tmp_path, tmp_path)
    assert "#SBATCH --dependency=afterok:77" in text and "#SBATCH --kill-on-invalid-dep=yes" in text
    assert "--gres" not in text and "#SBATCH --cpus-per-task=1" in text
    assert text.rstrip().endswith("profile --campaign 'a100 asis' --merge --shards 4 --no-progress")
    alone = merge_script(campaign("cuda:0"), opts, None, tmp_path, "python", tmp_path, tmp_path)
    assert "--dependency" not in alone  # every shard measured already: merge at once


def test_array_script_runs_as_a_batch_script(tmp_path):
    """The script is valid bash, records the task's own job id and runs the shard's command."""
    fake_py = tmp_path / "python"
    fake_py.write_text(
        '#!/bin/bash\necho "argv: $*" > "$OPCOST_ROOT/ran"; echo "path: $PYTHONPATH" >> "$OPCOST_ROOT/ran"\n'
    )
    fake_py.chmod(0o755)
    run_dir = tmp_path / "run"
    (run_dir / "jobs").mkdir(parents=True)
    script = tmp_path / "array.sh"
    script.write_text(
        array_script(campaign("cpu"), SlurmParams(shards=3), [0, 2], tmp_path, str(fake_py), Path("/src"), run_dir)
    )
    env = {**os.environ, "SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "2", "PYTHONPATH": ""}
    subprocess.run(["bash", str(script)], check=True, env=env, cwd=tmp_path)
    assert (run_dir / "jobs" / "40_2").read_text() == "41\n"
    assert (tmp_path / "ran").read_text() == (
        "argv: -m opcost profile --campaign a100 asis --shard 2/3 --wait-for-device --no-progress\npath: /src\n"
    )


# ---- status -----------------------------------------------------------------------------------------


def test_shard_rows_combine_parts_on_disk_with_slurm_states():
    states = scheduler.parse_squeue(sample("squeue_running.txt"))
    subs = [{"array_job": "1", "tasks": [0, 1, 2, 3, 4], "merge_job": "2", "shards": 6}]
    progress = [
        {"parts_total": 5, "parts_done": 5, "failed_rows": 0, "last_error": None},  # 1_0 COMPLETED
        {"parts_total": 5, "parts_done": 2, "failed_rows": 0, "last_error": None},  # 1_1 FAILED
        {"parts_total": 5, "parts_done": 1, "failed_rows": 0, "last_error": None},  # 1_2 RUNNING
        {"parts_total": 5, "parts_done": 5, "failed_rows": 2, "last_error": "OutOfMemoryError: CUDA"},  # 1_3
        {"parts_total": 4, "parts_done": 0, "failed_rows": 0, "last_error": None},  # 1_4 PENDING
        {"parts_total": 4, "parts_done": 0, "failed_rows": 0, "last_error": None},  # never submitted
    ]
    logs = {"1_1": "error: boom"}
    rows = shard_rows(progress, subs, states, lambda job: logs.get(job, ""))
    assert [(r["shard"], r["state"], r["job"]) for r in rows] == [
        (0, "done", "1_0"),
        (1, "failed", "1_1"),
        (2, "running", "1_2"),
        (3, "done", "1_3"),
        (4, "pending", "1_4"),
        (5, "not submitted", None),
    ]
    assert rows[1]["error"] == "FAILED (NonZeroExitCode): error: boom"
    assert rows[3]["error"] == "2 measurement(s) failed, last: OutOfMemoryError: CUDA"
    assert rows[0]["error"] is None and rows[2]["error"] is None


def test_shard_rows_newest_submission_wins_and_unfinished_completed_task_failed():
    subs = [
        {"array_job": "1", "tasks": [0, 1], "merge_job": "2", "shards": 2},
        {"array_job": "9", "tasks": [1], "merge_job": "10", "shards": 2},
    ]
    states = {
        "1_1": JobState("1_1", "4", "TIMEOUT"),
        "9_1": JobState("9_1", "11", "COMPLETED", exit_code="0:0"),
    }
    progress = [
        {"parts_total": 3, "parts_done": 1, "failed_rows": 0, "last_error": None},
        {"parts_total": 3, "parts_done": 2, "failed_rows": 0, "last_error": None},
    ]
    rows = shard_rows(progress, subs, states, lambda job: "")
    assert rows[0]["state"] == "failed"
    assert rows[0]["error"] == "no record in squeue or sacct (cancelled before it started?)"
    assert rows[1]["job"] == "9_1" and rows[1]["error"] == "ended without writing all its parts"


def test_log_tail_is_the_last_non_empty_line(tmp_path):
    f = tmp_path / "12_3.out"
    f.write_text("measuring\n" + "x" * 20000 + "\nerror: campaign cpu-smoke: out of time\n\n")
    assert log_tail(f) == "error: campaign cpu-smoke: out of time"
    assert log_tail(tmp_path / "missing.out") == ""


# ---- parameters -------------------------------------------------------------------------------------


def write_params(tmp_path: Path, slurm) -> Path:
    raw = {
        "extract": {"sets": [{"model": "resnet18", "input_shape": [1, 3, 32, 32]}]},
        "profile": {"campaigns": {"c1": {"sets": ["resnet18:1x3x32x32"]}, "g1": {"sets": ["resnet18:1x3x32x32"]}}},
    }
    if slurm is not None:
        raw["profile"]["slurm"] = slurm
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_slurm_defaults_and_per_campaign_overrides(tmp_path):
    p = load_params(write_params(tmp_path, {"partition": "gpu", "throttle": 3, "campaigns": {"c1": {"shards": 2}}}))
    assert p.profile.slurm_for("g1") == SlurmParams(partition="gpu", throttle=3)
    assert p.profile.slurm_for("c1") == SlurmParams(partition="gpu", throttle=3, shards=2)
    assert load_params(write_params(tmp_path, None)).profile.slurm_for("c1") == SlurmParams()


@pytest.mark.parametrize(
    "slurm, message",
    [
        ({"shard": 4}, r"slurm: unknown key 'shard' \(closest valid key: 'shards'; valid keys: shards, throttle"),
        ({"shards": 0}, "shards and cpus_per_task must be integers >= 1"),
        ({"throttle": 0}, "throttle must be an integer >= 1"),
        ({"time": 7200}, "must be a quoted SLURM time"),  # what YAML makes of an unquoted 02:00:00
        ({"time": "2 hours"}, "must be a quoted SLURM time"),
        ({"mem": "lots"}, "mem 'lots' must be a size"),
        ({"gres": "gpu 1"}, "gres 'gpu 1' must look like gpu:1"),
        ({"partition": "a;rm -rf"}, "partition 'a;rm -rf' must be a SLURM name"),
        ({"campaigns": {"nope": {"shards": 2}}}, r"profile.slurm.campaigns: nope not in profile.campaigns \(c1, g1\)"),
        ({"campaigns": {"c1": {"time": "x"}}}, "profile.slurm.campaigns.c1: time 'x'"),
    ],
)
def test_bad_slurm_settings_are_one_line_errors(tmp_path, slurm, message):
    with pytest.raises(OpcostError, match=message):
        load_params(write_params(tmp_path, slurm))


def test_slurm_times_sbatch_accepts(tmp_path):
    for t in ("30", "30:00", "02:00:00", "1-12", "1-12:00", "2-00:00:00"):
        SlurmParams(time=t).check("t")


def test_repo_params_slurm_block_loads(repo_root):
    p = load_params(repo_root / "params.yaml")
    for name in p.profile.campaigns:
        p.profile.slurm_for(name).check(name)


def test_merged_only_when_every_shard_says_so():
    assert not is_merged([])
    assert not is_merged([{"merged": True}, {"merged": False}])
    assert not is_merged([{"parts_total": 3, "parts_done": 3}])  # all parts written is not merged yet
    assert is_merged([{"merged": True}, {"merged": True}])


def test_flags_override_params_and_are_checked(tmp_path):
    p = load_params(write_params(tmp_path, {"partition": "gpu", "campaigns": {"c1": {"shards": 2, "mem": "8G"}}}))
    opts = resolve_options(p, "c1", {"shards": 6, "partition": None, "time": "00:30:00"})
    assert (opts.shards, opts.partition, opts.mem, opts.time) == (6, "gpu", "8G", "00:30:00")
    with pytest.raises(OpcostError, match="command line: throttle must be an integer >= 1"):
        resolve_options(p, "c1", {"throttle": 0})


def test_a_damaged_submission_record_is_a_one_line_error(tmp_path):
    paths = Paths(tmp_path)
    assert read_record(paths, "c1") == {"campaign": "c1", "submissions": []}
    paths.slurm_record("c1").parent.mkdir(parents=True)
    paths.slurm_record("c1").write_text('{"campaign": "c1", "submissions": [')
    with pytest.raises(OpcostError, match=r"c1.json is not valid JSON .*; remove it to forget earlier submissions"):
        read_record(paths, "c1")
    paths.slurm_record("c1").write_text("[]")
    with pytest.raises(OpcostError, match="is not a submission record"):
        read_record(paths, "c1")
