"""What an operation costs on paper: FLOPs, bytes moved, parameters, output shapes.

All of it is computed from the spec alone, by rebuilding the operation on the meta device and
running it once under `FlopCounterMode`. Coverage then checks the spec against the traced network:
if a rebuilt op disagrees with what the network did (a lost hyper-parameter, a wrong call), its
FLOPs or output shapes differ and coverage leaves 1.00.

Bytes are a first-order model: every input and parameter read once, every output written once;
an output that is a view of an input (reshape, permute, slicing) moves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from opcost.ops.spec import OpSpec, build, flat_tensors


@dataclass(frozen=True)
class OpMetrics:
    flops: int
    bytes_read: int
    bytes_written: int
    params: int
    output_shapes: tuple[tuple[int, ...], ...]
    is_view: bool

    def as_dict(self) -> dict[str, object]:
        """The JSON-safe form that feature records carry (model.features.metrics_of reads the same
        fields from an operations table row)."""
        return {
            "flops": self.flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "params": self.params,
            "is_view": self.is_view,
            "output_shapes": [list(o) for o in self.output_shapes],
        }


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def op_metrics(spec: OpSpec) -> OpMetrics:
    """Rebuild `spec` on meta tensors, run it once, and measure it."""
    runnable = build(spec, "meta")
    if isinstance(runnable.fn, torch.nn.Module):  # a module spec (CATEGORY_MODULE) builds a module
        runnable.fn.eval()  # paper costs of the forward pass; train-mode BatchNorm refuses 1-value channels
    counter = FlopCounterMode(display=False)
    # no_grad, not inference_mode: under inference_mode with a dispatch mode active, composite ops
    # (flatten, reshape) reach the mode whole and return a copy, not a view, so a flatten of a
    # contiguous tensor looked like a copy of its input (and was costed as one); FLOPs are the same
    with torch.no_grad(), counter:
        out = runnable()
    outputs = flat_tensors(out)
    params = 0
    param_bytes = 0
    if isinstance(runnable.fn, torch.nn.Module):
        for p in runnable.fn.parameters():
            params += p.numel()
            param_bytes += _nbytes(p)
    inplace = bool(spec.attrs.get("inplace"))
    input_bases = {id(t) for t in runnable.inputs}
    is_view = (
        not inplace
        and bool(outputs)
        and all(o._is_view() and (o._base is not None and id(o._base) in input_bases) for o in outputs)
    )
    if is_view:
        read = written = 0
    else:
        read = sum(_nbytes(t) for t in runnable.inputs) + param_bytes
        written = sum(_nbytes(o) for o in outputs)
    return OpMetrics(
        flops=int(counter.get_total_flops()),
        bytes_read=int(read),
        bytes_written=int(written),
        params=int(params),
        output_shapes=tuple(tuple(int(s) for s in o.shape) for o in outputs),
        is_view=is_view,
    )
