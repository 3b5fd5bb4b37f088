"""Known answers for model/gemm.py's Winograd unit (the `physical` baseline on FP32-convolution configs).

Synthetic convolutions (real specs, real paper costs) on the A30 without TF32, whose time is a known law:
the launch floor plus FLOPs / (FP32 peak x attained fraction), the 3x3 stride-1 ones (Winograd) at
WINO x the nominal peak, every other convolution at OTHER. The fit must learn WINO / OTHER as the Winograd
unit's speed-up over its siblings, from the rows it trains on only; a bundle must keep it, and a bundle
saved before the unit existed must load and answer as before (Winograd at the nominal peak).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from torch import nn

from opcost.model import fit, gemm
from opcost.model.bundle import BUNDLE_FILE, Bundle
from opcost.params.train import TrainParams
from test_known_answers import catalog_row, module_spec

FP32_A30 = 10.3e12  # FLOP/s, A30 datasheet (the A30 without TF32: every convolution on the FP32 units)
WINO, OTHER = 1.6, 1.0  # attained fractions of the nominal FP32 peak: Winograd 3x3 convolutions, the others
FLOOR = 1e-5  # s: the launch floor (three no-ops take exactly this time)
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 20}, xgboost={"n_estimators": 20})
CONV3 = {"kernel_size": [3, 3], "stride": [1, 1], "dilation": [1, 1], "groups": 1, "in_channels": 64,
         "out_channels": 64}  # fmt: skip


def test_the_winograd_unit_follows_the_configs_math_mode():
    """3x3, stride 1, undilated, ungrouped convolutions on the FP32 units (TF32 off, or a device without it)
    only; with TF32 on they stay on the tensor cores' unit; every other convolution and matmul as before."""
    assert gemm.gemm_unit("Conv2d", CONV3, "A30") == gemm.TF32_UNIT
    assert gemm.gemm_unit("Conv2d", CONV3, "A30_no_tf32") == gemm.WINOGRAD_UNIT
    assert gemm.gemm_unit("Conv2d", CONV3, "RTX2080Ti") == gemm.WINOGRAD_UNIT
    for change in ({"stride": [2, 2]}, {"kernel_size": [1, 1]}, {"dilation": [2, 2]}, {"groups": 2},
                   {"kernel_size": [1, 7]}):  # fmt: skip
        assert gemm.gemm_unit("Conv2d", CONV3 | change, "A30_no_tf32") == gemm.FP32_UNIT, change
    assert gemm.gemm_unit("Conv2d", CONV3 | {"groups": 64}, "A30_no_tf32") == ""  # depthwise: its own baseline
    assert gemm.gemm_unit("Linear", {"in_features": 8, "out_features": 8}, "A30_no_tf32") == gemm.FP32_UNIT
    assert not gemm.fp32_convolutions("A30") and gemm.fp32_convolutions("A30_no_tf32")


def test_the_winograd_fraction_is_its_speed_up_over_the_other_fp32_convolutions():
    """Five Winograd rows at 1.6 of the FP32 peak, five other convolutions at 1.0 (then 0.8), five FP32
    matmuls at 0.5 (no part in the reference), a memory-bound Winograd row at 5 (teaches nothing):
    the learnt fraction is 1.6 (then 2.0) within 1e-9; too few rows of either class, or no convolution
    mask, leave it nominal (absent)."""
    c = np.array([1e-4, 2e-4, 3e-4, 4e-4, 5e-4])
    unit = np.array([gemm.WINOGRAD_UNIT] * 5 + [gemm.FP32_UNIT] * 10 + [gemm.WINOGRAD_UNIT], dtype=object)
    conv = np.array([True] * 10 + [False] * 5 + [True])
    compute = np.concatenate([c, c, c, [1e-4]])
    memory = np.concatenate([c / 10, c / 10, c / 10, [1e-3]])
    for other, expected in ((OTHER, 1.6), (0.8, 2.0)):
        frac = np.concatenate([np.full(5, WINO), np.full(5, other), np.full(5, 0.5), [5.0]])
        t = FLOOR + compute / frac
        eff = gemm.unit_efficiencies(unit, compute, memory, t, FLOOR, conv)
        assert eff.keys() == {gemm.WINOGRAD_UNIT} and eff[gemm.WINOGRAD_UNIT] == pytest.approx(expected, abs=1e-9)
    assert gemm.unit_efficiencies(unit, compute, memory, t, FLOOR) == {}  # no convolution known
    few = np.r_[0:4, 5:16]
    assert gemm.unit_efficiencies(unit[few], compute[few], memory[few], t[few], FLOOR, conv[few]) == {}
    # the compute part: a Winograd row's nominal FP32 time over its fraction, the others nominal
    got = gemm.compute_part_s(c[:2], c[:2], np.zeros(2, bool), unit[[0, 5]], {gemm.WINOGRAD_UNIT: 1.6},
                              np.zeros(2, bool), 0.0)  # fmt: skip
    assert got.tolist() == pytest.approx([1e-4 / 1.6, 2e-4], rel=1e-12)


