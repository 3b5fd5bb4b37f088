"""The kernels a composite op runs: what costing sums where nothing measured or modelled the composite.

Multi-head attention and Swin's shifted-window attention are extracted as one op each
(ops/kinds.py `composite`): that is the unit a network calls and a profiler measures. No
reference data measured them, and no measured kind costs like them (a proxy convolution with the
attention's FLOPs put swin_t's training step 43 % low). The same holds for `scaled_dot_product_attention`
and for modules of kinds no op category knows (Hugging Face's `Conv1D`, a linear layer with its
weight transposed; `NewGELUActivation`, a tanh GELU in seven elementwise calls). So each of these also
carries its *parts*:
the composite rebuilt from its spec on meta tensors and run once, eval mode, under a
`TorchDispatchMode` that records every ATen call that launches work (not views, not allocations):
the matrix products, the softmax, and the elementwise and copy kernels of window partition, roll,
padding and masks. Each part has its FLOPs (torch.utils.flop_counter's formulas for the same ATen
op), the bytes it reads and writes (every tensor argument read once, every output written once) and
its shapes. Parts are plain JSON-able dicts, stored in the operations table (`parts_json`) and in the
network cache, so costing them needs no torch (model/composition/costing.py turns them into records).

Recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN` and their cells) carry parts too: the meta path
runs them step by step (per step, the input and hidden GEMMs and the gate kernels), which is how
they cost on any device, as sequential steps, never as one fused op; their parts are listed once
each with a `count` (`compact_steps`).

The trace is the meta device's path: fused kernels a GPU may pick instead (fused attention for
`need_weights=False`) are costed as their unfused math, a conservative bound.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from opcost.ops import kinds
from opcost.ops.spec import OpSpec, build, canonical_json


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _PartRecorder(TorchDispatchMode):
    """Every ATen call that does work, with its FLOPs, bytes and shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[dict[str, Any]] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        if getattr(func, "is_view", False) or not kinds.launches_work(name):
            return out
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not outputs:
            return out
        seen: set[int] = set()
        inputs = []
        for t in tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                inputs.append(t)
        formula = flop_registry.get(func._overloadpacket)
        flops = int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0
        self.parts.append(
            {
                "op": name,
                "kind": kinds.part_kind(name),
                "input_shapes": [list(t.shape) for t in inputs],
                "output_shapes": [list(t.shape) for t in outputs],
                "flops": flops,
                "bytes_read": sum(_nbytes(t) for t in inputs),
                "bytes_written": sum(_nbytes(t) for t in outputs),
            }
        )
        return out


def has_parts(spec: OpSpec) -> bool:
    """Composites, and kinds no op category knows (see module docstring)."""
    return kinds.has_parts(spec.kind)


def op_parts(spec: OpSpec) -> list[dict[str, Any]]:
    """The kernels of a composite op (see module docstring); [] for any other op, and for one whose
    trace fails on meta tensors (it is then costed as a whole, as before)."""
    if not has_parts(spec):
        return []
    recorder = _PartRecorder()
    try:
        runnable = build(spec, "meta")
        if isinstance(runnable.fn, torch.nn.Module):  # a module spec builds a module
            runnable.fn.eval()
        # no_grad, not inference_mode: under inference_mode composite ATen ops (linear, matmul, dropout)
        # reach the mode whole, without the kernels they decompose into and without FLOP formulas
        with torch.no_grad(), recorder:
            runnable()
    except Exception:  # noqa: BLE001 - no parts is a valid answer; the op keeps its own costs
        return []
    if kinds.is_recurrent(spec.kind):
        return compact_steps(recorder.parts)
    return recorder.parts


def compact_steps(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A recurrent layer's kernels, each distinct kernel once with its `count` (first-seen order).

    An LSTM over T steps and L layers launches the same dozen kernels T x L times, one step after
    the other; listing them once with their count keeps a 6-layer, 512-step LSTM at a few dozen
    parts instead of 37 000. Costing (model/composition/costing.py) charges every repetition, and one launch
    floor per sequential step: the largest count.
    """
    index: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for p in parts:
        key = canonical_json(p)
        if key in index:
            out[index[key]]["count"] += 1
        else:
            index[key] = len(out)
            out.append({**p, "count": 1})
    return out


def parts_json(parts: list[dict[str, Any]]) -> str:
    """The operations table's `parts_json` cell."""
    return canonical_json(parts)
