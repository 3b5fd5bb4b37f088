"""The report's cross-device section (validate/xdevice.py): known-answer error tables, thesis network
energy predicted entirely transferred with a power model that never saw the held-out GPU (a spy on
the learner), and the index tables with NeuSight's anchors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcost.model.clocks.xpower import PowerModel
from opcost.validate import xdevice as xv


def logo_nets() -> pd.DataFrame:
    """Two thesis GPUs and one NeuSight GPU; predictions off by known factors."""
    rows = []
    for gpu, tdp_cfg, factors in (("A30", "A30", (1.1, 0.8)), ("RTX2080Ti", "RTX2080Ti", (1.5, 1.0))):
        for i, (mode, f) in enumerate(zip(("inference", "training"), factors)):
            t = 0.01 * (i + 1)
            rows.append({"gpu": gpu, "device_config": tdp_cfg, "config": f"{tdp_cfg}/{mode}/net{i}:8x3x32x32",
                         "set": "thesis", "mode": mode, "measured_s": t, "predicted_s": f * t})  # fmt: skip
    rows.append({"gpu": "V100", "device_config": "V100_no_tf32", "config": "V100/gpt2", "set": "neusight",
                 "mode": "inference", "measured_s": 2.0, "predicted_s": 1.9})  # fmt: skip
    return pd.DataFrame(rows)


def power_rows() -> pd.DataFrame:
    """xpower.all_rows-like rows: the thesis networks' measured power and busy share, plus another GPU."""
    out = []
    for dev, cfg, tdp in (("A30", "A30", 165.0), ("RTX2080Ti", "RTX2080Ti", 250.0)):
        for i, mode in enumerate(("inference", "training")):
            out.append({"kind": "absolute", "source": "thesis-networks", "device": dev, "tdp": tdp,
                        "workload": f"{cfg}-{mode}|net{i}:8x3x32x32", "u": 0.2 + 0.1 * i, "p": 100.0 + 10 * i,
                        "t": 0.01 * (i + 1)})  # fmt: skip
    out.append({"kind": "absolute", "source": "nv-dvfs-kernels", "device": "V100", "tdp": 250.0, "workload": "k",
                "u": 0.5, "p": 200.0, "t": 1.0})  # fmt: skip
    return pd.DataFrame(out)


def test_network_errors_per_gpu_are_the_known_ones():
    err = xv.networks_by_gpu(logo_nets()).set_index(["set", "gpu"])
    assert err.loc[("thesis", "A30"), "mape"] == pytest.approx(15.0)  # +10 %, -20 %
    assert err.loc[("thesis", "A30"), "mdape"] == pytest.approx(15.0)
    # weighted: (0.1 * 0.01 + 0.2 * 0.02) / 0.03
    assert err.loc[("thesis", "A30"), "weighted"] == pytest.approx(100 * 0.005 / 0.03)
    assert err.loc[("thesis", "RTX2080Ti"), "mape"] == pytest.approx(25.0)
    assert err.loc[("thesis", "all"), "n"] == 4 and err.loc[("thesis", "all"), "mape"] == pytest.approx(20.0)
    assert err.loc[("neusight", "V100"), "mape"] == pytest.approx(5.0)


def test_transferred_energy_uses_a_power_model_that_never_saw_the_gpu():
    seen: dict[frozenset, int] = {}

    def spy(train: pd.DataFrame) -> PowerModel:
        seen[frozenset(train["device"])] = len(train)
        return PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0, trained_on=sorted(set(train["device"])))  # P = TDP

    rows = power_rows()
    en = xv.energy_logo(logo_nets(), rows, learner=spy)
    assert set(seen) == {frozenset({"RTX2080Ti", "V100"}), frozenset({"A30", "V100"})}
    assert set(en["gpu"]) == {"A30", "RTX2080Ti"} and len(en) == 4  # NeuSight rows have no power: not scored
    for r in en.itertuples():
        assert r.gpu not in r.power_fitted_on.split(",")
        tdp = 165.0 if r.gpu == "A30" else 250.0
        assert r.predicted_j == pytest.approx(r.predicted_s * tdp)  # transferred time x transferred power
        assert r.measured_j == pytest.approx(r.measured_w * r.measured_s)
    a30 = en[en["gpu"] == "A30"].sort_values("mode")
    assert list(a30["measured_j"]) == pytest.approx([100.0 * 0.01, 110.0 * 0.02])
    assert list(a30["predicted_j"]) == pytest.approx([165.0 * 1.1 * 0.01, 165.0 * 0.8 * 0.02])


