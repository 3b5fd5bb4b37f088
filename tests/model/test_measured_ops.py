"""Ops measured on a GPU without its own bundle (model/crossdevice/measured.py, stage measured-ops): the table keeps
only our campaigns' default-setting rows of table GPUs, and a transferred answer on that GPU takes those ops' measured
times (source `measured`), transfers the rest, and composes both with the transferred scale."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from opcost.devices import DEVICES
from opcost.errors import OpcostError
from opcost.io import write_parquet
from opcost.model.crossdevice import measured, xdevice
from opcost.params.xdevice import XdeviceParams
from opcost.paths import Paths
from opcost.schemas import EVALUATED_OPERATIONS, OPERATIONS, conform
from opcost.stages import measured_ops

SCALE, HOST_FLOOR = 0.8, 5e-6
FAST = XdeviceParams(n_estimators=30, max_depth=4, learning_rate=0.3, threads=1, floor_s=1e-9)
NET = ("resnet18", "8,3,32,32")
BIG = ("resnet18", "32,3,224,224")  # kernels well above the host floor


def evaluated(rows: list[dict]) -> pd.DataFrame:
    """Evaluated operation rows: the given columns, t_s as every statistic, one trial each unless said."""
    full = [
        {"clock_mhz": None, "power_limit_w": None, "n_measurements": 2, "n_trials": 2, "sigma_t_s": 1e-7,
         "e_j": None, "p_w": None, "kind": "Conv2d", **r}
        for r in rows
    ]  # fmt: skip
    return conform(pd.DataFrame(full), EVALUATED_OPERATIONS)


def test_the_table_keeps_our_default_setting_rows_of_table_gpus_only():
    ops = evaluated([
        {"op_id": "a", "device_config": "H200", "mode": "inference", "phase": "forward", "t_s": 1e-4,
         "method": "trials", "sources": "h200-probe"},
        {"op_id": "a", "device_config": "H200", "mode": "training", "phase": "forward_backward", "t_s": 5e-4,
         "method": "trials", "sources": "h200-probe"},
        {"op_id": "b", "device_config": "H200", "mode": "training", "phase": "forward", "t_s": 2e-4,
         "method": "trials", "sources": "h200-probe"},  # a phase training answers do not cost
        {"op_id": "c", "device_config": "H200", "mode": "inference", "phase": "forward", "t_s": 3e-4,
         "method": "trials", "sources": "h200-probe", "clock_mhz": 1500},  # not at the default clock
        {"op_id": "a", "device_config": "T4_no_tf32", "mode": "inference", "phase": "forward", "t_s": 9e-4,
         "method": "neusight-log", "sources": "neusight"},  # the cross-device model's own training data
        {"op_id": "a", "device_config": "A30", "mode": "inference", "phase": "forward", "t_s": 8e-4,
         "method": "thesis-log", "sources": "nicolai-thesis"},
        {"op_id": "a", "device_config": "AMD_EPYC", "mode": "inference", "phase": "forward", "t_s": 7e-3,
         "method": "trials", "sources": "cpu-smoke"},  # a CPU host: no transferred answers
    ])  # fmt: skip
    table = measured.measured_table(ops)
    assert list(table["devices"]) == ["H200"]
    h200 = table["devices"]["H200"]
    assert h200["campaigns"] == ["h200-probe"] and h200["energy_rows"] == 0
    assert h200["modes"] == {
        "inference": {"a": {"kind": "Conv2d", "t_s": 1e-4, "sigma_t_s": 1e-7, "n_trials": 2}},
        "training": {"a": {"kind": "Conv2d", "t_s": 5e-4, "sigma_t_s": 1e-7, "n_trials": 2}},
    }


def test_a_broken_table_is_one_line(tmp_path):
    folder = tmp_path / "measured"
    folder.mkdir()
    assert measured.op_times(folder, "H200", "inference") == {}  # no table: nothing measured
    (folder / measured.FILE).write_text(json.dumps({"format": "other", "devices": {}}))
    with pytest.raises(OpcostError, match=r"format 'other', expected 'opcost-measured/1'.*dvc repro measured-ops"):
        measured.op_times(folder, "H200", "inference")
    bad = {"format": measured.FORMAT, "devices": {"H200": {"modes": {"inference": {"a": {"t_s": -1.0}}}}}}
    (folder / measured.FILE).write_text(json.dumps(bad))
    with pytest.raises(OpcostError, match="H200 holds no valid time for op a"):
        measured.op_times(folder, "H200", "inference")


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A root with a cross-device model (synthetic rows of real table GPUs; scale SCALE, host floor
    HOST_FLOOR) and a power model drawing exactly the TDP."""
    from opcost.model.clocks.xpower import PowerModel

    rng = np.random.default_rng(3)
    rows = []
    for cfg in ("V100_no_tf32", "A30", "RTX2080Ti", "T4"):
        dev = DEVICES[cfg.removesuffix("_no_tf32")]
        for xk in ("conv", "linear", "relu", "batchnorm", "add", "pool"):
            for _ in range(15):
                numel = float(2 ** rng.integers(16, 24))
                flops = 0.0 if xk not in xdevice.GEMM_XKINDS else 200.0 * numel
                rows.append({"xkind": xk, "batch": 1.0, "m": 0.0, "n": 0.0, "k": 0.0, "flops": flops,
                             "bytes": 12 * numel, "numel": numel, "device_config": cfg, "wall_clock": 0.0,
                             "t_s": max(flops / dev.fp32_flops, 12 * numel / dev.bandwidth) * 2})  # fmt: skip
    op = xdevice.fit(pd.DataFrame(rows), FAST)
    comp = {"host_floor_s": HOST_FLOOR, "scale": SCALE, "bw_ratio": {"conv": 2.0}}
    paths = Paths(tmp_path)
    xdevice.XdeviceModel(op, comp, {"a": 0.2, "b": 0.05}).save(paths.xdevice_model_dir)
    PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0, rel_err90=0.1).save(paths.xpower_model_dir)
    monkeypatch.setenv("OPCOST_ROOT", str(tmp_path))
    return paths


