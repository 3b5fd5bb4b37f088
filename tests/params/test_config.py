import math
import re
from pathlib import Path

import pytest
import yaml

from opcost.errors import OpcostError
from opcost.params.clock import ClockParams
from opcost.params.extract import ModelInputSet
from opcost.params.load import load_params
from opcost.params.train import TrainParams
from opcost.params.xdevice import XdeviceParams
from opcost.paths import Paths, find_root
from opcost.shapes import parse_input_shape


def test_parse_input_shape_accepts_commas_x_and_lists():
    assert parse_input_shape("32,3,224,224") == (32, 3, 224, 224)
    assert parse_input_shape("1x3x32x32") == (1, 3, 32, 32)
    assert parse_input_shape([2, 3, 299, 299]) == (2, 3, 299, 299)


@pytest.mark.parametrize(
    "bad", ["2,3,224", "2,3,224,224,1", "a,b,c,d", "2,,224,224", "2,3,0,224", [2, 3, 224], "-1,3,4,4"]
)
def test_parse_input_shape_rejects_malformed(bad):
    with pytest.raises(OpcostError) as exc:
        parse_input_shape(bad)
    msg = str(exc.value)
    assert repr(bad) in msg and "B,C,H,W" in msg and "\n" not in msg


def test_set_id_spells_shape_and_non_default_dtype():
    assert ModelInputSet("resnet18", (32, 3, 224, 224)).set_id == "resnet18:32x3x224x224"
    assert ModelInputSet("resnet18", (1, 3, 32, 32), dtype="float16").set_id == "resnet18:1x3x32x32:float16"


def test_default_params_hold_the_thesis_network_sets(repo_root):
    params = load_params(repo_root / "params.yaml")
    thesis = [s for s in params.extract.sets if s.input_shape[0] == 32]
    # datasets README: 18 inference and 26 training model-input sets in the whole-network logs
    assert sum("inference" in s.modes for s in thesis) == 18
    assert sum("training" in s.modes for s in thesis) == 26
    assert all(s.dtype == "float32" for s in params.extract.sets)
    # beside them, the cpu-batch campaign's resnet18 at two more batch sizes and cpu-rnn's recurrent networks
    others = {(s.model, s.input_shape, s.modes) for s in params.extract.sets if s.input_shape[0] != 32}
    assert {o for o in others if not o[0].startswith("networks/")} == {
        ("resnet18", (b, 3, 32, 32), ("inference",)) for b in (8, 128)
    }
    recurrent = [s.set_id for s in params.extract.sets if s.is_user]
    assert recurrent and set(params.profile.campaigns["cpu-rnn"].sets) == set(recurrent)
    assert params.profile.campaigns["cpu-batch"].sets == ("resnet18:8x3x32x32", "resnet18:128x3x32x32")
    assert ModelInputSet("inception_v3", (32, 3, 299, 299), modes=("inference",)) in thesis


def _write_params(root: Path, sets) -> Path:
    p = root / "params.yaml"
    p.write_text(yaml.safe_dump({"extract": {"sets": sets}}))
    return p


def test_params_errors_name_the_entry(tmp_path):
    p = _write_params(tmp_path, [{"model": "resnet18", "input_shape": [1, 3, 32]}])
    with pytest.raises(OpcostError, match=r"extract.sets\[0\] input_shape"):
        load_params(p)
    p = _write_params(tmp_path, [{"model": "resnet18", "input_shape": [1, 3, 32, 32], "modes": ["train"]}])
    with pytest.raises(OpcostError, match=r"modes \['train'\] must be .*inference, training"):
        load_params(p)
    p = _write_params(tmp_path, [{"model": "resnet18", "input_shape": [1, 3, 32, 32], "dtype": "int8"}])
    with pytest.raises(OpcostError, match="dtype 'int8' is not one of"):
        load_params(p)
    twice = {"model": "resnet18", "input_shape": [1, 3, 32, 32]}
    p = _write_params(tmp_path, [twice, twice])
    with pytest.raises(OpcostError, match="resnet18:1x3x32x32 more than once"):
        load_params(p)


