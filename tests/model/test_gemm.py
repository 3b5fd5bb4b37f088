"""Known answers for model/gemm.py's depthwise baseline (the `physical` feature set).

Synthetic depthwise convolutions (real specs, real paper costs) whose time is a known law: the
launch floor plus FLOPs / (A30 FP32 peak x E_TRUE), the same law at every kernel size. The fit must
recover E_TRUE, predict a kernel size it never saw from it (the case ConvNeXt's 7x7 and EfficientNet's
3x3 / 5x5 layers are to each other with a family held out), learn it only from rows it trains on,
and a compiled bundle model must give what the library fit gives.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from torch import nn

from opcost.model import fit, gemm
from opcost.model.bundle import Bundle
from opcost.params.train import TrainParams
from test_known_answers import catalog_row, module_spec

FP32_A30 = 10.3e12  # FLOP/s, A30 datasheet
E_TRUE = 0.08  # depthwise convolutions' fraction of the FP32 peak in the generator
FLOOR = 1e-5  # s: the launch floor (three no-ops take exactly this time)
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 20}, xgboost={"n_estimators": 20})


def test_depthwise_is_groups_equal_in_channels():
    assert gemm.is_depthwise("Conv2d", {"groups": 32, "in_channels": 32, "out_channels": 32})
    assert not gemm.is_depthwise("Conv2d", {"groups": 1, "in_channels": 32})
    assert not gemm.is_depthwise("Conv2d", {"groups": 4, "in_channels": 32})  # grouped, still a GEMM per group
    assert not gemm.is_depthwise("Linear", {"groups": 32, "in_channels": 32})


def test_efficiency_and_baseline_are_the_known_figures():
    compute = np.array([1e-4, 2e-4, 4e-4])
    assert gemm.depthwise_efficiency(compute, compute / E_TRUE) == pytest.approx(E_TRUE, rel=1e-12)
    assert gemm.depthwise_efficiency(compute, FLOOR + compute / E_TRUE, FLOOR) == pytest.approx(E_TRUE, rel=1e-12)
    assert gemm.depthwise_efficiency(np.zeros(0), np.zeros(0)) == 0.0  # nothing to learn from: no baseline
    roof = np.array([5e-4, 5e-4, 5e-4])
    base = gemm.baseline_s(roof, np.array([True, True, False]), np.array([1e-5, 1e-4, 1e-4]), 0.1)
    assert base.tolist() == pytest.approx([5e-4, 1e-3, 5e-4])  # max(roofline, compute / e); non-depthwise as is
    assert gemm.fp32_compute_s(10.3e12, "A30") == pytest.approx(1.0)


def depthwise_target() -> fit.TargetData:
    """Depthwise convolutions at kernel 7 (family `big`, as ConvNeXt) and 3 and 5 (family `small`, as
    EfficientNet), time = FLOOR + FLOPs / (FP32 peak x E_TRUE), plus a few dense 1x1 convolutions."""
    rows = []
    for k, fam in ((7, "big"), (3, "small"), (5, "small")):
        for j, (c, hw) in enumerate([(32, 56), (64, 28), (96, 40), (128, 14), (48, 64), (160, 20), (24, 90)]):
            conv = nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False)
            row = catalog_row(module_spec(conv, (8, c, hw, hw)))
            rows.append(row | {"t_s": FLOOR + row["flops"] / (FP32_A30 * E_TRUE), "families": [fam],
                               "layer_id": f"dw{k}-{j}"})  # fmt: skip
    for j, (c, hw) in enumerate([(32, 56), (64, 28), (128, 14), (256, 7)]):
        row = catalog_row(module_spec(nn.Conv2d(c, 2 * c, 1, bias=False), (8, c, hw, hw)))
        rows.append(row | {"t_s": FLOOR + row["flops"] / 20e12, "families": [], "layer_id": f"pw{j}"})
    for j in range(3):  # no-ops at the floor: the 2nd percentile of the times, the floor `fit` takes off
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": FLOOR, "families": [], "layer_id": f"N{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, "inference", "A30")


def test_fit_recovers_the_efficiency_and_predicts_an_unseen_kernel_size():
    data = depthwise_target()
    f = fit.fit_model(data, "rf", "physical", "time", np.arange(data.n), SMALL)
    assert f.dw_efficiency == pytest.approx(E_TRUE, rel=1e-9)
    res = fit.cross_validate(data, "rf", "physical", "time", "family", SMALL)
    small = np.isin(res["rows"], np.where([fs == ["small"] for fs in data.families])[0])
    ape = np.abs(res["predicted"] / res["measured"] - 1)[small]
    # 3x3 and 5x5 from 7x7 only: the law, not the kernel size (measured: 4-12 %, the trees' residual
    # splits on kernel size that put some unseen rows with the dense convolutions)
    assert ape.max() < 0.15
    # the plain roofline target cannot carry the law across kernel sizes (why the baseline exists):
    # measured +42 to +77 %, as EfficientNet's +41 % with ConvNeXt's 7x7 layers to learn from
    old = fit.cross_validate(data, "rf", "improved", "time", "family", SMALL)
    assert (old["predicted"] / old["measured"] - 1)[small].min() > 0.3


def test_the_efficiency_is_learnt_from_training_rows_only(monkeypatch):
    data = depthwise_target()
    seen: list[np.ndarray] = []
    real = gemm.depthwise_efficiency

    def spy(compute_s, t_s, floor_s=0.0):
        seen.append(np.asarray(compute_s).copy())
        return real(compute_s, t_s, floor_s)

    monkeypatch.setattr(gemm, "depthwise_efficiency", spy)
    folds = fit.folds_of(data, "family", SMALL)
    fit.cross_validate(data, "rf", "physical", "time", "family", SMALL)
    assert len(seen) == len(folds) == 2
    for (_, _, test), compute in zip(folds, seen):
        held = set(np.round(data.dw_compute[test], 15))
        assert len(compute) and not held & set(np.round(compute, 15)), "a held-out family's row reached the fit"


def test_a_saved_bundle_predicts_what_the_fit_predicts(tmp_path):
    data = depthwise_target()
    qm = fit.final_model(data, "rf", "physical", "time", SMALL)
    assert qm.encoding.dw_efficiency == pytest.approx(E_TRUE, rel=1e-9)
    f = fit.fit_model(data, "rf", "physical", "time", np.arange(data.n), SMALL)
    work = np.where(~data.noop)[0]  # no-ops are costed at the floor by the costing layer, not the trees
    items = [(data.records[i], None) for i in work]
    expected = fit.predict_rows(data, f, work)
    assert qm.predict(items) == pytest.approx(expected, rel=1e-6)
    b = Bundle(target="A30-inference", device_config="A30", mode="inference", phase="forward", models={"time": qm},
               kinds=("Conv2d",), data_version="x", bundle_hash="y", floor_s=FLOOR)  # fmt: skip
    b.save(tmp_path)
    loaded = Bundle.load(tmp_path).models["time"]
    assert loaded.encoding.dw_efficiency == pytest.approx(qm.encoding.dw_efficiency)
    assert loaded.predict(items) == pytest.approx(expected, rel=1e-6)