def measure(paths: Paths, times: dict[tuple[str, str], float]) -> None:
    """Evaluated rows of an H200 campaign with these (op_id, mode) -> time per call, through the stage."""
    rows = [
        {"op_id": op, "device_config": "H200", "mode": mode, "phase": "forward" if mode == "inference" else
         "forward_backward", "t_s": t, "method": "trials", "sources": "h200-probe"}
        for (op, mode), t in times.items()
    ]  # fmt: skip
    write_parquet(evaluated(rows), paths.evaluated_operations)
    write_parquet(conform(pd.DataFrame([]), OPERATIONS), paths.operations)  # a catalog knowing none of them
    measured_ops.run(paths)


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_measured_ops_take_their_time_and_the_rest_stay_transferred(root, mode):
    from opcost.model.prediction.predict import Predictor

    before = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", mode)
    t4_before = Predictor(paths=root, disk_cache=False).predict(*NET, "T4", mode).to_json()
    assert set(before.sources) == {"transferred"} and before.measured is None
    big = np.argsort(-(before.t_s * before.calls))[:2]  # the two ops with the most time
    ids = [before.op_ids[i] for i in big]
    known = {ids[0]: 123e-6, ids[1]: 45e-6}
    measure(root, {(op, mode): t for op, t in known.items()} | {("0000000000000000", mode): 1e-3})

    p = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", mode)
    assert p.op_ids == before.op_ids
    src = dict(zip(p.op_ids, p.sources))
    t = dict(zip(p.op_ids, p.t_s))
    calls = dict(zip(p.op_ids, p.calls))
    # (a) a measured op's time is its measured time per call
    assert {op: t[op] for op in ids} == known and all(src[op] == "measured" for op in ids)
    # (b) every other op is transferred, with the time it had before
    others = [op for op in p.op_ids if op not in known]
    assert all(src[op] == "transferred" for op in others)
    assert [t[op] for op in others] == [dict(zip(before.op_ids, before.t_s))[op] for op in others]
    # the network runs through the host/GPU queue (model/crossdevice/hostqueue.py): each call that launches work (t_s >
    # 0:
    # views launch none) issued at the host floor (this model has no host profiles; backward issues at the same
    # cost, bw_host_factor 1 by default), so the host's busy time is known exactly; the step is never shorter
    # than either side's busy time and never longer than the two taking turns (the per-op sum + optimizer step)
    alternation = sum(t[op] * calls[op] for op in others) + SCALE * (123e-6 * calls[ids[0]] + 45e-6 * calls[ids[1]])
    assert p.sum_s == pytest.approx(alternation, rel=1e-12)
    issues = sum(c for op, c in calls.items() if t[op] > 0) * (2 if mode == "training" else 1)
    assert p.host.host_s == pytest.approx(SCALE * HOST_FLOOR * issues, rel=1e-9)
    assert p.host.name == "fitted-constant" and p.host.reference
    assert max(p.host.host_s, p.host.gpu_s) <= p.host.queue_s <= alternation * (1 + 1e-12)
    assert p.time_s - p.host.queue_s == pytest.approx(before.time_s - before.host.queue_s)  # the optimizer step
    # energy stays transferred: the power model's power (the TDP here) x the new time
    assert p.energy_j == pytest.approx(p.time_s * DEVICES["H200"].tdp_w, rel=1e-9)
    j = p.to_json()
    m = j["measured"]
    assert (m["device_config"], m["campaigns"], m["ops"], m["ops_total"]) == ("H200", ["h200-probe"], 2, len(p.op_ids))
    share = (calls[ids[0]] + calls[ids[1]]) / sum(calls.values())
    assert m["calls_share"] == pytest.approx(share) and j["coverage"]["calls"]["measured"] == pytest.approx(share)
    assert "transferred" in m["energy"]
    assert {o["op_id"]: o["source"] for o in j["operations"]}[ids[0]] == "measured"
    assert "measured: 2 of " in p.note and "not used" in p.note
    # another GPU's answer is unchanged, to the byte
    assert Predictor(paths=root, disk_cache=False).predict(*NET, "T4", mode).to_json() == t4_before


