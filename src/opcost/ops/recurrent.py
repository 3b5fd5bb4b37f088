"""Recurrent layers and their sequential steps, without torch (costing reads this from cached records).

An `nn.LSTM`, `nn.GRU` or `nn.RNN` over T time steps with L layers (D directions) runs T x L x D
steps one after the other: each step waits for the previous hidden state, so however the kernels of
a step are fused, a step is at least one launch, and the layer costs its steps times the per-step
cost of the cell's GEMMs and gates, never one fused op (ops/parts.compact_steps, model/composition/costing.py).
A cell (`nn.LSTMCell`, ...) is one step. Which kinds are which: ops/kinds.py (`recurrent`).
"""

from __future__ import annotations

from typing import Any

from opcost.ops.kinds import is_sequence


def recurrent_steps(kind: str, hp: dict[str, Any], input_shape: tuple[int, ...]) -> int:
    """Sequential steps of one call: T x num_layers x (2 if bidirectional) for a sequence layer, 1 for a
    cell or any other kind. T is the input's time axis: dim 1 with `batch_first`, else dim 0 (a 2-D input
    is one unbatched sequence)."""
    if not is_sequence(kind) or not input_shape:
        return 1
    time_axis = 1 if hp.get("batch_first") and len(input_shape) == 3 else 0
    steps = int(input_shape[time_axis])
    return max(steps * int(hp.get("num_layers") or 1) * (2 if hp.get("bidirectional") else 1), 1)
