"""Recurrent networks for the extract sets (sets.yaml) and the cpu-rnn campaign (params.yaml).

Three builders, `lstm`, `gru` and `rnn`, give a batch-first LSTM, GRU or Elman RNN over `[batch, time, features]`
inputs, returning the top layer's outputs for every step. Its arguments (sets.yaml `model_args`)
span what the costing of recurrent layers depends on: the cell, the hidden width, the layers and the
directions; the sequence length and batch come from the set's `input_shape`. Measured on a CPU, the
sets check that cost by sequential steps (ops/recurrent.py) gets the seq-len and layer scaling right
(bench/recurrent_scaling.py).
"""

from __future__ import annotations

from torch import Tensor, nn

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


class Recurrent(nn.Module):
    """A stack of recurrent layers; the output is the top layer's hidden state at every step."""

    def __init__(self, cell: str, features: int, hidden: int, layers: int, bidirectional: bool) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell {cell!r} is not one of {', '.join(CELLS)}")
        self.rnn = CELLS[cell](features, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.rnn(x)
        return out


def lstm(features: int = 32, hidden: int = 64, layers: int = 1, bidirectional: bool = False) -> nn.Module:
    """An `nn.LSTM` network of `layers` layers of `hidden` units."""
    return Recurrent("lstm", features, hidden, layers, bidirectional)


def gru(features: int = 32, hidden: int = 64, layers: int = 1, bidirectional: bool = False) -> nn.Module:
    """An `nn.GRU` network of `layers` layers of `hidden` units."""
    return Recurrent("gru", features, hidden, layers, bidirectional)


def rnn(features: int = 32, hidden: int = 64, layers: int = 1, bidirectional: bool = False) -> nn.Module:
    """An Elman `nn.RNN` (tanh) network of `layers` layers of `hidden` units."""
    return Recurrent("rnn", features, hidden, layers, bidirectional)
