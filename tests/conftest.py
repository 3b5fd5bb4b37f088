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
    """Each test starts with an empty encoded-row cache (model/features.ROW_CACHE): a test that patches
    the physics sees rows encoded under its patch, never one an earlier test left."""
    from opcost.model.features import ROW_CACHE

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


def clone_of(trained, tmp_path: Path) -> Path:
    """A project holding only the trained bundles, as a fresh clone's `dvc pull` brings them (no
    MLflow store yet); params.yaml lists just those targets."""
    import yaml

    paths, params, first = trained
    root = tmp_path / "clone"
    root.mkdir()
    # a DVC project whose dvc.lock records each model folder, as a clone's does (sync-registry checks
    # the folders' content against it, and `dvc status` for changes)
    stages = {f"train-{t}": {"cmd": "true", "outs": [f"models/{t}"]} for t in sorted(first)}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    raw = yaml.safe_load(paths.params.read_text())
    raw["train"]["targets"] = sorted(first)
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    for t in first:
        shutil.copytree(paths.model_dir(t), root / "models" / t)
    # a fresh clone is committed work on main: the registry moves `champion` only there
    git = ["git", "-c", "user.name=opcost-tests", "-c", "user.email=tests@opcost.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    dvc = [str(Path(sys.executable).with_name("dvc")), "--quiet"]
    subprocess.run([*dvc, "init"], cwd=root, check=True)
    subprocess.run([*dvc, "commit", "--force"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=root, check=True)
    return root


# Tests that build the small project end to end (extract, a CPU campaign, ingest, evaluate, train) take
# minutes: every test using one of these fixtures is `slow`, so `pytest -m "not slow"` (make test-fast)
# leaves them out without a mark on each. Other slow tests carry @pytest.mark.slow themselves.
SLOW_FIXTURES = frozenset({"pipeline_root", "trained", "external_data"})
PIPELINE_FIXTURES = frozenset({"pipeline_root", "trained", "synced"})  # session fixtures built once per worker
# Tests that took a second or more in `pytest -m "not slow" --durations=60` (campaigns, subprocesses, whole
# networks traced): one list, so a test file needs no edit; a name here that no longer exists fails below.
SLOW_TESTS = frozenset(
    {
        "tests/ops/test_extract.py::test_densenet121_call_counts",
        "tests/test_exp_show.py::test_make_exp_table_fits_120_columns_without_ellipses",
        "tests/test_exp_show.py::test_plain_dvc_exp_show_in_a_120_column_terminal_shows_every_headline_metric_first",
        "tests/model/test_registry.py::test_a_fold_without_a_score_is_left_out_of_the_replayed_run",
        "tests/ops/test_extract.py::test_resnet18_residual_add_is_inplace_with_two_inputs",
        "tests/ops/test_networks.py::test_hf_class_form_and_default_inputs",
        "tests/ops/test_parts.py::test_shifted_window_attention_parts_roll_pad_and_partition",
        "tests/ops/test_extract.py::test_vit_b_16_call_counts",
        "tests/ops/test_extract.py::test_vit_attention_is_one_self_attention_op",
        "tests/ops/test_extract.py::test_coverage_catches_a_lost_hyper_parameter",
        "tests/ops/test_extract.py::test_flop_coverage_of_representative_models",
        "tests/ops/test_extract.py::test_resnet18_call_counts",
        "tests/ops/test_extract.py::test_training_forward_flops_equal_inference",
        "tests/ops/test_extract.py::test_training_mode_runs_googlenet_aux_classifiers",
        "tests/ops/test_extract.py::test_views_move_no_bytes",
        "tests/test_known_measurements.py::test_a_counter_that_does_not_move_is_flagged_and_integrated_power_stands_in",
        "tests/test_known_measurements.py::test_evaluated_energy_and_power_are_the_cards",
        "tests/measure/test_measure.py::test_a_shard_told_to_wait_queues_behind_the_device_holder",
        "tests/measure/test_measure.py::test_adhoc_plan_counts_and_dry_run_touches_nothing",
        "tests/measure/test_measure.py::test_campaign_with_nvml_energy_and_raw_power_log",
        "tests/measure/test_measure.py::test_empty_or_unreadable_part_is_measured_again_with_a_warning",
        "tests/measure/test_measure.py::test_energy_check_reports_counter_and_integrated_power_apart",
        "tests/measure/test_measure.py::test_failed_op_is_recorded_and_campaign_goes_on",
        "tests/measure/test_measure.py::test_kill_and_resume_measures_only_what_is_missing",
        "tests/measure/test_measure.py::test_shard_killed_like_slurm_keeps_its_parts_and_restores_clocks",
        "tests/measure/test_measure.py::test_sigkill_leaves_state_that_restore_device_puts_back",
        "tests/measure/test_measure.py::test_state_left_by_a_killed_run_is_restored_by_the_next_campaign",
        "tests/measure/test_measure.py::test_sweep_rows_are_measured_between_their_settings",
        "tests/measure/test_measure.py::test_time_block_and_window_on_a_real_op",
        "tests/measure/test_measure.py::test_two_processes_cannot_measure_the_same_output_or_device",
        "tests/measure/test_measure.py::test_window_energy_matches_the_trace_power_times_the_timed_window",
        "tests/model/test_model.py::test_compiled_trees_reproduce_the_libraries",
        "tests/ops/test_networks.py::test_bad_models_and_inputs_are_one_line_errors_and_write_nothing",
        "tests/ops/test_networks.py::test_detection_is_traced_on_the_cpu_where_meta_cannot_run_it",
        "tests/ops/test_networks.py::test_segmentation_video_and_optical_flow_cover_their_flops",
        "tests/ops/test_networks.py::test_training_peak_matches_the_cpu_allocator_on_a_small_cnn",
        "tests/ops/test_networks.py::test_transformers_gpt2_bert_vit_cover_their_flops",
        "tests/ops/test_parts.py::test_parts_of_multihead_attention_are_its_kernels",
        "tests/model/test_registry.py::test_an_interrupted_run_never_stays_running",
        "tests/model/test_registry.py::test_the_cli_refuses_a_planted_pickle_in_one_line",
        "tests/test_schemas.py::test_no_float_column_anywhere_holds_an_infinity",
        "tests/stages/test_stage_extract.py::test_model_that_rejects_the_shape_writes_nothing",
        "tests/stages/test_stage_extract.py::test_stage_is_deterministic",
        "tests/stages/test_stage_profile.py::test_adhoc_campaign_threads_pin_the_measuring_process",
        "tests/stages/test_stage_profile.py::test_campaign_threads_pin_the_measuring_process",
        "tests/stages/test_stage_profile.py::test_complete_campaign_is_not_measured_again",
        "tests/stages/test_stage_profile.py::test_gpu_campaign_outputs_reproduce_on_a_machine_without_the_gpu",
        "tests/stages/test_stage_profile.py::test_interrupted_campaign_says_how_to_resume_and_keeps_its_parts",
        "tests/stages/test_stage_profile.py::test_merge_with_a_missing_shard_names_it",
        "tests/stages/test_stage_profile.py::test_no_temporary_file_goes_into_the_dvc_output",
        "tests/stages/test_stage_profile.py::test_profile_stage_errors_name_what_is_valid",
        "tests/stages/test_stage_profile.py::test_profile_stage_writes_raw_tables",
        "tests/stages/test_stage_profile.py::test_shards_then_merge_give_what_a_local_run_gives",
    }
)


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own collection hook (it appends the group
# to each node id, which `--dist loadgroup` schedules by); run after it, the marks came too late and every worker
# built the small project itself (CI's two workers each spent ~200 s on it)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen = set()
    for item in items:
        name = item.nodeid.split("[")[0]
        seen.add(name)
        fixtures = set(getattr(item, "fixturenames", ()))
        if name in SLOW_TESTS or SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        if PIPELINE_FIXTURES & fixtures:  # `make test` runs under pytest-xdist --dist loadgroup: one worker builds
            item.add_marker(pytest.mark.xdist_group("pipeline"))  # the small project once and runs its tests
    collected_files = {i.nodeid.split("::")[0] for i in items}
    stale = sorted(n for n in SLOW_TESTS if n.split("::")[0] in collected_files and n not in seen)
    picked = config.getoption("keyword") or config.getoption("markexpr") or any("::" in a for a in config.args)
    if stale and not picked:
        raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS names tests that do not exist: {stale}")
