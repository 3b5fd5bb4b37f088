"""A new GPU from one measured network (model/crossdevice/fewshot.py): the kind factors, their shrinkage, the own ops,
the shrink weight, and the validation's folds (no held-out GPU's network reaches a composition fit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opcost.model.crossdevice import fewshot

KEY = {"batch": 1.0, "m": 0.0, "n": 0.0, "k": 0.0, "flops": 0.0, "numel": 1.0}


def test_kind_factors_known_answer():
    # conv: three ops at 2x, 2x, 16x the transfer (median 2x); relu: one at 0.5x; pooled over the four: log
    # ratios ln2 x (1, 1, 4, -1) -> median ln2 (their mean, 1.25 ln2, would let the 16x op pull every kind)
    xk = ["conv", "conv", "conv", "relu"]
    p = np.array([1.0, 2.0, 3.0, 4.0])
    m = p * np.array([2.0, 2.0, 16.0, 0.5])
    f = fewshot.kind_factors(xk, m, p, shrink=0.0)
    assert f == {"*": pytest.approx(2.0), "conv": pytest.approx(2.0), "relu": pytest.approx(0.5)}
    s = 4.0
    f = fewshot.kind_factors(xk, m, p, shrink=s)
    pooled = math.log(2.0) * 4 / (4 + s)
    assert f["*"] == pytest.approx(math.exp(pooled))
    assert f["conv"] == pytest.approx(math.exp((3 * math.log(2.0) + s * pooled) / (3 + s)))
    assert f["relu"] == pytest.approx(math.exp((-math.log(2.0) + s * pooled) / (1 + s)))
    assert fewshot.kind_factors(xk, [0.0] * 4, p) == {}  # nothing measured: no correction


def test_apply_factors_takes_the_pooled_factor_for_an_unmeasured_kind():
    f = {"*": 1.5, "conv": 2.0}
    got = fewshot.apply_factors(["conv", "add", "conv"], [1.0, 2.0, 3.0], f)
    assert got.tolist() == [2.0, 3.0, 6.0]
    assert fewshot.apply_factors(["conv"], [1.0], {}).tolist() == [1.0]


@settings(max_examples=60, deadline=None)
@given(c=st.floats(0.05, 20.0), n=st.integers(1, 40), s=st.floats(0.0, 50.0), seed=st.integers(0, 10**6))
def test_a_uniform_miss_is_corrected_by_its_shrunk_power(c, n, s, seed):
    """Every measured op missing by the same factor c: every kind's factor is c^w with w between the pooled
    shrinkage n/(n+s) and 1, never overshooting c, and the pooled factor is exactly c^(n/(n+s))."""
    rng = np.random.default_rng(seed)
    xk = rng.choice(["conv", "linear", "add"], n)
    p = rng.uniform(1e-6, 1e-3, n)
    f = fewshot.kind_factors(xk, c * p, p, shrink=s)
    w = n / (n + s)
    assert f["*"] == pytest.approx(c**w, rel=1e-9)
    lo, hi = sorted([c**w, c])
    for k in set(xk):
        assert lo * (1 - 1e-9) <= f[k] <= hi * (1 + 1e-9)


def test_corrected_takes_own_ops_and_factors_the_rest():
    rows = pd.DataFrame([{"xkind": "conv", **KEY, "bytes": b} for b in (10.0, 20.0, 30.0)])
    measured = pd.DataFrame([{"xkind": "conv", **KEY, "bytes": 20.0, "measured_s": 4.0, "predicted_s": 2.0}])
    got = fewshot.corrected(rows, np.array([1.0, 1.0, 1.0]), measured)
    f = fewshot.kind_factors(["conv"], [4.0], [2.0])["conv"]
    assert got.tolist() == [pytest.approx(f), 4.0, pytest.approx(f)]  # the same op (bytes 20) is the GPU's own


def test_op_keys_tell_ops_apart_by_every_key_column():
    base = {"xkind": "linear", **KEY, "bytes": 8.0}
    rows = pd.DataFrame([base] + [{**base, c: 7.0} for c in fewshot.KEY_COLUMNS[1:]] + [{**base, "xkind": "bmm"}])
    assert fewshot.op_keys(rows).nunique() == len(rows)


def test_shrink_weight_known_answers():
    # GPU biases +-0.2 (between variance 0.08) and no scatter within: one network tells its GPU's bias
    same = pd.DataFrame({"gpu": ["a", "a", "b", "b"], "log_error": [0.2, 0.2, -0.2, -0.2]})
    assert fewshot.shrink_weight(same, 1) == pytest.approx(1.0)
    # the same GPU means with scatter: within variance 0.02 per GPU
    scatter = pd.DataFrame({"gpu": ["a", "a", "b", "b"], "log_error": [0.3, 0.1, -0.1, -0.3]})
    vb, vw = 0.08, 0.02
    assert fewshot.shrink_weight(scatter, 1) == pytest.approx(vb / (vb + vw))
    assert fewshot.shrink_weight(scatter, 4) == pytest.approx(vb / (vb + vw / 4))
    # no bias between GPUs: a network's error is its own
    flat = pd.DataFrame({"gpu": ["a", "a", "b", "b"], "log_error": [0.1, -0.1, 0.1, -0.1]})
    assert fewshot.shrink_weight(flat, 3) == 0.0
    assert fewshot.network_scale([2.0, 8.0], [1.0, 2.0], 0.5) == pytest.approx(math.exp(0.5 * math.log(8) / 2))


def test_the_validation_never_fits_a_composition_on_the_held_out_gpus_networks(monkeypatch):
    """A spy on the composition fit: for held-out GPU g, no network of g reaches it; and on a GPU whose every
    op runs at 2x the transfer, one measured model's ops move every other answer towards the truth."""
    from opcost.model.crossdevice import xdevice_net

    seen: list[set[str]] = []
    real_fit = xdevice_net.fit_composition

    def spy(nets, *a, **k):
        seen.append(set(nets["gpu"]))
        return real_fit(nets, *a, **k)

    monkeypatch.setattr(xdevice_net, "fit_composition", spy)

    class Twice:  # the transfer: every op at its bytes / 1e9 s
        trained_on = ("X",)

        def predict(self, rows):
            return rows["bytes"].to_numpy(float) / 1e9

    nets, nodes = [], []
    for g, truth in (("G1", 2.0), ("G2", 1.0), ("G3", 1.0)):
        for j, model in enumerate(("m1", "m2", "m3")):
            cfg = f"{g}/{model}"
            b = np.array([1e5, 2e5, 3e5]) * (j + 1)
            t = truth * b / 1e9
            nets.append({"gpu": g, "device_config": g, "config": cfg, "model": model, "set": "s", "mode": "inference",
                         "measured_s": float(t.sum()), "params": 0.0, "host": "none"})  # fmt: skip
            for bb, tt in zip(b, t):
                nodes.append({"xkind": "conv", **KEY, "bytes": bb, "config": cfg, "gpu": g, "device_config": g,
                              "calls": 1.0, "measured_fw_s": tt, "measured_bw_s": np.nan})  # fmt: skip
    nets, nodes = pd.DataFrame(nets), pd.DataFrame(nodes)
    empty = pd.DataFrame(columns=["device_config", "xkind", "t_s", "wall_clock"])
    logo = pd.DataFrame({"gpu": ["G2", "G3"], "measured_s": [1.0, 1.0], "predicted_s": [1.0, 1.0]})
    df = fewshot.evaluate(nets, nodes, empty, np.zeros(0, bool), {"G1": Twice()}, logo)
    assert seen and all("G1" not in s for s in seen)
    assert len(df) == 3 * 2  # each of 3 measured models, the other 2 predicted
    # every op of G1 runs at 2x the transfer: without, every answer is short; with a measured model's ops (the
    # shared op is its own, the rest corrected by the shrunk factor) every answer moves towards the truth
    assert (df["without_s"] < df["measured_s"]).all()
    assert (df["ops_error_pct"].abs() < df["without_error_pct"].abs()).all()
    assert (df["ops_s"] <= df["measured_s"] * (1 + 1e-9)).all()  # shrunk: never past the truth


