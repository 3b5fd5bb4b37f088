"""The machine-wide lock folder and the GPU state saved in it can be planted by nobody but root and
the current user.

On a shared GPU node another user could create the lock folder first, plant a state file whose
"original" power limit opcost then sets, or plant a lock file as a symbolic link whose target opcost
then truncates (clock campaigns run as root). Each attack is made here by root in the test: files
and folders of another uid (os.chown), planted links, planted records. Checked: nothing is written
through a link, the fake GPU keeps its state, and the refusal is one line that says how to fix it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest

from builders import CONV, campaign, op_units
from fake_nvml import FakeNvml
from opcost.errors import OpcostError
from opcost.locks import device_lock, device_state_dir, file_lock, machine_lock_dir
from opcost.measure.campaign import Campaign, make_plan
from opcost.measure.clocks import DeviceControl, Setting
from opcost.measure.nvml import Nvml

OTHER_UID = 12345  # another user: root makes files of this uid in the test
UUID = "GPU-00000000-fake-0000-0000-000000000000"  # the fake GPU's, which names its lock and state file

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="files of another uid need root (os.chown)")


@pytest.fixture
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "locks"
    monkeypatch.setenv("OPCOST_LOCK_DIR", str(d))
    return d


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_a_lock_folder_another_user_owns_is_refused(lock_dir):
    lock_dir.mkdir(mode=0o700)
    os.chown(lock_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(OpcostError) as exc:
        with device_lock(UUID, "device cuda:0"):
            pass
    msg = _one_line(exc)
    assert f"lock folder {lock_dir} is owned by uid {OTHER_UID}" in msg and "not by root or you" in msg
    assert "OPCOST_LOCK_DIR" in msg and f"rm -r {lock_dir}" in msg
    assert list(lock_dir.iterdir()) == []  # no lock file was made in it


def test_a_state_folder_another_user_owns_is_refused(lock_dir):
    machine_lock_dir()
    (lock_dir / "device-state").mkdir(mode=0o700)
    os.chown(lock_dir / "device-state", OTHER_UID, OTHER_UID)
    with pytest.raises(OpcostError, match=f"device-state is owned by uid {OTHER_UID}") as exc:
        device_state_dir()
    _one_line(exc)


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775, 0o720], ids=oct)
def test_a_lock_folder_others_can_write_is_refused(lock_dir, mode):
    lock_dir.mkdir()
    os.chmod(lock_dir, mode)
    with pytest.raises(OpcostError) as exc:
        machine_lock_dir()
    msg = _one_line(exc)
    assert f"writable by its group or others (mode {mode:04o})" in msg and f"chmod go-w {lock_dir}" in msg


def test_a_lock_folder_that_is_a_symbolic_link_is_refused(lock_dir, tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    lock_dir.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OpcostError, match=f"lock folder {lock_dir} is a symbolic link") as exc:
        machine_lock_dir()
    _one_line(exc)


def test_the_default_folder_is_the_users_own_and_closed_to_others(monkeypatch, tmp_path):
    monkeypatch.delenv("OPCOST_LOCK_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    d = device_state_dir()
    assert d == tmp_path / f"opcost-locks-{os.geteuid()}" / "device-state"
    for folder in (d, d.parent):
        st = os.lstat(folder)
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o022 == 0


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "precious.conf"
    victim.write_text("a file root can write but opcost must never touch\n")
    return victim


def test_a_lock_planted_as_a_symbolic_link_truncates_nothing(lock_dir, tmp_path):
    victim = _victim(tmp_path)
    machine_lock_dir()
    (lock_dir / f"device-{UUID}.lock").symlink_to(victim)
    with pytest.raises(OpcostError) as exc:
        with device_lock(UUID, "device cuda:0"):
            pass
    msg = _one_line(exc)
    assert f"lock file {lock_dir / f'device-{UUID}.lock'} is a symbolic link" in msg and "remove the link" in msg
    assert victim.read_text() == "a file root can write but opcost must never touch\n"


def test_any_lock_planted_as_a_link_truncates_nothing(tmp_path):
    """file_lock is every lock (the MLflow store's, a campaign output's), not only the device's."""
    victim = _victim(tmp_path)
    (tmp_path / "soft.lock").symlink_to(victim)
    os.link(victim, tmp_path / "hard.lock")
    for name, why in (("soft.lock", "is a symbolic link"), ("hard.lock", "is a file with 2 hard links")):
        with pytest.raises(OpcostError, match=why):
            with file_lock(tmp_path / name, "the MLflow store"):
                pass
    assert victim.read_text() == "a file root can write but opcost must never touch\n"


def _record(**changes) -> dict:
    """What a run killed on this host after lowering the fake GPU's limit would have saved, with `changes`."""
    rec = {
        "device": "cuda:0",
        "key": UUID,
        "index": 0,
        "host": socket.gethostname(),
        "pid": 4242,
        "saved_at": time.time() - 60,
        "original": {"power_limit_w": 100.0},
        "changed": ["power_limit"],
    }
    return {**rec, **changes}