def winograd_target() -> fit.TargetData:
    """Two families on the A30 without TF32, each with 3x3 stride-1 convolutions at WINO of the FP32 peak
    and 1x1 and 3x3 stride-2 convolutions at OTHER: time = FLOOR + max(bytes / bandwidth, FLOPs / attained)."""
    bw, rows = 933e9, []

    def add(row: dict, frac: float, fam: str, layer: str) -> None:
        t = FLOOR + max((row["bytes_read"] + row["bytes_written"]) / bw, row["flops"] / (FP32_A30 * frac))
        rows.append(row | {"t_s": t, "families": [fam], "layer_id": layer})

    for fam, shapes in (("res", [(64, 56), (128, 30), (256, 12), (96, 42), (32, 72)]),
                        ("vgg", [(200, 22), (392, 8), (56, 66), (328, 16), (168, 34)])):  # fmt: skip
        for j, (c, hw) in enumerate(shapes):
            for k, s, frac in ((3, 1, WINO), (1, 1, OTHER), (3, 2, OTHER)):
                conv = nn.Conv2d(c, c, k, stride=s, padding=k // 2, bias=False)
                add(catalog_row(module_spec(conv, (32, c, hw, hw))), frac, fam, f"{fam}{k}{s}-{j}")
    for j in range(3):  # no-ops at the floor: the 2nd percentile of the times, the floor `fit` takes off
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": FLOOR, "families": [], "layer_id": f"N{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, "inference", "A30_no_tf32")


def test_the_fit_learns_the_known_winograd_speed_up_and_charges_it():
    data = winograd_target()
    assert (data.unit == gemm.WINOGRAD_UNIT).sum() == 10 and (data.unit == gemm.FP32_UNIT).sum() == 20
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    assert f.unit_eff.keys() == {gemm.WINOGRAD_UNIT}
    assert f.unit_eff[gemm.WINOGRAD_UNIT] == pytest.approx(WINO / OTHER, abs=1e-9)
    assert f.encoding(data).winograd_efficiency == f.unit_eff[gemm.WINOGRAD_UNIT]
    rows = np.arange(data.n)
    flops = data.df["flops"].to_numpy(float)
    mem = (data.df["bytes_read"] + data.df["bytes_written"]).to_numpy(float) / 933e9
    c = np.where(data.unit == gemm.WINOGRAD_UNIT, flops / (FP32_A30 * WINO), flops / FP32_A30)
    expected = np.log(np.maximum(np.hypot(c, mem), 1e-9) + f.floor)
    assert fit.offsets(data, rows, f.floor, f.dw_efficiency, f.unit_eff, True) == pytest.approx(expected, rel=1e-9)
    assert f.encoding(data).log_roofline(data.records) == pytest.approx(expected, rel=1e-9)


def test_no_held_out_row_reaches_the_winograd_fraction(monkeypatch):
    data = winograd_target()
    seen: list[tuple[np.ndarray, dict]] = []
    real = gemm.unit_efficiencies

    def spy(unit, compute_s, memory_s, t_s, floor_s=0.0, conv=None):
        out = real(unit, compute_s, memory_s, t_s, floor_s, conv)
        seen.append((np.asarray(compute_s).copy(), out))
        return out

    monkeypatch.setattr(gemm, "unit_efficiencies", spy)
    ops = data.compute_s[~data.noop]
    assert len(set(np.round(ops, 18))) == len(ops)  # every op known by its compute time
    folds = fit.folds_of(data, "family", SMALL)
    fit.cross_validate(data, "xgb", "physical", "time", "family", SMALL)
    assert len(seen) == len(folds) == 2
    for (_, _, test), (compute, out) in zip(folds, seen):
        held = set(np.round(data.compute_s[test], 18))
        assert len(compute) and not held & set(np.round(compute, 18)), "a held-out family's row reached the fit"
        assert out[gemm.WINOGRAD_UNIT] == pytest.approx(WINO / OTHER, abs=1e-9)  # learnt from the other family


def test_a_bundle_keeps_the_winograd_fraction_and_an_old_one_loads_as_before(tmp_path):
    data = winograd_target()
    qm = fit.final_model(data, "xgb", "physical", "time", SMALL)
    assert qm.encoding.winograd_efficiency == pytest.approx(WINO / OTHER, abs=1e-9)
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    rows = np.where(~data.noop)[0]
    items = [(data.records[i], None) for i in rows]
    expected = fit.predict_rows(data, f, rows)
    b = Bundle(target="A30_no_tf32-inference", device_config="A30_no_tf32", mode="inference", phase="forward",
               models={"time": qm}, kinds=tuple(sorted(set(data.df["kind"]))), data_version="x", bundle_hash="y",
               floor_s=FLOOR)  # fmt: skip
    b.save(tmp_path)
    loaded = Bundle.load(tmp_path).models["time"]
    assert loaded.encoding.winograd_efficiency == pytest.approx(qm.encoding.winograd_efficiency, rel=1e-12)
    assert loaded.predict(items) == pytest.approx(expected, rel=1e-6)
    # a bundle written before the Winograd unit: no such field; it loads, Winograd at the nominal FP32 peak
    meta = json.loads((tmp_path / BUNDLE_FILE).read_text())
    del meta["models"]["time"]["encoding"]["winograd_efficiency"]
    (tmp_path / BUNDLE_FILE).write_text(json.dumps(meta))
    old = Bundle.load(tmp_path).models["time"]
    assert old.encoding.winograd_efficiency == 0.0
    nominal = dataclasses.replace(f, unit_eff={})
    wino = np.array([data.unit[i] == gemm.WINOGRAD_UNIT for i in rows])
    got, want = old.predict(items), fit.predict_rows(data, nominal, rows)
    assert got == pytest.approx(want, rel=1e-6)
    assert not np.allclose(got[wino], expected[wino], rtol=1e-3)  # the field is what moves the Winograd rows
