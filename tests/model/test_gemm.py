"""Known answers for model/basis/gemm.py's depthwise baseline (the `physical` feature set).

Synthetic depthwise convolutions (real specs, real paper costs) whose time is a known law: the
launch floor plus FLOPs / (A30 FP32 peak x E_TRUE), the same law at every kernel size. The fit must
recover E_TRUE, predict a kernel size it never saw from it (the case ConvNeXt's 7x7 and EfficientNet's
3x3 / 5x5 layers are to each other with a family held out), learn it only from rows it trains on,
and a compiled bundle model must give what the library fit gives.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import catalog_row, module_spec
from opcost.devices import find_device
from opcost.model.basis import gemm
from opcost.model.composition.bundle import Bundle
from opcost.model.training import fit
from opcost.params.train import TrainParams

A30 = find_device("A30")  # resolved once, as the answer path does (Bundle.device)

FP32_A30 = 10.3e12  # FLOP/s, A30 datasheet
E_TRUE = 0.08  # depthwise convolutions' fraction of the FP32 peak in the generator
FLOOR = 1e-5  # s: the launch floor (three no-ops take exactly this time)
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 20}, xgboost={"n_estimators": 20})


def test_depthwise_is_groups_equal_in_channels():
    assert gemm.is_depthwise("Conv2d", {"groups": 32, "in_channels": 32, "out_channels": 32})
    assert not gemm.is_depthwise("Conv2d", {"groups": 1, "in_channels": 32})
    assert not gemm.is_depthwise("Conv2d", {"groups": 4, "in_channels": 32})  # grouped, still a GEMM per group
    assert not gemm.is_depthwise("Linear", {"groups": 32, "in_channels": 32})


def test_depthwise_efficiency_and_fp32_time_are_the_known_figures():
    compute = np.array([1e-4, 2e-4, 4e-4])
    assert gemm.depthwise_efficiency(compute, compute / E_TRUE) == pytest.approx(E_TRUE, rel=1e-12)
    assert gemm.depthwise_efficiency(compute, FLOOR + compute / E_TRUE, FLOOR) == pytest.approx(E_TRUE, rel=1e-12)
    assert gemm.depthwise_efficiency(np.zeros(0), np.zeros(0)) == 0.0  # nothing to learn from: no baseline
    assert gemm.fp32_compute_s(10.3e12, A30) == pytest.approx(1.0)


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
    # measured +42 to +77 %, as EfficientNet's +41 % with ConvNeXt's 7x7 layers to learn from; with the
    # kernel columns (gemm.KERNEL_COLUMNS) the trees split some unseen rows elsewhere: -34 to +92 %,
    # 43 % on average, still three times the baseline's worst
    old = fit.cross_validate(data, "rf", "improved", "time", "family", SMALL)
    assert np.abs(old["predicted"] / old["measured"] - 1)[small].mean() > 0.3


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


# --------------------------------------------------------------------------------------------
# The compute unit's attained peak, and a Linear layer as the trees see it
# --------------------------------------------------------------------------------------------


def test_unit_of_each_gemm_like_op_follows_pytorchs_defaults():
    conv = {"groups": 1, "in_channels": 64, "out_channels": 64}
    assert gemm.gemm_unit("Conv2d", conv, A30) == gemm.TF32_UNIT
    assert gemm.gemm_unit("Conv2d", conv, find_device("A30_no_tf32")) == gemm.FP32_UNIT
    assert gemm.gemm_unit("Conv2d", conv, find_device("RTX2080Ti")) == gemm.FP32_UNIT
    assert gemm.gemm_unit("Linear", {"in_features": 8, "out_features": 8}, A30) == gemm.FP32_UNIT
    assert gemm.gemm_unit("Conv2d", {"groups": 64, "in_channels": 64}, A30) == ""  # depthwise: its own baseline
    assert gemm.gemm_unit("ReLU", {}, A30) == ""


def test_unit_efficiencies_are_the_known_fractions_of_compute_bound_rows():
    """Five TF32 rows at 0.4 of the peak, five FP32 rows at 0.85, after the floor; memory-bound rows and
    a unit with fewer than COMPUTE_BOUND_ROWS compute-bound rows teach nothing; without the TF32 unit
    nothing is calibrated."""
    c = np.array([1e-4, 2e-4, 3e-4, 4e-4, 5e-4])
    unit = np.array([gemm.TF32_UNIT] * 5 + [gemm.FP32_UNIT] * 5 + [gemm.TF32_UNIT, gemm.FP32_UNIT, ""])
    compute = np.concatenate([c, c, [1e-4, 1e-4, 1e-3]])
    memory = np.concatenate([c / 10, c / 10, [1e-4, 1e-4, 1e-6]])  # the last three: not compute-bound, or no unit
    t = FLOOR + compute / np.concatenate([np.full(5, 0.4), np.full(5, 0.85), [0.01, 0.01, 0.01]])
    eff = gemm.unit_efficiencies(unit, compute, memory, t, FLOOR)
    assert eff == pytest.approx({gemm.TF32_UNIT: 0.4, gemm.FP32_UNIT: 0.85}, rel=1e-9)
    assert gemm.unit_efficiencies(unit[:4], compute[:4], memory[:4], t[:4], FLOOR) == {}
    # one unit in use (no TF32, or TF32 off): nothing to put on one scale, every peak stays nominal
    assert gemm.unit_efficiencies(unit[5:10], compute[5:10], memory[5:10], t[5:10], FLOOR) == {}


def test_a_linear_layer_is_shown_to_the_trees_as_its_1x1_convolution():
    hp = {"in_features": 512, "out_features": 128, "bias": True}
    kind, view, shape = gemm.tree_view("Linear", hp, (32, 56, 56, 512))  # ConvNeXt: channels last
    assert (kind, shape) == ("Conv2d", (32, 512, 56, 56))
    assert view["in_channels"] == 512 and view["out_channels"] == 128 and view["kernel_size"] == [1, 1]
    assert view["bias"] is False and view["groups"] == 1  # a fused epilogue: shown as none
    assert gemm.tree_view("Linear", hp, (8, 197, 512))[2] == (8, 512, 197)  # a ViT token sequence
    assert gemm.tree_view("Linear", hp, (32, 512))[2] == (32, 512)  # a classifier head
    conv = {"in_channels": 3}
    assert gemm.tree_view("Conv2d", conv, (1, 3, 8, 8)) == ("Conv2d", conv, (1, 3, 8, 8))


TF32_A30 = 82e12  # FLOP/s, A30 datasheet
E_TF32, E_FP32 = 0.4, 0.85  # convolutions' fraction of the TF32 peak, large Linear layers' of the FP32 peak


def linear_target() -> fit.TargetData:
    """Family `cnn` (as ResNet): 1x1 and 3x3 convolutions at E_TF32 of the TF32 peak and classifier heads
    three times their roofline (skinny GEMMs); family `big` (as ConvNeXt): channels-last Linear layers,
    large GEMMs at E_FP32 of the FP32 peak. Time = FLOOR + max(bytes / bandwidth, FLOPs / attained peak)."""
    bw, rows = 933e9, []

    def add(row: dict, peak: float, fam: str, layer: str, slow: float = 1.0) -> None:
        t = FLOOR + slow * max((row["bytes_read"] + row["bytes_written"]) / bw, row["flops"] / peak)
        rows.append(row | {"t_s": t, "families": [fam], "layer_id": layer})

    for j, (c, hw) in enumerate([(64, 56), (128, 28), (256, 14), (512, 7), (96, 40), (192, 20), (384, 10), (48, 64)]):
        for k in (1, 3):
            row = catalog_row(module_spec(nn.Conv2d(c, 2 * c, k, padding=k // 2, bias=False), (32, c, hw, hw)))
            add(row, TF32_A30 * E_TF32, "cnn", f"c{k}-{j}")
    for j, c in enumerate([512, 1024, 2048, 768]):
        row = catalog_row(module_spec(nn.Linear(c, 1000), (32, c)))
        add(row, FP32_A30, "cnn", f"head{j}", slow=3.0)
    for j, (c, hw) in enumerate([(128, 56), (256, 28), (512, 14), (1024, 7), (192, 40), (384, 20)]):
        for cin, cout in ((c, 4 * c), (4 * c, c)):
            row = catalog_row(module_spec(nn.Linear(cin, cout), (32, hw, hw, cin)))
            add(row, FP32_A30 * E_FP32, "big", f"lin{j}-{cin}")
    for j in range(3):  # no-ops at the floor: the 2nd percentile of the times, the floor `fit` takes off
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": FLOOR, "families": [], "layer_id": f"N{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, "inference", "A30")


def test_a_held_out_familys_large_linear_layers_from_convolutions():
    """With `big` held out no large Linear layer is left to learn from: `physical` shows them as the 1x1
    convolutions they compute, against the TF32 unit's attained peak (E_TF32, learnt from the convolutions)
    and the FP32 units' nominal one (no compute-bound FP32 row left to learn it from): -25 to +19 %
    measured; without the attained TF32 peak up to +25 % and more (the convolutions' ratio to the nominal)."""
    data = linear_target()
    big = np.array([fs == ["big"] for fs in data.families])
    for fs, lo, hi in (("physical", -0.3, 0.25),):
        res = fit.cross_validate(data, "xgb", fs, "time", "family", SMALL)
        err = (res["predicted"] / res["measured"] - 1)[big[res["rows"]]]
        assert len(err) == 12 and lo < err.min() and err.max() < hi, (fs, err.round(2))


def test_the_unit_efficiencies_are_learnt_from_training_rows_only(monkeypatch):
    data = linear_target()
    seen: list[np.ndarray] = []
    real = gemm.unit_efficiencies

    def spy(unit, compute_s, memory_s, t_s, floor_s=0.0):
        seen.append(np.asarray(compute_s).copy())
        return real(unit, compute_s, memory_s, t_s, floor_s)

    monkeypatch.setattr(gemm, "unit_efficiencies", spy)
    folds = fit.folds_of(data, "family", SMALL)
    res = fit.cross_validate(data, "xgb", "physical", "time", "family", SMALL)
    assert len(seen) == len(folds) == 2 and len(res["rows"]) == data.n - 3  # the no-ops are in no family
    for (_, _, test), compute in zip(folds, seen):
        held = set(np.round(data.compute_s[test], 18))
        assert len(compute) and not held & set(np.round(compute, 18)), "a held-out family's row reached the fit"


def test_a_saved_bundle_keeps_the_unit_efficiencies(tmp_path):
    data = linear_target()
    qm = fit.final_model(data, "xgb", "physical", "time", SMALL)
    assert qm.encoding.tf32_efficiency == pytest.approx(E_TF32, rel=1e-6)
    assert qm.encoding.fp32_efficiency == pytest.approx(E_FP32, rel=1e-6)
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    rows = np.where(~data.noop)[0]  # no-ops are costed at the floor by the costing layer, not the trees
    expected = fit.predict_rows(data, f, rows)
    items = [(data.records[i], None) for i in rows]
    assert qm.predict(items) == pytest.approx(expected, rel=1e-6)
    b = Bundle(target="A30-inference", device_config="A30", mode="inference", phase="forward", models={"time": qm},
               kinds=tuple(sorted(set(data.df["kind"]))), data_version="x", bundle_hash="y", floor_s=FLOOR)  # fmt: skip
    b.save(tmp_path)
    loaded = Bundle.load(tmp_path).models["time"]
    assert (loaded.encoding.tf32_efficiency, loaded.encoding.fp32_efficiency) == pytest.approx((E_TF32, E_FP32))
    assert loaded.predict(items) == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Compute and memory overlapped (gemm.overlap_s): the `physical` baseline
# --------------------------------------------------------------------------------------------


def test_overlap_is_the_hypotenuse_of_compute_and_memory_time():
    # 3-4-5: balanced-ish ops cost more than the larger part; one part alone is itself; never below 1 ns
    got = gemm.overlap_s(np.array([3e-4, 1e-4, 0.0, 0.0]), np.array([4e-4, 1e-4, 2e-4, 0.0]))
    assert got.tolist() == pytest.approx([5e-4, 2**0.5 * 1e-4, 2e-4, 1e-9], rel=1e-12)


def test_compute_part_is_the_time_at_the_peak_each_op_attains():
    """Five ops by hand: a plain op (nominal compute), a TF32 fallback (its FP32 time), a TF32 and an
    FP32 GEMM (over their unit's fraction; the FP32 unit unfitted stays nominal), a depthwise convolution
    (the larger of its nominal compute and FP32 time over the depthwise fraction)."""
    compute = np.array([1e-4, 1e-4, 4e-4, 5e-4, 1e-5])  # FLOPs over the op's peak (physics.op_peak)
    fp32 = np.array([1e-4, 8e-4, 3.2e-3, 5e-4, 1e-5])  # FLOPs over the FP32 peak
    fallback = np.array([False, True, False, False, False])
    unit = np.array(["", "", gemm.TF32_UNIT, gemm.FP32_UNIT, ""], dtype=object)
    depthwise = np.array([False, False, False, False, True])
    got = gemm.compute_part_s(compute, fp32, fallback, unit, {gemm.TF32_UNIT: 0.4}, depthwise, 0.05)
    assert got.tolist() == pytest.approx([1e-4, 8e-4, 1e-3, 5e-4, 2e-4], rel=1e-12)
    got = gemm.compute_part_s(compute, fp32, fallback, unit, {gemm.TF32_UNIT: 0.4, gemm.FP32_UNIT: 0.8}, depthwise, 0)
    assert got.tolist() == pytest.approx([1e-4, 8e-4, 1e-3, 6.25e-4, 1e-5], rel=1e-12)


def test_the_physical_offset_overlaps_compute_and_memory_in_fit_and_bundle():
    """fit.offsets and Encoding.log_roofline give every row log(hypot(C, M) + floor), C at the peak the
    row attains: the depthwise rows at FLOPs / (FP32 peak x e), the dense 1x1 convolutions at the TF32
    roofline (the generator has too few compute-bound ones to fit a unit fraction)."""
    data = depthwise_target()
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    assert f.unit_eff == {} and f.dw_efficiency == pytest.approx(E_TRUE, rel=1e-9)
    rows = np.arange(data.n)
    flops = data.df["flops"].to_numpy(float)
    mem = (data.df["bytes_read"] + data.df["bytes_written"]).to_numpy(float) / 933e9  # A30 bandwidth
    c = np.where(data.depthwise, np.maximum(flops / 82e12, flops / (FP32_A30 * E_TRUE)), flops / 82e12)
    expected = np.log(np.maximum(np.hypot(c, mem), 1e-9) + f.floor)
    got = fit.offsets(data, rows, f.floor, f.dw_efficiency, f.unit_eff, True)
    assert got == pytest.approx(expected, rel=1e-12)
    assert f.encoding(data).log_roofline(data.records) == pytest.approx(expected, rel=1e-12)


def test_no_depthwise_baseline_in_training():
    """In training a depthwise convolution is bound by its memory passes, not its taps' FLOPs: the
    `physical` fit learns no FLOPs-based depthwise efficiency there (its offset stays the overlapped
    roofline; model/basis/backward.py's training baseline is tested in test_backward.py), and the same rows in
    inference give E_TRUE."""
    inference = depthwise_target()
    training = fit.prepare(inference.df, "training", "A30")
    assert fit.fit_model(inference, "xgb", "physical", "time", np.arange(inference.n), SMALL).dw_efficiency == (
        pytest.approx(E_TRUE, rel=1e-9))  # fmt: skip
    f = fit.fit_model(training, "xgb", "physical", "time", np.arange(training.n), SMALL)
    assert f.dw_efficiency == 0.0 and f.encoding(training).dw_efficiency == 0.0
    flops = training.df["flops"].to_numpy(float)
    mem = (training.df["bytes_read"] + training.df["bytes_written"]).to_numpy(float) / 933e9
    expected = np.log(np.maximum(np.hypot(flops / 82e12, mem), 1e-9) + f.floor)  # every row at its TF32 roofline
    assert fit.offsets(training, np.arange(training.n), f.floor, 0.0, f.unit_eff, True) == pytest.approx(expected)


def test_offsets_roofline_model_keeps_its_roofline_and_physical_without_gemm_arrays_is_refused():
    """A roofline model's offset is log(roofline + floor), whatever efficiencies are passed (only a physical
    model learns them); a physical model whose data lacks the GEMM arrays gets no stand-in baseline."""
    data = depthwise_target()
    rows = np.arange(data.n)
    expected = np.log(data.roofline + 1e-6)
    assert fit.offsets(data, rows, 1e-6, 0.05, {gemm.TF32_UNIT: 0.4}, False) == pytest.approx(expected, rel=1e-12)
    assert fit.offsets(data, rows, 1e-6, 0.05, {gemm.TF32_UNIT: 0.4}, True) != pytest.approx(expected, rel=1e-3)
    with pytest.raises(ValueError, match="needs the GEMM arrays"):
        fit.offsets(dataclasses.replace(data, fallback=None), rows, 1e-6, 0.05, {}, True)
