"""The cross-device power model (model/clocks/xpower.py) and the clock model's zero-parameter guesses and power cap.

Known answers on synthetic devices whose power follows a known law, a spy proving no held-out GPU's row
reaches a fit, and the interface the cross-device time model calls."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from builders import transferred_ops
from opcost.devices import DEVICES, device_config
from opcost.errors import OpcostError
from opcost.model.clocks import clockval, xpower
from opcost.model.clocks.clock import ClockModel, memory_share, time_ratio
from opcost.model.clocks.xpower import PowerModel

TRUE = PowerModel(idle=0.2, a=0.15, b=0.7, c=0.8, gamma=1.7)
GPUS = ("A40", "V100", "RTX8000", "P100")


def synthetic_rows(model: PowerModel = TRUE, seed: int = 0) -> pd.DataFrame:
    """Absolute rows (known busy share, several clocks) and clock/power-limit curves on four table GPUs,
    power exactly the law of `model`."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in GPUS:
        dev = DEVICES[name]
        for i in range(40):
            u, x = float(rng.uniform(0.02, 1.0)), float(rng.uniform(0.5, 1.0))
            p = float(model.power(u, x, dev.tdp_w, np.nan))
            rows.append(dict(kind="absolute", source="syn", device=name, workload=f"a{i}", curve=f"a{i}{name}",
                             u=u, f=x * dev.boost_clock_mhz, cap=np.nan, p=p, t=1.0))  # fmt: skip
        for j in range(6):
            u = float(rng.uniform(0.05, 1.0))
            for x in np.linspace(0.5, 1.0, 6):
                p = float(model.power(u, x, dev.tdp_w, np.nan))
                rows.append(dict(kind="sweep", source="sweep", device=name, workload=f"k{j}", curve=f"{name}|k{j}",
                                 u=np.nan, f=x * dev.boost_clock_mhz, cap=np.nan, p=p, t=1.0))  # fmt: skip
    df = pd.DataFrame(rows)
    df["tdp"] = df["device"].map({k: v.tdp_w for k, v in DEVICES.items()}).astype(float)
    df["f_boost"] = df["device"].map({k: v.boost_clock_mhz for k, v in DEVICES.items()}).astype(float)
    df["x"] = df["f"] / df["f_boost"]
    sweep = df["kind"] == "sweep"
    ref = df[sweep].loc[df[sweep].groupby("curve")["f"].idxmax()]
    df["is_ref"] = df.index.isin(ref.index)
    df = df.merge(ref[["curve", "p", "x"]].rename(columns={"p": "p_ref", "x": "x_ref"}), on="curve", how="left")
    return df


def test_fit_recovers_a_known_power_law_and_predicts_held_out_gpus_exactly():
    rows = synthetic_rows()
    m = xpower.fit(rows)
    for k in xpower.PARAMS:
        assert getattr(m, k) == pytest.approx(getattr(TRUE, k), abs=2e-3), k
    pred, _ = xpower.leave_one_gpu_out(rows)
    table = xpower.scores(pred)
    assert set(table["device"]) == set(GPUS)
    assert table["power_mape"].max() < 0.2  # % : every held-out GPU predicted from the others' law
    # the reference point of a curve carries its level, so curves are exact at any power law
    off = pred[(pred["kind"] == "sweep") & ~pred["is_ref"]]
    assert np.allclose(off["p_hat"], off["p"], rtol=2e-3)


def test_a_wrong_law_is_seen_in_the_scores():
    """The scores are not flattering: data from another law, scored with a model fitted elsewhere, err."""
    rows = synthetic_rows(PowerModel(idle=0.05, a=0.6, b=0.1, c=1.0, gamma=3.0))
    held = rows[rows["device"] == "A40"]
    p_hat = xpower.predict_rows(TRUE, held)
    a = held["kind"] == "absolute"
    assert float(np.mean(np.abs(p_hat[a.to_numpy()] / held.loc[a, "p"] - 1))) > 0.1


