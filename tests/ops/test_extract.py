"""Call counts worked out from the torchvision network definitions, and FLOP coverage."""

from collections import Counter

import pytest

from opcost.ops.catalog import extract_sets
from opcost.ops.extract import trace
from opcost.ops.features import op_metrics
from opcost.ops.models import meta_model
from opcost.ops.spec import OpSpec
from opcost.params.extract import ModelInputSet


def kinds(model: str, shape, training: bool = False) -> Counter:
    tr = trace(meta_model(model), shape, training=training)
    return Counter(c.spec.kind for c in tr.calls)


@pytest.mark.slow
def test_resnet18_call_counts():
    # stem conv/bn/relu/maxpool; 8 BasicBlocks of conv-bn-relu-conv-bn (+= identity) relu; 3 downsample
    # conv+bn pairs; avgpool, torch.flatten, fc. ReLU is one module per block called twice.
    c = kinds("resnet18", (1, 3, 224, 224))
    assert c == Counter(
        {
            "Conv2d": 20,
            "BatchNorm2d": 20,
            "ReLU": 17,
            "add": 8,
            "MaxPool2d": 1,
            "AdaptiveAvgPool2d": 1,
            "flatten": 1,
            "Linear": 1,
        }
    )


@pytest.mark.slow
def test_resnet18_residual_add_is_inplace_with_two_inputs():
    tr = trace(meta_model("resnet18"), (1, 3, 224, 224))
    adds = [c.spec for c in tr.calls if c.spec.kind == "add"]
    assert all(s.attrs == {"inplace": True} and len(s.inputs) == 2 for s in adds)
    assert adds[0].inputs[0].shape == (1, 64, 56, 56)


@pytest.mark.slow
def test_vit_b_16_call_counts():
    # _process_input: conv_proj, reshape, permute; class token expand + cat; encoder: + pos_embedding,
    # dropout, 12 blocks of (ln_1, attention, dropout, +, ln_2, mlp[Linear, GELU, Dropout, Linear,
    # Dropout], +), final ln; x[:, 0]; heads.head Linear.
    c = kinds("vit_b_16", (1, 3, 224, 224))
    assert c == Counter(
        {
            "Conv2d": 1,
            "reshape": 1,
            "permute": 1,
            "expand": 1,
            "cat": 1,
            "add": 25,
            "Dropout": 37,
            "LayerNorm": 25,
            "MultiheadAttention": 12,
            "Linear": 25,
            "GELU": 12,
            "getitem": 1,
        }
    )


@pytest.mark.slow
def test_vit_attention_is_one_self_attention_op():
    tr = trace(meta_model("vit_b_16"), (1, 3, 224, 224))
    mha = [c.spec for c in tr.calls if c.spec.kind == "MultiheadAttention"]
    assert len({s.op_id for s in mha}) == 1
    s = mha[0]
    assert s.args == [{"tensor": 0}] * 3 and s.kwargs == {"need_weights": False}
    assert [i.shape for i in s.inputs] == [(1, 197, 768)]
    assert s.attrs["embed_dim"] == 768 and s.attrs["num_heads"] == 12 and s.attrs["batch_first"] is True


@pytest.mark.slow
def test_densenet121_call_counts():
    # 58 dense layers (6+12+24+16), each: cat of its inputs, bn-relu-conv, bn-relu-conv; each of 4 blocks
    # ends with a cat; 3 transitions bn-relu-conv-avgpool; stem conv-bn-relu-maxpool; norm5; then
    # F.relu, F.adaptive_avg_pool2d, torch.flatten and the classifier.
    c = kinds("densenet121", (1, 3, 224, 224))
    assert c == Counter(
        {
            "cat": 62,
            "Conv2d": 120,
            "BatchNorm2d": 121,
            "ReLU": 120,
            "relu": 1,
            "MaxPool2d": 1,
            "AvgPool2d": 3,
            "adaptive_avg_pool2d": 1,
            "flatten": 1,
            "Linear": 1,
        }
    )


