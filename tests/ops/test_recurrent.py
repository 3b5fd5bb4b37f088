"""Recurrent layers (issue 23): rebuilt from their spec, and costed by their sequential steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from opcost.devices import find_device
from opcost.model.basis.features import op_record
from opcost.model.composition.costing import OpCoster
from opcost.ops.extract import trace_call
from opcost.ops.features import op_metrics
from opcost.ops.parts import op_parts
from opcost.ops.recurrent import recurrent_steps
from opcost.ops.spec import OpSpec, build

A30 = find_device("A30")  # resolved once, as the answer path does (Bundle.device)


def _spec(module: nn.Module, x_shape: tuple[int, ...]) -> OpSpec:
    x = torch.empty(x_shape, device="meta")
    (call, *_) = trace_call(module.to("meta"), (x,), {}).calls
    return call.spec


@pytest.mark.parametrize(
    "module, x_shape, expect",
    [
        (nn.LSTM(8, 16, num_layers=2, batch_first=True), (3, 5, 8), {"num_layers": 2, "batch_first": True}),
        (nn.LSTM(8, 16, proj_size=4), (5, 3, 8), {"proj_size": 4}),
        (nn.GRU(8, 16, bidirectional=True), (5, 3, 8), {"bidirectional": True}),
        (nn.RNN(8, 16, nonlinearity="relu", bias=False), (5, 3, 8), {"nonlinearity": "relu", "bias": False}),
        (nn.LSTMCell(8, 4), (3, 8), {"hidden_size": 4}),
        (nn.GRUCell(8, 4), (3, 8), {"hidden_size": 4}),
        (nn.RNNCell(8, 4, nonlinearity="relu"), (3, 8), {"nonlinearity": "relu"}),
    ],
)
def test_a_recurrent_layer_is_rebuilt_from_its_spec(module, x_shape, expect):
    spec = OpSpec.from_json(_spec(module, x_shape).to_json())
    assert expect.items() <= spec.attrs.items()
    run = build(spec, "cpu", torch.Generator().manual_seed(0))
    rebuilt = run.fn
    assert type(rebuilt) is type(module)
    ref = type(module)(**{k: v for k, v in spec.attrs.items()})
    assert {n: p.shape for n, p in rebuilt.named_parameters()} == {n: p.shape for n, p in ref.named_parameters()}
    out = run()
    first = out[0] if isinstance(out, tuple) else out
    assert first.shape[-1] == (expect.get("proj_size") or spec.attrs["hidden_size"]) * (
        2 if spec.attrs.get("bidirectional") else 1
    )
    assert op_metrics(spec).flops > 0


def _lstm(layers: int, steps: int) -> OpSpec:
    return _spec(nn.LSTM(16, 32, num_layers=layers, batch_first=True), (4, steps, 16))


def test_lstm_parts_repeat_once_per_sequential_step():
    for layers, steps in ((1, 8), (2, 8), (2, 16)):
        parts = op_parts(_lstm(layers, steps))
        rec = op_record(_lstm(layers, steps), {})
        assert recurrent_steps("LSTM", rec.hp, rec.input_shape) == layers * steps
        # the hidden-state GEMM ([4, 32] x [32, 128]) runs once per step of every layer
        hidden = [p for p in parts if p["op"] == "addmm" and p["input_shapes"][1] == [4, 32]]
        assert sum(p["count"] for p in hidden) == 2 * layers * steps - steps  # layer 0's input GEMM is [4, 16]
        assert sum(p["flops"] * p["count"] for p in parts) == op_metrics(_lstm(layers, steps)).flops


class _ByBytes:
    """A fixed physical rule, not the code under test: time = bytes moved / 100 GB/s + 10 us."""

    def predict(self, items):
        return np.array([(r.metrics["bytes_read"] + r.metrics["bytes_written"]) / 1e11 + 1e-5 for r, _ in items])


def _cost(layers: int, steps: int, floor: float = 2e-5) -> float:
    spec = _lstm(layers, steps)
    rec = op_record(spec, {**op_metrics(spec).as_dict(), "parts": op_parts(spec)})
    coster = OpCoster("inference", A30, {"time": _ByBytes()}, ("Linear", "ReLU"), floor, 100.0, 1.0, 100.0)
    costs = coster.cost([rec])
    assert costs.source == ["decomposed"]
    return float(costs.t_s[0])


def test_lstm_cost_grows_linearly_in_steps_and_layers():
    floor = 2e-5
    # every sequential step launches at least once: never less than a floor per step and layer
    assert _cost(6, 64) >= 6 * 64 * floor
    # known answer: each kernel of a step is costed by the rule above; the total is steps x layers x that
    assert _cost(2, 32) / _cost(2, 16) == pytest.approx(2.0, rel=0.02)
    assert _cost(2, 64) / _cost(2, 16) == pytest.approx(4.0, rel=0.02)
    assert _cost(6, 16) / _cost(3, 16) == pytest.approx(2.0, rel=0.05)
    assert _cost(3, 16) - _cost(2, 16) == pytest.approx(_cost(6, 16) - _cost(5, 16), rel=1e-6)


def test_sequential_steps_of_a_call():
    assert recurrent_steps("LSTM", {"num_layers": 6, "batch_first": True}, (32, 512, 128)) == 6 * 512
    assert recurrent_steps("GRU", {"num_layers": 2, "bidirectional": True}, (100, 8, 64)) == 2 * 2 * 100
    assert recurrent_steps("RNN", {"num_layers": 1, "batch_first": True}, (7, 64)) == 7  # unbatched: T first
    assert recurrent_steps("LSTMCell", {}, (8, 64)) == 1 and recurrent_steps("Linear", {}, (8, 64)) == 1
