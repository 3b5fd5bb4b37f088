"""Known answers for model/basis/backward.py: the training baselines of depthwise convolutions and Linear layers.

Synthetic training rows (real specs, real paper costs) whose depthwise convolutions take a known law:
the launch floor plus (2 + kh x kw) passes over their forward memory time at E_BW of the bandwidth, at
every kernel size (the thesis A30's ~15 / ~32 / ~60 x memory time at 3x3 / 5x5 / 7x7); compute-bound
Linear layers take three GEMMs of their forward FLOPs at E_MM of the FP32 peak, on 4-D (ConvNeXt) and
3-D (Swin) inputs alike. The fit must
recover E_BW from its own fit rows only, predict a kernel size it never saw exactly (ConvNeXt's 7x7
against EfficientNet's 3x3 and 5x5 with a family held out), leave inference alone, and a saved bundle
and the network layer's library model must predict what the fit predicts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import catalog_row, module_spec
from opcost.devices import find_device
from opcost.model.basis import backward
from opcost.model.basis.physics import compute_memory_s
from opcost.model.composition.bundle import Bundle
from opcost.model.training import fit
from opcost.model.training.netval import LibraryModel
from opcost.params.train import TrainParams

E_BW = 0.8  # the passes' fraction of the bandwidth in the generator
E_MM = 0.7  # the Linear layers' GEMMs' fraction of the FP32 peak in the generator
FP32_A30 = 10.3e12  # FLOP/s, A30 datasheet (Linear layers: cuBLAS on the FP32 units)
FLOOR = 1e-4  # s: the launch floor (three no-ops take exactly this time)
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 20}, xgboost={"n_estimators": 20})


def test_taps_work_efficiency_and_baseline_are_the_known_figures():
    dw = {"groups": 32, "in_channels": 32, "out_channels": 32, "kernel_size": [7, 7]}
    assert backward.taps("Conv2d", dw) == 49
    assert backward.taps("Conv2d", dw | {"kernel_size": 3}) == 9  # an int kernel size is k x k
    assert backward.taps("Conv2d", dw | {"groups": 1}) == 0  # a dense convolution: no baseline
    assert backward.taps("Linear", {"in_features": 8}) == 0
    assert backward.work_s(np.array([1e-5, 2e-5, 3e-5]), np.array([9, 49, 0])).tolist() == pytest.approx(
        [11e-5, 102e-5, 0.0])  # fmt: skip
    work = np.array([1e-4, 3e-4, 0.0])
    t = FLOOR + work / E_BW
    t[2] = 5e-3  # no work: not a depthwise convolution, no part in the efficiency
    assert backward.efficiency(work, t, FLOOR) == pytest.approx(E_BW, rel=1e-12)
    # the ratio of the sums, not the mean ratio: (1e-4 + 3e-4) / (1e-4 + 6e-4) = 4/7
    assert backward.efficiency(work[:2], np.array([1e-4, 6e-4])) == pytest.approx(4 / 7, rel=1e-12)
    assert backward.efficiency(np.zeros(0), np.zeros(0)) == 0.0  # nothing to learn from: no baseline
    base = backward.baseline_s(np.array([5e-4, 5e-5, 5e-4]), work, 0.5)
    assert base.tolist() == pytest.approx([5e-4, 6e-4, 5e-4])  # max(base, work / e); no work: as is
    assert backward.baseline_s(np.array([1.0]), np.array([5.0]), 0.0).tolist() == [1.0]  # e = 0: as is


def training_target(mode: str = "training") -> fit.TargetData:
    """Depthwise convolutions at kernel 7 (family `big`, as ConvNeXt) and 3 and 5 (family `small`, as
    EfficientNet), time = FLOOR + (2 + k^2) x memory time / E_BW; dense 1x1 convolutions at a rate the
    baseline knows nothing of; no-ops at the floor."""
    rows = []
    for k, fam in ((7, "big"), (3, "small"), (5, "small")):
        for j, (c, hw) in enumerate([(32, 56), (64, 28), (96, 40), (128, 14), (48, 64), (160, 20), (24, 90)]):
            conv = nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False)
            row = catalog_row(module_spec(conv, (8, c, hw, hw)))
            m = (row["bytes_read"] + row["bytes_written"]) / 933e9  # the A30's bandwidth
            rows.append(row | {"t_s": FLOOR + (2 + k * k) * m / E_BW, "families": [fam], "layer_id": f"dw{k}-{j}"})
    for fam, shapes in (("big", [(8, 56, 56, 512), (8, 28, 28, 1024), (8, 14, 14, 2048)]),
                        ("small", [(8, 3136, 384), (8, 784, 768), (8, 196, 1536), (8, 49, 3072)])):  # fmt: skip
        for j, shape in enumerate(shapes):
            row = catalog_row(module_spec(nn.Linear(shape[-1], shape[-1] // 2), shape))
            rows.append(row | {"t_s": FLOOR + 3 * row["flops"] / (FP32_A30 * E_MM), "families": [fam],
                               "layer_id": f"lin-{fam}-{j}"})  # fmt: skip
    for j, (c, hw) in enumerate([(32, 56), (64, 28), (128, 14), (256, 7), (96, 20), (48, 40)]):
        row = catalog_row(module_spec(nn.Conv2d(c, 2 * c, 1, bias=False), (8, c, hw, hw)))
        rows.append(row | {"t_s": FLOOR + row["flops"] / 20e12, "families": [], "layer_id": f"pw{j}"})
    for j in range(3):  # no-ops at the floor: the 2nd percentile of the times, the floor `fit` takes off
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": FLOOR, "families": [], "layer_id": f"N{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, mode, "A30")


def small_rows(data: fit.TargetData, rows: np.ndarray) -> np.ndarray:
    return np.isin(rows, np.where([fs == ["small"] for fs in data.families])[0])


def test_the_generator_is_the_thesis_law():
    data = training_target()
    m = np.array([compute_memory_s(r.kind, r.metrics, find_device("A30"))[1] for r in data.records])
    dw = data.depthwise
    k2 = np.array([int(np.ravel([data.records[i].hp["kernel_size"]])[0]) ** 2 for i in np.where(dw)[0]])
    assert sorted(set(k2.tolist())) == [9, 25, 49]
    assert data.dw_work[dw] == pytest.approx((2 + k2) * m[dw], rel=1e-12)
    assert (data.y("time")[dw] - FLOOR) == pytest.approx(data.dw_work[dw] / E_BW, rel=1e-9)
    assert (data.dw_work[~dw] == 0).all() and (m[dw] > 0).all()
    lin = (data.df["kind"] == "Linear").to_numpy()
    assert lin.sum() == 7 and (data.mm_work[lin] > 0).all() and (data.mm_work[~lin] == 0).all()  # all compute-bound
    assert data.mm_work[lin] == pytest.approx(3 * data.df["flops"][lin] / FP32_A30, rel=1e-12)
    assert (data.y("time")[lin] - FLOOR) == pytest.approx(data.mm_work[lin] / E_MM, rel=1e-9)


@pytest.mark.parametrize("fs", ["improved", "physical"])
def test_an_unseen_kernel_size_is_predicted_by_the_law(fs):
    data = training_target()
    f = fit.fit_model(data, "xgb", fs, "time", np.arange(data.n), SMALL)
    assert f.dw_train_efficiency == pytest.approx(E_BW, rel=1e-9)
    assert f.mm_train_efficiency == pytest.approx(E_MM, rel=1e-9)
    res = fit.cross_validate(data, "xgb", fs, "time", "family", SMALL)
    ape = np.abs(res["predicted"] / res["measured"] - 1)[small_rows(data, res["rows"])]
    # 3x3 and 5x5 from 7x7 alone, 3-D Linear inputs from 4-D ones alone: exactly the laws
    assert len(ape) == 14 + 4 and ape.max() < 1e-9


def test_without_the_baseline_the_trees_miss_an_unseen_kernel_size():
    """What main did (no training baselines: the roofline, taps-blind): the 7x7 layers' ratio given to 3x3 and 5x5."""
    data = training_target()
    old = fit.TargetData(**{**data.__dict__, "dw_work": None, "mm_work": None})
    res = fit.cross_validate(old, "xgb", "improved", "time", "family", SMALL)
    dw = small_rows(old, res["rows"]) & old.depthwise[res["rows"]]
    ape = np.abs(res["predicted"] / res["measured"] - 1)[dw]
    assert dw.sum() == 14 and ape.mean() > 0.3  # measured: 42 % on average


