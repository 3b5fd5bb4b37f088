"""Validation: sweep optima, summed-vs-measured arithmetic, and the stage's report."""

import json
import math

import pandas as pd
import pytest

from opcost.data.evaluate import device_config
from opcost.params.load import load_params
from opcost.stages.validate import run as run_validate_stage
from opcost.validate import summation, sweeps


def sweep_rows(workload, values, times, powers):
    return [
        {
            "source": "s",
            "device": "d",
            "workload": workload,
            "knob": "power_limit_w",
            "value": float(v),
            "time_s": t,
            "power_w": p,
            "energy_j": t * p,
        }
        for v, t, p in zip(values, times, powers)
    ]


def test_sweep_optima_and_edges():
    df = pd.DataFrame(
        sweep_rows("mid", [100, 150, 200, 250], [2.0, 1.5, 1.2, 1.0], [100, 120, 160, 250])
        + sweep_rows("edge", [100, 150, 200, 250], [1.0, 1.0, 1.0, 1.0], [100, 120, 160, 250])
    )
    opt = sweeps.optima(sweeps.normalised(df)).set_index("workload")
    # mid: energy 200, 180, 192, 250 J -> optimum 150 W; EDP 400, 270, 230.4, 250 -> 200 W
    m = opt.loc["mid"]
    assert m["energy_optimal_value"] == 150 and m["edp_optimal_value"] == 200
    assert m["energy_saved"] == pytest.approx(1 - 180 / 250) and m["time_lost_at_energy_optimum"] == pytest.approx(0.5)
    assert m["energy_saved_at_edp_optimum"] == pytest.approx(1 - 192 / 250)
    assert not m["energy_optimum_at_edge"] and not m["edp_optimum_at_edge"]
    # edge: time does not change, so the lowest limit wins and sits at the edge of the range
    e = opt.loc["edge"]
    assert e["energy_optimal_value"] == 100 and e["energy_optimum_at_edge"] and e["reference_value"] == 250


def test_grid_optimum_is_the_joint_minimum():
    rows = []
    for core in (500, 1000):
        for mem in (2000, 3000):
            t = 2.0 if core == 500 else 1.0
            p = {(500, 2000): 50, (500, 3000): 60, (1000, 2000): 90, (1000, 3000): 130}[(core, mem)]
            base = {
                "source": "g",
                "device": "d",
                "time_s": t,
                "power_w": p,
                "energy_j": t * p,
                "core_clock_mhz": float(core),
                "mem_clock_mhz": float(mem),
                "power_limit_w": None,
            }
            rows.append({**base, "workload": f"app@mem{mem}", "knob": "core_clock_mhz", "value": float(core)})
            rows.append({**base, "workload": f"app@core{core}", "knob": "mem_clock_mhz", "value": float(mem)})
    g = sweeps.grid_optima(pd.DataFrame(rows)).iloc[0]
    # energies: (500,2000) 100, (500,3000) 120, (1000,2000) 90, (1000,3000) 130 J; EDP 200, 240, 90, 130
    assert (g["energy_optimal_core_mhz"], g["energy_optimal_mem_mhz"]) == (1000, 2000)
    assert (g["edp_optimal_core_mhz"], g["edp_optimal_mem_mhz"]) == (1000, 2000)
    assert g["energy_saved"] == pytest.approx(1 - 90 / 130) and g["grid_points"] == 4 and g["energy_optimum_at_edge"]