def test_a_measured_op_follows_a_transferred_clock(root):
    from opcost.model.clocks.clock import ClockModel
    from opcost.model.prediction.predict import Predictor

    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(root.clock_model_dir)
    pr = Predictor(paths=root, disk_cache=False)
    before = pr.predict(*NET, "H200", "inference")
    op = before.op_ids[int(np.argmax(before.t_s * before.calls))]
    measure(root, {(op, "inference"): 2e-4})
    boost = DEVICES["H200"].boost_clock_mhz
    at_boost = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference", clock_mhz=boost)
    default = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference")
    assert at_boost.time_s == pytest.approx(default.time_s, rel=1e-9)  # the boost clock is the default clock
    slow = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference", clock_mhz=boost / 2)
    assert slow.time_s > default.time_s and dict(zip(slow.op_ids, slow.sources))[op] == "measured"


def test_recommend_says_a_partly_measured_gpu_is_transferred(root):
    from opcost.model.prediction.predict import Predictor
    from opcost.model.prediction.recommend import summary_lines

    before = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference")
    op = before.op_ids[int(np.argmax(before.t_s * before.calls))]
    measure(root, {(op, "inference"): 2e-4})
    df = Predictor(paths=root, disk_cache=False).recommend(*NET, "inference", devices="H200,H100,T4")
    rows = df.set_index("device_config")
    assert rows.loc["H200", "source"] == "transferred" and rows.loc["H100", "source"] == "transferred"
    assert rows.loc["H200", "marks"].endswith("device partly measured")
    assert rows.loc["H100", "marks"].endswith("device transferred")
    # the T4's own ops are in the cross-device model's training set (`root`): an in-sample fit, not a transfer
    assert rows.loc["T4", "source"] == "fitted" and rows.loc["T4", "marks"].endswith("device fitted")
    calls = dict(zip(before.op_ids, before.calls))[op]
    shown = sum(t * c for o, t, c in zip(before.op_ids, before.t_s, before.calls) if o != op) + 2e-4 * calls
    assert rows.loc["H200", "measured_time_share"] == pytest.approx(2e-4 * calls / shown)
    assert rows.loc["T4", "measured_time_share"] == 0.0 and rows.loc["H100", "measured_time_share"] == 0.0
    assert any(line.startswith("device partly measured:") for line in summary_lines(df))