def test_find_root_prefers_env_then_dvc_yaml(tmp_path, monkeypatch):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert find_root(sub) == tmp_path.resolve()
    monkeypatch.setenv("OPCOST_ROOT", str(sub))
    assert find_root(tmp_path) == sub.resolve()
    # inside a DVC stage the working directory decides: DVC_ROOT names the user's workspace even when
    # the stage runs in a temp/queued experiment's copy (tests/test_trust_exp.py runs the real thing)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    assert find_root(copy) == copy.resolve()


def _declared(entry) -> str:
    return entry if isinstance(entry, str) else next(iter(entry))


def test_dvc_yaml_paths_are_the_config_paths(repo_root):
    """One place for paths: every output, metrics and plots file the stages declare in dvc.yaml is a
    path opcost.paths.Paths names (with the foreach/matrix key filled in)."""
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    paths = Paths(repo_root)
    rel = lambda p: p.relative_to(repo_root).as_posix()  # noqa: E731
    known = {
        rel(p)
        for p in (
            paths.operations,
            paths.occurrences,
            paths.extract_coverage,
            paths.extract_summary,
            paths.raw_dir("${key}"),
            paths.ingested_dir("${key}"),
            paths.evaluated_operations,
            paths.evaluated_networks,
            paths.evaluated_sweeps,
            paths.evaluated_targets_dir,
            paths.ingest_summary,
            paths.ingest_coverage,
            paths.evaluate_summary,
            paths.model_dir("${item.target}"),
            paths.train_metrics("${item.target}"),
            paths.train_metrics(),
            paths.train_networks("${item.target}"),
            paths.validate_figures,
            paths.validate_detail,
            paths.validate_metrics,
            paths.report_index,
            paths.clock_model_dir,
            paths.clock_metrics,
            paths.clock_detail,
            paths.clock_figures,
            *(
                paths.clock_table(t)
                for t in ("logo", "loko", "curves", "logo_points", "guesses", "vs_guesses", "path", "shares")
            ),
            paths.xpower_model_dir,
            paths.xpower_logo,
            paths.validate_xdevice_energy,
            paths.validate_xdevice_energy_fewshot,
            paths.xpower_report_dir / "metrics.json",
            paths.xdevice_model_dir,
            paths.measured_ops_dir,
            paths.xdevice_metrics,
            *(paths.xdevice_table(t) for t in ("logo_ops", "logo_networks", "fewshot")),
            paths.headline_metrics,
            paths.goals_json,
            paths.goals_md,
            paths.plots_dir,
            paths.validate_summed,
            paths.validate_out_of_sample,
            paths.validate_kind_errors,
            paths.validate_in_sample,
            paths.validate_tensor_cores,
            *(paths.validate_sweeps(k) for k in ("power_limit_w", "core_clock_mhz", "mem_clock_mhz")),
            paths.validate_sweep_optima,
            paths.validate_grid_optima,
            paths.validate_clock_sweeps,
            paths.validate_clock_optima,
            paths.validate_latency,
        )
    }
    declared = []
    for name, st in stages.items():
        body = st.get("do", st)
        for kind in ("outs", "metrics", "plots"):
            declared += [(name, _declared(e)) for e in body.get(kind, [])]
        assert body["cmd"].startswith("python3 -m opcost.stages."), name
    unknown = [(n, d) for n, d in declared if d not in known]
    assert not unknown, f"dvc.yaml declares paths Paths does not name: {unknown}"
    assert stages["profile"]["foreach"] == "${profile.campaigns}"


def test_default_dvc_remote_is_a_folder_inside_the_repo(repo_root):
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(repo_root / ".dvc" / "config")
    default = cfg["core"]["remote"]
    url = cfg[f"'remote \"{default}\"'"]["url"]
    store = (repo_root / ".dvc" / url).resolve()
    assert store.parent == repo_root.resolve() and store.is_dir()


# --- strict params.yaml: unknown keys, types, NaN/inf, non-positive values, safe names ------------


def base_params(repo_root: Path) -> dict:
    """The repository's params.yaml with sets.yaml's sets inline (a temp root has no sets.yaml)."""
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    params["extract"] = {"sets": yaml.safe_load((repo_root / "sets.yaml").read_text())["sets"]}
    return params


def refused(tmp_path: Path, params: dict, *parts: str) -> str:
    """load_params fails on `params` with a one-line OpcostError containing every part."""
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    with pytest.raises(OpcostError) as exc:
        load_params(p)
    msg = str(exc.value)
    assert "\n" not in msg, msg
    for part in parts:
        assert part in msg, (part, msg)
    return msg