def test_summed_vs_measured_propagates_sigmas():
    nets = pd.DataFrame(
        [
            {
                "set_id": "m:1x3x8x8",
                "model": "m",
                "device_config": "D",
                "mode": "inference",
                "clock_mhz": None,
                "power_limit_w": None,
                "t_s": 1.0,
                "sigma_t_s": 0.05,
                "e_j": 10.0,
                "sigma_e_j": 0.5,
                "sources": "x",
            }
        ]
    )
    ops = pd.DataFrame(
        [
            {
                "op_id": "a",
                "device_config": "D",
                "mode": "inference",
                "phase": "forward",
                "clock_mhz": None,
                "power_limit_w": None,
                "t_s": 0.1,
                "sigma_t_s": 0.01,
                "e_j": 1.0,
                "sigma_e_j": 0.1,
            },
            {
                "op_id": "b",
                "device_config": "D",
                "mode": "inference",
                "phase": "forward",
                "clock_mhz": None,
                "power_limit_w": None,
                "t_s": 0.2,
                "sigma_t_s": 0.02,
                "e_j": 2.0,
                "sigma_e_j": 0.2,
            },
        ]
    )
    occ = pd.DataFrame(
        {"set_id": ["m:1x3x8x8"] * 3, "mode": ["inference"] * 3, "op_id": ["a", "b", "c"], "calls": [2, 3, 1]}
    )
    cat = pd.DataFrame({"op_id": ["a", "b", "c"], "flops": [10, 20, 40]})
    r = summation.summed_vs_measured(nets, ops, occ, cat).iloc[0]
    assert r["summed_t_s"] == pytest.approx(2 * 0.1 + 3 * 0.2)
    assert r["summed_sigma_t_s"] == pytest.approx(math.sqrt((2 * 0.01) ** 2 + (3 * 0.02) ** 2))
    assert r["summed_e_j"] == pytest.approx(8.0) and r["e_error"] == pytest.approx(-0.2)
    assert r["flops_share"] == pytest.approx(80 / 120) and r["calls_share"] == pytest.approx(5 / 6)


def leaves(d) -> int:
    """Columns `dvc metrics show` would print for this JSON: its scalar leaves."""
    return sum(leaves(v) for v in d.values()) if isinstance(d, dict) else 1


