"""Composite ops (attention) and their kernels: what costing sums where nothing covers the composite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opcost.devices import find_device
from opcost.model.basis.features import op_record, part_record
from opcost.model.composition.costing import OpCoster
from opcost.ops.catalog import extract_nets
from opcost.ops.netspec import NetSpec
from opcost.ops.parts import op_parts

A30 = find_device("A30")  # resolved once, as the answer path does (Bundle.device)


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    coster = OpCoster("inference", A30, {"time": _ByBytes()}, ("Linear", "ReLU"), floor, 100.0, 1.0, 100.0)
    costs = coster.cost([rec])
    assert costs.source == ["decomposed"] and costs.proxy == [f"{len(parts)} kernels"]
    each = [(p["bytes_read"] + p["bytes_written"]) / 1e11 + 1e-5 for p in parts]
    assert costs.t_s[0] == pytest.approx(floor + sum(max(t - floor, 0.0) for t in each), rel=1e-12)
    # measured beats decomposed; a model that knows the composite kind predicts it whole
    measured = OpCoster("inference", A30, {"time": _ByBytes()}, ("Linear",), floor, 100.0, 1.0, 100.0,
                        lookup={spec.op_id: (1e-3, 150.0, False)})  # fmt: skip
    assert measured.cost([rec]).source == ["measured"] and measured.cost([rec]).t_s[0] == 1e-3
    knows = OpCoster("inference", A30, {"time": _ByBytes()}, ("MultiheadAttention",), floor, 100.0, 1.0, 100.0)
    assert knows.cost([rec]).source == ["predicted"]


@pytest.fixture(scope="module")
def gpt2_ops():
    """A two-layer GPT-2 built from its config (no weights, no download), on 2 x 64 token ids, SDPA path."""
    pytest.importorskip("transformers")
    net = NetSpec.make("hf:gpt2", ["int64:2,64"], {"n_layer": 2, "attn_implementation": "sdpa"})
    cat = extract_nets([(net, "inference")], show_progress=False)
    return {op_id: (s, cat.metrics[op_id], cat.parts[op_id]) for op_id, s in cat.built.items()}


def test_kinds_no_category_knows_and_sdpa_carry_their_kernels(gpt2_ops):
    by_kind = {}
    for s, m, p in gpt2_ops.values():
        by_kind.setdefault(s.kind, []).append((s, m, p))
    # Hugging Face's Conv1D is a linear layer with its weight transposed: one addmm of the same FLOPs
    for _, m, parts in by_kind["Conv1D"]:
        assert [p["op"] for p in parts] == ["addmm"] and parts[0]["flops"] == m.flops > 0
    # the tanh GELU is elementwise kernels only, no FLOP formula among them
    (gelu,) = by_kind["NewGELUActivation"]
    assert len(gelu[2]) >= 5 and {p["kind"] for p in gelu[2]} <= {"mul", "add", "pow", "tanh"}
    # scaled_dot_product_attention: its matrix products carry all of its FLOPs
    for _, m, parts in by_kind["scaled_dot_product_attention"]:
        assert sum(p["flops"] for p in parts) == m.flops > 0 and "softmax" in {p["kind"] for p in parts}
    # kinds the op categories know keep no parts (LayerNorm, the residual add, dropout)
    assert all(not p for k in ("LayerNorm", "add", "Dropout") for _, _, p in by_kind.get(k, []))


def test_a_conv1d_is_costed_as_the_linear_layer_it_is(gpt2_ops):
    floor = 2e-5
    coster = OpCoster("inference", A30, {"time": _ByBytes()}, ("Linear", "ReLU"), floor, 100.0, 1.0, 100.0)
    for s, m, parts in gpt2_ops.values():
        if s.kind != "Conv1D":
            continue
        rec = op_record(s, {**m.as_dict(), "parts": parts})
        costs = coster.cost([rec])
        assert costs.source == ["decomposed"]
        (part,) = parts
        linear = part_record(rec, 0, part)
        k, n = linear.hp["in_features"], linear.hp["out_features"]
        assert (linear.kind, linear.input_shape, part["flops"]) == ("Linear", (128, k), 2 * 128 * k * n)
        byt = (part["bytes_read"] + part["bytes_written"]) / 1e11 + 1e-5
        assert costs.t_s[0] == pytest.approx(floor + max(byt - floor, 0.0), rel=1e-12)


def test_an_op_nothing_covers_is_charged_above_the_floor_and_counts_in_the_total():
    """Charged ops sit in the composition's sum like every op: never left out of a total."""
    from opcost.model.basis.physics import roofline_s
    from opcost.model.composition.compose import Composition, network_terms
    from opcost.model.training.netval import charge_ratio

    # the charge ratio: cost above the floor per roofline second, over ops big enough to leave the floor
    t = np.array([1e-5, 3e-3, 5e-3, 9e-3, 2e-5])
    roof = np.array([1e-7, 1e-3, 2e-3, 4e-3, 1e-6])
    assert charge_ratio(t, roof, 1e-5) == pytest.approx(np.median((t[1:4] - 1e-5) / roof[1:4]))
    rec = op_record_like("Mystery", flops=2 * 10**9, bytes_moved=4 * 10**6)
    floor = 1e-5
    coster = OpCoster("inference", A30, {"time": _ByBytes()}, ("Linear",), floor, 100.0, 3.0, 150.0)
    costs = coster.cost([rec])
    assert costs.source == ["charged"]
    assert costs.t_s[0] == pytest.approx(floor + 3.0 * roofline_s("Mystery", rec.metrics, A30), rel=1e-12)
    terms = network_terms(costs, np.array([4.0]), [rec], floor, A30, "inference")
    assert terms["sum"] == pytest.approx(4 * (costs.t_s[0] - floor), rel=1e-12)
    comp = Composition("inference", time_coef={"sum": 0.5, "calls_floor": 1.0, "params_bw": 0.0, "const": 0.0})
    assert comp.time(terms) == pytest.approx(0.5 * terms["sum"] + 4 * floor, rel=1e-12)


def op_record_like(kind: str, flops: int, bytes_moved: int):
    from opcost.model.basis.features import OpRecord

    metrics = {"flops": flops, "bytes_read": bytes_moved, "bytes_written": 0, "params": 0, "is_view": False,
               "output_shapes": [[1000]], "parts": []}  # fmt: skip
    return OpRecord("mystery", kind, {}, (1000,), 1000, metrics)