def at(params: dict, path: str) -> dict:
    """The mapping at a dotted path (`profile.campaigns.cpu-smoke`, `extract.sets.0`)."""
    node = params
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


UNKNOWN_KEYS = [
    # (where the key goes, the misspelt key, where the message says it is, the closest valid key)
    ("", "trian", "params.yaml (top level)", "'train'"),
    ("extract", "set", "params.yaml: extract", "'sets'"),
    ("extract.sets.0", "input_shapes", "params.yaml: extract.sets[0]", "'input_shape'"),
    ("profile", "campaign", "params.yaml: profile", "'campaigns'"),
    ("profile.campaigns.cpu-smoke", "min_time", "params.yaml: profile.campaigns.cpu-smoke", "'min_time_s'"),
    ("profile.campaigns.cpu-smoke", "window", "params.yaml: profile.campaigns.cpu-smoke", "'window_s'"),
    ("ingest", "source", "params.yaml: ingest", "'sources'"),
    ("ingest.sources.dvfs-conv", "knd", "params.yaml: ingest.sources.dvfs-conv", "'kind'"),
    ("train", "fold", "params.yaml: train", "'folds'"),
    ("train.random_forest", "n_estimator", "params.yaml: train.random_forest", "'n_estimators'"),
    ("train.random_forest", "random_state", "params.yaml: train.random_forest", "'n_estimators'"),
    ("train.xgboost", "learningrate", "params.yaml: train.xgboost", "'learning_rate'"),
    ("train.xgboost", "objective", "params.yaml: train.xgboost", "'max_leaves'"),
    ("clock", "min_point", "params.yaml: clock", "'min_points'"),
    ("xdevice", "n_estimator", "params.yaml: xdevice", "'n_estimators'"),
]


@pytest.mark.parametrize(
    "where, key, named, closest", UNKNOWN_KEYS, ids=[f"{w or 'top'}.{k}" for w, k, _, _ in UNKNOWN_KEYS]
)
def test_unknown_key_at_any_level_names_key_place_and_closest(tmp_path, repo_root, where, key, named, closest):
    params = base_params(repo_root)
    (at(params, where) if where else params)[key] = 1
    refused(tmp_path, params, named, f"unknown key {key!r}", f"closest valid key: {closest}")


