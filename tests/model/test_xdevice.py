"""The cross-device op-time model (model/xdevice*.py): known answers on synthetic GPUs, a spy proving
leave-one-GPU-out never fits on the held-out GPU, numerics per device config, transferred answers
for GPUs without own models, and refusal of a GPU the table does not know."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builders import FAST_XDEVICE, SYNTH_GPUS, synthetic_xdevice_rows
from opcost.devices import DEVICES, device_config, resolve_device_config, same_numerics
from opcost.errors import OpcostError
from opcost.model.crossdevice import hosts as xdevice_hosts
from opcost.model.crossdevice import xdevice, xdevice_net
from opcost.model.prediction import xdevice_predict
from opcost.params.xdevice import XdeviceParams
from opcost.paths import Paths


@pytest.fixture
def synthetic_gpus(monkeypatch):
    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)
    return SYNTH_GPUS


def test_known_efficiency_is_recovered_on_an_unseen_gpu(synthetic_gpus):
    rows = synthetic_xdevice_rows(np.random.default_rng(0))
    pred = xdevice.leave_one_gpu_out(rows, FAST_XDEVICE)
    ape = np.abs(pred["predicted_s"] / pred["t_s"] - 1)
    # t / roofline is a constant per kind: what the normalised target makes learnable on any GPU
    assert ape.max() < 0.03, pred.assign(ape=ape).sort_values("ape").tail()
    for g, d in pred.groupby("gpu"):
        assert xdevice.scores(d["t_s"], d["predicted_s"])["mape"] < 1.5, g


def test_spy_no_row_of_the_held_out_gpu_reaches_a_fit(synthetic_gpus):
    rows = synthetic_xdevice_rows(np.random.default_rng(1), n=10)
    seen: list[tuple[str, set[str]]] = []

    def spy(train: pd.DataFrame, p: XdeviceParams) -> xdevice.OpModel:
        seen.append(("fit", set(train["device_config"].map(xdevice.gpu_of))))
        return xdevice.fit(train, p)

    folds: dict[str, xdevice.OpModel] = {}
    pred = xdevice.leave_one_gpu_out(rows, FAST_XDEVICE, fit_fn=spy, on_fold=folds.__setitem__)
    assert [g for g, _ in seen] == ["fit"] * len(SYNTH_GPUS)
    for held, (_, gpus) in zip(sorted(SYNTH_GPUS), seen):
        assert held not in gpus and gpus == set(SYNTH_GPUS) - {held}
        assert held not in folds[held].trained_on
    assert set(pred["gpu"]) == set(SYNTH_GPUS)

    def cheat(train: pd.DataFrame, p: XdeviceParams) -> xdevice.OpModel:
        m = xdevice.fit(train, p)
        return xdevice.OpModel(m.ensemble, m.floor_s, tuple(sorted(SYNTH_GPUS)))  # claims every GPU

    with pytest.raises(AssertionError, match="fitted on"):
        xdevice.leave_one_gpu_out(rows, FAST_XDEVICE, fit_fn=cheat)


def test_configs_of_one_chip_are_one_gpu_for_the_split():
    assert xdevice.gpu_of("A30_no_tf32") == xdevice.gpu_of("A30") == "A30"
    assert xdevice.gpu_of("A100_PCIe_40GB_no_tf32") == xdevice.gpu_of("A100_PCIe") == "A100_PCIe"


def test_numerics_tf32_only_for_convolutions_where_allowed():
    a30, tf32 = device_config("A30")
    assert tf32 and xdevice.op_peak("conv", a30, tf32) == a30.tf32_flops
    assert xdevice.op_peak("linear", a30, tf32) == a30.fp32_flops  # PyTorch: matmul TF32 off by default
    a30, tf32 = device_config("A30_no_tf32")
    assert not tf32 and xdevice.op_peak("conv", a30, tf32) == a30.fp32_flops
    t4, tf32 = device_config("T4")
    assert xdevice.op_peak("conv", t4, tf32) == t4.fp32_flops  # no TF32 on Turing


def test_names_resolve_and_unknown_gpus_are_refused():
    assert resolve_device_config("NVIDIA H100 80GB HBM3") == "H100"
    assert resolve_device_config("tesla t4") == "T4"
    assert resolve_device_config("Tesla T4_no_tf32") == "T4_no_tf32"
    # the table's resolver (devices.resolve_device where the table has one) names the input and the valid keys
    with pytest.raises(OpcostError, match=r"unknown (GPU|device) 'Radeon VII'.*`opcost devices` lists all"):
        resolve_device_config("Radeon VII")
    with pytest.raises(OpcostError, match="unknown (GPU|device) 'Z9'"):
        xdevice_predict.table_configs("H100,Z9")
    assert xdevice_predict.table_configs("H100, NVIDIA L4,h100") == ["H100", "L4"]


def test_own_models_stay_champion_elsewhere_transferred():
    own = ["A30-inference", "A30_no_tf32-training"]
    assert xdevice_predict.transfer_config("NVIDIA A30", "inference", own) == ("A30", None)
    assert xdevice_predict.transfer_config("A30", "training", own) == ("A30", (DEVICES["A30"], True))
    assert xdevice_predict.transfer_config("Tesla T4", "inference", own) == ("T4", (DEVICES["T4"], True))


def test_no_tf32_on_a_gpu_without_tf32_is_its_own_bundle():
    """Without TF32 units `_no_tf32` changes no op's numerics: the RTX 2080 Ti's own bundle answers."""
    own = ["RTX2080Ti-inference", "A30-inference"]
    assert xdevice_predict.transfer_config("RTX2080Ti_no_tf32", "inference", own) == ("RTX2080Ti", None)
    assert xdevice_predict.transfer_config("A30_no_tf32", "inference", own) == ("A30_no_tf32", (DEVICES["A30"], False))
    assert xdevice_predict.transfer_config("RTX2080Ti_no_tf32", "training", own) == (
        "RTX2080Ti_no_tf32", (DEVICES["RTX2080Ti"], False))  # fmt: skip
    assert same_numerics("V100_no_tf32") == "V100" and same_numerics("nvidia a100_no_tf32") == "A100_no_tf32"
    assert same_numerics("Tesla T4") == "T4" and same_numerics("my-cpu-host") == "my-cpu-host"


def _queued(t, calls, host):
    """A step call by call: the host issues each call; each kernel starts after its issue and the last kernel."""
    t_host = t_gpu = 0.0
    for g, c, h in zip(t, calls, host):
        for _ in range(int(c)):
            t_host += h
            t_gpu = max(t_gpu, t_host) + g
    return max(t_host, t_gpu)


def test_composition_recovers_a_known_host_floor_in_network_share_and_scale():
    """Networks made by the host/GPU queue: NeuSight-like ones with no host profile at a per-call constant h,
    others with a profiled host at 0.35 of its profile's costs; the fit finds h, the share and the scale."""
    rng = np.random.default_rng(2)
    nets, nodes = [], []
    h, kappa, scale = xdevice_net.HOST_FLOOR_GRID[20], xdevice_net.IN_NETWORK_GRID[3], 1.3
    box = xdevice_hosts.HostProfile("box", {"add": 40e-6, "relu": 12e-6}, 20e-6, "test")
    for i in range(16):
        t = 10 ** rng.uniform(-6.5, -3.5, 60)
        calls = rng.integers(1, 5, 60).astype(float)
        xk = rng.choice(["add", "relu"], 60)
        cfg, profiled = f"n{i}", i % 2 == 1
        host = kappa * box.costs(xk) if profiled else np.full(60, h)
        nodes.append(pd.DataFrame({"config": cfg, "xkind": xk, "calls": calls, "t": t}))
        measured = scale * _queued(t, calls, host)
        nets.append({"config": cfg, "mode": "inference", "params": 0.0, "device_config": "A30",
                     "host": "box" if profiled else "neusight", "measured_s": measured})  # fmt: skip
    nodes_df = pd.concat(nodes, ignore_index=True)
    comp = xdevice_net.fit_composition(pd.DataFrame(nets), nodes_df, nodes_df["t"].to_numpy(), {}, {"box": box})
    assert comp["host_floor_s"] == h and comp["in_network"] == kappa
    assert comp["scale"] == pytest.approx(scale, rel=1e-9)
    assert comp["hosts"] == {"box": box.to_json()}


