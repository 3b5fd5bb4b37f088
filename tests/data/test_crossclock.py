"""The cross-clock parsers on real lines (copied from data/external/, exact values), their quirks, and
the row counts of every file against CROSS_CLOCK.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from opcost.data import crossclock
from opcost.params.load import load_params
from opcost.paths import Paths
from opcost.schemas import SWEEPS
from opcost.stages.ingest import run as run_ingest_stage


def put(d: Path, name: str, content: bytes) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content)
    return d


def rows_by(out, **match) -> list[dict]:
    return [r for r in out.rows if all(r[k] == v for k, v in match.items())]


# --- perseus-stage-profiles -------------------------------------------------------------------

# bloom+a100_sxm_bf16.csv lines 1-3 and 535, CRLF as in the file
PERSEUS_STAGE = (
    b"stage,instruction,frequency,time,energy\r\n"
    b"0,forward,1410,0.05123121643066401,24.150648000000043\r\n"
    b"0,backward,1410,0.09906433725357054,45.96569999999972\r\n"
    b"7,backward,1410,0.08914007298151651,41.55551666666645\r\n"
)


def test_perseus_stage_lines_exact_values_with_crlf(tmp_path):
    out = crossclock.perseus_stages(put(tmp_path / "p", "bloom+a100_sxm_bf16.csv", PERSEUS_STAGE), "perseus")
    assert not out.rejects and len(out.rows) == 3
    (fwd,) = rows_by(out, workload="bloom/stage0/forward")
    assert fwd["device"] == "A100" and fwd["knob"] == "core_clock_mhz" and fwd["phase"] == "forward"
    assert fwd["value"] == 1410.0 and fwd["core_clock_mhz"] == 1410.0 and fwd["mem_clock_mhz"] is None
    assert fwd["time_s"] == 0.05123121643066401 and fwd["energy_j"] == 24.150648000000043  # no "\r" left
    assert fwd["power_w"] == 24.150648000000043 / 0.05123121643066401
    assert json.loads(fwd["detail"]) == {"unit": "stage instruction", "model": "bloom", "stage": 0, "dtype": "bf16"}
    (last,) = rows_by(out, workload="bloom/stage7/backward")
    assert last["time_s"] == 0.08914007298151651 and last["energy_j"] == 41.55551666666645


def test_identical_perseus_stages_are_kept_once_and_counted(tmp_path):
    lines = PERSEUS_STAGE.split(b"\r\n")[:3]
    copies = [ln.replace(b"0,", b"%d," % s, 1) for s in (1, 2) for ln in lines[1:]]
    other = lines[1].replace(b"0,", b"3,", 1).replace(b"0.05123121643066401", b"0.05123121643066402")
    content = b"\r\n".join([*lines, *copies, other]) + b"\r\n"
    out = crossclock.perseus_stages(put(tmp_path / "p", "bloom+a40_bf16.csv", content), "perseus")
    assert sorted(r["workload"] for r in out.rows) == [
        "bloom/stage0/backward",
        "bloom/stage0/forward",
        "bloom/stage3/forward",  # differs in the last digit of one time: not a copy
    ]
    assert json.loads(rows_by(out, workload="bloom/stage0/forward")[0]["detail"])["identical_stages"] == [0, 1, 2]
    assert out.files["bloom+a40_bf16.csv"]["identical_stage_rows_dropped"] == 4
    assert out.info["identical_stages"] == {"bloom+a40_bf16.csv": {"stage0": [1, 2]}}


def test_bad_perseus_stage_rows_are_rejected(tmp_path):
    head, good = PERSEUS_STAGE.split(b"\r\n")[:2]
    bad = [
        good.replace(b"forward", b"sideways"),
        good.replace(b"0,forward", b"-1,forward"),
        good.replace(b"1410", b"0"),
        good.replace(b"24.150648000000043", b"-24.15"),
    ]
    out = crossclock.perseus_stages(put(tmp_path / "p", "bloom+a40_bf16.csv", b"\r\n".join([head, *bad])), "p")
    assert [(r["line"], r["reason"]) for r in out.rejects] == [
        (2, "bad_value"),
        (3, "out_of_range"),
        (4, "out_of_range"),
        (5, "out_of_range"),
    ]
    assert out.rejects[2]["message"] == "value = 0.0, must be > 0"


# --- perseus-power-limit -------------------------------------------------------------------------

A40_GLOBAL = (  # A40_zeus_global.csv line 1 and 26 (gpt3-6.7b: pp4, 0.0 for stages 4-7)
    "model_name,partition_method,batch_size,dp,tp,pp,microbatch_size,num_microbatches,power_limit_0,power_limit_1,"
    "power_limit_2,power_limit_3,power_limit_4,power_limit_5,power_limit_6,power_limit_7,time,energy,"
    "optimal_power_limit\n"
    "gpt3-6.7b,uniform_transformer,512,2,2,4,4,64,300,300,300,300,0.0,0.0,0.0,0.0,136.38908396164575,"
    "567139.558000012,225\n"
)
A40_LOCAL = (  # A40_zeus_local.csv line 1 and 32: power_limit_4..7 come last
    "model_name,partition_method,batch_size,dp,tp,pp,microbatch_size,num_microbatches,power_limit_0,power_limit_1,"
    "power_limit_2,power_limit_3,time,energy,heaviest_stage,heaviest_stage_power_limit,"
    "optimal_heaviest_stage_power_limit,power_limit_4,power_limit_5,power_limit_6,power_limit_7\n"
    't5-3b,"custom:0,9,16,24,33,43,53,63,74",128,1,1,8,4,32,300,150,175,175,28.60162940290239,29598.758222215707,'
    "0,300,175,150.0,175.0,175.0,175.0\n"
)
A100_LOCAL = (  # A100_zeus_local.csv lines 1-2: no power_limit_4..7 at all
    "model_name,partition_method,batch_size,dp,tp,pp,microbatch_size,num_microbatches,power_limit_0,power_limit_1,"
    "power_limit_2,power_limit_3,time,energy,heaviest_stage,heaviest_stage_power_limit,"
    "optimal_heaviest_stage_power_limit\n"
    'bert-huge-uncased,"custom:0,8,14,20,26",256,1,1,4,8,32,300,225,225,200,7.037829257823803,6255.096592592421,'
    "0,300,275\n"
)


def test_perseus_power_limit_zero_means_no_such_stage_and_energy_is_per_gpu(tmp_path):
    out = crossclock.perseus_power_limit(put(tmp_path / "pl", "A40_zeus_global.csv", A40_GLOBAL.encode()), "pl")
    (r,) = out.rows
    assert r["device"] == "A40" and r["workload"] == "gpt3-6.7b/bs512/dp2-tp2-pp4/uniform_transformer/zeus_global"
    assert r["knob"] == "power_limit_w" and r["value"] == 300.0 and r["power_limit_w"] == 300.0
    assert r["time_s"] == 136.38908396164575
    assert r["energy_j"] == 567139.558000012 / 16 and r["power_w"] == 567139.558000012 / 136.38908396164575 / 16
    d = json.loads(r["detail"])
    assert d["stage_power_limits_w"] == [300.0] * 4 and d["gpus"] == 16 and d["iteration_energy_j"] == 567139.558000012
    assert d["optimal_power_limit_w"] == 225.0


def test_perseus_local_files_read_by_column_name_whatever_the_order(tmp_path):
    d = put(tmp_path / "pl", "A40_zeus_local.csv", A40_LOCAL.encode())
    put(d, "A100_zeus_local.csv", A100_LOCAL.encode())
    out = crossclock.perseus_power_limit(d, "pl")
    a100, a40 = out.rows  # files in name order
    assert a40["device"] == "A40" and a40["value"] == 300.0 and a40["time_s"] == 28.60162940290239
    assert json.loads(a40["detail"])["stage_power_limits_w"] == [300, 150, 175, 175, 150, 175, 175, 175]
    assert json.loads(a40["detail"])["heaviest_stage"] == 0 and a40["energy_j"] == 29598.758222215707 / 8
    assert a100["device"] == "A100_PCIe" and a100["value"] == 300.0 and a100["time_s"] == 7.037829257823803
    assert json.loads(a100["detail"])["stage_power_limits_w"] == [300, 225, 225, 200]
    assert a100["workload"] == "bert-huge-uncased/bs256/dp1-tp1-pp4/custom:0,8,14,20,26/zeus_local"


def test_perseus_power_limit_inconsistent_rows_are_rejected(tmp_path):
    head, row = A40_GLOBAL.strip().split("\n")
    bad = [
        row.replace("300,300,300,300,0.0", "300,300,300,300,250.0"),  # a limit for a stage beyond pp
        row.replace("300,300,300,300,0.0", "300,0,300,300,0.0"),  # no limit for a stage that exists
        row.replace("300,300,300,300,0.0", "300,275,300,300,0.0"),  # global with different limits
        row.replace(",4,4,64,", ",9,4,64,"),  # pp 9: stage 4 exists, so its 0.0 is no limit
    ]
    out = crossclock.perseus_power_limit(
        put(tmp_path / "pl", "A40_zeus_global.csv", "\n".join([head, *bad]).encode()), "x"
    )
    assert [(r["line"], r["reason"]) for r in out.rejects] == [
        (2, "bad_value"),
        (3, "out_of_range"),
        (4, "bad_value"),
        (5, "out_of_range"),
    ]
    assert out.rejects[0]["message"] == "power_limit_4 = 250.0 for a stage beyond pp = 4; expected 0.0 (no such stage)"
    assert out.rejects[3]["message"] == "power_limit_4 = 0.0 for a stage that exists (pp = 9); must be > 0 W"
    # the A100 files have columns for 4 stages only
    five = A100_LOCAL.replace(",1,1,4,8,32,", ",1,1,5,8,32,")
    out = crossclock.perseus_power_limit(put(tmp_path / "pl2", "A100_zeus_local.csv", five.encode()), "x")
    assert [(r["line"], r["reason"], r["message"]) for r in out.rejects] == [
        (2, "value_count", "pp = 5 but the file has no power_limit_4 column")
    ]


# --- nv-dvfs-kernels --------------------------------------------------------------------------------


def test_nv_dvfs_real_line_exact_values(tmp_path, external_data):
    real = (external_data / "nv-dvfs-kernels" / "v100-dvfs-real.csv").read_bytes().split(b"\n")
    out = crossclock.nv_dvfs(put(tmp_path / "nv", "v100-dvfs-real.csv", b"\n".join(real[:2]) + b"\n"), "nv")
    (r,) = out.rows
    assert r["device"] == "V100" and r["workload"] == "BlackScholes/BlackScholesGPU"
    assert r["knob"] == "core_clock_mhz" and r["value"] == 1087.0 and r["mem_clock_mhz"] == 877.0
    assert r["time_s"] == 0.91044 / 1000 and r["power_w"] == 157.9836 and r["energy_j"] == 0.91044 / 1000 * 157.9836
    assert (r["sm_active"], r["sm_occupancy"], r["dram_active"], r["fp32_active"]) == (
        0.9769017857142844,
        0.8309017857142857,
        0.6917767857142852,
        0.4346785714285714,
    )
    assert (r["fp64_active"], r["fp16_active"], r["tensor_active"]) == (0.0, 0.0, 0.0)
    d = json.loads(r["detail"])
    assert d["arg"] == "input000" and d["ptx_counts"]["fma"] == 12 and d["ptx_counts"]["add"] == 5
    assert "abs" in d["ptx_counts"] and "activemask" not in d["ptx_counts"]  # non-zero counts only


# --- gpu-frequency-dvfs -----------------------------------------------------------------------------

GPU_FREQ = (  # aggregated_all_kernels_effective.csv lines 1, 2 (auto), 67 (210/405) and 88 (2100/405 -> 1920/810)
    "workload,kernel,requested_core_clock,requested_mem_clock,requested_pair,is_auto_baseline,applied_core_clock,"
    "applied_mem_clock,n,measured_launches_mean,measured_launches_std,total_time_mean_ms,total_time_std_ms,"
    "total_energy_mean_mJ,total_energy_std_mJ,avg_power_mean_W,avg_power_std_W,time_per_launch_mean_ms,"
    "time_per_launch_std_ms,energy_per_launch_mean_mJ,energy_per_launch_std_mJ,effective_core_clock,"
    "effective_mem_clock,num_requested_pairs_merged,requested_pairs_merged,requested_core_clock_original,"
    "requested_mem_clock_original\n"
    "2dconv,convolution2D_kernel,auto,auto,auto/auto,1,255,5001,1,28858.0,0.0,5000.009,0.0,1717690.0,0.0,343.537396,"
    "0.0,0.1732624922032019,0.0,59.52214290664634,0.0,,,1,auto/auto,auto,auto\n"
    "2dconv,convolution2D_kernel,210,405,210/405,0,210,405,1,928.0,0.0,5001.789,0.0,211602.0,0.0,42.305263,0.0,"
    "5.389858836206896,0.0,228.01939655172413,0.0,210.0,405.0,1,210/405,210,405\n"
    "2dconv,convolution2D_kernel,1920,810,2100/405,0,1920,810,1,2282.0,0.0,5001.75,0.0,646565.0,0.0,129.267769,0.0,"
    "2.1918273444347065,0.0,283.33260297984225,0.0,1920.0,810.0,1,2100/405,2100,405\n"
)


def test_gpu_frequency_auto_rows_are_default_settings_not_measurements_at_the_recorded_clock(tmp_path):
    out = crossclock.gpu_frequency(put(tmp_path / "g", "aggregated_all_kernels_effective.csv", GPU_FREQ.encode()), "g")
    (auto,) = rows_by(out, default_setting=True)
    assert auto["workload"] == "2dconv/convolution2D_kernel@default" and auto["knob"] == "core_clock_mhz"
    assert auto["value"] is None and auto["core_clock_mhz"] is None and auto["mem_clock_mhz"] is None
    assert auto["time_s"] == 0.1732624922032019 / 1000 and auto["energy_j"] == 59.52214290664634 / 1000
    assert auto["power_w"] == 343.537396
    d = json.loads(auto["detail"])
    assert d["recorded_core_clock_mhz"] == 255.0 and d["recorded_mem_clock_mhz"] == 5001.0
    assert not any(r["core_clock_mhz"] == 255.0 or r["value"] == 255.0 for r in out.rows)
    assert out.info["default_setting_rows"] == 1


def test_gpu_frequency_grid_points_in_both_sweeps_at_applied_clocks(tmp_path):
    out = crossclock.gpu_frequency(put(tmp_path / "g", "aggregated_all_kernels_effective.csv", GPU_FREQ.encode()), "g")
    core, mem = rows_by(out, core_clock_mhz=210.0)
    assert (core["workload"], core["knob"], core["value"]) == (
        "2dconv/convolution2D_kernel@mem405",
        "core_clock_mhz",
        210.0,
    )
    assert (mem["workload"], mem["knob"], mem["value"]) == (
        "2dconv/convolution2D_kernel@core210",
        "mem_clock_mhz",
        405.0,
    )
    assert core["time_s"] == 5.389858836206896 / 1000 and core["energy_j"] == 228.01939655172413 / 1000
    assert core["power_w"] == 42.305263 and core["mem_clock_mhz"] == 405.0
    top = rows_by(out, core_clock_mhz=1920.0)
    assert [r["workload"] for r in top] == [
        "2dconv/convolution2D_kernel@mem810",
        "2dconv/convolution2D_kernel@core1920",
    ]
    assert json.loads(top[0]["detail"])["requested_core_clock_mhz"] == 2100 and top[0]["mem_clock_mhz"] == 810.0
    assert len(out.rows) == 1 + 2 * 2


# --- the real files: row counts (CROSS_CLOCK.md) and the stage ---------------------------------------


@pytest.fixture
def crossclock_root(tmp_root, external_data):
    (tmp_root / "data").mkdir()
    os.symlink(external_data, tmp_root / "data" / "external")
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params["profile"] = {}
    (tmp_root / "params.yaml").write_text(yaml.safe_dump(params))
    return Paths(tmp_root)


def test_real_files_row_counts_match_cross_clock_md(crossclock_root):
    params = load_params(crossclock_root.params)
    kinds = {"perseus-stage-profiles", "perseus-power-limit", "nv-dvfs-kernels", "gpu-frequency-dvfs"}
    s = {
        n: run_ingest_stage(crossclock_root, params, n) for n, src in params.ingest.sources.items() if src.kind in kinds
    }
    assert {n: v["rows_per_file"] for n, v in s.items()} == {
        "perseus-stage-profiles": {
            "gpt3-175b+a40_bf16.csv": 960,
            "bloom+a40_bf16.csv": 960,
            "gpt3-175b+a100_sxm_bf16.csv": 608,
            "bloom+a100_sxm_bf16.csv": 608,
        },
        "perseus-power-limit": {
            "A40_zeus_global.csv": 48,
            "A40_zeus_local.csv": 47,
            "A100_zeus_global.csv": 30,
            "A100_zeus_local.csv": 35,
        },
        "nv-dvfs-kernels": {"v100-dvfs-real.csv": 200, "rtx8000-dvfs-real.csv": 200},
        "gpu-frequency-dvfs": {"aggregated_all_kernels_effective.csv": 1731},
    }
    assert all(v["rejected_lines"] == 0 for v in s.values())
    # stages 1-6 repeat stage 0 in every file: 6 stages x 2 instructions x (60 or 38) clocks dropped
    assert s["perseus-stage-profiles"]["identical_stage_rows_dropped"] == 2 * 6 * 2 * 60 + 2 * 6 * 2 * 38
    assert s["perseus-stage-profiles"]["sweep_rows"] == 2 * 2 * 2 * 60 + 2 * 2 * 2 * 38
    assert s["perseus-power-limit"]["sweep_rows"] == 48 + 47 + 30 + 35
    assert s["nv-dvfs-kernels"]["sweep_rows"] == 400 and s["nv-dvfs-kernels"]["workloads"] == 40
    g = s["gpu-frequency-dvfs"]
    assert g["default_setting_rows"] == 65 and g["sweep_rows"] == 65 + 2 * 1666
    tables = {n: SWEEPS.validate(pd.read_parquet(crossclock_root.ingested_dir(n) / "sweeps.parquet")) for n in s}
    nv = tables["nv-dvfs-kernels"]
    # 19 kernel names, convolutionRowsKernel in two benchmarks: 20 workloads per GPU, 10 clocks each
    assert nv.groupby("device")["workload"].nunique().to_dict() == {"RTX8000": 20, "V100": 20}
    assert nv.groupby(["device", "workload"]).size().eq(10).all()
    assert (nv["fp16_active"] == 0).all() and (nv["tensor_active"] == 0).all()  # as CROSS_CLOCK.md says
    gf = tables["gpu-frequency-dvfs"]
    auto = gf[gf["default_setting"]]
    assert auto["value"].isna().all() and auto["core_clock_mhz"].isna().all() and auto["workload"].nunique() == 65
    assert set(gf.loc[~gf["default_setting"], "core_clock_mhz"]) == {
        210,
        630,
        1050,
        1470,
        1890,
        1905,
        1920,
        1935,
        1950,
        1965,
    }
    # the per-GPU reading of the Perseus iteration energy: no GPU averages more than its limit + 2 %
    pl = tables["perseus-power-limit"]
    glob = pl[pl["workload"].str.endswith("zeus_global")]
    assert (glob["power_w"] <= glob["power_limit_w"] * 1.02).all()
    assert set(pl["device"]) == {"A40", "A100_PCIe"}


def test_zero_times_are_rejects_not_divisions_by_zero(tmp_path):
    """Found by bench/fuzz_ingest.py: power = energy / time crashed on a zero time."""
    head, good = PERSEUS_STAGE.split(b"\r\n")[:2]
    out = crossclock.perseus_stages(
        put(tmp_path / "p", "bloom+a40_bf16.csv", head + b"\n" + good.replace(b"0.05123121643066401", b"0")), "p"
    )
    assert [(r["line"], r["reason"], r["message"]) for r in out.rejects] == [
        (2, "out_of_range", "time = 0.0, must be > 0")
    ]
    zero = A40_GLOBAL.replace("136.38908396164575", "0.0")
    out = crossclock.perseus_power_limit(put(tmp_path / "pl", "A40_zeus_global.csv", zero.encode()), "pl")
    assert [(r["line"], r["reason"]) for r in out.rejects] == [(2, "out_of_range")] and not out.rows