BAD_VALUES = [
    # (dotted path, value, part of the message)
    ("profile.campaigns.cpu-smoke.trials", "3", "expected an integer >= 1, got '3'"),
    ("profile.campaigns.cpu-smoke.trials", True, "expected an integer >= 1, got True"),
    ("profile.campaigns.cpu-smoke.trials", 2.0, "expected an integer >= 1, got 2.0"),
    ("profile.campaigns.cpu-smoke.trials", 0, "expected an integer >= 1, got 0"),
    ("profile.campaigns.cpu-smoke.chunks", 2, "chunks: expected an integer >= 3, got 2"),
    ("profile.campaigns.cpu-smoke.min_time_s", "0.02", "min_time_s: expected a finite number > 0, got '0.02'"),
    ("profile.campaigns.cpu-smoke.min_time_s", math.nan, "min_time_s: expected a finite number > 0, got nan"),
    ("profile.campaigns.cpu-smoke.min_time_s", 0, "min_time_s: expected a finite number > 0, got 0"),
    ("profile.campaigns.cpu-smoke.window_s", math.inf, "window_s: expected a finite number > 0, got inf"),
    ("profile.campaigns.cpu-smoke.window_s", -0.05, "window_s: expected a finite number > 0, got -0.05"),
    ("profile.campaigns.cpu-smoke.sample_interval_s", 0.0, "sample_interval_s: expected a finite number > 0"),
    ("profile.campaigns.cpu-smoke.instance_budget_mb", False, "instance_budget_mb: expected a finite number > 0"),
    ("profile.campaigns.cpu-smoke.max_instances", 0, "max_instances: expected an integer >= 1, got 0"),
    ("profile.campaigns.cpu-smoke.seed", -1, "seed: expected an integer >= 0, got -1"),
    ("profile.campaigns.cpu-smoke.networks", "yes", "networks: expected true or false, got 'yes'"),
    ("profile.campaigns.cpu-smoke.modes", ["inference", "train"], "modes[1]: expected one of inference, training"),
    ("profile.campaigns.cpu-smoke.clocks_mhz", [1410, 0], "clocks_mhz[1]: expected an integer >= 1, got 0"),
    ("profile.campaigns.cpu-smoke.clocks_mhz", [1410.5], "clocks_mhz[0]: expected an integer >= 1, got 1410.5"),
    ("profile.campaigns.cpu-smoke.power_limits_w", [math.nan], "power_limits_w[0]: expected a finite number > 0"),
    ("profile.campaigns.cpu-smoke.energy_source", "nvml2", "energy_source: expected one of auto, nvml"),
    ("profile.campaigns.cpu-smoke.device", "cuda:64", "device 'cuda:64' must be cpu or cuda:N"),
    ("profile.campaigns.cpu-smoke.sets", ["resnet18"], "sets[0]: 'resnet18' is not a model-input set id"),
    ("profile.campaigns.cpu-smoke.op_ids", ["xyz"], "op_ids[0]: 'xyz' is not an op id"),
    ("train.folds", 1, "train.folds: expected an integer >= 2, got 1"),
    ("train.folds", "15", "train.folds: expected an integer >= 2, got '15'"),
    ("train.seed", 0.5, "train.seed: expected an integer >= 0, got 0.5"),
    ("train.random_forest.n_estimators", 0, "random_forest.n_estimators: expected an integer >= 1, got 0"),
    ("train.random_forest.max_features", 1.5, "max_features: expected a finite number > 0 and <= 1, got 1.5"),
    ("train.random_forest.max_features", "all", "max_features: expected a share in (0, 1], a count >= 1"),
    ("train.random_forest.bootstrap", 1, "bootstrap: expected true or false, got 1"),
    ("train.xgboost.learning_rate", math.inf, "xgboost.learning_rate: expected a finite number > 0 and <= 1"),
    ("train.xgboost.subsample", 0, "xgboost.subsample: expected a finite number > 0 and <= 1, got 0"),
    ("train.xgboost.max_depth", True, "xgboost.max_depth: expected an integer >= 1, got True"),
    ("train.xgboost.reg_lambda", -1, "xgboost.reg_lambda: expected a finite number >= 0, got -1"),
    ("train.targets", ["A30"], "train.targets[0]: train target 'A30' must be <device config>-<mode>"),
    ("ingest.sources.dvfs-conv.kind", "dvfs", "kind 'dvfs' is not one of thesis-logs"),
    ("train.targets", ["A30-inference", "A30-inference"], "params.yaml: train.targets lists a target more than once"),
    ("clock.min_points", 2, "params.yaml: clock.min_points: expected an integer >= 3, got 2"),
    ("clock.grid_points", 1.0, "params.yaml: clock.grid_points: expected an integer >= 2, got 1.0"),
    ("clock.tree_iterations", 0, "params.yaml: clock.tree_iterations: expected an integer >= 1, got 0"),
    ("clock.seed", -1, "params.yaml: clock.seed: expected an integer >= 0, got -1"),
    ("xdevice.neusight", "../neusight", "params.yaml: xdevice.neusight: path '../neusight' must lie inside data/ext"),
    ("xdevice.op_targets", ["A30-inference", ""], "params.yaml: xdevice.op_targets[1]: expected a non-empty string"),
    ("xdevice.floor_s", 0, "params.yaml: xdevice.floor_s: expected a finite number > 0, got 0"),
    ("xdevice.subsample", math.nan, "params.yaml: xdevice.subsample: expected a finite number > 0, got nan"),
    ("xdevice.threads", 0, "params.yaml: xdevice.threads: expected an integer >= 1, got 0"),
    ("xdevice.max_depth", True, "params.yaml: xdevice.max_depth: expected an integer >= 1, got True"),
]


@pytest.mark.parametrize("path, value, part", BAD_VALUES, ids=[f"{p}={v!r}" for p, v, _ in BAD_VALUES])
def test_wrong_types_nan_inf_and_non_positive_values_are_refused(tmp_path, repo_root, path, value, part):
    params = base_params(repo_root)
    parent, _, key = path.rpartition(".")
    at(params, parent)[key] = value
    refused(tmp_path, params, part)