def test_inference_keeps_the_trees():
    data = training_target("inference")
    assert (data.dw_work == 0).all()
    f = fit.fit_model(data, "xgb", "improved", "time", np.arange(data.n), SMALL)
    assert (data.mm_work == 0).all() and f.dw_train_efficiency == f.mm_train_efficiency == 0.0
    assert not f.encoding(data).baseline_only(data.records).any()


def test_the_efficiency_is_learnt_from_training_rows_only(monkeypatch):
    data = training_target()
    seen: list[np.ndarray] = []
    real = backward.efficiency

    def spy(work, t_s, floor_s=0.0):
        seen.append(np.asarray(work).copy())
        return real(work, t_s, floor_s)

    monkeypatch.setattr(backward, "efficiency", spy)
    folds = fit.folds_of(data, "family", SMALL)
    fit.cross_validate(data, "xgb", "improved", "time", "family", SMALL)
    assert len(seen) == 2 * len(folds) == 4  # the depthwise and the Linear efficiency per fold
    for i, (_, _, test) in enumerate(folds):
        for work, all_work in zip(seen[2 * i : 2 * i + 2], (data.dw_work, data.mm_work)):
            held = set(np.round(all_work[test][all_work[test] > 0], 15))
            got = set(np.round(work[work > 0], 15))
            assert got and not held & got, "a held-out family's row reached the fit"


