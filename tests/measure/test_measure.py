"""The profiler: real CPU measurements of tiny ops, energy sources, clock control, campaigns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from builders import BROKEN, CONV, campaign, module_spec, op_units, shard_campaign
from fake_nvml import FakeNvml
from opcost.errors import OpcostError
from opcost.locks import cpu_lock_key, device_lock, device_state_dir, file_lock, machine_lock_dir
from opcost.measure.campaign import TABLE_FILES, Campaign, all_failed_message, make_plan
from opcost.measure.clocks import PERMISSION_HELP, DeviceControl, RestoreError, Setting, settings_grid
from opcost.measure.interrupts import Interrupted
from opcost.measure.nvml import Nvml
from opcost.measure.power import NvidiaSmiEnergy, RaplEnergy, integrate_power_j, open_source, parse_smi_line
from opcost.measure.profile import adhoc_plan
from opcost.measure.timing import measure_window, time_block
from opcost.measure.workload import VARIANT_OUT_OF_PLACE, op_workload
from opcost.params.extract import ModelInputSet
from opcost.schemas import POWER_SAMPLES, TIMINGS

RELU_INPLACE = module_spec(nn.ReLU(inplace=True), (2, 8, 16, 16))
RELU = module_spec(nn.ReLU(), (2, 8, 16, 16))
POOL = module_spec(nn.MaxPool2d(2), (2, 8, 16, 16))


# -- timing ------------------------------------------------------------------------------


@pytest.mark.slow
def test_time_block_and_window_on_a_real_op():
    """Structure and arithmetic only: how fast, or how linear, depends on what else the machine runs."""
    wl = op_workload(CONV, "inference", "cpu", seed=1, max_instances=4, budget_bytes=1e9)
    assert wl.instances == 4 and len(wl.runs) == 4
    t = time_block(wl.block, wl.instances, min_time_s=0.02)
    s = t.stats()
    assert t.iterations == 4 * t.number_per_run * len(t.block_means_s) > 0
    assert 0 < s["median_s"] and 0 < s["mean_s"] and t.total_time_s >= 0.02 * 0.5
    w = measure_window(
        wl.block, wl.instances, blocks_per_chunk=3, chunks=5, sync=lambda: None, read_energy=lambda: None
    )
    assert w.iterations == 5 * 3 * 4
    assert [c[0] for c in w.checkpoints] == [0, 12, 24, 36, 48, 60]
    times = [c[1] for c in w.checkpoints]
    assert times == sorted(times) and times[0] == 0.0 and times[-1] == w.time_s > 0
    # the linearity fit's arithmetic is checked on known checkpoints (test_window_fit_flags_non_proportional_runs);
    # on a real op its quality is a benchmark matter (bench/window_linearity.py). No energy source: no energy.
    assert w.fit("energy") is None and w.energy_j is None


def test_window_fit_flags_non_proportional_runs():
    from opcost.measure.timing import WindowResult

    linear = WindowResult(40, 4.0, 8.0, [(0, 0.0, 0.0), (10, 1.0, 2.0), (20, 2.0, 4.0), (30, 3.0, 6.0), (40, 4.0, 8.0)])
    assert linear.fit("time") == pytest.approx((1.0, 0.0), abs=1e-9) and linear.proportional() is True
    # time that does not grow with iterations is not proportional
    bent = WindowResult(40, 4.0, 8.0, [(0, 0.0, 0.0), (10, 3.0, 2.0), (20, 3.2, 4.0), (30, 3.4, 6.0), (40, 4.0, 8.0)])
    assert bent.proportional() is False
    # a counter that updates once in the window makes its energy steps: that is for the energy bound to judge
    # (test_counter.py), not the time proportionality
    stuck = WindowResult(40, 4.0, 8.0, [(0, 0.0, 0.0), (10, 1.0, 0.0), (20, 2.0, 0.0), (30, 3.0, 0.0), (40, 4.0, 8.0)])
    assert stuck.proportional() is True and stuck.fit("energy")[0] < 0.9


def _grads(wl):
    return [t.grad for r in wl.runs for t in [*r.inputs, *(r.fn.parameters() if isinstance(r.fn, nn.Module) else [])]]


def test_training_workload_resets_grads_after_every_block():
    wl = op_workload(CONV, "training", "cpu", seed=0, max_instances=2, budget_bytes=1e9)
    assert wl.instances == 2
    # backward really runs on every instance in every block (else "no gradient" would prove nothing)
    calls = []
    for r in wl.runs:
        r.fn.weight.register_hook(lambda g: calls.append(g.shape))
        r.inputs[0].register_hook(lambda g: calls.append(g.shape))
    for block in (1, 2):
        wl.block()
        assert len(calls) == 2 * 2 * block
        grads = _grads(wl)
        assert len(grads) == 2 * 3  # input, weight and bias of each instance
        assert all(g is None for g in grads)  # reset: nothing accumulates into the next iteration
    inplace = op_workload(RELU_INPLACE, "training", "cpu", seed=0, max_instances=2, budget_bytes=1e9)
    assert inplace.variant == VARIANT_OUT_OF_PLACE
    assert inplace.runs[0].fn.inplace is False
    inplace.block()
    assert all(g is None for g in _grads(inplace)) and len(_grads(inplace)) == 2


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


def constant_trace(power_w: float, counter_w: float | None = None, seconds: float = 2.0, step: float = 0.05):
    """Readings of a card drawing `power_w` steadily, whose energy counter grows at `counter_w` W
    (by default the same): expected energies follow from these two numbers alone."""
    counter_w = power_w if counter_w is None else counter_w
    return [
        [i * step, 1e6 + counter_w * i * step * 1000, power_w * 1000, 1410, 1215, 60, 100, 0]
        for i in range(int(round(seconds / step)) + 1)
    ]


def test_nvml_wrapper_reads_replayed_trace_and_falls_back():
    fake = FakeNvml()
    n = Nvml(0, lib=fake)
    assert n.name() == "Fake GPU (replayed trace)" and n.uuid().startswith("GPU-")
    e0 = n.energy_j()
    assert e0 == pytest.approx(5000.0, abs=1.0)  # the trace's counter starts at 5,000,000 mJ
    s = n.sample()
    assert s["power_kind"] == "instant" and s["sm_clock_mhz"] == 1410 and s["mem_clock_mhz"] == 1215
    no_instant = Nvml(0, lib=FakeNvml(instant_power=False, energy_counter=False))
    assert no_instant.power_w()[1] == "average" and no_instant.energy_j() is None
    assert open_source("nvml", "cuda:0", nvml=no_instant).has_counter is False


def test_fake_nvml_refuses_calls_outside_init_like_the_real_library():
    import pynvml

    fake = FakeNvml()
    with pytest.raises(fake.NVMLError) as before:
        fake.nvmlDeviceGetName("gpu0")
    assert before.value.value == pynvml.NVML_ERROR_UNINITIALIZED == 1
    n = Nvml(0, lib=fake)
    assert n.name() == "Fake GPU (replayed trace)"
    n.close()
    n.close()  # closing twice shuts NVML down once
    assert fake.shutdowns == 1 and not fake.initialised
    for call in (n.name, n.driver_version, n.uuid, n.energy_j, n.power_limit_w, lambda: n.lock_clocks(900)):
        with pytest.raises(fake.NVMLError) as after:
            call()
        assert after.value.value == pynvml.NVML_ERROR_UNINITIALIZED
    with pytest.raises(fake.NVMLError):
        fake.nvmlShutdown()  # not initialised: as pynvml's nvmlShutdown fails


def test_fake_nvml_has_pynvml_names_signatures_and_constants():
    """The fake stands in for pynvml only if opcost cannot tell them apart by name and call shape."""
    import inspect
    import re

    import pynvml

    import opcost.measure.nvml as wrapper

    fake = FakeNvml()
    functions = [n for n in vars(FakeNvml) if n.startswith("nvml")]
    constants = [n for n in vars(FakeNvml) if n.startswith("NVML_")]
    assert len(functions) >= 20 and len(constants) >= 8
    compared = 0
    for name in functions:
        real = getattr(pynvml, name, None)
        assert callable(real), f"pynvml has no {name}"
        real_params = list(inspect.signature(real).parameters.values())
        # pynvml's functions are Python wrappers with named positional parameters (those decorated
        # with convertStrBytes keep them through functools.wraps), so names and order compare
        # directly. A wrapper taking *args/**kwargs exposes no names: only its existence is checked.
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in real_params):
            continue
        fake_params = list(inspect.signature(getattr(fake, name)).parameters.values())  # bound: no self
        assert [p.name for p in fake_params] == [p.name for p in real_params], name
        compared += 1
    assert compared == len(functions)
    for name in constants:
        assert getattr(FakeNvml, name) == getattr(pynvml, name), name
    # errors carry their NVML return code the same way
    assert pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION).value == fake.NVMLError(4).value == 4
    # and everything the wrapper calls exists in both
    used = set(re.findall(r"self\.lib\.(\w+)", Path(wrapper.__file__).read_text()))
    assert used and all(hasattr(pynvml, u) and hasattr(fake, u) for u in used), used - set(dir(fake))


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


def test_apply_records_reached_clock_and_restore_returns_to_found_state(tmp_path):
    fake = FakeNvml(power_limit_w=280, sag_mhz=45)  # the card runs 45 MHz below its lock
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path)
    reached = ctl.apply(Setting(900, 200))
    assert reached == {"sm_clock_mhz": 855, "power_limit_w": 200.0}  # what the device reports, not the request
    assert fake.locked == (900, 900)
    ctl.apply(Setting())  # back to default: clocks reset, limit restored
    assert fake.locked is None and fake.power_limit_mw == 280_000
    ctl.apply(Setting(1200, 150))
    ctl.restore()
    assert fake.locked is None and fake.power_limit_mw == 280_000
    assert fake.calls[-2:] == [("reset",), ("power_limit", 280_000)]
    assert list(tmp_path.iterdir()) == []  # restored cleanly: no state left to restore


def test_state_file_is_written_before_the_first_change(tmp_path):
    seen = []

    def look() -> None:  # runs inside the lock call: the originals must already be on disk
        seen.append(json.loads((tmp_path / f"{fake.uuid}.json").read_text()))

    fake = FakeNvml(power_limit_w=280, hooks={"lock": look})
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path)
    ctl.apply(Setting(900))
    assert seen[0]["original"] == {"power_limit_w": 280.0} and seen[0]["changed"] == ["clocks"]
    assert seen[0]["pid"] == os.getpid() and seen[0]["device"] == "cuda:0"
    ctl.apply(Setting(900, 200))
    saved = json.loads((tmp_path / f"{fake.uuid}.json").read_text())
    assert saved["changed"] == ["clocks", "power_limit"] and saved["original"] == {"power_limit_w": 280.0}
    ctl.restore()
    assert not (tmp_path / f"{fake.uuid}.json").exists()


@pytest.mark.parametrize("knob", ["lock", "power_limit"])
def test_signal_during_the_set_call_still_restores(tmp_path, knob):
    """The device changed and then the signal came, before the call returned: it must come back."""
    sent = []

    def once() -> None:  # one signal, in the first call that changes `knob`
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    fake = FakeNvml(power_limit_w=300, hooks={knob: once})
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path)
    with pytest.raises(Interrupted) as exc:
        with ctl.session():
            ctl.apply(Setting(900, 200))
            time.sleep(5)  # not reached: the handler raises first
    assert exc.value.exit_code == 143
    assert fake.locked is None and fake.power_limit_mw == 300_000
    assert not list(tmp_path.iterdir())


def test_failing_clock_reset_still_restores_the_power_limit_and_reports(tmp_path):
    fake = FakeNvml(power_limit_w=300, fail={"reset": FakeNvml.NVML_ERROR_UNKNOWN})
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path)
    ctl.apply(Setting(900, 200))
    with pytest.raises(RestoreError) as exc:
        ctl.restore()
    msg = str(exc.value)
    assert "resetting the locked clocks failed (NVMLError: NVML error 999)" in msg
    assert "opcost restore-device --device cuda:0" in msg and "\n" not in msg
    assert fake.power_limit_mw == 300_000 and fake.locked == (900, 900)  # the limit came back anyway
    left = json.loads((tmp_path / f"{fake.uuid}.json").read_text())
    assert left["changed"] == ["clocks"] and left["original"] == {"power_limit_w": 300.0}
    # in a session the failure is reported and the error that stopped the run is what propagates
    said = []
    ctl2 = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path / "2", say=said.append)
    with pytest.raises(RuntimeError, match="an op failed"):
        with ctl2.session():
            ctl2.apply(Setting(1200, 250))
            raise RuntimeError("an op failed")
    assert fake.power_limit_mw == 300_000 and len(said) == 1 and "resetting the locked clocks failed" in said[0]
    fake.fail.clear()  # the driver accepts it again: the saved state restores it
    assert DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path, say=said.append).recover()
    assert fake.locked is None and not (tmp_path / f"{fake.uuid}.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGINT])
def test_signal_during_session_restores_clocks(sig):
    fake = FakeNvml(power_limit_w=300)
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0")
    before = signal.getsignal(sig)
    with pytest.raises(Interrupted) as exc:
        with ctl.session():
            ctl.apply(Setting(900, 200))
            assert fake.locked == (900, 900)
            os.kill(os.getpid(), sig)
            time.sleep(5)  # the handler raises before this ends
    assert exc.value.exit_code == 128 + sig
    assert fake.locked is None and fake.power_limit_mw == 300_000
    assert signal.getsignal(sig) == before  # handlers put back


@pytest.mark.parametrize("knob,when", [("lock", "after"), ("reset", "before")])
def test_signal_during_the_permission_probe_restores(tmp_path, knob, when):
    """Handlers that restore are in place before the probe (the first change of a campaign): a
    signal while the probe changes the clock, or while it resets it (before the reset took
    effect), still leaves the device as found."""
    sent = []

    def once() -> None:
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGHUP)

    hooks = {"hooks" if when == "after" else "early_hooks": {knob: once}}
    fake = FakeNvml(power_limit_w=300, **hooks)
    plan = make_plan(campaign(clocks_mhz=(900,), power_limits_w=(200,)), op_units([CONV]))
    with pytest.raises(Interrupted) as exc:
        new_campaign(plan, tmp_path, nvml_lib=fake).run(show_progress=False)
    assert exc.value.exit_code == 128 + signal.SIGHUP and sent
    assert fake.calls[0] == ("lock", 900, 900) and ("reset",) in fake.calls  # only the probe ran
    assert fake.locked is None and fake.power_limit_mw == 300_000
    assert not list((tmp_path / "state").iterdir()) and not (tmp_path / "out").exists()


def test_no_permission_stops_before_measuring(tmp_path):
    fake = FakeNvml(deny_knobs=True)
    plan = make_plan(campaign(clocks_mhz=(900,), energy_source="nvml"), op_units([CONV]))
    with pytest.raises(OpcostError) as exc:
        new_campaign(plan, tmp_path, nvml_lib=fake).run(show_progress=False)
    assert "no permission to apply clk900" in str(exc.value) and PERMISSION_HELP in str(exc.value)
    assert not (tmp_path / "out").exists() and not list((tmp_path / "parts").rglob("*.parquet"))
    assert fake.calls == [("lock", 900, 900)]  # refused: nothing changed, so nothing to reset
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())


@pytest.mark.slow
def test_state_left_by_a_killed_run_is_restored_by_the_next_campaign(tmp_path):
    fake = FakeNvml(power_limit_w=300)
    killed = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=tmp_path / "state")
    killed.apply(Setting(900, 200))  # ... and the process died here (SIGKILL: no handler, no finally)
    assert fake.locked == (900, 900) and (tmp_path / "state" / f"{fake.uuid}.json").is_file()
    said = []
    plan = make_plan(campaign(energy_source="nvml", window_s=0.05), op_units([CONV]))
    meta = new_campaign(plan, tmp_path, nvml_lib=fake, say=said.append).run(show_progress=False)
    assert fake.locked is None and fake.power_limit_mw == 300_000
    assert not (tmp_path / "state" / f"{fake.uuid}.json").exists()
    assert any(
        "restoring the state saved by an interrupted run" in s and "power limit back to 300.0 W" in s for s in said
    )
    assert meta["rows"]["timings"] == 2


HOLD_SCRIPT = """
import sys, time
from pathlib import Path
from fake_nvml import FakeNvml
from opcost.measure.clocks import DeviceControl, Setting
from opcost.measure.nvml import Nvml
fake = FakeNvml(state_file=Path(sys.argv[1]), power_limit_w=300)
ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=Path(sys.argv[2]))
with ctl.session():
    ctl.apply(Setting(900, 200))
    print("changed", flush=True)
    time.sleep(120)
