"""Non-finite hyper-parameters (issue 23): a -inf attention mask survives specs, op ids, tables and JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import torch
from torch import nn

from opcost.ops.catalog import operations_table
from opcost.ops.extract import trace_call
from opcost.ops.hparams import hyperparameters
from opcost.ops.keys import json_safe
from opcost.ops.spec import OpSpec, build, decode_value, encode_value


class CausalMask(nn.Module):
    """minGPT's attention mask: scores where the causal mask is 0 become -inf."""

    def __init__(self, fill: float = float("-inf")) -> None:
        super().__init__()
        self.fill = fill
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)).view(1, 1, 4, 4))
        self.drop = nn.Dropout(0.0)  # a child, so the functional calls are ops of their own

    def forward(self, att: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.softmax(att.masked_fill(self.mask == 0, self.fill), dim=-1))


def test_non_finite_floats_encode_explicitly_and_decode_back():
    for x, text in ((float("inf"), "inf"), (float("-inf"), "-inf")):
        assert encode_value(x) == {"float": text}
        assert decode_value(encode_value(x)) == x
    assert math.isnan(decode_value(encode_value(float("nan"))))
    assert encode_value(float("nan")) == {"float": "nan"} and encode_value(1.5) == 1.5
    assert encode_value("-inf") == "-inf"  # a string argument stays a string: no ambiguity with the tag


def _masked_fill(fill: float) -> OpSpec:
    m = CausalMask(fill).to("meta")
    calls = trace_call(m, (torch.empty(2, 3, 4, 4, device="meta"),), {}).calls
    (spec,) = [c.spec for c in calls if c.spec.kind == "masked_fill"]
    return spec


def test_a_minus_inf_mask_has_an_op_id_a_table_row_and_rebuilds():
    spec = _masked_fill(float("-inf"))
    text = spec.key_json()
    assert '{"float":"-inf"}' in text and "Infinity" not in text
    # distinct fills are distinct ops, and the id is stable through JSON
    ids = {_masked_fill(v).op_id for v in (float("-inf"), float("inf"), float("nan"), -1e9)}
    assert len(ids) == 4
    again = OpSpec.from_json(json.loads(json.dumps(spec.to_json(), allow_nan=False)))
    assert again.op_id == spec.op_id
    # rebuilt on the CPU it fills with -inf again
    run = build(again, "cpu", torch.Generator().manual_seed(0))
    out = run()
    assert torch.isneginf(out).all()  # the rebuilt mask input is all True
    assert hyperparameters(spec)["value"] == "-inf"
    table = operations_table({spec.op_id: spec})
    assert table.loc[0, "hp_value"] == "-inf"
    assert "Infinity" not in table.loc[0, "spec_json"]


def test_json_answers_never_hold_nan_or_infinity():
    doc = {"a": float("nan"), "b": [np.float64("inf"), -math.inf, 1.0], "c": {"d": np.float32(2.5)}}
    text = json.dumps(json_safe(doc), allow_nan=False)
    assert json.loads(text) == {"a": "nan", "b": ["inf", "-inf", 1.0], "c": {"d": 2.5}}
