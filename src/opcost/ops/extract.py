"""Network -> operations: trace one forward pass on meta tensors and record every operation call.

How it works. Forward hooks mark the operation modules (leaves, and the composites listed in
`COMPOSITE_MODULES`) so that everything they do inside counts as that one operation. A
`TorchFunctionMode` sees every torch function called outside them: a call that takes tensors and
returns tensors is a functional operation (residual `add`, `cat`, `flatten`, ...). Calls that only
read metadata (`size()`, `.shape`) return no tensor and are not operations. While the mode handles a
call it is switched off, so `F.layer_norm` is one operation, not also the `torch.layer_norm` inside.

Everything runs on the meta device: no arithmetic, so any input size costs the same few
milliseconds. A `FlopCounterMode` counts the whole forward pass at the same time, which is what
coverage compares the per-operation FLOPs against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.flop_counter import FlopCounterMode

from opcost.errors import OpcostError
from opcost.ops.spec import (
    CATEGORY_FUNCTION,
    CATEGORY_MODULE,
    OpSpec,
    TensorInput,
    dtype_name,
    encode_value,
    flat_tensors,
    function_kind,
    function_target,
    module_attrs,
    target_of_class,
)

# Modules with children whose work happens in functional calls on the children's weights (the
# children's forward never runs): each call is one operation.
COMPOSITE_MODULES = frozenset({"MultiheadAttention", "ShiftedWindowAttention", "ShiftedWindowAttentionV2"})


def is_op_module(module: nn.Module) -> bool:
    return next(module.children(), None) is None or type(module).__name__ in COMPOSITE_MODULES


def _inputs(tensors: list[torch.Tensor]) -> tuple[TensorInput, ...]:
    return tuple(TensorInput(tuple(int(s) for s in t.shape), dtype_name(t.dtype)) for t in tensors)


@dataclass
class OpCall:
    """One call of an operation during the traced forward pass."""

    spec: OpSpec
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)


@dataclass
class Trace:
    calls: list[OpCall]
    total_flops: int


class _Tracer(TorchFunctionMode):
    """Records functional calls made outside operation modules (see module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 while inside an operation module
        self.calls: list[OpCall] = []

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.depth:
            return out
        outputs = flat_tensors(out)
        if not outputs:
            return out
        tensors: list[torch.Tensor] = []
        enc_args = encode_value(list(args), tensors, call=True)
        enc_kwargs = encode_value(kwargs, tensors, call=True)
        if not tensors:
            return out  # a factory function (torch.zeros(...)): no input, not an operation
        kind, inplace = function_kind(func.__name__)
        spec = OpSpec(
            kind=kind,
            category=CATEGORY_FUNCTION,
            target=function_target(func),
            attrs={"inplace": inplace},
            args=enc_args,
            kwargs=enc_kwargs,
            inputs=_inputs(tensors),
        )
        self.calls.append(OpCall(spec, [tuple(t.shape) for t in outputs]))
        return out

    # Module hooks -------------------------------------------------------------------------

    def pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.depth == 0:
            tensors: list[torch.Tensor] = []
            enc_args = encode_value(list(args), tensors, call=True)
            enc_kwargs = encode_value(kwargs, tensors, call=True)
            spec = OpSpec(
                kind=type(module).__name__,
                category=CATEGORY_MODULE,
                target=target_of_class(type(module)),
                attrs=module_attrs(module),
                args=enc_args,
                kwargs=enc_kwargs,
                inputs=_inputs(tensors),
            )
            self.calls.append(OpCall(spec))
            self._open = self.calls[-1]
        self.depth += 1

    def post_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            self._open.output_shapes = [tuple(t.shape) for t in flat_tensors(output)]


def trace(model: nn.Module, input_shape: tuple[int, ...], dtype: str = "float32", training: bool = False) -> Trace:
    """Run one forward pass of `model` on a meta input and return its operation calls in order."""
    tracer = _Tracer()
    handles = []
    for module in model.modules():
        if is_op_module(module):
            handles.append(module.register_forward_pre_hook(tracer.pre_hook, with_kwargs=True))
            handles.append(module.register_forward_hook(tracer.post_hook, with_kwargs=True))
    model.train(training)
    x = torch.empty(input_shape, dtype=getattr(torch, dtype), device="meta")
    counter = FlopCounterMode(display=False)
    grad = torch.enable_grad() if training else torch.inference_mode()
    try:
        with grad, tracer, counter:
            model(x)
    except OpcostError:
        raise
    except Exception as exc:  # a model that cannot take this input: say which and why, on one line
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OpcostError(
            f"{type(model).__name__} cannot run on input shape {'x'.join(map(str, input_shape))}: {msg}"
        ) from exc
    finally:
        for h in handles:
            h.remove()
    return Trace(calls=tracer.calls, total_flops=int(counter.get_total_flops()))
