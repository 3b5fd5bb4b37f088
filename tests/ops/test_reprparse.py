import pytest

from opcost.errors import OpcostError
from opcost.ops.extract import trace
from opcost.ops.models import meta_model
from opcost.ops.reprparse import parse_repr, spec_from_repr


def test_parse_repr_arguments():
    assert parse_repr("Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)") == (
        "Conv2d",
        [3, 64],
        {"kernel_size": (7, 7), "stride": (2, 2), "padding": (3, 3), "bias": False},
    )
    assert parse_repr("StochasticDepth(p=0.0, mode=row)") == ("StochasticDepth", [], {"p": 0.0, "mode": "row"})
    assert parse_repr("LayerNorm((96,), eps=1e-06, elementwise_affine=True)")[1] == [(96,)]
    assert parse_repr("GELU(approximate='none')")[2] == {"approximate": "none"}


def test_old_reprs_match_the_layers_extract_finds():
    """Early-2025 reprs (BatchNorm2d without today's bias=True) get extract's op_ids."""
    tr = trace(meta_model("resnet34"), (32, 3, 56, 56))
    extracted = {c.spec.op_id for c in tr.calls}
    stem = spec_from_repr(
        "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)", (32, 3, 56, 56)
    )
    bn = spec_from_repr(
        "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)", (32, 64, 28, 28)
    )
    relu = spec_from_repr("ReLU(inplace=True)", (32, 64, 28, 28))
    relu_plain = spec_from_repr("ReLU()", (32, 64, 28, 28))  # the training logs print this form
    assert bn.attrs["bias"] is True
    assert {stem.op_id, bn.op_id, relu.op_id} <= extracted
    assert relu_plain.op_id == relu.op_id


@pytest.mark.parametrize(
    "text,message",
    [
        ("Frobnicate(3)", "unknown module class 'Frobnicate'"),
        ("Conv2d(3, 64, kernel_size=(7, 7)", "not a module repr"),
        ("Conv2d(3, 64, kernel=(7, 7))", "cannot build"),
        ("Linear(in_features=foo(1), out_features=2)", "cannot parse argument"),
    ],
)
def test_bad_reprs(text, message):
    with pytest.raises(OpcostError, match=message.replace("(", r"\(")):
        spec_from_repr(text, (1, 3, 8, 8))
