"""Issue 24.2: device state a killed campaign left is found from any directory, and the signals a
scheduler or `timeout` may send restore the device like SIGINT/SIGTERM.

Two clones of a project on one GPU node: a campaign in clone A is SIGKILLed after changing the
(fake) GPU's clocks and power limit; `opcost restore-device` and the next campaign, started in clone
B, must find and restore what A left. The fake NVML keeps the GPU's state in a file, so it outlives
the killed process as a real GPU's does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fake_nvml import FakeNvml
from opcost.measure.clocks import DeviceControl
from opcost.measure.nvml import Nvml

# A campaign-like holder in the clone it is started in, with the state dir a campaign uses by default.
HOLD = """
import sys, time
from pathlib import Path
from fake_nvml import FakeNvml
from opcost.locks import device_state_dir
from opcost.measure.clocks import DeviceControl, Setting
from opcost.measure.nvml import Nvml
fake = FakeNvml(state_file=Path(sys.argv[1]), power_limit_w=300)
ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=device_state_dir())
with ctl.session():
    ctl.apply(Setting(900, 200))
    print("changed", flush=True)
    time.sleep(120)
"""

CHANGED = {"power_limit_mw": 200_000, "locked": [900, 900]}
ORIGINAL = {"power_limit_mw": 300_000, "locked": None}


def _clone(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "dvc.yaml").write_text("stages: {}\n")
    return d


def _hold(clone: Path, device_file: Path) -> subprocess.Popen:
    here = str(Path(__file__).parents[1])
    env = {k: v for k, v in os.environ.items() if k not in ("OPCOST_ROOT", "DVC_ROOT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(device_file)],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "changed", proc.stderr.read()
    return proc


@pytest.fixture
def two_clones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("OPCOST_ROOT", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return _clone(tmp_path, "clone-a"), _clone(tmp_path, "clone-b")


def _sigkill_in(clone: Path, device_file: Path) -> None:
    proc = _hold(clone, device_file)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads(device_file.read_text()) == CHANGED  # SIGKILL: nothing could restore it


def test_restore_device_from_another_clone_finds_a_killed_campaigns_state(two_clones, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import opcost.measure.nvml as nvml_module
    from opcost.cli import app

    a, b = two_clones
    device_file = tmp_path / "gpu0.json"
    _sigkill_in(a, device_file)
    assert not (a / ".opcost" / "device-state").exists() or not list((a / ".opcost" / "device-state").iterdir())

    monkeypatch.chdir(b)
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: FakeNvml(state_file=device_file))
    r = CliRunner().invoke(app, ["restore-device", "--device", "cuda:0"])
    assert r.exit_code == 0, r.output
    assert "restoring the state saved by an interrupted run" in r.stderr
    assert json.loads(device_file.read_text()) == ORIGINAL


def test_next_campaign_from_another_clone_restores_first(two_clones, tmp_path, monkeypatch):
    from opcost.locks import device_state_dir

    a, b = two_clones
    device_file = tmp_path / "gpu0.json"
    _sigkill_in(a, device_file)
    monkeypatch.chdir(b)
    said: list[str] = []
    fake = FakeNvml(state_file=device_file)
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=device_state_dir(), say=said.append)
    assert ctl.recover()
    assert json.loads(device_file.read_text()) == ORIGINAL
    assert any("power limit back to 300.0 W" in s for s in said)


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGTERM])
def test_scheduler_signals_restore_the_device(two_clones, tmp_path, sig):
    a, _ = two_clones
    device_file = tmp_path / "gpu0.json"
    proc = _hold(a, device_file)
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert json.loads(device_file.read_text()) == ORIGINAL, f"{signal.Signals(sig).name} left the GPU changed"
    assert proc.returncode != 0
    from opcost.locks import device_state_dir

    assert not list(device_state_dir().iterdir())  # a clean restore removes the saved state