def test_a_measured_ops_gpu_time_is_its_kernel_in_the_queue(root):
    """Where the campaign timed an op's GPU apart (gpu_time_per_call_s), the table carries its median over the
    default-setting trials, and the step's queue runs that op's kernel at it: the GPU's busy time moves by
    scale x calls x (GPU time - wall time); the op still shows its measured wall time."""
    from opcost.model.crossdevice.measured import op_gpu_times, with_gpu_times
    from opcost.model.prediction.predict import Predictor

    before = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference")
    op = before.op_ids[int(np.argmax(before.t_s * before.calls))]
    measure(root, {(op, "inference"): 300e-6})
    wall = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference")
    timings = pd.DataFrame({
        "op_id": [op, op, op, op], "mode": ["inference"] * 4, "status": ["ok", "ok", "ok", "failed"],
        "clock_mhz": [None, None, 900, None], "power_limit_w": [None] * 4,
        "gpu_time_per_call_s": [100e-6, 120e-6, 1.0, 1.0],  # the 900 MHz and failed rows are not the default
    })  # fmt: skip
    f = root.measured_ops_dir / measured.FILE
    table = with_gpu_times(json.loads(f.read_text()), timings)
    f.write_text(json.dumps(table))
    assert op_gpu_times(root.measured_ops_dir, "H200", "inference") == {op: pytest.approx(110e-6)}
    gpu = Predictor(paths=root, disk_cache=False).predict(*NET, "H200", "inference")
    calls = dict(zip(gpu.op_ids, gpu.calls))[op]
    assert gpu.host.gpu_s - wall.host.gpu_s == pytest.approx(SCALE * calls * (110e-6 - 300e-6), rel=1e-9)
    assert dict(zip(gpu.op_ids, gpu.t_s))[op] == 300e-6 and gpu.host.host_s == pytest.approx(wall.host.host_s)


def test_a_measured_ops_kind_factor_corrects_the_transferred_ops_of_its_kind(root):
    """Few-shot (model/crossdevice/fewshot.py): one measured op with a cross-device row and a GPU time r x what the
    transfer says corrects every transferred op of its kind by r^((1 + s/(1+s)) / (1+s)) and of any other kind by
    r^(1/(1+s)) (s = SHRINK_OPS pseudo-ops; with one op both medians are log r), in the GPU's busy time."""
    from opcost.model.crossdevice import fewshot, xdevice_net
    from opcost.model.prediction import xdevice_predict
    from opcost.model.prediction.predict import Predictor

    pr = Predictor(paths=root, disk_cache=False)
    before = pr.predict(*BIG, "H200", "inference")
    net = pr.network(*BIG, mode="inference")
    convs = [i for i in before.op_ids if xdevice.xkind_of(net.records[i].kind) == "conv"]
    op = max(convs, key=lambda i: dict(zip(before.op_ids, before.t_s))[i])
    measure(root, {(op, "inference"): 300e-6})
    ((row, count),) = xdevice_net.op_rows(net.records[op])
    transferred = float(xdevice_predict.load(root.xdevice_model_dir).op.predict(
        pd.DataFrame([row]).assign(device_config="H200", wall_clock=0.0))[0])  # fmt: skip
    r, s = 3.0, fewshot.SHRINK_OPS
    f = root.measured_ops_dir / measured.FILE
    table = json.loads(f.read_text())
    table["devices"]["H200"]["modes"]["inference"][op] |= {"gpu_t_s": r * transferred, "row": row}
    f.write_text(json.dumps(table))
    assert measured.op_rows_measured(root.measured_ops_dir, "H200") == [(row, pytest.approx(r * transferred))]

    after = Predictor(paths=root, disk_cache=False).predict(*BIG, "H200", "inference")
    kind_f, other_f = r ** ((1 + s / (1 + s)) / (1 + s)), r ** (1 / (1 + s))
    b, a = dict(zip(before.op_ids, before.t_s)), dict(zip(after.op_ids, after.t_s))
    floor = SCALE * HOST_FLOOR * 1.01  # an op at its host cost shows that, not its kernel
    checked = {"conv": 0, "other": 0}
    for i in after.op_ids:
        if i == op or b[i] <= floor or b[i] * min(kind_f, other_f) <= floor:
            continue
        want = kind_f if i in convs else other_f
        assert a[i] == pytest.approx(b[i] * want, rel=1e-9), (i, net.records[i].kind)
        checked["conv" if i in convs else "other"] += 1
    assert min(checked.values()) >= 2, checked
    assert "corrected: 1 ops measured on H200" in after.note
    assert a[op] == 300e-6  # the measured op shows its measured wall time