def test_no_held_out_gpu_row_reaches_a_fit():
    rows = synthetic_rows()
    seen_by_fit: list[set[str]] = []

    def spy(train: pd.DataFrame) -> PowerModel:
        seen_by_fit.append(set(train["device"]))
        return xpower.fit(train)

    pred, seen = xpower.leave_one_gpu_out(rows, spy)
    assert len(seen_by_fit) == len(GPUS)
    for held, devices in zip(sorted(GPUS), seen_by_fit):
        assert held not in devices and devices == set(GPUS) - {held}
        assert seen[held] == sorted(devices)
    assert set(pred["device"]) == set(GPUS)


def test_power_cap_holds_and_a_limit_below_tdp_caps_the_power():
    m = PowerModel(idle=0.1, a=1.0, b=0.0, c=1.0, gamma=2.0)  # level 1: at the boost clock exactly the TDP
    assert float(m.power(0.5, 1.0, 300.0, np.nan)) == pytest.approx(300.0)
    assert float(m.power(0.5, 1.2, 300.0, np.nan)) == 300.0  # above the boost: the TDP holds
    assert float(m.power(0.5, 1.0, 300.0, 200.0)) == 200.0  # a power limit caps it
    # half the clock: idle + dynamic x 0.25
    assert float(m.power(0.5, 0.5, 300.0, np.nan)) == pytest.approx(300 * (0.1 + 0.9 * 0.25))
    # the level a measured power implies inverts the form
    d = m.level_from_power(m.power_from_level(0.4, 0.7, 250.0, np.nan), 0.7, 250.0)
    assert float(d) == pytest.approx(0.4)


def test_interface_for_the_cross_device_time_model(tmp_path):
    TRUE.rel_err90 = 0.12
    TRUE.save(tmp_path)
    m = PowerModel.load(tmp_path)
    dev = DEVICES["H100"]
    p, err = m.predict("H100", np.array([0.0, 0.5, 1.0]), None, "inference")
    assert err == 0.12 and p.shape == (3,)
    assert p == pytest.approx(TRUE.power(np.array([0.0, 0.5, 1.0]), 1.0, dev.tdp_w, dev.tdp_w))
    assert np.all(np.diff(p) > 0)  # busier draws more
    lo, _ = m.predict("H100", np.array([0.5]), dev.clock_range_mhz[0], "training")
    assert lo[0] < p[1]  # a lower clock draws less
    with pytest.raises(OpcostError, match="unknown device 'Z9'"):
        m.predict("Z9", np.array([0.5]))
    with pytest.raises(OpcostError, match="mode 'train'"):
        m.predict("H100", np.array([0.5]), None, "train")
    with pytest.raises(OpcostError, match="outside the H100's range"):
        m.predict("H100", np.array([0.5]), 10.0)
    with pytest.raises(OpcostError, match="busy_share"):
        m.predict("H100", np.array([np.nan]))
    with pytest.raises(OpcostError, match=r"^busy_share must hold finite numbers >= 0"):  # a negative share too
        m.predict("H100", np.array([0.5, -0.1]))
    top, _ = m.predict("H100", np.array([0.5]), dev.clock_range_mhz[1], "inference")  # both ends of the range
    assert np.isfinite(top[0]) and top[0] >= lo[0]
    raw = json.loads((tmp_path / xpower.XPOWER_MODEL_FILE).read_text())
    (tmp_path / xpower.XPOWER_MODEL_FILE).write_text(json.dumps({**raw, "idle": 1.5}))
    with pytest.raises(OpcostError, match="out of range"):
        PowerModel.load(tmp_path)
    (tmp_path / xpower.XPOWER_MODEL_FILE).write_text("not json")
    with pytest.raises(OpcostError, match="not JSON"):
        PowerModel.load(tmp_path)


def test_perseus_layer_flops_by_hand():
    # GPT-3: 96 layers / 8 stages / tp 8 = 1.5 layers per GPU; 2048 tokens x (24 h^2 + 4 s h) FLOPs
    h, s = 12288, 2048
    flops, _ = xpower.perseus_flops_bytes("gpt3-175b/stage3/forward")
    assert flops == pytest.approx(1.5 * 2048 * (24 * h * h + 4 * s * h))
    back, _ = xpower.perseus_flops_bytes("gpt3-175b/stage3/backward")
    assert back == pytest.approx(2 * flops)


