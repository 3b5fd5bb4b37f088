"""The profiler: real CPU measurements of tiny ops, energy sources, clock control, campaigns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from fake_nvml import FakeNvml
from opcost.config import CampaignParams, ModelInputSet
from opcost.errors import OpcostError
from opcost.measure.campaign import Campaign, Unit, make_plan
from opcost.measure.clocks import PERMISSION_HELP, DeviceControl, Setting, settings_grid
from opcost.measure.nvml import Nvml
from opcost.measure.power import NvidiaSmiEnergy, RaplEnergy, integrate_power_j, open_source, parse_smi_line
from opcost.measure.profile import adhoc_plan
from opcost.measure.timing import measure_window, time_block
from opcost.measure.workload import VARIANT_OUT_OF_PLACE, op_workload
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class
from opcost.schemas import POWER_SAMPLES, TIMINGS


def module_spec(module: nn.Module, shape) -> OpSpec:
    return OpSpec(
        kind=type(module).__name__,
        category=CATEGORY_MODULE,
        target=target_of_class(type(module)),
        attrs=module_attrs(module),
        args=[{"tensor": 0}],
        inputs=(TensorInput(tuple(shape), "float32"),),
    )


CONV = module_spec(nn.Conv2d(8, 8, 3, padding=1), (2, 8, 16, 16))
RELU_INPLACE = module_spec(nn.ReLU(inplace=True), (2, 8, 16, 16))
BROKEN = module_spec(nn.Linear(10, 4), (2, 5))  # 5 features into a 10-feature layer: fails at run time


def campaign(**kw) -> CampaignParams:
    base = dict(
        name="t",
        device="cpu",
        modes=("inference",),
        sets=("x",),
        networks=False,
        trials=2,
        min_time_s=0.01,
        window_s=0.03,
        energy_source="none",
        max_instances=4,
        instance_budget_mb=8,
    )
    base.update(kw)
    return CampaignParams(**base)


def op_units(specs, modes=("inference",)):
    return [Unit("op", s.op_id, m, s.kind, spec=s) for s in specs for m in modes]


# -- timing ------------------------------------------------------------------------------


def test_time_block_and_window_on_a_real_op():
    wl = op_workload(CONV, "inference", "cpu", seed=1, max_instances=4, budget_bytes=1e9)
    assert wl.instances == 4
    t = time_block(wl.block, wl.instances, min_time_s=0.02)
    s = t.stats()
    assert t.iterations == 4 * t.number_per_run * len(t.block_means_s)
    assert 0 < s["median_s"] and 0 < s["mean_s"] < 1
    w = measure_window(
        wl.block, wl.instances, blocks_per_chunk=3, chunks=5, sync=lambda: None, read_energy=lambda: None
    )
    assert w.iterations == 5 * 3 * 4
    assert [c[0] for c in w.checkpoints] == [0, 12, 24, 36, 48, 60]
    times = [c[1] for c in w.checkpoints]
    assert times == sorted(times) and times[-1] == w.time_s > 0
    r2, share = w.fit("time")
    assert r2 > 0.9  # time grows with iterations
    assert w.fit("energy") is None and w.energy_j is None


def test_window_fit_flags_non_proportional_runs():
    from opcost.measure.timing import WindowResult

    linear = WindowResult(40, 4.0, 8.0, [(0, 0.0, 0.0), (10, 1.0, 2.0), (20, 2.0, 4.0), (30, 3.0, 6.0), (40, 4.0, 8.0)])
    assert linear.fit("time") == pytest.approx((1.0, 0.0), abs=1e-9) and linear.proportional() is True
    # energy that does not grow with iterations (a counter that updates once) is flagged
    stuck = WindowResult(40, 4.0, 8.0, [(0, 0.0, 0.0), (10, 1.0, 0.0), (20, 2.0, 0.0), (30, 3.0, 0.0), (40, 4.0, 8.0)])
    assert stuck.proportional() is False


def test_training_workload_resets_grads_and_measures_inplace_out_of_place():
    wl = op_workload(RELU_INPLACE, "training", "cpu", seed=0, max_instances=2, budget_bytes=1e9)
    assert wl.variant == VARIANT_OUT_OF_PLACE
    wl.block()
    wl2 = op_workload(CONV, "training", "cpu", seed=0, max_instances=1, budget_bytes=1e9)
    wl2.block()
    wl2.block()  # gradients were reset: a second step does not fail or accumulate


# -- energy sources ----------------------------------------------------------------------


def test_rapl_counter_sums_packages_and_handles_wraparound(tmp_path):
    for i, (e, rng) in enumerate([(1_000_000, 10_000_000), (2_000_000, 10_000_000)]):
        d = tmp_path / f"intel-rapl:{i}"
        d.mkdir()
        (d / "energy_uj").write_text(str(e))
        (d / "max_energy_range_uj").write_text(str(rng))
    (tmp_path / "intel-rapl:0:0").mkdir()  # a sub-domain (core): must not be counted twice
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("5")
    src = RaplEnergy(tmp_path)
    assert [d.name for d in src.domains] == ["intel-rapl:0", "intel-rapl:1"]
    assert src.read_energy_j() == 0.0
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("1500000")  # +0.5 J
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("500000")  # wrapped: +8.5 J
    assert src.read_energy_j() == pytest.approx(0.5 + 8.5)


def test_rapl_missing_falls_back_to_none_on_auto(tmp_path):
    with pytest.raises(OpcostError, match="no RAPL package domain"):
        RaplEnergy(tmp_path)
    assert open_source("auto", "cpu", rapl_root=tmp_path).name == "none"


def test_nvidia_smi_line_and_thesis_energy():
    row = parse_smi_line("2026/11/21 10:00:00.123, 245.31, 1410, 1215, 61, 100\n")
    assert (
        row["power_w"],
        row["sm_clock_mhz"],
        row["mem_clock_mhz"],
        row["temperature_c"],
        row["utilization_pct"],
    ) == (
        245.31,
        1410.0,
        1215.0,
        61.0,
        100.0,
    )
    assert parse_smi_line("[N/A], bad") is None
    assert parse_smi_line("t, [N/A], 1410, 1215, 61, 100")["power_w"] is None
    src = NvidiaSmiEnergy.__new__(NvidiaSmiEnergy)  # no nvidia-smi here: test the arithmetic alone
    assert src.window_energy_j([{"power_w": 100.0}, {"power_w": 300.0}], seconds=2.0) == 400.0


def test_integrate_power_trapezoid():
    samples = [
        {"timestamp": 0.0, "power_w": 100.0},
        {"timestamp": 1.0, "power_w": 300.0},
        {"timestamp": 3.0, "power_w": 300.0},
    ]
    assert integrate_power_j(samples) == 200.0 + 600.0


def test_nvml_wrapper_reads_replayed_trace_and_falls_back():
    fake = FakeNvml()
    n = Nvml(0, lib=fake)
    assert n.name() == "Fake GPU (replayed trace)"
    e0 = n.energy_j()
    assert e0 == pytest.approx(5000.0, abs=1.0)  # the trace's counter starts at 5,000,000 mJ
    s = n.sample()
    assert s["power_kind"] == "instant" and s["sm_clock_mhz"] == 1410 and s["mem_clock_mhz"] == 1215
    no_instant = Nvml(0, lib=FakeNvml(instant_power=False, energy_counter=False))
    assert no_instant.power_w()[1] == "average" and no_instant.energy_j() is None
    assert open_source("nvml", "cuda:0", nvml=no_instant).has_counter is False


# -- clock control -----------------------------------------------------------------------


def test_settings_grid():
    assert settings_grid([], []) == [Setting()]
    assert [s.label for s in settings_grid([900, 1410], [250])] == ["clk900-pl250", "clk1410-pl250"]


def test_unsupported_clocks_and_limits_are_refused_before_anything():
    fake = FakeNvml()
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0")
    with pytest.raises(
        OpcostError, match=r"core clock\(s\) \[1000\] MHz not supported by cuda:0; supported: 210..1410"
    ):
        ctl.validate([Setting(1000)])
    with pytest.raises(OpcostError, match=r"power limit\(s\) \[400\] W outside .*100..300 W"):
        ctl.validate([Setting(None, 400)])
    ctl.validate([Setting(900), Setting(None, 250)])
    assert fake.calls == []  # validation only reads
    with pytest.raises(OpcostError, match="no clock or power-limit control"):
        DeviceControl(None, "cpu").validate([Setting(900)])


def test_apply_records_reached_clock_and_restore_returns_to_found_state():
    fake = FakeNvml(power_limit_w=280)
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0")
    reached = ctl.apply(Setting(900, 200))
    assert reached == {"sm_clock_mhz": 900, "power_limit_w": 200.0}
    ctl.apply(Setting())  # back to default: clocks reset, limit restored
    assert fake.locked is None and fake.power_limit_mw == 280_000
    ctl.apply(Setting(1200, 150))
    ctl.restore()
    assert fake.locked is None and fake.power_limit_mw == 280_000
    assert fake.calls[-2:] == [("reset",), ("power_limit", 280_000)]


def test_sigterm_during_session_restores_clocks():
    fake = FakeNvml(power_limit_w=300)
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exc:
        with ctl.session():
            ctl.apply(Setting(900, 200))
            assert fake.locked == (900, 900)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler raises before this ends
    assert exc.value.code == 128 + signal.SIGTERM
    assert fake.locked is None and fake.power_limit_mw == 300_000
    assert signal.getsignal(signal.SIGTERM) == before  # handlers put back


def test_no_permission_stops_before_measuring(tmp_path):
    fake = FakeNvml(deny_knobs=True)
    plan = make_plan(campaign(clocks_mhz=(900,), energy_source="nvml"), op_units([CONV]))
    with pytest.raises(OpcostError) as exc:
        Campaign(plan, tmp_path / "out", tmp_path / "parts", nvml_lib=fake).run(show_progress=False)
    assert "no permission to apply clk900" in str(exc.value) and PERMISSION_HELP in str(exc.value)
    assert not (tmp_path / "out").exists() and not (tmp_path / "parts").exists()


# -- campaigns ---------------------------------------------------------------------------


def test_campaign_with_nvml_energy_and_raw_power_log(tmp_path):
    """The NVML path end to end, against the fake library; compute runs for real on the CPU."""
    fake = FakeNvml()
    c = campaign(energy_source="nvml", window_s=0.3, sample_interval_s=0.01, trials=2)
    plan = make_plan(c, op_units([CONV]))
    meta = Campaign(plan, tmp_path / "out", tmp_path / "parts", nvml_lib=fake).run(show_progress=False)
    t = TIMINGS.validate(pd.read_parquet(tmp_path / "out" / "timings.parquet"))
    ps = POWER_SAMPLES.validate(pd.read_parquet(tmp_path / "out" / "power_samples.parquet"))
    assert list(t["trial"]) == [0, 1] and (t["status"] == "ok").all()
    # the counter difference over the window: between the trace's idle 60 W and loaded 250 W
    assert ((t["power_w"] > 55) & (t["power_w"] < 255)).all()
    assert (t["energy_per_iter_j"] - t["power_w"] * t["time_per_iter_s"]).abs().max() < 1e-9
    assert t["energy_r2"].notna().all() and (t["sm_clock_mhz"] == 1410).all()
    assert len(ps) >= 4 and set(ps["source"]) == {"nvml"} and set(ps["power_kind"]) == {"instant"}
    assert set(ps["item_id"]) == {CONV.op_id} and set(ps["trial"]) == {0, 1}
    assert meta["environment"]["nvml_device_name"] == "Fake GPU (replayed trace)"
    assert meta["environment"]["energy_counter"] is True


def test_failed_op_is_recorded_and_campaign_goes_on(tmp_path):
    plan = make_plan(campaign(trials=3), op_units([BROKEN, CONV]))
    meta = Campaign(plan, tmp_path / "out", tmp_path / "parts").run(show_progress=False)
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    bad = t[t["op_id"] == BROKEN.op_id]
    assert list(bad["status"]) == ["failed"] * 3
    # 5 features into a 10-feature Linear: the shape error, whichever kernel reports it first
    assert bad["error"].str.match(r"RuntimeError: .*(shape|dim)").all()
    assert bad["mean_s"].isna().all()
    assert (t[t["op_id"] == CONV.op_id]["status"] == "ok").all()
    assert meta["failed_rows"] == 3


def test_cuda_campaign_without_gpu_says_where_to_run(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    plan = make_plan(campaign(name="h100", device="cuda:0"), op_units([CONV]))
    with pytest.raises(OpcostError, match=r"run `dvc repro profile@h100` on a node with that GPU"):
        Campaign(plan, tmp_path / "out", tmp_path / "parts").run(show_progress=False)


def test_adhoc_plan_counts_and_dry_run_touches_nothing(tmp_path):
    c = campaign(modes=("inference", "training"), networks=True, clocks_mhz=())
    plan = adhoc_plan(c, [ModelInputSet("resnet18", (2, 3, 32, 32), modes=("inference", "training"))])
    s = plan.summary()
    # resnet18: 29 unique ops per mode (see the extract tests' catalogue), plus the network
    assert s["ops_per_mode"] == {"inference": 29, "training": 29} and s["networks_per_mode"] == {
        "inference": 1,
        "training": 1,
    }
    assert s["parts"] == 60 and s["measurements"] == 120
    from typer.testing import CliRunner

    from opcost.cli import app

    out = tmp_path / "never"
    res = CliRunner().invoke(
        app, ["profile", "--models", "resnet18:2,3,32,32", "--out", str(out), "--dry-run", "--no-progress"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["parts"] == 30 and not out.exists()


def test_profile_cli_errors():
    from typer.testing import CliRunner

    from opcost.cli import app

    r = CliRunner().invoke(app, ["profile", "--models", "resnet18", "--out", "x"])
    assert r.exit_code == 2 and "expected MODEL:B,C,H,W" in r.stderr
    r = CliRunner().invoke(
        app, ["profile", "--models", "resnet18:2,3,32,32", "--out", "x", "--energy-source", "joulemeter"]
    )
    assert r.exit_code == 2 and "energy_source 'joulemeter' is not one of" in r.stderr


KILL_SCRIPT = """
import sys
from pathlib import Path
from opcost.config import CampaignParams
from opcost.measure.campaign import Campaign, Unit, make_plan
from opcost.ops.spec import OpSpec, TensorInput
specs = [OpSpec("ReLU", "module", "torch.nn.modules.activation.ReLU", {"inplace": False}, [{"tensor": 0}], {},
                (TensorInput((2, 4, n, n), "float32"),)) for n in range(4, 4 + int(sys.argv[2]))]