def test_model_roundtrip_and_refusal(synthetic_gpus, tmp_path):
    rows = synthetic_xdevice_rows(np.random.default_rng(3), n=8)
    op = xdevice.fit(rows, FAST_XDEVICE)
    m = xdevice.XdeviceModel(op, {"host_floor_s": 5e-6, "scale": 1.0, "bw_ratio": {}}, {"a": 0.2, "b": 0.1})
    m.save(tmp_path)
    back = xdevice.XdeviceModel.load(tmp_path)
    assert np.array_equal(back.op.predict(rows), op.predict(rows))
    (tmp_path / xdevice.MODEL_FILE).write_text('{"format": "other"}')
    with pytest.raises(OpcostError, match="format 'other'"):
        xdevice.XdeviceModel.load(tmp_path)


@pytest.fixture
def xdevice_root(tmp_path, monkeypatch):
    """A root holding only a cross-device model (fitted on NeuSight-like synthetic rows of real table GPUs)."""
    rng = np.random.default_rng(4)
    real = ["V100_no_tf32", "P100_no_tf32", "A30", "RTX2080Ti"]
    frames = []
    for cfg in real:
        r = synthetic_xdevice_rows(rng, n=15)
        r = r[r["device_config"] == "SYN0"].assign(device_config=cfg)
        frames.append(r)
    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)
    rows = pd.concat(frames, ignore_index=True)
    op = xdevice.fit(rows, FAST_XDEVICE)
    comp = {"host_floor_s": 5e-6, "scale": 1.0, "bw_ratio": {"linear": 2.0}}
    xdevice.XdeviceModel(op, comp, {"a": 0.2, "b": 0.05}).save(Paths(tmp_path).xdevice_model_dir)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("device,mode", [("H100", "inference"), ("NVIDIA H100 80GB HBM3", "training"),
                                         ("T4", "training"), ("Tesla T4_no_tf32", "inference")])  # fmt: skip