def test_transferred_busy_share_is_roofline_time_over_predicted_time():
    # P = TDP * u: the energy is then TDP * roofline time, whatever the predicted time
    en = xv.energy_logo(logo_nets(), power_rows(), learner=lambda tr: PowerModel(idle=0.0, a=0.0, b=1.0, c=1.0))
    rows = power_rows().set_index("workload")
    for r in en.itertuples():
        w = rows.loc[f"{r.device_config}-{r.mode}|{r.set_id}"]
        assert r.busy_share == pytest.approx(w["u"] * w["t"] / r.predicted_s)
        assert r.predicted_j == pytest.approx(w["tdp"] * w["u"] * w["t"])


def test_energy_summary_and_index_tables():
    en = xv.energy_logo(logo_nets(), power_rows(), learner=lambda tr: PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0))
    s = xv.energy_summary(en)
    ape = np.abs(en["predicted_j"] / en["measured_j"] - 1)
    assert s["all"]["n"] == 4 and s["all"]["mape"] == pytest.approx(100 * ape.mean())
    assert s["A30"]["time_mape"] == pytest.approx(15.0)
    ops = pd.DataFrame([{"gpu": g, "group": k, "n": 10, "mape": 20.0, "mdape": 18.0, "twe": 19.0, "r2_log": 0.9,
                         "goal_mape": 12} for g in ("all", "T4") for k in ("bmm", "layernorm")])  # fmt: skip
    power = pd.DataFrame(
        [
            {
                "device": "A30",
                "kind": "absolute",
                "source": "thesis-networks",
                "rows": 3,
                "power_mape": 30.0,
                "power_mdape": 29.0,
                "energy_time_weighted": 31.0,
                "energy_r2": 0.5,
            }
        ]
    )
    text = "\n".join(xv.index_lines(ops, xv.networks_by_gpu(logo_nets()), power, s))
    assert "| bmm | 10 | 20.0 | 18.0 | 19.0 | 0.90 | 13.8 | 12.0 |" in text
    assert "| layernorm | 10 | 20.0 | 18.0 | 19.0 | 0.90 | 56.7 | 12.0 |" in text
    assert "| thesis | A30 | 2 | 15.0 |" in text and "| A30 | absolute | thesis-networks | 3 | 30.0 |" in text
    assert f"| all | 4 | {s['all']['mape']:.1f} |" in text


def test_figures_are_written(tmp_path):
    figs: list = []
    xv.fig_networks(logo_nets(), tmp_path / "n.png", figs)
    en = xv.energy_logo(logo_nets(), power_rows(), learner=lambda tr: PowerModel())
    xv.fig_energy(en, tmp_path / "e.png", figs)
    assert figs == [tmp_path / "n.png", tmp_path / "e.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figs)


def test_energy_from_one_measured_network_is_wired_from_the_transferred_energy_rows():
    """validate's few-shot energy table takes the transferred rows as they are: with P = TDP (A30: 165 W
    predicted, 100 and 110 W measured), measuring net0 sets the level 100/165 for net1, whose energy is then its
    predicted time x 100 W (time +-20 % off as in logo_nets), and the other way round."""
    from opcost.model.crossdevice import fewshot

    en = xv.energy_logo(logo_nets(), power_rows(), learner=lambda tr: PowerModel(idle=0.5, a=1.0, b=0.0, c=1.0))
    t = fewshot.energy_table(en)
    a30 = t[t["gpu"] == "A30"].set_index("measured_model")
    assert a30.loc["net0", "level"] == pytest.approx(100.0 / 165.0)
    assert a30.loc["net0", "with_j"] == pytest.approx(100.0 * 0.8 * 0.02)  # net1: its predicted time x net0's level
    assert a30.loc["net1", "with_j"] == pytest.approx(110.0 * 1.1 * 0.01)
    s = fewshot.energy_summary(t)["A30"]
    assert s["energy_mape_with"] == pytest.approx(
        100 * (abs(100 * 0.8 * 0.02 / (110 * 0.02) - 1) + abs(110 * 1.1 * 0.01 / (100 * 0.01) - 1)) / 2
    )
