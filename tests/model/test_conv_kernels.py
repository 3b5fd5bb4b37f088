"""Known answers for the convolution parts of the `physical` and `improved` encodings (issue 21, section 4).

- physics.tensor_core_eligible / gemm.tf32_fallback: a convolution whose channels per group are not
  multiples of 4 (a stem's 3 input channels) runs on the FP32 units even where TF32 is on; the
  `physical` baseline charges it at the FP32 roofline. The family test generates such stems at exactly
  their FP32 roofline and dense convolutions at 0.4 of the TF32 peak: with the stems' family held out,
  the fit has only the dense convolutions to learn from and must still put the stems where they are
  (against the TF32 roofline: FLOPs / (82 TF x 0.4) instead of FLOPs / 10.3 TF, -69 %).
- gemm.kernel_features: the whole kernel (a 1x7 convolution is not a 1x1 one), the stride area and
  Winograd eligibility, hand-computed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from torch import nn

from builders import catalog_row, module_spec
from opcost.devices import find_device
from opcost.model.basis import features, gemm, physics
from opcost.model.training import fit
from opcost.params.train import TrainParams

A30 = find_device("A30")  # resolved once, as the answer path does (Bundle.device)

FP32_A30, TF32_A30, BW_A30 = 10.3e12, 82e12, 933e9  # FLOP/s, FLOP/s, B/s: A30 datasheet (devices.py)
FLOOR = 1e-5
E_TF32 = 0.4
SMALL = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 20}, xgboost={"n_estimators": 20})


@pytest.mark.parametrize(
    ("hp", "eligible"),
    [
        ({"in_channels": 3, "out_channels": 64, "groups": 1}, False),  # every stem
        ({"in_channels": 64, "out_channels": 64, "groups": 1}, True),
        ({"in_channels": 64, "out_channels": 6, "groups": 1}, False),  # out channels count too
        ({"in_channels": 128, "out_channels": 128, "groups": 32}, True),  # ResNeXt: 4 channels per group
        ({"in_channels": 64, "out_channels": 64, "groups": 32}, False),  # 2 per group
        ({"in_channels": 116, "out_channels": 116, "groups": 1}, True),  # ShuffleNet: 116 = 4 x 29
    ],
)
def test_tensor_core_eligibility_is_channels_per_group_multiples_of_4(hp: dict, eligible: bool) -> None:
    assert physics.tensor_core_eligible("Conv2d", hp) is eligible


def test_only_convolutions_with_known_channels_can_fall_back() -> None:
    stem = {"in_channels": 3, "out_channels": 64, "groups": 1}
    assert physics.tensor_core_eligible("Linear", {"in_features": 3, "out_features": 5})
    assert physics.tensor_core_eligible("Conv2d", None) and physics.tensor_core_eligible("Conv2d", {})
    assert gemm.tf32_fallback("Conv2d", stem, A30)
    assert not gemm.tf32_fallback(
        "Conv2d", stem, find_device("A30_no_tf32")
    )  # TF32 off: every convolution on FP32 already
    assert not gemm.tf32_fallback("Conv2d", stem, find_device("RTX2080Ti"))  # no TF32 on Turing
    assert not gemm.tf32_fallback("Conv2d", {"in_channels": 64, "out_channels": 64, "groups": 1}, A30)
    assert not gemm.tf32_fallback("Conv2d", {"in_channels": 6, "out_channels": 6, "groups": 6}, A30)  # depthwise
    # a stem takes no part in the TF32 unit's attained fraction: it is not on that unit
    assert gemm.gemm_unit("Conv2d", stem, A30) == ""
    assert gemm.gemm_unit("Conv2d", stem, find_device("A30_no_tf32")) == gemm.FP32_UNIT
    # the physics the improved encoding sees stays the kind's (the peak of every convolution on the A30)
    assert physics.op_peak("Conv2d", A30) == pytest.approx(TF32_A30)


def stem_target() -> fit.TargetData:
    """Stems (3 -> 64 channels, family `new`) at exactly their FP32 baseline (compute and memory time
    overlapped as gemm.overlap_s: their hypotenuse, where the two are close as in a stem); dense convolutions (family
    `old`, and some in no family) at E_TF32 of the TF32 peak; three no-ops at the floor."""
    rows = []

    def add(module: nn.Module, shape: tuple, t: float, fam: list[str], layer: str) -> None:
        row = catalog_row(module_spec(module, shape))
        rows.append(row | {"t_s": FLOOR + t(row), "families": fam, "layer_id": layer})

    def fp32_roof(r: dict) -> float:  # compute at the FP32 peak overlapped with memory (gemm.overlap_s)
        return math.hypot(r["flops"] / FP32_A30, (r["bytes_read"] + r["bytes_written"]) / BW_A30)

    for j, (k, s, hw) in enumerate([(7, 2, 224), (3, 2, 224), (7, 2, 112), (4, 4, 224), (11, 4, 224), (3, 2, 160)]):
        add(nn.Conv2d(3, 64, k, stride=s, padding=k // 2, bias=False), (16, 3, hw, hw), fp32_roof, ["new"], f"s{j}")
    # compute-bound at the TF32 peak (at least gemm.COMPUTE_BOUND_RATIO): the unit's fraction is learnt
    dense = [
        (256, 256, 56),
        (256, 256, 28),
        (384, 384, 28),
        (384, 256, 14),
        (512, 512, 14),
        (320, 320, 28),
        (448, 448, 14),
        (256, 512, 28),
        (512, 256, 28),
        (288, 288, 42),
    ]
    for j, (cin, cout, hw) in enumerate(dense):
        add(nn.Conv2d(cin, cout, 3, padding=1, bias=False), (16, cin, hw, hw),
            lambda r: r["flops"] / (TF32_A30 * E_TF32), ["old"] if j % 2 else [], f"d{j}")  # fmt: skip
    for j in range(3):
        row = catalog_row(module_spec(nn.Identity(), (4 + j, 16)))
        rows.append(row | {"t_s": FLOOR, "families": [], "layer_id": f"N{j}"})
    df = pd.DataFrame(rows).assign(p_w=100.0, clock_mhz=np.nan, power_limit_w=np.nan, estimated=False)
    return fit.prepare(df, "inference", "A30")


def test_a_held_out_familys_stems_at_their_fp32_roofline() -> None:
    data = stem_target()
    new = np.array([fs == ["new"] for fs in data.families])
    res = fit.cross_validate(data, "xgb", "physical", "time", "family", SMALL)
    err = (res["predicted"] / res["measured"] - 1)[new[res["rows"]]]
    # measured 0.0 %: the trees' residual is learnt on the dense convolutions, whose baseline (TF32 at
    # its attained fraction E_TF32) is exact, and the stems' baseline is exact too. Without the fallback
    # (gemm.tf32_fallback always False): -67 to -2 %, the memory-bound stems at their TF32 roofline
    assert len(err) == 6 and np.abs(err).max() < 0.05, err.round(3)


def test_the_stems_baseline_is_the_same_in_training_and_in_a_bundle() -> None:
    """Encoding.log_roofline (what a saved bundle predicts with) and fit.offsets (what the fit trains on)
    give a stem the same baseline: its FP32 compute time overlapped with its memory time, plus the floor."""
    data = stem_target()
    f = fit.fit_model(data, "xgb", "physical", "time", np.arange(data.n), SMALL)
    enc = f.encoding(data)
    rows = np.arange(data.n)
    got = enc.log_roofline(data.records)
    fl = fit.row_floors(data, rows, f.floor, f.kind_floors)  # the convolutions' own floor (data/floors.py)
    assert got == pytest.approx(fit.offsets(data, rows, fl, f.dw_efficiency, f.unit_eff, True), rel=1e-12)
    assert fl[0] == dict(f.kind_floors)["Conv2d"] > f.floor
    stem = data.records[0]
    m = stem.metrics
    expected = math.log(math.hypot(m["flops"] / FP32_A30, (m["bytes_read"] + m["bytes_written"]) / BW_A30) + fl[0])
    assert got[0] == pytest.approx(expected, rel=1e-9)
    # the improved encoding keeps the kind's TF32 roofline (its models are unchanged)
    improved = data.encs["improved"].log_roofline([stem])[0]
    assert improved == pytest.approx(math.log(physics.roofline_s("Conv2d", m, A30)))


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (nn.Conv2d(64, 64, (1, 7), padding=(0, 3)), [1.0, 7.0, 1.0, 0.0]),  # Inception's factorised 1x7
        (nn.Conv2d(64, 64, (7, 1), padding=(3, 0)), [7.0, 1.0, 1.0, 0.0]),
        (nn.Conv2d(64, 64, 3, padding=1), [3.0, 3.0, 1.0, 1.0]),  # Winograd-eligible
        (nn.Conv2d(64, 64, 3, stride=2, padding=1), [3.0, 3.0, 4.0, 0.0]),
        (nn.Conv2d(64, 64, 3, padding=2, dilation=2), [3.0, 3.0, 1.0, 0.0]),
        (nn.Conv2d(64, 64, 3, padding=1, groups=64), [3.0, 3.0, 1.0, 0.0]),  # depthwise: no Winograd
        (nn.Conv2d(64, 64, 5, stride=(2, 1), padding=2), [5.0, 5.0, 2.0, 0.0]),
        (nn.Linear(64, 64), [-1.0, -1.0, -1.0, -1.0]),
    ],
)
def test_kernel_features_are_the_whole_kernel(module: nn.Module, expected: list[float]) -> None:
    shape = (8, 64, 14, 14) if isinstance(module, nn.Conv2d) else (8, 64)
    rec = features.record_of(catalog_row(module_spec(module, shape)))
    assert gemm.kernel_features(rec.kind, rec.hp) == expected
    for fs in ("improved", "physical"):  # the row the trees see carries them, under their names
        enc = features.Encoding(fs, (rec.kind,), "A30")
        row = dict(zip(enc.columns, enc.row(rec, None)))
        linear_as_1x1 = fs == "physical" and rec.kind == "Linear"  # gemm.tree_view: a Linear layer's 1x1 view
        assert [row[c] for c in gemm.KERNEL_COLUMNS] == ([1.0, 1.0, 1.0, 0.0] if linear_as_1x1 else expected)
    assert "kernel_h" not in features.Encoding("baseline", (rec.kind,), "A30").columns  # the thesis encoding as it was
