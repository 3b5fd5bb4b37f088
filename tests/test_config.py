from pathlib import Path

import pytest
import yaml

from opcost.config import ModelInputSet, Paths, find_root, load_params, parse_input_shape
from opcost.errors import OpcostError


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
    sets = params.extract.sets
    # datasets README: 18 inference and 26 training model-input sets in the whole-network logs
    assert sum("inference" in s.modes for s in sets) == 18
    assert sum("training" in s.modes for s in sets) == 26
    assert all(s.dtype == "float32" and s.input_shape[0] == 32 for s in sets)
    assert ModelInputSet("inception_v3", (32, 3, 299, 299), modes=("inference",)) in sets


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
    monkeypatch.setenv("DVC_ROOT", str(sub))
    assert find_root(tmp_path) == sub.resolve()


def _declared(entry) -> str:
    return entry if isinstance(entry, str) else next(iter(entry))


def test_dvc_yaml_paths_are_the_config_paths(repo_root):
    """One place for paths: every output, metrics and plots file the stages declare in dvc.yaml is a
    path config.Paths names (with the foreach/matrix key filled in)."""
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
            paths.validate_figures,
            paths.validate_detail,
            paths.validate_metrics,
            paths.report_index,
        )
    }
    validate_tables = {"tensor_cores", "sweep_optima", "grid_optima", "latency", "summed_vs_measured"}
    validate_tables |= {
        "predicted_vs_measured",
        "sweeps_power_limit_w",
        "sweeps_core_clock_mhz",
        "sweeps_mem_clock_mhz",
    }
    known |= {rel(paths.validate_dir / f"{t}.csv") for t in validate_tables}
    declared = []
    for name, st in stages.items():
        body = st.get("do", st)
        for kind in ("outs", "metrics", "plots"):
            declared += [(name, _declared(e)) for e in body.get(kind, [])]
        assert body["cmd"].startswith("python3 -m opcost.stages."), name
    unknown = [(n, d) for n, d in declared if d not in known]
    assert not unknown, f"dvc.yaml declares paths config.Paths does not name: {unknown}"
    assert stages["profile"]["foreach"] == "${profile.campaigns}"


def test_default_dvc_remote_is_a_folder_inside_the_repo(repo_root):
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(repo_root / ".dvc" / "config")
    default = cfg["core"]["remote"]
    url = cfg[f"'remote \"{default}\"'"]["url"]
    store = (repo_root / ".dvc" / url).resolve()
    assert store.parent == repo_root.resolve() and store.is_dir()