def test_predict_on_a_gpu_without_own_models_is_transferred(xdevice_root, device, mode):
    from opcost.model.prediction.predict import Predictor

    pr = Predictor(paths=Paths(xdevice_root), disk_cache=False)
    p = pr.predict("resnet18", "8,3,32,32", device, mode)
    assert set(p.sources) == {"transferred"} and p.to_json()["composition"] == "cross-device"
    assert p.device_config == resolve_device_config(device)
    assert 0 < p.time_interval_s[0] < p.time_s < p.time_interval_s[1]
    assert p.memory is not None and p.fits is True
    assert "transferred" in p.note and ("TF32 off" in p.note) == device.endswith("_no_tf32")
    assert p.energy_j is None and "energy" in p.note
    # the interval's half-width: a + b distance + c other_share (model/crossdevice/xinterval.py); the law here has no c
    h = math.log(p.time_interval_s[1] / p.time_s)
    assert h == pytest.approx(math.log(p.time_s / p.time_interval_s[0]), rel=1e-9)
    dist = float(p.note.split("at this GPU's distance ")[1].split(" ")[0])
    assert h == pytest.approx(0.2 + 0.05 * dist, abs=0.0051 * 0.05 + 1e-12)
    share = float(p.note.split("this network's ")[1].split(" %")[0])
    assert share >= 90  # resnet18: convolutions are not matrix products here, only its last Linear is
    with pytest.raises(OpcostError, match="unknown (GPU|device) 'MI300X'"):
        pr.predict("resnet18", "8,3,32,32", "MI300X", mode)


def test_recommend_ranks_transferred_gpus(xdevice_root):
    from opcost.model.prediction.predict import Predictor

    df = Predictor(paths=Paths(xdevice_root), disk_cache=False).recommend(
        "resnet18", "8,3,32,32", "inference", devices="H100,A100,L4,T4"
    )
    assert sorted(df["device_config"]) == ["A100", "H100", "L4", "T4"]
    assert set(df["source"]) == {"transferred"} and df["fits_memory"].all()
    fastest = df.sort_values("time_s")["device_config"].iloc[0]
    assert df.loc[df["device_config"] == fastest, "rank_time"].iloc[0] == 1


