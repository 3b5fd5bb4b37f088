"""bench/baseline_variants.py: the variants change what they say and nothing else, and every figure they
learn comes from the rows given (issue 21, section 4: round 31's candidate baseline changes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench_modules import load_bench
from opcost.model.basis import gemm
from opcost.model.training import fit

FLOOR = 1e-6
BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench():
    return load_bench("baseline_variants")


CONV = {"in_channels": 64, "out_channels": 64, "kernel_size": [3, 3], "stride": [1, 1], "groups": 1}
LINEAR = {"in_features": 64, "out_features": 64}


def test_a_convolution_is_its_own_unit_only_where_it_runs_on_the_fp32_units():
    b = _bench()
    assert b.conv_unit_of("Conv2d", CONV, "A30_no_tf32") == b.CONV_FP32_UNIT
    assert b.conv_unit_of("Conv2d", CONV, "RTX2080Ti") == b.CONV_FP32_UNIT
    assert b.conv_unit_of("Conv2d", CONV, "A30") == gemm.TF32_UNIT
    assert b.conv_unit_of("Linear", LINEAR, "A30_no_tf32") == gemm.FP32_UNIT
    assert b.conv_unit_of("Conv2d", {**CONV, "groups": 64}, "A30_no_tf32") == ""  # depthwise: its own baseline


def _rows(n_conv: int, n_matmul: int) -> tuple[np.ndarray, ...]:
    """n_conv convolutions at 0.5 of the peak, n_matmul matmuls at 0.8, one memory-bound matmul (out)."""
    unit = np.array(["conv_fp32"] * n_conv + [gemm.FP32_UNIT] * n_matmul + [gemm.FP32_UNIT], dtype=object)
    c = np.full(len(unit), 4e-5)
    m = np.full(len(unit), 1e-6)
    m[-1] = 1e-4
    t = FLOOR + np.r_[np.full(n_conv, 8e-5), np.full(n_matmul, 5e-5), 1e-4]
    return unit, c, m, t


def test_unit_fractions_are_the_known_medians_and_paired_needs_both():
    b = _bench()
    assert b.unit_fractions(*_rows(5, 5), FLOOR, paired=False) == pytest.approx({"conv_fp32": 0.5, "fp32": 0.8})
    assert b.unit_fractions(*_rows(5, 5), FLOOR, paired=True) == pytest.approx({"conv_fp32": 0.5, "fp32": 0.8})
    assert b.unit_fractions(*_rows(5, 4), FLOOR, paired=False) == pytest.approx({"conv_fp32": 0.5})
    assert b.unit_fractions(*_rows(5, 4), FLOOR, paired=True) == {}
    assert b.unit_fractions(*_rows(4, 5), FLOOR, paired=False) == {}  # no convolution unit learnt: nominal


def test_variants_restore_the_shipped_functions():
    b = _bench()
    shipped = (fit.prepare, fit.offsets, fit.unit_efficiency_of, gemm.unit_efficiencies, gemm.tree_view)
    for name, make in b.VARIANTS.items():
        with make():
            now = (fit.prepare, fit.offsets, fit.unit_efficiency_of, gemm.unit_efficiencies, gemm.tree_view)
            assert now != shipped, name
        assert (fit.prepare, fit.offsets, fit.unit_efficiency_of, gemm.unit_efficiencies, gemm.tree_view) == shipped


def test_occupancy_factor_is_sms_over_tiles_below_one_wave():
    b = _bench()
    assert b.occupancy_factor(32, 112, 56) == pytest.approx(56.0)  # one 128 x 128 tile: one SM of 56
    assert b.occupancy_factor(256, 512, 56) == pytest.approx(7.0)  # 2 x 4 tiles
    assert b.occupancy_factor(4096, 4096, 56) == 1.0  # 1024 tiles fill the SMs
    assert b.occupancy_factor(0, 0, 56) == 1.0  # not a GEMM
