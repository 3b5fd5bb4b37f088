"""Host profiles (model/crossdevice/hosts.py) and transferred answers driven by a named host: known plateaus and
medians, profiles read as checked data, a host-bound network whose time is its host costs, and calibrate-host run in a
fresh process on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from builders import FAST_XDEVICE, SYNTH_GPUS, synthetic_xdevice_rows
from opcost.data.floors import FLOOR_PERCENTILE
from opcost.devices import DEVICES
from opcost.errors import OpcostError
from opcost.model.crossdevice import hosts, xdevice
from opcost.paths import Paths


def test_a_thesis_plateau_is_the_floor_percentile_of_each_kinds_wall_clock_rows():
    rng = np.random.default_rng(0)
    relu = 7.6e-6 + rng.exponential(2e-6, 40)
    conv = 44e-6 + rng.exponential(1e-5, 30)
    kinds = np.array(["relu"] * 40 + ["conv"] * 30 + ["pool"] * 3)
    p = hosts.plateau_profile("thesis-X", kinds, np.concatenate([relu, conv, [1e-3] * 3]), 5, "test rows")
    assert p.per_call_s["relu"] == pytest.approx(np.percentile(relu, FLOOR_PERCENTILE))
    assert p.per_call_s["conv"] == pytest.approx(np.percentile(conv, FLOOR_PERCENTILE))
    assert "pool" not in p.per_call_s  # 3 rows: too few for a plateau; the default (median of the kinds) stands
    assert p.cost("pool") == pytest.approx(np.median([p.per_call_s["relu"], p.per_call_s["conv"]]))


def test_a_campaign_profile_is_the_median_enqueue_time_of_each_kind_and_skips_missing_rows():
    kinds = np.array(["relu", "relu", "relu", "linear", "linear"])
    p = hosts.timings_profile("h", kinds, np.array([19e-6, 21e-6, np.nan, 62e-6, 0.0]), "test")
    assert p.per_call_s == {"relu": pytest.approx(20e-6), "linear": pytest.approx(62e-6)}
    assert p.counts == {"linear": 1, "relu": 2}
    with pytest.raises(OpcostError, match="no rows to learn it from"):
        hosts.timings_profile("h", np.array(["relu"]), np.array([np.nan]), "test")


def test_a_profile_is_checked_data(tmp_path):
    p = hosts.HostProfile("box", {"relu": 1e-5}, 2e-5, "test", {"relu": 3})
    hosts.save(p, tmp_path / "box.json")
    assert hosts.load(tmp_path / "box.json") == p
    for bad, why in (({"format": "x"}, "not an opcost host profile"),
                     ({**p.to_json(), "per_call_s": {"relu": 5.0}}, "per-call cost of 'relu' is 5.0"),
                     ({**p.to_json(), "default_s": "fast"}, "per-call cost of 'default'")):  # fmt: skip
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(OpcostError, match=why):
            hosts.load(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text('{"format": "opcost-host/1", "default_s": NaN}')
    with pytest.raises(OpcostError, match="default"):
        hosts.load(tmp_path / "bad.json")
    for name in ("../x", "", ".hidden", "a b"):
        with pytest.raises(OpcostError, match="host name"):
            hosts.check_name(name)


RELUS = """
from torch import nn


def chain():
    return nn.Sequential(*[nn.ReLU() for _ in range(40)])


def trainable():
    return nn.Sequential(nn.Linear(16, 16), *[nn.ReLU() for _ in range(39)])
"""


@pytest.fixture
def hosted_root(tmp_path, monkeypatch):
    """A cross-device model whose composition carries two host profiles, scale 1 and in-network share 0.5."""
    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)
    rng = np.random.default_rng(4)
    rows = synthetic_xdevice_rows(rng, n=15)
    rows = rows[rows["device_config"] == "SYN0"].assign(device_config="A30")
    op = xdevice.fit(rows, FAST_XDEVICE)
    profiles = {
        "slow": hosts.uniform("slow", 1e-3, "a 1 ms host"),
        "h200-visit": hosts.uniform("h200-visit", 2e-6, "x"),
    }
    comp = {"host_floor_s": 5e-6, "scale": 1.0, "bw_ratio": {}, "in_network": 0.5, "bw_host_factor": 0.5,
            "hosts": {n: p.to_json() for n, p in profiles.items()}}  # fmt: skip
    xdevice.XdeviceModel(op, comp, {"a": 0.2, "b": 0.05}).save(Paths(tmp_path).xdevice_model_dir)
    (tmp_path / "relus.py").write_text(RELUS)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


def _predict(root: Path, host: str | None, mode: str = "inference", builder: str = "chain"):
    from opcost.model.prediction.predict import Predictor
    from opcost.ops.netspec import NetSpec

    net = NetSpec.make(f"{root / 'relus.py'}:{builder}", ["float32:4,16"])
    return Predictor(paths=Paths(root), disk_cache=False, host=host).predict(net, None, "H100", mode)


def test_a_host_bound_network_takes_its_host_costs(hosted_root):
    """40 tiny ReLUs behind a 1 ms host (x 0.5 in a network): 40 x 0.5 ms plus the last kernel; the answer names
    the host and says the GPU waits on it almost all of the step."""
    p = _predict(hosted_root, "slow")
    kernel = p.t_s.min()  # each op shows max(kernel, host): the host's 0.5 ms
    assert kernel == pytest.approx(0.5e-3)
    assert 40 * 0.5e-3 < p.time_s < 40 * 0.5e-3 + 1e-4
    doc = p.to_json()
    assert doc["host"]["name"] == "slow" and doc["host"]["host_bound_share"] > 0.95 and not doc["host"]["reference"]
    assert "host: slow" in p.note
    fast = _predict(hosted_root, None)  # the reference host: 2 us x 0.5 per call, so the kernels decide
    assert fast.to_json()["host"]["name"] == "h200-visit" and fast.to_json()["host"]["reference"]
    assert fast.time_s < p.time_s / 5
    train = _predict(hosted_root, "slow", "training", "trainable")  # backward issues at half the forward's cost
    assert 40 * 0.75e-3 < train.time_s < 40 * 0.75e-3 + 2e-4
    with pytest.raises(OpcostError, match="no trainable parameters"):
        _predict(hosted_root, "slow", "training")


def test_an_unknown_host_is_one_line_and_a_calibrated_one_is_found_under_hosts(hosted_root):
    with pytest.raises(OpcostError, match=r"--host 'mine': no such host profile; known: h200-visit, slow.*"
                                          r"calibrate-host --name mine"):  # fmt: skip
        _predict(hosted_root, "mine")
    hosts.save(hosts.uniform("mine", 1e-3, "calibrated"), Paths(hosted_root).host_file("mine"))
    assert _predict(hosted_root, "mine").to_json()["host"]["source"] == "calibrated"


def test_calibrate_host_measures_this_cpu_in_a_fresh_process(tmp_path):
    out = tmp_path / "box.json"
    res = subprocess.run([sys.executable, "-m", "opcost.cli", "calibrate-host", "--name", "box", "--seconds", "0.02",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    p = hosts.load(out)
    assert set(p.per_call_s) == set(hosts.KINDS) and p.name == "box"
    assert all(hosts.LAUNCH_S < v < 1e-2 for v in p.per_call_s.values())
    assert "launch constant" in p.source
    bad = subprocess.run([sys.executable, "-m", "opcost.cli", "calibrate-host", "--name", "box", "--seconds", "0"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert bad.returncode == 2 and "--seconds 0: expected 0.01 to 60" in bad.stderr