def test_neusight_fx_nodes_map_to_op_rows():
    lin = xdevice_net.fx_node_row("call_module", "bert.encoder.layer.0.attention.self.query", "Linear",
                                  [[8, 512, 1024]], [8, 512, 1024], "torch.float32", False)  # fmt: skip
    assert lin is not None and (lin["xkind"], lin["m"], lin["n"], lin["k"]) == ("linear", 4096.0, 1024.0, 1024.0)
    bmm = xdevice_net.fx_node_row(
        "call_function",
        "<built-in method matmul of type object at 0x1>",
        "",
        [[8, 16, 512, 64], [8, 16, 64, 512]],
        [8, 16, 512, 512],
        "torch.float32",
        False,
    )
    assert bmm is not None and (bmm["xkind"], bmm["batch"], bmm["m"], bmm["n"], bmm["k"]) == (
        "bmm",
        128.0,
        512.0,
        512.0,
        64.0,
    )
    assert xdevice_net.fx_node_row("call_method", "view", "", [[8, 512, 1024]], [8, 512, 16, 64],
                                   "torch.float32", False) is None  # fmt: skip
    assert xdevice_net.fx_node_row("call_module", "x.dropout", "Dropout", [[8, 4]], [8, 4], "torch.float32",
                                   False) is None  # eval-mode dropout launches nothing  # fmt: skip


def test_neusight_ops_parse_shapes(tmp_path):
    d = tmp_path / "ops" / "bmm"
    d.mkdir(parents=True)
    import gzip

    with gzip.open(d / "Tesla_T4.csv.gz", "wt") as fh:
        fh.write("OPName,Latency,Device,B,M,N,K\nbmm,0.5,Tesla T4,2,3,5,7\n")
    rows = xdevice.neusight_ops(Path(tmp_path))
    r = rows.iloc[0]
    # B x M x N @ B x N x K: rows M, cols K, reduction N
    assert (r["xkind"], r["batch"], r["m"], r["n"], r["k"]) == ("bmm", 2.0, 3.0, 7.0, 5.0)
    assert r["flops"] == 2 * 2 * 3 * 5 * 7 and r["t_s"] == pytest.approx(0.5e-3)
    assert r["device_config"] == "T4_no_tf32" and r["wall_clock"] == 0.0