def test_validate_stage_writes_the_report(trained):
    paths = trained[0]
    metrics = run_validate_stage(paths, load_params(paths.params), log_to_mlflow=False)
    summed = pd.read_csv(paths.validate_summed)
    # every measured thesis network whose set is extracted in this project (resnet18 at 32x32 here),
    # on every device config and mode it was measured in, plus the tiny CPU campaign's network
    got = set(zip(summed["set_id"], summed["device_config"], summed["mode"]))
    assert {("resnet18:32x3x32x32", c, "inference") for c in ("A30", "A30_no_tf32", "RTX2080Ti")} <= got
    assert ("resnet18:32x3x32x32", "A30", "training") in got
    meta = json.loads((paths.raw_dir("tiny") / "campaign.json").read_text())
    cpu_config = device_config(meta["environment"], "cpu")  # whatever CPU this machine has
    assert ("squeezenet1_1:2x3x32x32", cpu_config, "inference") in got
    assert (summed["flops_share"] > 0.99).all()
    opt = pd.read_csv(paths.validate_sweep_optima)
    sw = pd.read_parquet(paths.evaluated_sweeps)
    assert len(opt) == sw.groupby(["source", "device", "workload", "knob"]).ngroups
    assert set(opt["source"]) == {
        "zeus-power-limit",
        "dvfs-conv",
        "perseus-stage-profiles",
        "perseus-power-limit",
        "nv-dvfs-kernels",
        "gpu-frequency-dvfs",
    }
    grid = pd.read_csv(paths.validate_grid_optima)
    # dvfs-conv: three cuDNN algorithms, each a 5 x 5 core x memory clock grid
    conv = grid[grid["source"] == "dvfs-conv"]
    assert sorted(conv["workload"]) == ["conv-fft/input00", "conv-sgemm/input00", "conv-winograd/input00"]
    assert (conv["grid_points"] == 25).all()
    # gpu-frequency-dvfs: 65 kernels, each over a core x memory clock grid
    assert (grid["source"] == "gpu-frequency-dvfs").sum() == 65
    index = paths.report_index.read_text()
    for f in (paths.validate_figures).glob("*.png"):
        assert f"validate/figures/{f.name}" in index
    assert "validate/sweep_optima.csv" in index and "A30-inference" in index
    # every table the stage writes is named by Paths (one place for paths), and the index links each one
    named = {getattr(paths, a) for a in dir(paths) if a.startswith("validate_") and a != "validate_sweeps"}
    named |= {paths.validate_sweeps(k) for k in ("power_limit_w", "core_clock_mhz", "mem_clock_mhz")}
    written = set(paths.validate_dir.glob("*.csv"))
    assert written and written <= named, sorted(f.name for f in written - named)
    for f in written:
        assert f"validate/{f.name}" in index, f.name
    detail = json.loads(paths.validate_detail.read_text())
    assert detail["summed_vs_measured"]["A30-inference"]["networks"] == 1
    # the headline table gives the median and the time-weighted error beside the MAPE
    s = detail["summed_vs_measured"]["A30-inference"]
    row = next(r for r in index.splitlines() if r.startswith("| sum of measured ops | A30-inference |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:6] == [f"{s['time_mape_pct']:.1f}", f"{s['time_mdape_pct']:.1f}", f"{s['time_weighted_pct']:.1f}"]
    assert s["time_mdape_pct"] == pytest.approx(s["time_mape_pct"])  # one network: mean = median = weighted
    assert s["time_weighted_pct"] == pytest.approx(s["time_mape_pct"])
    headline = json.loads(paths.validate_metrics.read_text())  # what `dvc metrics show` lists: few columns
    assert set(headline["summed_vs_measured"]["A30-inference"]) == {"time_mape_pct", "energy_mape_pct"}
    assert leaves(headline) <= 40 < leaves(detail)
    assert metrics["sweeps"]["zeus-power-limit/V100/power_limit_w"]["workloads"] == 68


def test_figure_labels_read_torchvision_and_user_set_ids() -> None:
    """The summed-figure labels parse a user's set id, whose model holds colons and brackets of its own
    (the validate stage stopped on `networks/recurrent.py:lstm(layers=2):8x64x32`)."""
    from opcost.validate.report import _label

    assert _label("resnet18:32x3x224x224") == "resnet18\n3x224x224"
    assert _label("resnet18:32x3x224x224:float16") == "resnet18\n3x224x224"
    assert _label("networks/recurrent.py:lstm(layers=2):8x64x32") == "lstm(layers=2)\n64x32"
    assert _label("pkg.mod:net:16:input=int64:vocab=100") == "net\n16"
    assert _label("nets/t.py:bert(heads=2):4x128:bfloat16:input=int64") == "bert(heads=2)\n128"
    assert _label("not a set id") == "not a set id"


def test_clock_optima_say_transferred_where_an_optimum_sits_at_a_transferred_clock():
    """An own bundle's boost clock is `measured` (its default-clock measurements); the optimum below it comes
    from the cross-clock model, and the optima row says so (it took the boost row's source: `measured`)."""
    from opcost.devices import DEVICES
    from opcost.validate import clocks

    boost = DEVICES["A30"].boost_clock_mhz
    sw = pd.DataFrame(
        {
            "set_id": ["n"] * 3, "mode": ["inference"] * 3, "device_config": ["A30"] * 3,
            "clock_mhz": [600.0, 900.0, boost], "clock_source": ["transferred", "transferred", "measured"],
            "time_s": [2.0, 1.5, 1.0], "energy_j": [1.0, 1.2, 1.5], "edp_js": [2.0, 1.8, 1.5],
        }
    )  # fmt: skip
    o = clocks.optima(sw).iloc[0]
    assert (o["energy_optimal_mhz"], o["edp_optimal_mhz"], o["clock_source"]) == (600.0, boost, "transferred")
    at_boost = clocks.optima(sw.assign(energy_j=[2.0, 1.9, 1.5])).iloc[0]
    assert (at_boost["energy_optimal_mhz"], at_boost["clock_source"]) == (boost, "measured")