@pytest.mark.parametrize("fs", ["improved", "physical"])
def test_a_saved_bundle_and_the_library_model_predict_what_the_fit_predicts(tmp_path, fs):
    data = training_target()
    qm = fit.final_model(data, "xgb", fs, "time", SMALL)
    assert qm.encoding.dw_train_efficiency == pytest.approx(E_BW, rel=1e-9)
    assert qm.encoding.mm_train_efficiency == pytest.approx(E_MM, rel=1e-9)
    f = fit.fit_model(data, "xgb", fs, "time", np.arange(data.n), SMALL)
    work = np.where(~data.noop)[0]  # no-ops are costed at the floor by the costing layer, not the trees
    items = [(data.records[i], None) for i in work]
    expected = fit.predict_rows(data, f, work)
    law = data.depthwise[work] | (data.df["kind"].to_numpy()[work] == "Linear")
    assert expected[law] == pytest.approx(data.y("time")[work][law], rel=1e-9)  # the laws, no tree residual
    assert qm.predict(items) == pytest.approx(expected, rel=1e-6)
    assert LibraryModel(f.model, f.encoding(data), qm.transform).predict(items) == pytest.approx(expected, rel=1e-6)
    b = Bundle(target="A30-training", device_config="A30", mode="training", phase="forward_backward",
               models={"time": qm}, kinds=("Conv2d",), data_version="x", bundle_hash="y", floor_s=FLOOR)  # fmt: skip
    b.save(tmp_path)
    loaded = Bundle.load(tmp_path).models["time"]
    assert loaded.encoding.dw_train_efficiency == pytest.approx(qm.encoding.dw_train_efficiency)
    assert loaded.encoding.mm_train_efficiency == pytest.approx(qm.encoding.mm_train_efficiency)
    assert loaded.predict(items) == pytest.approx(expected, rel=1e-6)