@pytest.fixture
def xdevice_power_root(xdevice_root):
    """`xdevice_root` plus a power model drawing exactly the TDP (idle + (1 - idle) * 1 = 1) and a clock
    model: transferred answers then have a known energy, time x TDP."""
    from opcost.model.clocks.clock import ClockModel
    from opcost.model.clocks.xpower import PowerModel

    PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0, rel_err90=0.1).save(Paths(xdevice_root).xpower_model_dir)
    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(
        Paths(xdevice_root).clock_model_dir
    )
    return xdevice_root


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_transferred_energy_is_time_times_transferred_power(xdevice_power_root, mode):
    from opcost.model.prediction.predict import Predictor

    p = Predictor(paths=Paths(xdevice_power_root), disk_cache=False).predict("resnet18", "8,3,32,32", "T4", mode)
    assert set(p.sources) == {"transferred"} and "models/xpower" in p.note
    assert p.energy_j == pytest.approx(p.time_s * DEVICES["T4"].tdp_w, rel=1e-9)
    assert p.avg_power_w == pytest.approx(DEVICES["T4"].tdp_w)
    lo, hi = p.energy_interval_j
    assert lo == pytest.approx(p.time_interval_s[0] * 70 * 0.9) and hi == pytest.approx(p.time_interval_s[1] * 70 * 1.1)
    assert 0 < lo < p.energy_j < hi
    # the answer states the power model's basis: the TDP, its idle share, the dynamic share at the busy share
    assert "70 W = TDP 70 W x (idle 0.50 + (1 - idle) x dynamic share 1.00 at busy share" in p.note


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_clock_applies_to_transferred_gpus(xdevice_power_root, mode):
    from opcost.model.prediction.predict import Predictor

    pr = Predictor(paths=Paths(xdevice_power_root), disk_cache=False)
    h100 = DEVICES["H100"]
    base = pr.predict("resnet18", "8,3,32,32", "H100", mode)
    at_boost = pr.predict("resnet18", "8,3,32,32", "H100", mode, clock_mhz=h100.boost_clock_mhz)
    assert at_boost.clock_source == "transferred" and at_boost.time_s == pytest.approx(base.time_s, rel=1e-9)
    assert at_boost.energy_j == pytest.approx(base.energy_j, rel=1e-9)
    f = 1200.0
    slow = pr.predict("resnet18", "8,3,32,32", "NVIDIA H100 80GB HBM3", mode, clock_mhz=f)
    assert slow.clock_source == "transferred" and slow.clock_mhz == f and set(slow.sources) == {"transferred"}
    # t(f) = t_ref (1 + s (f_ref / f - 1)), s in [0, 1]: between the reference time and fully compute-bound
    assert base.time_s < slow.time_s <= base.time_s * h100.boost_clock_mhz / f
    assert slow.avg_power_w < base.avg_power_w  # P = static + dynamic (f / f_ref)^2, static 30 % of P_ref
    assert slow.avg_power_w >= 0.3 * base.avg_power_w
    assert slow.time_interval_s[0] < slow.time_s < slow.time_interval_s[1]
    assert "cross-clock model" in slow.note
    lo, hi = h100.clock_range_mhz
    with pytest.raises(OpcostError, match=f"outside the H100's supported range {lo:g}-{hi:g} MHz"):
        pr.predict("resnet18", "8,3,32,32", "H100", mode, clock_mhz=hi + 100)


def test_recommend_sweeps_clocks_of_transferred_gpus(xdevice_power_root):
    from opcost.model.prediction.predict import Predictor

    pr = Predictor(paths=Paths(xdevice_power_root), disk_cache=False)
    df = pr.recommend("resnet18", "8,3,32,32", "inference", devices="H100,T4")
    for gpu in ("H100", "T4"):
        clocks = sorted(df.loc[df["device_config"] == gpu, "clock_mhz"])
        assert clocks == sorted(pr.clock_grid(gpu)) and DEVICES[gpu].boost_clock_mhz in clocks
    assert df["energy_j"].notna().all()


LAYERS = '''
import torch
from torch import nn
from transformers.pytorch_utils import Conv1D


def conv1d():
    return Conv1D(3072, 768)  # GPT-2's MLP up-projection: an addmm with the weight transposed


def linear():
    return nn.Linear(768, 3072)


def mha():
    return MHA()


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(256, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Explicit(nn.Module):
    """The same attention written out: projections, scores, softmax, weighted sum, output projection."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(256, 768), nn.Linear(256, 256)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.reshape(b, n, 4, 64).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        a = (q @ k.transpose(-2, -1) / 8.0).softmax(-1)
        return self.out((a @ v).transpose(1, 2).reshape(b, n, 256))


def explicit():
    return Explicit()


def lstm():
    return nn.LSTM(64, 64)
'''


@pytest.fixture
def layers(tmp_path):
    (tmp_path / "layers.py").write_text(LAYERS)
    return tmp_path / "layers.py"


def _transferred(root: Path, model: str, shape: str, mode: str = "inference") -> float:
    from opcost.model.prediction.predict import Predictor
    from opcost.ops.netspec import NetSpec

    p = Predictor(paths=Paths(root), disk_cache=False).predict(NetSpec.make(model, [f"float32:{shape}"]), None,
                                                               "H100", mode)  # fmt: skip
    assert set(p.sources) == {"transferred"}
    return p.time_s


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_hf_conv1d_is_costed_as_the_linear_layer_of_its_gemm(xdevice_root, layers, mode):
    """Hugging Face's Conv1D is an addmm: on a transferred GPU it costs what nn.Linear of the same GEMM costs,
    not a convolution at the tensor-core convolution peak (3x the FP32 peak on an H100)."""
    conv = _transferred(xdevice_root, f"{layers}:conv1d", "8,128,768", mode)
    lin = _transferred(xdevice_root, f"{layers}:linear", "8,128,768", mode)
    assert conv == pytest.approx(lin, rel=0.02)