c = CampaignParams(name="k", device="cpu", sets=("x",), trials=2, min_time_s=0.01, window_s=0.2,
                   energy_source="none", max_instances=2, networks=False)
plan = make_plan(c, [Unit("op", s.op_id, "inference", s.kind, spec=s) for s in specs])
Campaign(plan, Path(sys.argv[1]) / "out", Path(sys.argv[1]) / "parts").run(show_progress=False)
"""


def test_kill_and_resume_measures_only_what_is_missing(tmp_path):
    n_ops = 12
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])),
    }
    cmd = [sys.executable, "-c", KILL_SCRIPT, str(tmp_path), str(n_ops)]
    proc = subprocess.Popen(cmd, env=env)
    parts = tmp_path / "parts"
    deadline = time.time() + 120
    done: list[Path] = []
    while time.time() < deadline and proc.poll() is None:
        done = list(parts.glob("*/*.timings.parquet"))
        if len(done) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "campaign finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sorted(parts.glob("*/*.timings.parquet"))
    assert 3 <= len(done) < n_ops and not (tmp_path / "out").exists()
    before = pd.concat([pd.read_parquet(p) for p in done], ignore_index=True)
    # started again: finishes, and the parts measured before the kill are not measured again
    subprocess.run(cmd, env=env, check=True)
    out = tmp_path / "out"
    t = pd.read_parquet(out / "timings.parquet")
    assert len(t) == n_ops * 2 and not t.duplicated(["op_id", "mode", "setting", "trial"]).any()
    assert (t["status"] == "ok").all()
    assert json.loads((out / "campaign.json").read_text())["parts_resumed"] == len(done)
    again = before[["op_id", "trial", "started_at"]].merge(t[["op_id", "trial", "started_at"]], on=["op_id", "trial"])
    assert len(again) == len(before) and (again["started_at_x"] == again["started_at_y"]).all()
    assert not list(out.glob(".*.tmp"))  # nothing half-written left behind


def test_energy_check_compares_counter_and_integrated_power():
    """On the fake's replayed trace (steady 250 W after 0.2 s) both figures agree closely."""
    from opcost.measure.energycheck import energy_check

    fake = FakeNvml()
    time.sleep(0.25)  # past the trace's idle start
    r = energy_check(Nvml(0, lib=fake), "cpu", seconds=0.5, size=64, interval_s=0.01)
    assert r["counter_energy_j"] == pytest.approx(250 * r["seconds"], rel=0.05)
    assert abs(r["relative_difference"]) < 0.1 and r["power_kind"] == "instant" and r["samples"] > 10