def test_power_level_is_the_geometric_mean_ratio():
    assert fewshot.power_level([200.0, 50.0], [100.0, 100.0]) == pytest.approx(1.0)  # x2 and x0.5
    assert fewshot.power_level([300.0, 300.0], [100.0, 150.0]) == pytest.approx(math.sqrt(3.0 * 2.0))
    assert fewshot.power_level([], []) == 1.0 and fewshot.power_level([np.nan], [100.0]) == 1.0


def test_energy_table_takes_the_level_of_the_measured_model_only():
    """GPU G draws 1.5x the predicted power on every network: with any one model measured, every other network's
    energy is exact (its time is exact here); the measured model's own networks are never scored."""
    en = pd.DataFrame({
        "gpu": "G", "set_id": ["a:1", "a:2", "b:1", "c:1"], "mode": "inference",
        "predicted_s": [1.0, 2.0, 3.0, 4.0], "measured_w": [150.0, 150.0, 300.0, 75.0],
        "predicted_w": [100.0, 100.0, 200.0, 50.0],
    })  # fmt: skip
    en["measured_j"] = en["measured_w"] * en["predicted_s"]
    en["predicted_j"] = en["predicted_w"] * en["predicted_s"]
    t = fewshot.energy_table(en)
    assert sorted(zip(t["measured_model"], t["set_id"])) == [
        ("a", "b:1"), ("a", "c:1"), ("b", "a:1"), ("b", "a:2"), ("b", "c:1"), ("c", "a:1"), ("c", "a:2"), ("c", "b:1")
    ]  # fmt: skip
    assert t["with_error_pct"].abs().max() == pytest.approx(0.0, abs=1e-9)
    assert t["without_error_pct"].to_numpy() == pytest.approx(np.full(len(t), -100 / 3))
    s = fewshot.energy_summary(t)["G"]
    assert s["choices"] == 3 and s["energy_mape_with"] == pytest.approx(0.0, abs=1e-9)
    assert s["energy_mape_without"] == pytest.approx(100 / 3) and s["power_mape_without"] == pytest.approx(100 / 3)