def test_multihead_attention_pays_for_its_sequence_squared_products(xdevice_root, layers):
    """nn.MultiheadAttention costs about what the same attention written out in Linear, matmul and softmax
    costs (its kernels differ by a few copies); costed as a linear layer it came to a third of it at L=2048,
    where the L^2 products carry 4x the projections' FLOPs."""
    mha = _transferred(xdevice_root, f"{layers}:mha", "8,2048,256")
    written_out = _transferred(xdevice_root, f"{layers}:explicit", "8,2048,256")
    assert 0.6 < mha / written_out < 1.5


def test_a_transferred_lstm_is_costed_by_its_steps(xdevice_root, layers):
    """An LSTM runs its steps in sequence: twice the sequence, twice the time, and each step at least one
    host floor (5 us in the fixture); as one op it was a single ~30 us kernel whatever its length."""
    t50 = _transferred(xdevice_root, f"{layers}:lstm", "50,8,64")
    t100 = _transferred(xdevice_root, f"{layers}:lstm", "100,8,64")
    assert t100 / t50 == pytest.approx(2.0, rel=0.05)
    assert t100 >= 100 * 5e-6


def test_the_validation_nodes_expand_composites_as_predictions_do():
    """xdevice_net.op_rows is the one expansion: a recurrent record's rows are its kernels, with their step
    counts; a plain layer is its own single row."""
    from opcost.model.basis.features import OpRecord, part_record

    parts = [{"op": "mm", "kind": "mm", "input_shapes": [[8, 64], [64, 256]], "output_shapes": [[8, 256]],
              "flops": 2 * 8 * 64 * 256, "bytes_read": 4 * (8 * 64 + 64 * 256), "bytes_written": 4 * 8 * 256,
              "count": 50},
             {"op": "sigmoid", "kind": "sigmoid", "input_shapes": [[8, 256]], "output_shapes": [[8, 256]],
              "flops": 0, "bytes_read": 4 * 8 * 256, "bytes_written": 4 * 8 * 256, "count": 150}]  # fmt: skip
    rec = OpRecord("lstm0", "LSTM", {"input_size": 64, "hidden_size": 64}, (50, 8, 64), 50 * 8 * 64,
                   {"flops": 1, "bytes_read": 1, "bytes_written": 1, "params": 0, "parts": parts})  # fmt: skip
    rows = xdevice_net.op_rows(rec)
    assert [c for _, c in rows] == [50.0, 150.0]
    assert [r["xkind"] for r, _ in rows] == ["linear", "relu"]
    mm = part_record(rec, 0, parts[0])
    assert rows[0][0] == xdevice.record_row(mm.kind, mm.metrics, mm.hp, mm.input_shape)
    lin = OpRecord("l", "Linear", {"in_features": 64, "out_features": 256}, (8, 64), 512,
                   {"flops": 2 * 8 * 64 * 256, "bytes_read": 1, "bytes_written": 1, "params": 64 * 256})  # fmt: skip
    assert xdevice_net.op_rows(lin) == [(xdevice.record_row("Linear", lin.metrics, lin.hp, (8, 64)), 1.0)]


@pytest.fixture
def fitted_root(tmp_path, monkeypatch):
    """A cross-device model fitted on 90 NeuSight rows of the V100 (TF32 off, as NeuSight measured) and 90 thesis
    rows of the A30: the V100 and the A30 are in its training set, the H100 and the T4 are not."""
    rng = np.random.default_rng(4)
    frames = []
    for cfg, source in (("V100_no_tf32", "neusight"), ("A30", "thesis")):
        r = synthetic_xdevice_rows(rng, n=15)
        frames.append(r[r["device_config"] == "SYN0"].assign(device_config=cfg, source=source))
    for k, d in SYNTH_GPUS.items():
        monkeypatch.setitem(DEVICES, k, d)
    op = xdevice.fit(pd.concat(frames, ignore_index=True), FAST_XDEVICE)
    xdevice.XdeviceModel(op, {"host_floor_s": 5e-6, "scale": 1.0}, {"a": 0.2, "b": 0.05}).save(
        Paths(tmp_path).xdevice_model_dir
    )
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return tmp_path