# -- the clock model against the guesses -----------------------------------------------------------
def curve_points(share: float, power_exp: float) -> pd.DataFrame:
    f = np.array([600.0, 800.0, 1000.0, 1200.0])
    t = 2.0 * time_ratio(f, 1200.0, share)
    p = 200.0 * (f / 1200.0) ** power_exp
    return pd.DataFrame({"curve": "c", "source": "s", "device": "V100", "workload": "w", "kernel": "w", "f": f, "t": t,
                         "p": p, "e": t * p, "f_ref": 1200.0, "t_ref": 2.0, "p_ref": 200.0, "tdp": 250.0,
                         "is_ref": f == 1200.0})  # fmt: skip


def test_a_guess_that_matches_the_law_scores_zero_and_the_others_do_not():
    pts = curve_points(0.5, 1.0)
    g = clockval.guess_scores(pts)
    exact = g[g["learner"] == "guess:half/prop_f"].iloc[0]
    assert exact["time_mape"] == pytest.approx(0.0, abs=1e-9) and exact["energy_mape"] == pytest.approx(0.0, abs=1e-9)
    assert (g.loc[g["learner"] != "guess:half/prop_f", "energy_mape"] > 1).all()
    model = g[g["learner"] == "guess:compute/prop_f"].assign(learner="physical")
    versus = clockval.beats_guesses(model, g)
    assert not versus["beats_time_mape"].iloc[0] and versus["best_guess_time_mape_by"].iloc[0] == "guess:half/prop_f"


def test_a_capped_reference_ran_at_a_throttled_clock():
    m = ClockModel(static_frac=0.3, gamma=2.0, cap_k=0.25)
    # P_ref at the TDP: the reference ran at f_base + 0.25 (f_ref - f_base) = 1000 + 0.25 x 800 = 1200 MHz
    assert float(m.reached_clock(1800.0, 1000.0, 299.0, 300.0)) == pytest.approx(1200.0)
    assert float(m.reached_clock(1800.0, 1000.0, 200.0, 300.0)) == 1800.0  # well below the TDP: not capped
    assert float(m.reached_clock(1800.0, 1000.0, 470.0, 400.0)) == 1800.0  # a board limit above the TDP
    t, p, _ = m.predict(np.array([600.0, 1200.0, 1500.0, 1800.0]), 1800.0, 1.0, 299.0, 300.0, 1.0, 1000.0)
    assert t == pytest.approx([2.0, 1.0, 1.0, 1.0])  # compute-bound below the reached clock, flat above
    assert p[1:] == pytest.approx([299.0] * 3)


def test_memory_share_is_the_time_the_dram_is_idle():
    # 1 GB at 1 TB/s is 1 ms of a 4 ms op: three quarters scale with the core clock
    assert float(memory_share(1e9, 1e12, 4e-3)) == pytest.approx(0.75)
    assert float(memory_share(1e10, 1e12, 4e-3)) == 0.0  # more bytes than the time allows: all memory


def test_a_gpus_measured_networks_set_its_power_level(tmp_path):
    """device_levels: on a GPU whose measured networks draw 1.3x the law, the level is 1.3 (geometric mean), from
    network rows only; answers on that GPU carry it, capped at the TDP; other GPUs' answers do not move; the LOGO
    scores never use it; a level that is not positive is refused on load."""
    rows = synthetic_rows()
    net = rows[(rows["kind"] == "absolute") & (rows["device"] == "V100")].head(6).copy()
    net["source"], net["p"] = xpower.NETWORK_SOURCE, net["p"] * np.array([1.2, 1.4, 1.3, 1.3, 1.2, 1.4])
    rows = pd.concat([rows, net], ignore_index=True)
    levels = xpower.device_levels(TRUE, rows)
    assert list(levels) == ["V100"] and levels["V100"]["networks"] == 6
    assert levels["V100"]["factor"] == pytest.approx(float(np.exp(np.mean(np.log([1.2, 1.4, 1.3, 1.3, 1.2, 1.4])))))
    m = PowerModel(**{k: getattr(TRUE, k) for k in xpower.PARAMS}, levels=levels)
    m.save(tmp_path)
    m = PowerModel.load(tmp_path)
    u = np.array([0.05, 0.3, 1.0])
    base = TRUE.power(u, 1.0, DEVICES["V100"].tdp_w, DEVICES["V100"].tdp_w)
    got, _ = m.predict("V100", u)
    assert got == pytest.approx(np.minimum(base * levels["V100"]["factor"], DEVICES["V100"].tdp_w))
    assert m.predict("A40", u)[0] == pytest.approx(TRUE.predict("A40", u)[0])
    pred, _ = xpower.leave_one_gpu_out(rows, lambda r: m)
    held = pred[pred["device"] == "V100"]
    assert held["p_hat"].to_numpy() == pytest.approx(xpower.predict_rows(TRUE, held))
    raw = json.loads((tmp_path / xpower.XPOWER_MODEL_FILE).read_text())
    raw["levels"]["V100"]["factor"] = 0.0
    (tmp_path / xpower.XPOWER_MODEL_FILE).write_text(json.dumps(raw))
    with pytest.raises(OpcostError, match="power level factor is not positive"):
        PowerModel.load(tmp_path)