@pytest.mark.slow
def test_training_mode_runs_googlenet_aux_classifiers():
    # In train mode each of the two InceptionAux heads runs: adaptive_avg_pool2d, conv (Conv2d, BN, F.relu),
    # flatten, fc1, F.relu, dropout, fc2 = 9 calls.
    inf = kinds("googlenet", (2, 3, 224, 224))
    tr = kinds("googlenet", (2, 3, 224, 224), training=True)
    assert sum(tr.values()) - sum(inf.values()) == 18
    assert tr - inf == Counter(
        {"adaptive_avg_pool2d": 2, "Conv2d": 2, "BatchNorm2d": 2, "relu": 4, "flatten": 2, "Linear": 4, "Dropout": 2}
    )


REPRESENTATIVE = [
    ("alexnet", 224),
    ("resnet50", 224),
    ("densenet121", 224),
    ("inception_v3", 299),
    ("googlenet", 224),
    ("efficientnet_b0", 224),
    ("mobilenet_v3_small", 224),
    ("shufflenet_v2_x0_5", 224),
    ("squeezenet1_1", 224),
    ("regnet_y_400mf", 224),
    ("mnasnet0_5", 224),
    ("convnext_tiny", 224),
    ("vit_b_16", 224),
    ("swin_t", 224),
    ("swin_v2_t", 224),
    ("maxvit_t", 224),
    ("vgg11_bn", 224),
]


@pytest.mark.slow
def test_flop_coverage_of_representative_models():
    sets = [ModelInputSet(m, (2, 3, s, s)) for m, s in REPRESENTATIVE]
    rows = extract_sets(sets, show_progress=False).coverage_rows()
    bad = {r["model"]: r["coverage"] for r in rows if abs(r["coverage"] - 1) > 0.01}
    assert not bad
    assert all(r["flops_total"] > 0 for r in rows)


@pytest.mark.slow
def test_coverage_catches_a_lost_hyper_parameter():
    """A spec that forgot `groups` of a depthwise conv rebuilds a dense conv: more FLOPs."""
    tr = trace(meta_model("efficientnet_b0"), (1, 3, 224, 224))
    dw = next(c.spec for c in tr.calls if c.spec.kind == "Conv2d" and c.spec.attrs["groups"] > 1)
    broken = OpSpec(**{**dw.__dict__, "attrs": {**dw.attrs, "groups": 1}})
    assert op_metrics(broken).flops == op_metrics(dw).flops * dw.attrs["groups"]


@pytest.mark.slow
def test_training_forward_flops_equal_inference():
    rows = extract_sets(
        [ModelInputSet("resnet18", (2, 3, 64, 64), modes=("inference", "training"))], False
    ).coverage_rows()
    assert rows[0]["flops_total"] == rows[1]["flops_total"] and all(r["coverage"] == pytest.approx(1.0) for r in rows)


def test_op_metrics_of_a_conv_are_exact():
    tr = trace(meta_model("resnet18"), (1, 3, 224, 224))
    stem = tr.calls[0].spec
    m = op_metrics(stem)
    # 64 x 112 x 112 outputs, each 3*7*7 multiply-adds = 2 FLOPs
    assert m.flops == 2 * 64 * 112 * 112 * 3 * 7 * 7
    assert m.params == 64 * 3 * 7 * 7
    assert m.bytes_read == 4 * (3 * 224 * 224 + 64 * 3 * 7 * 7)
    assert m.bytes_written == 4 * 64 * 112 * 112
    assert m.output_shapes == ((1, 64, 112, 112),) and not m.is_view


@pytest.mark.slow
def test_views_move_no_bytes():
    tr = trace(meta_model("vit_b_16"), (1, 3, 224, 224))
    permute = next(c.spec for c in tr.calls if c.spec.kind == "permute")
    m = op_metrics(permute)
    assert m.is_view and m.bytes_read == 0 and m.bytes_written == 0 and m.flops == 0
