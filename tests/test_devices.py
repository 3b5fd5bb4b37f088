"""The device table and the one name of a GPU (issues 20 and 22: one vocabulary)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fake_nvml import FakeNvml
from opcost.devices import (
    ALIASES,
    DEVICES,
    NO_TF32_SUFFIX,
    device_config,
    find_device,
    lookup_device,
    resolve_device,
    resolve_device_config,
    table_name,
)
from opcost.errors import OpcostError
from opcost.params.load import load_params
from opcost.paths import Paths

REQUIRED = {  # issue 20's list: each must have its own row
    "P100", "P4", "V100", "V100_SXM2", "T4", "RTX2080Ti", "RTX6000", "RTX8000", "A10", "A10G", "A30", "A40",
    "A100", "A100_SXM_40GB", "A100_PCIe", "A100_PCIe_40GB", "RTX3080Ti", "RTX3090", "RTX4090", "L4", "L40S",
    "H100", "H100_PCIe", "H200", "B200",
}  # fmt: skip


def test_the_table_holds_every_gpu_people_use_with_sane_figures():
    assert REQUIRED <= set(DEVICES)
    for key, d in DEVICES.items():
        assert re.fullmatch(r"[A-Za-z0-9_]+", key) and not key.endswith(NO_TF32_SUFFIX), key
        assert d.name == key and d.nvml_names[0] == d.product
        assert d.base_clock_mhz <= d.boost_clock_mhz
        lo, hi = d.clock_range_mhz
        assert lo < d.base_clock_mhz and d.boost_clock_mhz <= hi, key
        # TF32 exists from Ampere on (compute capability 8.0), tensor cores from Volta (7.0)
        assert (d.tf32_flops is not None) == (d.compute_capability >= (8, 0)), key
        assert d.tensor_cores == (d.compute_capability >= (7, 0)), key
        if d.tensor_cores:
            assert d.fp16_flops > d.fp32_flops and (d.tf32_flops or d.fp32_flops) >= d.fp32_flops
        # FP32 peak = 2 FLOP x cores x boost clock: 64 cores per SM on GP100/GV100/GA100/TU1xx,
        # 128 on GP104, GA10x, AD10x, GH100 and GB100, within the 10 % datasheets round by
        cores = 64 if (d.architecture in ("Volta", "Turing") or d.compute_capability in ((6, 0), (8, 0))) else 128
        assert d.fp32_flops == pytest.approx(2 * cores * d.sms * d.boost_clock_mhz * 1e6, rel=0.1), key
        assert 0 < d.bandwidth and 0 < d.memory_bytes and 0 < d.l2_bytes and 0 < d.tdp_w


def test_every_nvml_name_resolves_to_its_key():
    for key, d in DEVICES.items():
        for n in (key, d.product, *d.nvml_names):
            assert resolve_device(n) == key
            assert resolve_device(n.upper()) == key and resolve_device(n.lower()) == key
            assert resolve_device(n.replace(" ", "_")) == key  # NeuSight's file names
    for alias, key in ALIASES.items():
        assert resolve_device(alias) == key


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("H100", "H100"),
        ("h100 pcie", "H100_PCIe"),
        ("A100", "A100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100_PCIe"),
        ("NVIDIA_A100_80GB_PCIe", "A100_PCIe"),
        ("NVIDIA_A100-PCIE-40GB", "A100_PCIe_40GB"),
        ("Tesla_V100-PCIE-32GB", "V100"),
        ("Tesla V100-SXM2-32GB", "V100_SXM2"),
        ("Tesla T4", "T4"),
        ("Tesla_P4", "P4"),
        ("Tesla_P100-PCIE-16GB", "P100"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA B200", "B200"),
        ("Quadro RTX 8000", "RTX8000"),
        ("NVIDIA A30", "A30"),
        ("A10", "A10"),
        ("NVIDIA A10G", "A10G"),
    ],
)
def test_names_people_and_nvml_use(name, key):
    assert resolve_device(name) == key


def test_device_configs_keep_their_tf32_suffix():
    assert resolve_device_config("NVIDIA A30_no_tf32") == "A30_no_tf32"
    assert resolve_device_config("NVIDIA_A100-PCIE-40GB_no_tf32") == "A100_PCIe_40GB_no_tf32"
    assert resolve_device_config("Tesla T4") == "T4"
    dev, tf32 = device_config("nvidia a30_no_tf32")
    assert dev is DEVICES["A30"] and tf32 is False
    assert find_device("NVIDIA_A30") == (DEVICES["A30"], True)
    assert table_name("AMD_EPYC_7763") == "AMD_EPYC_7763" and table_name("NVIDIA_A30_no_tf32") == "A30_no_tf32"


def test_unknown_names_fail_in_one_line_naming_the_closest_keys():
    for bad in ("NVIDIA Titan Z", "A1000", "", "cuda:0"):
        with pytest.raises(OpcostError) as e:
            resolve_device(bad)
        msg = str(e.value)
        assert "\n" not in msg and len(msg) < 180 and "`opcost devices` lists all" in msg
    with pytest.raises(OpcostError, match=r"unknown device 'A1000'; closest: A100[,;]"):
        resolve_device("A1000")
    assert lookup_device("A1000") is None and find_device("cpu") is None


def test_physics_of_any_spelling_is_the_table_gpu_never_nominal():
    from opcost.model.basis.physics import NOMINAL_BANDWIDTH, NOMINAL_PEAK, device_peaks

    a30 = DEVICES["A30"]
    assert device_peaks(find_device("NVIDIA_A30")) == (a30.tf32_flops, a30.fp32_flops, a30.bandwidth)
    assert device_peaks(find_device("NVIDIA A30_no_tf32")) == (a30.fp32_flops, a30.fp32_flops, a30.bandwidth)
    for key in DEVICES:
        assert device_peaks(find_device(key)) != (NOMINAL_PEAK, NOMINAL_PEAK, NOMINAL_BANDWIDTH)


def test_clock_model_reads_sweep_names_through_the_table():
    from opcost.devices import table_device
    from opcost.model.clocks import clock

    assert not hasattr(clock, "SWEEP_DEVICES")  # no name map of its own
    assert table_device("A100-SXM4-80GB") is DEVICES["A100"]
    assert table_device("A100_PCIe") is DEVICES["A100_PCIe"]
    assert table_device("unnamed Maxwell/Pascal GPU (dvfs-conv)") is None


def test_a_device_config_is_one_value_whose_name_is_the_canonical_config():
    from opcost.devices import DeviceConfig, device_config, find_device

    cfg = device_config("nvidia a30_NO_TF32")
    assert isinstance(cfg, DeviceConfig) and cfg == (DEVICES["A30"], False)
    assert cfg.name == "A30_no_tf32" and device_config(cfg.name) == cfg
    assert device_config("Tesla T4").name == "T4" and find_device("T4") == device_config("T4")
    assert find_device("cpu") is None


def test_device_names_are_resolved_in_devices_py_only():
    """One resolver: the model packages define no function of their own that turns a GPU name into a table
    entry or key (they had six: xdevice.resolve, xdevice.config_device, clock's and xpower's table_device)."""
    import ast

    src = Path(__file__).resolve().parents[1] / "src" / "opcost" / "model"
    banned = {"resolve", "config_device", "table_device", "resolve_device", "device_config", "find_device"}
    defined = [
        f"{f.relative_to(src)}:{n.name}"
        for f in sorted(src.rglob("*.py"))
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, ast.FunctionDef) and n.name in banned
    ]
    assert defined == []


PARAMS = {
    "extract": {"sets": [{"model": "squeezenet1_1", "input_shape": [2, 3, 32, 32], "modes": ["inference"]}]},
    "profile": {
        "campaigns": {
            "gpu": {
                "device": "cuda:0",
                "modes": ["inference"],
                "sets": [],
                "op_ids": ["0" * 16],  # set below, once extract has named the ops
                "networks": False,
                "trials": 2,
                "min_time_s": 0.005,
                "window_s": 0.01,
                "energy_source": "nvml",
                "max_instances": 2,
                "instance_budget_mb": 4,
            }
        }
    },
}


@pytest.mark.parametrize("tf32", [True, False])
def test_a_gpu_campaign_on_an_a30_lands_as_the_table_key(tmp_root, tf32):
    """A campaign on a GPU NVML calls `NVIDIA A30` (a fake NVML; the parts measured on the CPU standing in
    for the GPU node, as a merge of shards meets them) becomes the device config `A30`, not `NVIDIA_A30`:
    its rows and sweeps carry the key, the physics uses the A30's figures and `--clock` is checked
    against the A30's range."""
    from opcost.data.evaluate import campaign_frames
    from opcost.io import write_json
    from opcost.measure.campaign import environment, measure_part, part_name
    from opcost.measure.nvml import Nvml
    from opcost.measure.power import NoEnergy
    from opcost.model.clocks.clock import check_device_clock
    from opcost.stages.extract import run as run_extract_stage
    from opcost.stages.profile import merge as merge_stage
    from opcost.stages.profile import stage_campaign

    (tmp_root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    paths = Paths(tmp_root)
    run_extract_stage(paths, load_params(paths.params), show_progress=False)
    raw = yaml.safe_load(paths.params.read_text())
    raw["profile"]["campaigns"]["gpu"]["op_ids"] = list(pd.read_parquet(paths.operations)["op_id"][:2])
    paths.params.write_text(yaml.safe_dump(raw))
    params = load_params(paths.params)
    camp = stage_campaign(paths, params, "gpu")
    camp.parts_dir.mkdir(parents=True)
    on_cpu = replace(camp.c, device="cpu")
    for setting, unit in camp.pending():
        camp.write_part(part_name(setting, unit), unit, *measure_part(on_cpu, unit, setting, NoEnergy()))
    nvml = Nvml(0, lib=FakeNvml(name="NVIDIA A30"))
    try:
        env = environment(camp.c, None, nvml)  # what the GPU node recorded
    finally:
        nvml.close()
    env["tf32_cudnn"] = tf32
    write_json({"name": "shard", "shard": 0, "environment": env}, camp.record_path("shard-0-of-1"))
    merge_stage(paths, params, "gpu")

    ops, _, _ = campaign_frames(paths)
    want = "A30" if tf32 else "A30_no_tf32"
    assert len(ops) == 2 and set(ops["device_config"]) == {want}
    assert find_device(want) == (DEVICES["A30"], tf32)
    check_device_clock(find_device(want), 900.0)  # `--clock` is accepted for it, within the A30's range ...
    with pytest.raises(OpcostError, match="outside the A30's supported range 210-1440 MHz"):
        check_device_clock(find_device(want), 1500.0)  # ... and refused outside it


def test_opcost_devices_lists_specs_holdings_and_how_each_gpu_is_predicted(tmp_root):
    import json

    from typer.testing import CliRunner

    from opcost.cli import app

    r = CliRunner().invoke(app, ["devices", "--json"])  # nothing evaluated, nothing trained
    assert r.exit_code == 0, r.output
    rows = {d["key"]: d for d in json.loads(r.stdout)}
    assert list(rows) == list(DEVICES) and rows["H100"]["measured_ops"] is None
    assert {d["predictions"] for d in rows.values()} == {"none yet"}
    assert rows["H100"]["fp32_tflops"] == 67 and rows["H100"]["tf32_tflops"] == 495
    assert rows["T4"]["tf32_tflops"] is None

    ev = tmp_root / "data" / "evaluated"
    ev.mkdir(parents=True)
    nan = float("nan")
    pd.DataFrame(
        {  # A30: ops a, b (b on both configs) -> 2 ops; 2 rows with energy; a CPU host is no table GPU
            "device_config": ["A30", "A30_no_tf32", "A30", "T4", "AMD_EPYC"],
            "op_id": ["a", "b", "b", "a", "a"],
            "e_j": [1.0, nan, 2.0, nan, 1.0],
            "p_w": [10.0, nan, nan, nan, 5.0],
        }
    ).to_parquet(ev / "operations.parquet")
    pd.DataFrame(
        {"device_config": ["A30", "A30", "T4"], "set_id": ["n1", "n1", "n2"], "e_j": [1.0, 1.0, nan],
         "p_w": [nan, nan, nan]}
    ).to_parquet(ev / "networks.parquet")  # fmt: skip
    pd.DataFrame(
        {"device": ["A40", "A40", "A100-SXM4-80GB", "A40"], "knob": ["core_clock_mhz"] * 3 + ["power_limit_w"],
         "power_w": [100.0, nan, 50.0, 80.0]}
    ).to_parquet(ev / "sweeps.parquet")  # fmt: skip
    for target in ("A30-inference", "A30_no_tf32-training"):
        (tmp_root / "models" / target).mkdir(parents=True)
        (tmp_root / "models" / target / "bundle.json").write_text("{}")
    (tmp_root / "models" / "xdevice").mkdir()
    (tmp_root / "models" / "xdevice" / "xdevice.json").write_text('{"trained_on": ["A30", "T4"]}')

    r = CliRunner().invoke(app, ["devices", "--json"])
    assert r.exit_code == 0, r.output
    rows = {d["key"]: d for d in json.loads(r.stdout)}
    held = ("measured_ops", "measured_networks", "clock_sweep_rows", "power_rows", "predictions")
    assert [rows["A30"][k] for k in held] == [2, 1, 0, 4, "own measurements"]
    assert rows["A30"]["trained_targets"] == ["A30-inference", "A30_no_tf32-training"]
    assert [rows["T4"][k] for k in held] == [1, 1, 0, 0, "fitted"]  # the cross-device model saw its ops
    assert [rows["A40"][k] for k in held] == [0, 0, 2, 2, "transferred"]
    assert [rows["A100"][k] for k in held] == [0, 0, 1, 1, "transferred"]  # the sweep's NVML-style name
    r = CliRunner().invoke(app, ["devices"])
    assert r.exit_code == 0 and "own measurements" in r.stdout and "B200" in r.stdout


def test_the_file_names_devicelist_keeps_match_their_homes():
    """`opcost devices` names the bundle and cross-device model files without importing their (heavy) modules."""
    from opcost import devicelist
    from opcost.model.composition import bundle
    from opcost.model.crossdevice import xdevice

    assert devicelist.BUNDLE_FILE == bundle.BUNDLE_FILE and devicelist.XDEVICE_FILE == xdevice.MODEL_FILE