def test_matmul_checks_are_absolute_rows_at_their_flop_rate(tmp_path):
    """An energy counter check (measure/energycheck.py) of 500 fp32 4096^2 matmuls in 2 s at 600 W on an H200:
    busy share = 2 x 4096^3 x 500 FLOPs / FP32 peak / 2 s; the same check landed twice is one row; a device the
    table does not know, or a check without its counts, gives none."""
    check = {
        "device_name": "NVIDIA H200",
        "matmul_size": 4096,
        "matmuls": 500,
        "seconds": 2.0,
        "counter_power_w": 600.0,
    }
    for name, body in (("a", check), ("b", check), ("c", {**check, "device_name": "Some GPU"}),
                       ("d", {k: v for k, v in check.items() if k != "matmuls"})):  # fmt: skip
        (tmp_path / name).mkdir()
        (tmp_path / name / xpower.CHECK_FILE).write_text(json.dumps(body))
    rows = xpower.check_rows(tmp_path)
    assert len(rows) == 1 and rows.loc[0, "device"] == "H200" and rows.loc[0, "source"] == xpower.MATMUL_SOURCE
    assert rows.loc[0, "u"] == pytest.approx(2 * 4096**3 * 500 / DEVICES["H200"].fp32_flops / 2.0)
    assert (rows.loc[0, "p"], rows.loc[0, "t"]) == (600.0, pytest.approx(2.0 / 500))
    assert xpower.check_rows(None).empty


@pytest.mark.parametrize("mode, work", [("inference", 1.0), ("training", 3.0)])
def test_a_transferred_training_step_counts_its_backward_in_the_busy_share(tmp_path, mode, work):
    """A transferred answer's power at the busy share the power model was fitted on: the training rows count 3x the
    forward's roofline work (backward = 2x forward, `thesis_rows`), so a training step's busy share is 3x its
    forward ops' roofline time over its time. Two calls of an H100 matmul of 1e12 FLOPs (compute-bound, FP32 peak
    67 TFLOP/s) in a 0.1 s step: u = work x 2e12 / 67e12 / 0.1; power = 700 W x (0.2 + 0.8 x 0.5 u) (a = 0, b = 0.5,
    c = 1). Counting the forward alone had drawn less power in training than in inference at the same time."""
    from opcost.model.basis.features import OpRecord
    from opcost.model.prediction import xdevice_predict

    PowerModel(idle=0.2, a=0.0, b=0.5, c=1.0, gamma=1.0, rel_err90=0.1).save(tmp_path / "models" / "xpower")
    rec = OpRecord("mm", "Linear", {}, (1024, 1024), 1024 * 1024,
                   {"flops": 1e12, "bytes_read": 1e6, "bytes_written": 1e6})  # fmt: skip
    r = transferred_ops([rec], [2.0], 0.1, (0.08, 0.12))
    en, note = xdevice_predict.energy(tmp_path, r, device_config("H100"), mode)
    assert en is not None
    u = work * 2 * 1e12 / 67e12 / 0.1
    assert xpower.work_factor(mode) == work and DEVICES["H100"].fp32_flops == 67e12
    assert en.power_w == pytest.approx(700 * (0.2 + 0.8 * 0.5 * u))
    assert en.energy_j == pytest.approx(en.power_w * 0.1)
    assert f"busy share {u:.2f}" in note and ("backward" in note) == (mode == "training")