def test_settings_the_code_makes_are_refused_with_the_reason(tmp_path, repo_root):
    params = base_params(repo_root)
    params["train"]["random_forest"]["random_state"] = 3
    refused(tmp_path, params, "unknown key 'random_state'", "; the seed comes from train.seed")
    params = base_params(repo_root)
    params["train"]["xgboost"]["objective"] = "reg:absoluteerror"
    refused(tmp_path, params, "unknown key 'objective'", "model/basis/trees.py compiles squared-error models only")


def test_estimator_settings_accept_their_documented_keys(tmp_path, repo_root):
    params = base_params(repo_root)
    params["train"]["random_forest"] = {
        "n_estimators": 10,
        "max_depth": None,
        "max_features": "sqrt",
        "min_samples_split": 4,
        "bootstrap": False,
        "max_samples": None,
        "criterion": "friedman_mse",
    }
    params["train"]["xgboost"] = {"n_estimators": 5, "learning_rate": 1, "reg_lambda": 0, "max_bin": 64, "gamma": 0.5}
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    tr = load_params(p).train
    assert tr.random_forest["max_features"] == "sqrt" and tr.random_forest["max_depth"] is None
    assert tr.xgboost == {"n_estimators": 5, "learning_rate": 1.0, "reg_lambda": 0.0, "max_bin": 64, "gamma": 0.5}


def test_estimator_keys_are_keyword_arguments_of_the_estimators():
    """What params.yaml may pass through exists in the estimators' signatures (and the code's own
    arguments are not among them)."""
    import inspect

    from sklearn.ensemble import RandomForestRegressor
    from xgboost import XGBRegressor

    from opcost.params.train import RANDOM_FOREST_KEYS, XGBOOST_KEYS

    rf = set(inspect.signature(RandomForestRegressor).parameters)
    assert set(RANDOM_FOREST_KEYS) <= rf
    xgb = set(XGBRegressor().get_params())
    assert set(XGBOOST_KEYS) <= xgb
    for own in ("random_state", "n_jobs", "tree_method", "objective", "booster"):
        assert own not in RANDOM_FOREST_KEYS and own not in XGBOOST_KEYS


UNSAFE = ["../../x", "..", ".hidden", "a/b", "x y", "café", "a..b", ""]


@pytest.mark.parametrize("name", UNSAFE)
def test_names_that_become_paths_are_refused_unless_safe(tmp_path, repo_root, name):
    params = base_params(repo_root)
    params["profile"]["campaigns"][name] = params["profile"]["campaigns"].pop("cpu-smoke")
    refused(tmp_path, params, "profile.campaigns: campaign name", "may use only letters, digits")
    params = base_params(repo_root)
    params["ingest"]["sources"][name] = params["ingest"]["sources"].pop("dvfs-conv")
    refused(tmp_path, params, "ingest.sources: source name", "(it becomes part of a file path)")
    params = base_params(repo_root)
    params["train"]["targets"] = [f"{name}-inference"] if name else [""]
    refused(tmp_path, params, "train.targets[0]: train target")
    params = base_params(repo_root)
    params["extract"]["sets"][0]["model"] = name
    refused(tmp_path, params, "extract.sets[0]")


@pytest.mark.parametrize(
    "path",
    [
        "../../x",
        "data/external/../../x",
        "data/external/../raw/cpu-smoke",
        "/etc",
        "data/other/x",
        "data/external",
        "data/external/.hidden",
        "data\\external\\x",
    ],
)
def test_a_source_path_stays_inside_data_external(tmp_path, repo_root, path):
    params = base_params(repo_root)
    params["ingest"]["sources"]["dvfs-conv"]["path"] = path
    refused(tmp_path, params, "ingest.sources.dvfs-conv.path")


def test_a_campaign_set_id_with_a_path_in_it_is_refused(tmp_path, repo_root):
    params = base_params(repo_root)
    params["profile"]["campaigns"]["cpu-smoke"]["sets"] = ["../../x:32x3x32x32"]
    refused(tmp_path, params, "sets[0]: '../../x:32x3x32x32' is not a model-input set id")


