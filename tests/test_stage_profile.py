"""The profile stage: a params.yaml campaign over extract outputs, into data/raw/<campaign>/."""

import json

import pandas as pd
import pytest
import yaml

from opcost.config import Paths, load_params
from opcost.errors import OpcostError
from opcost.measure.profile import run_stage
from opcost.schemas import NETWORKS, POWER_SAMPLES, TIMINGS
from opcost.stages.extract import run as run_extract_stage

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
    assert meta["failed_rows"] == 0
    assert not any(paths.parts_dir("tiny").rglob("*.parquet"))  # finished: no parts left to resume


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
    with pytest.raises(OpcostError, match=r"unknown key\(s\) \['trails'\]"):
        load_params(tmp_path / "params.yaml")
