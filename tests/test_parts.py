"""Composite ops (attention) and their kernels: what costing sums where nothing covers the composite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opcost.model.costing import OpCoster, part_record
from opcost.model.features import op_record
from opcost.ops.catalog import extract_nets
from opcost.ops.netspec import NetSpec
from opcost.ops.parts import op_parts


@pytest.fixture(scope="module")
def composites():
    """Real composites as the extract stage records them: ViT's multi-head attention (B=2, 197 tokens,
    768 wide, 12 heads) and Swin-T's shifted-window attention blocks (224 x 224 input)."""
    cat = extract_nets(
        [
            (NetSpec.make("vit_b_16", ["float32:2,3,224,224"]), "inference"),
            (NetSpec.make("swin_t", ["float32:2,3,224,224"]), "inference"),
        ],
        show_progress=False,
    )
    out = {}
    for op_id, spec in cat.built.items():
        if spec.kind in ("MultiheadAttention", "ShiftedWindowAttention"):
            out.setdefault(spec.kind, []).append((spec, cat.metrics[op_id], cat.parts[op_id]))
    return out


def test_parts_of_multihead_attention_are_its_kernels(composites):
    ((spec, metrics, parts),) = composites["MultiheadAttention"]
    # the catalog's parts are those of the spec alone
    assert parts == op_parts(spec)
    # every FLOP of the composite is in a part: 2 x (2 x 197 x 768 x 2304) for the q/k/v projection,
    # 2 x 2 x 12 x 197 x 197 x 64 for q k^T and again for attn v, 2 x 394 x 768 x 768 for the output
    assert sum(p["flops"] for p in parts) == metrics.flops
    gemms = [(p["op"], p["flops"]) for p in parts if p["op"] in ("mm", "addmm", "bmm")]
    assert gemms == [
        ("mm", 2 * 394 * 768 * 2304),
        ("bmm", 2 * 24 * 197 * 197 * 64),
        ("bmm", 2 * 24 * 197 * 197 * 64),
        ("addmm", 2 * 394 * 768 * 768),
    ]
    assert "softmax" in {p["kind"] for p in parts}
    # no views among the parts (a transpose moves nothing), and every part moves data
    assert not {p["op"] for p in parts} & {"view", "transpose", "permute", "_unsafe_view", "expand", "t"}
    assert all(p["bytes_read"] + p["bytes_written"] > 0 for p in parts)
    # the kernels move far more than the composite's first-order bytes (inputs, weights, output once)
    assert sum(p["bytes_read"] + p["bytes_written"] for p in parts) > 3 * (metrics.bytes_read + metrics.bytes_written)


def test_shifted_window_attention_parts_roll_pad_and_partition(composites):
    shifted = [(s, m, p) for s, m, p in composites["ShiftedWindowAttention"] if any(x["op"] == "roll" for x in p)]
    assert shifted, "Swin-T's odd blocks shift their windows"
    for _spec, metrics, parts in composites["ShiftedWindowAttention"]:
        assert sum(p["flops"] for p in parts) == metrics.flops
        assert {"softmax", "contiguous"} <= {p["kind"] for p in parts}  # softmax, window partition copies
    # an op that is not a composite has no parts
    conv = next(s for s in extract_nets([(NetSpec.make("resnet18", ["float32:1,3,32,32"]), "inference")],
                                        show_progress=False).built.values() if s.kind == "Conv2d")  # fmt: skip
    assert op_parts(conv) == []


def test_a_matrix_product_part_is_the_linear_layer_of_its_gemm(composites):
    ((spec, metrics, parts),) = composites["MultiheadAttention"]
    owner = op_record(spec, {**metrics.as_dict(), "parts": parts})
    recs = [part_record(owner, i, p) for i, p in enumerate(parts)]
    by_op: dict[str, list] = {}
    for p, r in zip(parts, recs):
        by_op.setdefault(p["op"], []).append(r)
    bmm = by_op["bmm"][0]  # q k^T: [24, 197, 64] x [24, 64, 197]
    assert bmm.kind == "Linear" and bmm.hp == {"in_features": 64, "out_features": 197, "bias": False}
    assert bmm.input_shape == (24, 197, 64) and bmm.metrics["flops"] == 2 * 24 * 197 * 197 * 64
    attn_v = by_op["bmm"][1]  # softmax(q k^T) v: [24, 197, 197] x [24, 197, 64]
    assert attn_v.hp == {"in_features": 197, "out_features": 64, "bias": False}
    (addmm,) = by_op["addmm"]  # the output projection, with its bias
    assert addmm.hp == {"in_features": 768, "out_features": 768, "bias": True} and addmm.input_shape == (394, 768)
    assert {r.kind for r in recs} >= {"Linear", "softmax", "contiguous"}
    assert len({r.op_id for r in recs}) == len(recs) and all(r.op_id.startswith(spec.op_id) for r in recs)
    assert math.prod(bmm.input_shape) == bmm.in_numel


class _ByBytes:
    """A stand-in model at the hardware boundary of nothing: time = bytes moved / 100 GB/s + 10 us, a
    fixed physical rule, so the test knows every part's cost without the code under test."""

    def predict(self, items):
        return np.array([(r.metrics["bytes_read"] + r.metrics["bytes_written"]) / 1e11 + 1e-5 for r, _ in items])


def test_an_uncovered_composite_costs_floor_plus_its_kernels_above_the_floor(composites):
    ((spec, metrics, parts),) = composites["MultiheadAttention"]
    rec = op_record(spec, {**metrics.as_dict(), "parts": parts})
    floor = 2e-5
    coster = OpCoster("inference", "A30", {"time": _ByBytes()}, ("Linear", "ReLU"), floor, 100.0, 1.0, 100.0)
    costs = coster.cost([rec])
    assert costs.source == ["decomposed"] and costs.proxy == [f"{len(parts)} kernels"]
    each = [(p["bytes_read"] + p["bytes_written"]) / 1e11 + 1e-5 for p in parts]
    assert costs.t_s[0] == pytest.approx(floor + sum(max(t - floor, 0.0) for t in each), rel=1e-12)
    # measured beats decomposed; a model that knows the composite kind predicts it whole
    measured = OpCoster("inference", "A30", {"time": _ByBytes()}, ("Linear",), floor, 100.0, 1.0, 100.0,
                        lookup={spec.op_id: (1e-3, 150.0, False)})  # fmt: skip
    assert measured.cost([rec]).source == ["measured"] and measured.cost([rec]).t_s[0] == 1e-3
    knows = OpCoster("inference", "A30", {"time": _ByBytes()}, ("MultiheadAttention",), floor, 100.0, 1.0, 100.0)
    assert knows.cost([rec]).source == ["predicted"]