def test_duplicate_keys_and_broken_yaml_are_one_line_errors(tmp_path, repo_root):
    p = tmp_path / "params.yaml"
    p.write_text("train:\n  folds: 3\n  folds: 5\n")
    with pytest.raises(OpcostError, match=r"^params.yaml: key 'folds' given twice \(line 3\)$"):
        load_params(p)
    p.write_text("train: [folds: 3\n")
    with pytest.raises(OpcostError, match=r"^params.yaml is not valid YAML: ") as exc:
        load_params(p)
    assert "\n" not in str(exc.value)
    p.write_text("- just\n- a list\n")
    with pytest.raises(OpcostError, match=r"^params.yaml: expected a mapping of sections, got list"):
        load_params(p)


def test_every_section_setting_has_a_check_in_field_order():
    """One parsing style: each section's `from_dict` checks its keys with a table of per-key checks; every
    field has one (a new setting cannot arrive unchecked), listed in field order (the order an unknown
    key's error names the valid keys in)."""
    from dataclasses import fields

    from opcost.params.clock import CLOCK_FIELDS, ClockParams
    from opcost.params.train import TRAIN_FIELDS, TrainParams
    from opcost.params.xdevice import XDEVICE_FIELDS, XdeviceParams

    for cls, checks in ((ClockParams, CLOCK_FIELDS), (TrainParams, TRAIN_FIELDS), (XdeviceParams, XDEVICE_FIELDS)):
        assert [f.name for f in fields(cls)] == list(checks), cls.__name__


def test_absent_sections_take_the_defaults_and_given_values_are_converted(tmp_path, repo_root):
    params = base_params(repo_root)
    for section in ("clock", "xdevice", "train"):
        del params[section]
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(params))
    loaded = load_params(p)
    assert (loaded.clock, loaded.xdevice, loaded.train) == (ClockParams(), XdeviceParams(), TrainParams())
    params["xdevice"] = {"op_targets": "A30-inference", "floor_s": 1, "neusight": "data/external/n2"}
    params["clock"] = {"grid_points": 5}
    p.write_text(yaml.safe_dump(params))
    loaded = load_params(p)
    assert loaded.xdevice == XdeviceParams(op_targets=("A30-inference",), floor_s=1.0, neusight="data/external/n2")
    assert isinstance(loaded.xdevice.floor_s, float) and loaded.clock == ClockParams(grid_points=5)


def test_every_campaign_setting_has_a_check():
    from dataclasses import fields

    from opcost.params.profile import CAMPAIGN_FIELDS, CampaignParams

    assert {f.name for f in fields(CampaignParams)} - {"name"} == set(CAMPAIGN_FIELDS)


@pytest.mark.parametrize("key, value", [("min_time_s", math.nan), ("window_s", math.inf), ("window_s", -1.0)])
def test_ad_hoc_campaigns_refuse_nan_and_inf_durations(key, value):
    """The command line builds CampaignParams from typer's floats and calls check()."""
    from opcost.params.profile import CampaignParams

    c = CampaignParams(name="adhoc", sets=("resnet18:1x3x32x32",), **{key: value})
    with pytest.raises(OpcostError, match=f"command line: {key} must be a finite number > 0, got {value}"):
        c.check("command line")


@pytest.mark.parametrize(
    ("section", "key"), [("xgboost", "n_jobs"), ("xgboost", "tree_method"), ("random_forest", "n_jobs")]
)
def test_a_key_the_code_sets_is_refused_naming_a_module_that_exists(tmp_path, repo_root, section, key):
    """The refusal says which module sets the key; that module must exist, so a user can go and read it."""
    params = base_params(repo_root)
    params["train"][section][key] = 4 if key == "n_jobs" else "exact"
    msg = refused(tmp_path, params, f"train.{section}", key)
    named = re.findall(r"\b((?:model|ops|data|params|stages)/(?:\w+/)*\w+\.py)\b", msg)
    assert named, msg
    for module in named:
        assert (repo_root / "src" / "opcost" / module).is_file(), f"{module} named in {msg!r} does not exist"


def test_the_sets_file_names_the_module_that_parses_it(repo_root):
    first = (repo_root / "sets.yaml").read_text().splitlines()[0]
    paths = re.findall(r"src/opcost/[\w/]+\.py", first)
    assert paths and all((repo_root / p).is_file() for p in paths), first
