import hashlib
import json

import pytest
import torch
from torch import nn

from opcost.errors import OpcostError
from opcost.ops.spec import (
    CATEGORY_MODULE,
    OpSpec,
    TensorInput,
    build,
    decode_value,
    encode_value,
    function_kind,
    module_attrs,
    resolve_target,
    target_of_class,
)


def conv_spec(module: nn.Module, shape=(32, 3, 56, 56)) -> OpSpec:
    return OpSpec(
        kind=type(module).__name__,
        category=CATEGORY_MODULE,
        target=target_of_class(type(module)),
        attrs=module_attrs(module),
        args=[{"tensor": 0}],
        inputs=(TensorInput(shape, "float32"),),
    )


def test_module_attrs_are_full_constructor_arguments():
    attrs = module_attrs(nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False))
    # every Conv2d constructor argument, sizes as pairs (Conv2d stores them via _pair)
    assert attrs == {
        "in_channels": 3,
        "out_channels": 64,
        "kernel_size": [7, 7],
        "stride": [2, 2],
        "padding": [3, 3],
        "dilation": [1, 1],
        "groups": 1,
        "bias": False,
        "padding_mode": "zeros",
    }


def test_op_id_is_sha256_of_canonical_key_and_ignores_spelling():
    a = conv_spec(nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False))
    b = conv_spec(nn.Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), dilation=1, bias=False))
    assert a.op_id == b.op_id
    key = {
        "kind": "Conv2d",
        "attrs": {
            "bias": False,
            "dilation": [1, 1],
            "groups": 1,
            "in_channels": 3,
            "kernel_size": [7, 7],
            "out_channels": 64,
            "padding": [3, 3],
            "padding_mode": "zeros",
            "stride": [2, 2],
        },
        "args": [{"tensor": 0}],
        "kwargs": {},
        "inputs": [{"shape": [32, 3, 56, 56], "dtype": "float32"}],
    }
    text = json.dumps(key, sort_keys=True, separators=(",", ":"))
    assert a.op_id == hashlib.sha256(text.encode()).hexdigest()[:16]
    # a different shape, dtype or hyper-parameter is a different op
    assert conv_spec(nn.Conv2d(3, 64, 7, 2, 3, bias=False), (16, 3, 56, 56)).op_id != a.op_id
    assert conv_spec(nn.Conv2d(3, 64, 7, 2, 3, bias=True)).op_id != a.op_id


def test_inplace_is_not_part_of_the_key():
    a = conv_spec(nn.ReLU(inplace=True), (2, 4, 8, 8))
    b = conv_spec(nn.ReLU(), (2, 4, 8, 8))
    assert a.attrs["inplace"] is True and b.attrs["inplace"] is False
    assert a.op_id == b.op_id


def test_encode_decode_round_trip_keeps_tuples_in_calls():
    x = torch.empty(2, 3)
    tensors: list = []
    enc = encode_value([x, (slice(None), 0), Ellipsis, torch.float16, [x, 1.5]], tensors, call=True)
    assert enc == [
        {"tensor": 0},
        {"tuple": [{"slice": [None, None, None]}, 0]},
        {"ellipsis": True},
        {"dtype": "float16"},
        [{"tensor": 0}, 1.5],
    ]
    assert tensors == [x] or (len(tensors) == 1 and tensors[0] is x)
    y = torch.ones(2, 3)
    dec = decode_value(enc, [y])
    assert dec[0] is y and dec[1] == (slice(None), 0) and dec[2] is Ellipsis and dec[3] is torch.float16
    # hyper-parameters do not keep the tuple/list distinction
    assert encode_value((1, 2)) == [1, 2]


def test_encode_rejects_unknown_values_clearly():
    with pytest.raises(OpcostError, match="cannot record a value of type object"):
        encode_value(object())


@pytest.mark.parametrize(
    "name,expected",
    [
        ("__iadd__", ("add", True)),
        ("add_", ("add", True)),
        ("add", ("add", False)),
        ("__add__", ("add", False)),
        ("__radd__", ("add", False)),
        ("__rmul__", ("mul", False)),
        ("__rsub__", ("rsub", False)),
        ("__getitem__", ("getitem", False)),
        ("cat", ("cat", False)),
    ],
)
def test_function_kind(name, expected):
    assert function_kind(name) == expected


def test_resolve_target():
    assert resolve_target("torch.cat") is torch.cat
    assert resolve_target("torch.nn.modules.conv.Conv2d") is nn.Conv2d
    assert resolve_target("torch.Tensor.add") is torch.Tensor.add
    assert resolve_target("torch._C._nn.avg_pool2d") is torch._C._nn.avg_pool2d
    with pytest.raises(OpcostError, match="cannot import operation target 'torch.nope'"):
        resolve_target("torch.nope")


def test_build_runs_real_module_and_function_on_cpu():
    spec = conv_spec(nn.Conv2d(3, 8, 3, padding=1, bias=False), (2, 3, 8, 8))
    r = build(spec, "cpu", generator=torch.Generator().manual_seed(0))
    assert isinstance(r.fn, nn.Conv2d) and r.fn.weight.device.type == "cpu"
    out = r()
    assert out.shape == (2, 8, 8, 8)
    # the same weights and input give what a hand-made conv gives
    assert torch.allclose(out, torch.nn.functional.conv2d(r.inputs[0], r.fn.weight, padding=1))
    add = OpSpec(
        kind="add",
        category="function",
        target="torch.Tensor.add",
        attrs={"inplace": False},
        args=[{"tensor": 0}, {"tensor": 1}],
        inputs=(TensorInput((4,), "float32"), TensorInput((4,), "float32")),
    )
    r = build(add, "cpu")
    assert torch.equal(r(), r.inputs[0] + r.inputs[1])


def test_spec_json_round_trip():
    spec = conv_spec(nn.Conv2d(3, 64, 7, 2, 3, bias=False))
    again = OpSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec and again.op_id == spec.op_id


def test_layer_id_groups_a_layer_across_batch_and_resolution_but_not_across_widths():
    """The grouped split's unit: one layer at other batch sizes and resolutions, never a whole kind."""
    from opcost.ops.layers import layer_id

    def lid(module, shape):
        return layer_id(json.dumps(conv_spec(module, shape).to_json()))

    relu = nn.ReLU(inplace=True)
    # the same ReLU of a network at another resolution and batch: one layer
    assert lid(relu, (32, 64, 56, 56)) == lid(relu, (32, 64, 28, 28)) == lid(nn.ReLU(), (8, 64, 299, 299))
    # ReLUs over 64 and over 512 channels are different layers (else every ReLU would be one group)
    assert lid(relu, (32, 64, 56, 56)) != lid(relu, (32, 512, 56, 56))
    # a convolution at two resolutions: one layer; its width is in its hyper-parameters too
    conv = nn.Conv2d(64, 128, 3)
    assert lid(conv, (32, 64, 56, 56)) == lid(conv, (1, 64, 224, 224))
    assert lid(conv, (32, 64, 56, 56)) != lid(nn.Conv2d(64, 128, 1), (32, 64, 56, 56))
    # token inputs keep their embedding width, not their sequence length
    ln = nn.LayerNorm(768)
    assert lid(ln, (8, 128, 768)) == lid(ln, (2, 512, 768))
    assert lid(nn.GELU(), (8, 128, 768)) != lid(nn.GELU(), (8, 128, 3072))