def _plant(record: dict, uid: int | None = None) -> Path:
    f = device_state_dir() / f"{UUID}.json"
    f.write_text(json.dumps(record))
    if uid is not None:
        os.chown(f, uid, uid)
    return f


def _restore_device(monkeypatch, gpu_file: Path):
    from typer.testing import CliRunner

    import opcost.measure.nvml as nvml_module
    from opcost.cli import app

    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: FakeNvml(state_file=gpu_file))
    return CliRunner().invoke(app, ["restore-device", "--device", "cuda:0"])


AT_250 = {"power_limit_mw": 250_000, "locked": None}  # what the GPU is set to, and must stay at


@pytest.mark.parametrize(
    "planted, why",
    [
        ((_record, {}, OTHER_UID), f"it is owned by uid {OTHER_UID}, not by root or you"),
        ((_record, {"host": "elsewhere"}, None), "it was written on host 'elsewhere', not on this host"),
        ((_record, {"saved_at": 0}, None), "its time 19[67][09]-[0-9-]+ [0-9:]+ is not between this machine's boot"),
        ((_record, {"saved_at": 4e9}, None), "its time 2096-.* is not between this machine's boot"),
        ((_record, {"pid": 0}, None), "its pid 0 is no process id"),
        ((_record, {"pid": 1 << 30}, None), "its pid 1073741824 is no process id"),
        ((_record, {"pid": "1"}, None), "its pid '1' is no process id"),
        ((_record, {"key": "GPU-other"}, None), "it records GPU 'GPU-other', not GPU-"),
        ((_record, {"original": {"power_limit_w": 5.0}}, None), "original power limit 5 W is outside .*100..300 W"),
    ],
    ids=["other-user", "other-host", "1970", "future", "pid-0", "pid-too-big", "pid-text", "other-gpu", "limit"],
)
def test_restore_device_refuses_a_planted_state_file(lock_dir, tmp_path, monkeypatch, planted, why):
    make, changes, uid = planted
    gpu = tmp_path / "gpu0.json"
    gpu.write_text(json.dumps(AT_250))
    f = _plant(make(**changes), uid)
    r = _restore_device(monkeypatch, gpu)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and f"device state file {f} is not trusted: " in r.stderr
    assert "nothing was changed" in r.stderr and "delete the file" in r.stderr
    assert re.search(why, r.stderr), r.stderr
    assert json.loads(gpu.read_text()) == AT_250  # the planted 100 W was not set


def test_restore_device_refuses_a_state_file_planted_as_a_link(lock_dir, tmp_path, monkeypatch):
    """A link to a record that would pass every other check: the link is refused, not followed."""
    gpu = tmp_path / "gpu0.json"
    gpu.write_text(json.dumps(AT_250))
    target = tmp_path / "record.json"
    target.write_text(json.dumps(_record()))
    (device_state_dir() / f"{UUID}.json").symlink_to(target)
    r = _restore_device(monkeypatch, gpu)
    assert r.exit_code == 2 and "is not trusted: it is a symbolic link" in r.stderr, r.output
    assert json.loads(gpu.read_text()) == AT_250


def test_a_record_that_can_be_ours_is_restored(lock_dir, tmp_path, monkeypatch):
    """The same record, owned by this user and written on this host: restored (the checks refuse plants only)."""
    gpu = tmp_path / "gpu0.json"
    gpu.write_text(json.dumps(AT_250))
    _plant(_record())
    r = _restore_device(monkeypatch, gpu)
    assert r.exit_code == 0, r.output
    assert json.loads(gpu.read_text()) == {"power_limit_mw": 100_000, "locked": None}


def test_a_campaign_never_takes_a_planted_limit_as_the_original(lock_dir, tmp_path):
    """A campaign at 250 W on a GPU found at 300 W: a planted 100 W 'original' would be set first, read
    back as the original, and left behind. The campaign stops before any change instead."""
    fake = FakeNvml(power_limit_w=300)
    _plant(_record(), OTHER_UID)
    plan = make_plan(campaign(power_limits_w=(250,), energy_source="nvml", window_s=0.05), op_units([CONV]))
    camp = Campaign(plan, tmp_path / "out", tmp_path / "parts", state_dir=device_state_dir(), nvml_lib=fake)
    with pytest.raises(OpcostError, match=f"is not trusted: it is owned by uid {OTHER_UID}"):
        camp.run(show_progress=False)
    assert fake.calls == [] and fake.power_limit_mw == 300_000


def test_state_is_written_only_into_a_private_folder(tmp_path):
    """DeviceControl given a state folder others can write into refuses before its first change."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    fake = FakeNvml(power_limit_w=300)
    ctl = DeviceControl(Nvml(0, lib=fake), "cuda:0", state_dir=shared)
    with pytest.raises(OpcostError, match="writable by its group or others"):
        ctl.apply(Setting(900))
    assert fake.locked is None and list(shared.iterdir()) == []