"""


def _env_with_tests() -> dict:
    """A subprocess that imports the tests' builders (tests/builders.py) and the fake NVML (tests/fake_nvml.py)."""
    tests = str(Path(__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_sigkill_leaves_state_that_restore_device_puts_back(tmp_root, monkeypatch):
    from typer.testing import CliRunner

    import opcost.measure.nvml as nvml_module
    from opcost.cli import app

    device_file = tmp_root / "gpu0.json"  # the fake GPU's own state: it outlives the process
    state_dir = device_state_dir()  # machine-wide (tests/measure/test_trust_device_state.py)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_SCRIPT, str(device_file), str(state_dir)],
        env=_env_with_tests(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "changed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    gpu = json.loads(device_file.read_text())
    assert gpu == {"power_limit_mw": 200_000, "locked": [900, 900]}  # SIGKILL: nothing could restore it
    saved = json.loads(next(state_dir.iterdir()).read_text())
    assert saved["original"] == {"power_limit_w": 300.0} and saved["changed"] == ["clocks", "power_limit"]

    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: FakeNvml(state_file=device_file))
    r = CliRunner().invoke(app, ["restore-device", "--device", "cuda:0"])
    assert r.exit_code == 0, r.output
    assert "restoring the state saved by an interrupted run" in r.stderr and "restored" in r.stdout
    assert json.loads(device_file.read_text()) == {"power_limit_mw": 300_000, "locked": None}
    assert not list(state_dir.iterdir())
    r = CliRunner().invoke(app, ["restore-device"])
    assert r.exit_code == 0 and "nothing to restore" in r.stdout
    r = CliRunner().invoke(app, ["restore-device", "--device", "cpu"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "expected cuda:N" in r.stderr


def test_restore_device_waits_for_no_running_campaign(tmp_root, monkeypatch):
    from typer.testing import CliRunner

    import opcost.measure.nvml as nvml_module
    from opcost.cli import app

    fake = FakeNvml()
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    with device_lock(fake.uuid, "a campaign"):
        r = CliRunner().invoke(app, ["restore-device"])
    assert r.exit_code == 2 and f"device cuda:0 ({fake.uuid}) is in use by another process" in r.stderr
    assert fake.shutdowns == 1  # NVML closed even so


# -- campaigns ---------------------------------------------------------------------------


def new_campaign(plan, tmp_path, **kw) -> Campaign:
    return Campaign(plan, tmp_path / "out", tmp_path / "parts", state_dir=tmp_path / "state", **kw)


@pytest.mark.slow
def test_campaign_with_nvml_energy_and_raw_power_log(tmp_path):
    """The NVML path end to end, against the fake library; compute runs for real on the CPU."""
    fake = FakeNvml()
    c = campaign(energy_source="nvml", window_s=0.3, sample_interval_s=0.01, trials=2)
    plan = make_plan(c, op_units([CONV]))
    meta = new_campaign(plan, tmp_path, nvml_lib=fake).run(show_progress=False)
    t = TIMINGS.validate(pd.read_parquet(tmp_path / "out" / "timings.parquet"))
    ps = POWER_SAMPLES.validate(pd.read_parquet(tmp_path / "out" / "power_samples.parquet"))
    assert list(t["trial"]) == [0, 1] and (t["status"] == "ok").all()
    # the counter difference over the window: between the trace's idle 60 W and loaded 250 W
    assert ((t["power_w"] > 55) & (t["power_w"] < 255)).all()
    assert t["energy_r2"].notna().all() and (t["sm_clock_mhz"] == 1410).all()
    assert len(ps) >= 4 and set(ps["source"]) == {"nvml"} and set(ps["power_kind"]) == {"instant"}
    assert ps["power_w"].between(60, 250).all()  # every sample is a point of the trace
    assert set(ps["item_id"]) == {CONV.op_id} and set(ps["trial"]) == {0, 1}
    # the environment was read while NVML was open (the fake, like NVML, refuses calls after shutdown)
    env = meta["environment"]
    assert env["nvml_device_name"] == "Fake GPU (replayed trace)" and env["driver"] == "0.0-fake"
    assert env["nvml_uuid"] == fake.uuid and env["energy_counter"] is True
    assert fake.shutdowns == 1 and not fake.initialised  # closed, once


@pytest.mark.slow
def test_window_energy_matches_the_trace_power_times_the_timed_window(tmp_path):
    """A card at a steady 200 W: the energy of each window must be 200 W x the window the campaign
    timed (perf_counter), a figure computed here from the trace, not from the campaign's output."""
    fake = FakeNvml(trace=constant_trace(200.0))
    c = campaign(energy_source="nvml", window_s=0.3, sample_interval_s=0.01, trials=2)
    new_campaign(make_plan(c, op_units([CONV])), tmp_path, nvml_lib=fake).run(show_progress=False)
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    expected_j = 200.0 * t["window_time_s"]
    assert t["window_energy_j"].to_numpy() == pytest.approx(expected_j.to_numpy(), rel=0.05)
    assert t["energy_per_iter_j"].to_numpy() == pytest.approx(
        (expected_j / t["window_iterations"]).to_numpy(), rel=0.05
    )
    assert t["power_w"].to_numpy() == pytest.approx([200.0, 200.0], rel=0.05)


@pytest.mark.slow
def test_sweep_rows_are_measured_between_their_settings(tmp_path):
    """Each row was measured after its clock was locked and before the next change."""
    fake = FakeNvml(sag_mhz=30)  # a card that runs 30 MHz below its locked clock
    c = campaign(clocks_mhz=(900, 1200), energy_source="nvml", window_s=0.05, sample_interval_s=0.01)
    plan = make_plan(c, op_units([CONV, RELU]))
    new_campaign(plan, tmp_path, nvml_lib=fake).run(show_progress=False)
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    assert len(t) == 2 * 2 * 2 and set(t["clock_mhz"]) == {900, 1200}
    knobs = fake.knob_log
    assert [call for _, call in knobs] == [
        ("lock", 900, 900),  # the permission probe ...
        ("reset",),  # ... restored at once
        ("lock", 900, 900),
        ("lock", 1200, 1200),
        ("reset",),  # the end of the campaign
    ]
    for r in t.itertuples():
        before = [call for ts, call in knobs if ts <= r.started_at]
        during = [call for ts, call in knobs if r.started_at < ts < r.ended_at]
        assert before[-1] == ("lock", r.clock_mhz, r.clock_mhz) and during == [], r
    assert (t["sm_clock_mhz"] == t["clock_mhz"] - 30).all()  # the clock read during the window, not the lock


@pytest.mark.slow
def test_failed_op_is_recorded_and_campaign_goes_on(tmp_path):
    plan = make_plan(campaign(trials=3), op_units([BROKEN, CONV]))
    meta = new_campaign(plan, tmp_path).run(show_progress=False)
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    bad = t[t["op_id"] == BROKEN.op_id]
    assert list(bad["status"]) == ["failed"] * 3
    # 5 features into a 10-feature Linear: the shape error, whichever kernel reports it first
    assert bad["error"].str.match(r"RuntimeError: .*(shape|dim)").all()
    assert bad["mean_s"].isna().all()
    assert (t[t["op_id"] == CONV.op_id]["status"] == "ok").all()
    assert meta["failed_rows"] == 3 and meta["errors"][0]["rows"] == 3
    assert all_failed_message(meta) is None
    only_bad = new_campaign(make_plan(campaign(trials=2), op_units([BROKEN])), tmp_path / "b").run(False)
    assert all_failed_message(only_bad).startswith("every measurement of campaign t failed (2 rows); most frequent")


def test_cuda_campaign_without_gpu_says_where_to_run(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    plan = make_plan(campaign(name="h100", device="cuda:0"), op_units([CONV]))
    with pytest.raises(OpcostError, match=r"run `dvc repro profile@h100` on a node with that GPU"):
        new_campaign(plan, tmp_path).run(show_progress=False)


@pytest.mark.slow
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
    assert s["cpu_threads"] is None  # the plan says how many CPU threads the run pins (none: as found)
    sets = [ModelInputSet("resnet18", (2, 3, 32, 32), modes=("inference", "training"))]
    assert adhoc_plan(replace(c, threads=4), sets).summary()["cpu_threads"] == 4
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
    r = CliRunner().invoke(app, ["profile", "--models", "resnet18:2,3,32,32", "--out", "x", "--shard", "0/2"])
    assert r.exit_code == 2 and "add --campaign NAME" in r.stderr


@pytest.mark.parametrize(
    "flags",
    [["--min-time", "nan"], ["--window", "inf"], ["--min-time", "0"], ["--window", "-1"], ["--min-time", "inf"]],
)
def test_profile_refuses_non_finite_or_non_positive_durations(tmp_path, flags):
    """--min-time nan used to hang for ever in the timer's autorange; --window inf to end in a traceback."""
    from typer.testing import CliRunner

    from opcost.cli import app

    out = tmp_path / "never"
    r = CliRunner().invoke(app, ["profile", "--models", "resnet18:2,3,32,32", "--out", str(out), *flags])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1
    key = {"--min-time": "min_time_s", "--window": "window_s"}[flags[0]]
    assert f"command line: {key} must be a finite number > 0, got {float(flags[1])!r}" in r.stderr
    assert not out.exists()


KILL_SCRIPT = """
import sys
from pathlib import Path
from opcost.params.profile import CampaignParams
from opcost.measure.campaign import Campaign, Unit, make_plan
from opcost.ops.spec import OpSpec, TensorInput
specs = [OpSpec("ReLU", "module", "torch.nn.modules.activation.ReLU", {"inplace": False}, [{"tensor": 0}], {},
                (TensorInput((2, 4, n, n), "float32"),)) for n in range(4, 4 + int(sys.argv[2]))]
c = CampaignParams(name="k", device="cpu", sets=("x",), trials=2, min_time_s=0.01, window_s=0.2,
                   energy_source="none", max_instances=2, networks=False)
plan = make_plan(c, [Unit("op", s.op_id, "inference", s.kind, spec=s) for s in specs])
root = Path(sys.argv[1])
Campaign(plan, root / "out", root / "parts", state_dir=root / "state").run(show_progress=False)
"""


def _wait_for_parts(proc, parts: Path, n: int, pattern: str = "*/*.timings.parquet") -> list[Path]:
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list(parts.glob(pattern))) >= n:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the campaign finished (or failed) before it could be stopped"
    return list(parts.glob(pattern))


@pytest.mark.slow
def test_kill_and_resume_measures_only_what_is_missing(tmp_path):
    n_ops = 12
    cmd = [sys.executable, "-c", KILL_SCRIPT, str(tmp_path), str(n_ops)]
    proc = subprocess.Popen(cmd, env=_env_with_tests())
    parts = tmp_path / "parts"
    _wait_for_parts(proc, parts, 3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sorted(parts.glob("*/*.timings.parquet"))
    assert 3 <= len(done) < n_ops and not (tmp_path / "out").exists()
    before = pd.concat([pd.read_parquet(p) for p in done], ignore_index=True)
    # started again: finishes, and the parts measured before the kill are not measured again
    subprocess.run(cmd, env=_env_with_tests(), check=True)
    out = tmp_path / "out"
    t = pd.read_parquet(out / "timings.parquet")
    assert len(t) == n_ops * 2 and not t.duplicated(["op_id", "mode", "setting", "trial"]).any()
    assert (t["status"] == "ok").all()
    assert json.loads((out / "campaign.json").read_text())["parts_resumed"] == len(done)
    again = before[["op_id", "trial", "started_at"]].merge(t[["op_id", "trial", "started_at"]], on=["op_id", "trial"])
    assert len(again) == len(before) and (again["started_at_x"] == again["started_at_y"]).all()
    assert sorted(p.name for p in out.iterdir()) == sorted(TABLE_FILES)  # nothing half-written left behind


@pytest.mark.slow
def test_empty_or_unreadable_part_is_measured_again_with_a_warning(tmp_path):
    plan = make_plan(campaign(), op_units([CONV, RELU, POOL]))
    camp = new_campaign(plan, tmp_path)
    camp.run_shard(0, 1, show_progress=False)  # every part, not consolidated
    names = plan.part_names()
    empty = camp.parts_dir / f"{names[0]}.timings.parquet"
    garbage = camp.parts_dir / f"{names[1]}.samples.parquet"
    kept = pd.read_parquet(camp.parts_dir / f"{names[2]}.timings.parquet")
    empty.write_bytes(b"")
    garbage.write_bytes(b"PAR1 not really parquet")
    said = []
    camp.say = said.append
    meta = camp.run(show_progress=False)
    assert len(said) == 2
    assert f"part file {empty} is empty (0 bytes); measuring that part again" in said[0]
    assert f"part file {garbage} is unreadable (" in said[1] and said[1].endswith("measuring that part again")
    assert meta["parts_resumed"] == 1 and meta["rows"]["timings"] == 3 * 2
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    assert (t["status"] == "ok").all() and not t.duplicated(["op_id", "trial"]).any()
    same = t[t["op_id"] == kept["op_id"].iloc[0]]
    assert list(same["started_at"]) == list(kept["started_at"])  # the good part was not measured again


def test_second_campaign_on_the_same_output_or_device_fails_at_once(tmp_path):
    plan = make_plan(campaign(), op_units([CONV]))
    camp = new_campaign(plan, tmp_path)
    with file_lock(camp.output_lock, "the other run"):
        t0 = time.monotonic()
        with pytest.raises(OpcostError, match=r"campaign output .*out is in use by another process \(pid \d+\)"):
            camp.run(show_progress=False)
        assert time.monotonic() - t0 < 5
    with device_lock(cpu_lock_key(), "the other run"):
        with pytest.raises(OpcostError, match=rf"device cpu \({cpu_lock_key()}\) is in use by another process"):
            new_campaign(plan, tmp_path / "elsewhere").run(show_progress=False)
    fake = FakeNvml()
    with device_lock(fake.uuid, "the other run"):
        with pytest.raises(OpcostError, match=rf"\({fake.uuid}\) is in use by another process"):
            new_campaign(plan, tmp_path / "gpu", nvml_lib=fake).run(show_progress=False)
    assert fake.calls == [] and fake.shutdowns == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "elsewhere" / "out").exists()


@pytest.mark.slow
def test_a_shard_told_to_wait_queues_behind_the_device_holder(tmp_path):
    """SLURM may start several CPU shards on one node: with wait_for_device they take turns on the
    device instead of failing (the integration test's array tasks did), and say they are waiting."""
    import threading

    plan = make_plan(campaign(), op_units([CONV, RELU]))
    camp = new_campaign(plan, tmp_path)
    said: list[str] = []
    camp.say = said.append
    with device_lock(cpu_lock_key(), "the other run"):
        with pytest.raises(OpcostError, match=r"device cpu .* is in use by another process"):
            camp.run_shard(0, 2, show_progress=False)  # the default: fail at once
        result: dict = {}
        waiter = threading.Thread(
            target=lambda: result.update(camp.run_shard(0, 2, show_progress=False, wait_for_device=True))
        )
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive() and not list(camp.parts_dir.glob("*.timings.parquet"))  # nothing measured yet
    waiter.join(timeout=120)
    assert not waiter.is_alive()
    assert result["parts_done"] == plan.shard(0, 2).parts
    assert [m for m in said if "waiting for it" in m] == [
        f"device cpu ({cpu_lock_key()}) is in use by another process (pid {os.getpid()}) "
        f"(lock {machine_lock_dir() / ('device-' + cpu_lock_key() + '.lock')}); wait for it to finish: waiting for it"
    ]


@pytest.mark.slow
def test_two_processes_cannot_measure_the_same_output_or_device(tmp_path):
    cmd = [sys.executable, "-c", KILL_SCRIPT, str(tmp_path), "12"]
    proc = subprocess.Popen(cmd, env=_env_with_tests())
    try:
        _wait_for_parts(proc, tmp_path / "parts", 1)
        plan = make_plan(campaign(name="k"), op_units([CONV]))
        with pytest.raises(OpcostError, match="is in use by another process"):
            new_campaign(plan, tmp_path).run(show_progress=False)  # same output folder
        with pytest.raises(OpcostError, match=r"device cpu .* is in use by another process"):
            new_campaign(plan, tmp_path / "other").run(show_progress=False)  # same CPU
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the lock died with its process: the output folder is free again
    new_campaign(make_plan(campaign(name="k"), op_units([CONV])), tmp_path / "after").run(show_progress=False)


SHARD_SCRIPT = """
import sys
from pathlib import Path
from fake_nvml import FakeNvml
from opcost.measure.interrupts import Interrupted
from builders import shard_campaign
try:
    shard_campaign(Path(sys.argv[1])).run_shard(0, 2, show_progress=False)
except Interrupted as exc:
    sys.exit(exc.exit_code)
"""


@pytest.mark.slow
def test_shard_killed_like_slurm_keeps_its_parts_and_restores_clocks(tmp_path):
    """SLURM stops a task with SIGTERM, then SIGKILL after a grace period."""
    proc = subprocess.Popen([sys.executable, "-c", SHARD_SCRIPT, str(tmp_path)], env=_env_with_tests())
    done = _wait_for_parts(proc, tmp_path / "parts", 2)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        rc = proc.wait()
    assert rc == 128 + signal.SIGTERM
    assert json.loads((tmp_path / "gpu.json").read_text()) == {"power_limit_mw": 300_000, "locked": None}
    assert not list((tmp_path / "state").iterdir())
    kept = sorted((tmp_path / "parts").glob("*/*.timings.parquet"))
    assert len(done) <= len(kept) < 4
    record = json.loads(next((tmp_path / "parts").glob("*/shard-0-of-2.run.json")).read_text())
    assert record["status"] == "interrupted" and record["error"] == "interrupted by SIGTERM"
    # resubmitted: measures only what is missing; then the other shard; then the merge
    again = shard_campaign(tmp_path).run_shard(0, 2, show_progress=False)
    assert again["parts_resumed"] == len(kept) and again["parts_done"] == 4
    shard_campaign(tmp_path).run_shard(1, 2, show_progress=False)
    meta = shard_campaign(tmp_path).merge()
    t = pd.read_parquet(tmp_path / "out" / "timings.parquet")
    assert len(t) == 8 * 2 and not t.duplicated(["op_id", "setting", "trial"]).any() and (t["status"] == "ok").all()
    assert {r["name"]: r["status"] for r in meta["runs"]} == {"shard-0-of-2": "done", "shard-1-of-2": "done"}
    assert json.loads((tmp_path / "gpu.json").read_text())["locked"] is None


@pytest.mark.slow
def test_energy_check_reports_counter_and_integrated_power_apart():
    """A card whose counter runs at 200 W while its instant power reads 250 W: the check must report
    the counter's 200 W and a +25 % difference of the integrated power (figures from the trace)."""
    from opcost.measure.energycheck import energy_check

    fake = FakeNvml(trace=constant_trace(250.0, counter_w=200.0))
    r = energy_check(Nvml(0, lib=fake), "cpu", seconds=1.0, size=64, interval_s=0.01)
    assert r["counter_energy_j"] == pytest.approx(200.0 * r["seconds"], rel=0.05)
    assert r["counter_power_w"] == pytest.approx(200.0, rel=0.05)
    # samples span the window plus at most a sampling interval or two at its ends
    assert r["relative_difference"] == pytest.approx(0.25, abs=0.06)
    assert r["power_kind"] == "instant" and r["samples"] > 10 and r["device_name"] == "Fake GPU (replayed trace)"