def test_a_gpu_whose_ops_the_model_was_trained_on_is_fitted_not_transferred(fitted_root):
    """The V100's answer is an in-sample fit of the cross-device model (its 90 rows in the training set): every op
    `fitted`, the JSON's `fitted` names the GPU, the 6 x 15 rows and NeuSight, the note says so; the H100's stays
    `transferred` with no `fitted`. recommend marks them `device fitted` / `device transferred` and says what each
    means; the model keeps its row counts through save and load, and one saved without them still says `fitted`."""
    from opcost.model.composition.costing import FITTED, TRANSFERRED
    from opcost.model.prediction.predict import Predictor

    model = xdevice.XdeviceModel.load(Paths(fitted_root).xdevice_model_dir)
    assert model.op.trained_rows == {"A30": {"thesis": 90}, "V100": {"neusight": 90}}
    pr = Predictor(paths=Paths(fitted_root), disk_cache=False)
    v100 = pr.predict("resnet18", "8,3,32,32", "V100_no_tf32", "inference")
    assert set(v100.sources) == {FITTED} and v100.coverage()["time"] == {FITTED: 1.0}
    doc = v100.to_json()
    assert doc["fitted"] == {"gpu": "V100", "ops": 90, "measured_by": ["NeuSight"]}
    assert {o["source"] for o in doc["operations"]} == {FITTED}
    assert v100.note.startswith(
        "fitted: V100_no_tf32 has no bundle of its own, but the cross-device model was trained on 90 ops measured "
        "on this GPU by NeuSight: its op times are that model's in-sample fit, not a transfer to a GPU it never saw"
    )
    assert v100.summary.startswith(  # the one sentence too (it said "no measurements of its own")
        "V100_no_tf32 has no bundle of its own: times from the cross-device model, which was fitted on 90 ops "
        "measured on this GPU by NeuSight (an in-sample fit) and on 1 other GPU"
    )
    h100 = pr.predict("resnet18", "8,3,32,32", "H100", "inference")
    assert set(h100.sources) == {TRANSFERRED} and "fitted" not in h100.to_json()
    assert h100.note.startswith("transferred: H100 has no measurements of its own")
    assert h100.summary.startswith("H100 has no measurements of its own: times from the cross-device model (2 other")
    from opcost.model.prediction.recommend import summary_lines

    df = pr.recommend("resnet18", "8,3,32,32", "inference", devices="V100_no_tf32,H100")
    by = df.groupby("device_config")
    assert set(by.get_group("V100_no_tf32")["source"]) == {FITTED}
    assert by.get_group("V100_no_tf32")["marks"].str.contains("device fitted").all()
    assert set(by.get_group("H100")["source"]) == {TRANSFERRED}
    assert not by.get_group("H100")["marks"].str.contains("device fitted").any()
    lines = summary_lines(df)
    assert any(
        x.startswith("device fitted: op costs from the cross-device model, which was trained on this GPU")
        for x in lines
    )
    older = Paths(fitted_root / "older")  # a model saved before it counted its rows (another folder: models load once)
    shutil.copytree(Paths(fitted_root).xdevice_model_dir, older.xdevice_model_dir)
    raw = json.loads((older.xdevice_model_dir / xdevice.MODEL_FILE).read_text())
    del raw["trained_rows"]
    (older.xdevice_model_dir / xdevice.MODEL_FILE).write_text(json.dumps(raw))
    old = Predictor(paths=older, disk_cache=False).predict("resnet18", "8,3,32,32", "V100_no_tf32")
    assert set(old.sources) == {FITTED} and old.to_json()["fitted"] == {"gpu": "V100", "ops": None, "measured_by": []}
    assert "the cross-device model was trained on ops measured on this GPU: its op times" in old.note
