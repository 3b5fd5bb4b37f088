"""Known answers for what a prediction flags as extrapolating (model/composition/extrapolation.py): every range both
ways by EXTRAPOLATION_FACTOR (2) except an op's size and FLOPs, which only flag above; the per-sample input of an image
network against the calibration networks' (round 31: ResNets at 32 x 32 and 56 x 56 were not flagged)."""

from __future__ import annotations

from opcost.model.basis.features import OpRecord
from opcost.model.composition.extrapolation import (
    EXTRAPOLATION_FACTOR,
    NET_SAMPLE_NUMEL,
    extrapolation_warnings,
    network_ranges,
    op_ranges,
    sample_numel,
)


def _rec(i: int, shape: tuple[int, ...], flops: float) -> OpRecord:
    n = 1
    for x in shape:
        n *= x
    return OpRecord(f"op{i}", "Conv2d", {}, shape, n, {"flops": flops})


RECS = [_rec(0, (8, 3, 32, 32), 1e6), _rec(1, (32, 64, 56, 56), 4e9), _rec(2, (16, 128), 2e5)]
# calibration networks at 224 x 224 and 384 x 384, and one 2-D (token) input that has no image size
NETS = network_ranges([[32, 3, 224, 224], [32, 3, 384, 384], [4, 512]])


def test_ranges_by_hand() -> None:
    r = op_ranges(RECS)
    assert r["batch"] == [8.0, 32.0]  # 4-D inputs only: the 2-D op's 16 is no image batch
    assert r["in_numel"] == [2048.0, 32 * 64 * 56 * 56.0]
    assert r["flops"] == [2e5, 4e9]
    assert NETS == {NET_SAMPLE_NUMEL: [3 * 224 * 224.0, 3 * 384 * 384.0]}
    assert sample_numel((4, 512)) is None and sample_numel((2, 3, 32, 32)) == 3072
    assert network_ranges([[4, 512]]) == {} and op_ranges([]) == {}
    assert EXTRAPOLATION_FACTOR == 2.0


def _flags(shape: tuple[int, ...], recs: list[OpRecord] | None = None) -> list[str]:
    return extrapolation_warnings({**op_ranges(RECS), **NETS}, "A30-inference", shape, recs or [])


def test_an_input_smaller_or_larger_than_the_calibration_networks_by_more_than_2x_is_flagged() -> None:
    lo, hi = 3 * 224 * 224, 3 * 384 * 384
    assert not _flags((16, 3, 224, 224))
    # 32 x 32 (3072) and 56 x 56 (9408) per sample: far below 150528 / 2
    for side in (32, 56):
        (w,) = _flags((16, 3, side, side))
        assert f"an input of {3 * side * side} values per sample (3x{side}x{side})" in w
        assert "A30-inference composition layer" in w and f"({lo}..{hi} per sample)" in w
    # the edges: lo / 2 itself is inside, one value less is not; hi x 2 likewise
    assert not _flags((16, 1, 1, lo // 2)) and _flags((16, 1, 1, lo // 2 - 1))
    assert not _flags((16, 1, 1, 2 * hi)) and _flags((16, 1, 1, 2 * hi + 1))
    assert not _flags((16, 1024))  # no image: no per-sample range to fall outside


def test_batch_both_ways_and_op_size_above_only() -> None:
    assert not _flags((4, 3, 224, 224)) and not _flags((64, 3, 224, 224))
    (w,) = _flags((3, 3, 224, 224))
    assert w.startswith("batch 3 lies outside the batches the A30-inference model was measured at (8..32)")
    assert "interval is widened" in w and "measure the network at this batch" in w  # the consequence, and advice
    assert _flags((65, 3, 224, 224))
    big = _rec(9, (32, 64, 56, 56), 8e9 + 1)  # FLOPs just over 2x the largest
    (w,) = _flags((16, 3, 224, 224), [RECS[0], big])
    assert w.startswith("1 of 2 ops exceed by more than 2x the largest FLOPs")
    tiny = _rec(8, (1, 1, 1, 1), 1.0)  # far below every op row: floor-bound, not flagged
    assert not _flags((16, 3, 224, 224), [tiny])
