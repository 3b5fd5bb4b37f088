"""Network -> operations: trace one forward pass on meta tensors and record every operation call.

How it works. Forward hooks mark the operation modules (leaves, and the composites of the kinds table,
ops/kinds.py) so that everything they do inside counts as that one operation. A
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
from opcost.ops import kinds
from opcost.ops.spec import (
    CATEGORY_FUNCTION,
    CATEGORY_MODULE,
    OpSpec,
    TensorInput,
    dtype_name,
    encode_opaque,
    encode_value,
    flat_tensors,
    function_kind,
    function_target,
    module_attrs,
    target_of_class,
)


def is_op_module(module: nn.Module) -> bool:
    """A leaf, or a composite (ops/kinds.py): a module with children whose work happens in functional
    calls on the children's weights (the children's forward never runs). Each call is one operation."""
    return next(module.children(), None) is None or kinds.is_composite(type(module).__name__)


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


def op_class(module: nn.Module) -> tuple[type, dict[str, Any]] | None:
    """The class a module call is recorded as, with its constructor arguments; None if none fits.

    The module's own class where its arguments can be read back; else the nearest base class with
    the same `forward` whose arguments can (torchvision's `Conv3DSimple` is an `nn.Conv3d` with
    another constructor). None makes the module transparent: its functional calls are recorded
    one by one instead (MViT's `PositionalEncoding`, `QuantStub`, a detector's `AnchorGenerator`).
    """
    forward = type(module).forward
    for cls in type(module).__mro__:
        if cls is nn.Module or not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            break
        if cls is not type(module) and cls.forward is not forward:
            continue
        try:
            return cls, module_attrs(module, cls)
        except OpcostError:
            continue
    return None


# What a module call did to the tracer's depth, popped by the post-hook.
_OPENED, _INSIDE, _TRANSPARENT = "opened", "inside", "transparent"


class _Tracer(TorchFunctionMode):
    """Records functional calls made outside operation modules (see module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 while inside an operation module
        self.calls: list[OpCall] = []
        self._stack: list[tuple[str, OpCall | None]] = []

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
        try:
            enc_args = encode_value(list(args), tensors, call=True)
            enc_kwargs = encode_value(kwargs, tensors, call=True)
        except OpcostError:  # an argument no spec can hold: count the call, marked not rebuildable
            enc_args = encode_opaque(list(args), tensors)
            enc_kwargs = encode_opaque(kwargs, tensors)
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

    def _module_spec(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpSpec | None:
        found = op_class(module)
        if found is None:
            return None
        cls, attrs = found
        tensors: list[torch.Tensor] = []
        try:
            enc_args = encode_value(list(args), tensors, call=True)
            enc_kwargs = encode_value(kwargs, tensors, call=True)
        except OpcostError:
            return None  # called with something no spec can hold (an ImageList): look inside instead
        return OpSpec(
            kind=cls.__name__,
            category=CATEGORY_MODULE,
            target=target_of_class(cls),
            attrs=attrs,
            args=enc_args,
            kwargs=enc_kwargs,
            inputs=_inputs(tensors),
        )

    def pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.depth:
            self._stack.append((_INSIDE, None))
            self.depth += 1
            return
        spec = self._module_spec(module, args, kwargs)
        if spec is None:
            self._stack.append((_TRANSPARENT, None))
            return
        call = OpCall(spec)
        self.calls.append(call)
        self._stack.append((_OPENED, call))
        self.depth += 1

    def post_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        what, call = self._stack.pop()
        if what == _TRANSPARENT:
            return
        self.depth -= 1
        if call is not None:
            call.output_shapes = [tuple(t.shape) for t in flat_tensors(output)]


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (whitespace collapsed), or its type where it has none."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def trace_call(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], training: bool = False, what: str = "its input"
) -> Trace:
    """Run one forward pass `model(*args, **kwargs)` and return its operation calls in order.

    The inputs decide the device: meta tensors (the default everywhere) cost no arithmetic.
    `what` names the input in the error a model that cannot take it raises.
    """
    tracer = _Tracer()
    handles = []
    for module in model.modules():
        if is_op_module(module):
            handles.append(module.register_forward_pre_hook(tracer.pre_hook, with_kwargs=True))
            handles.append(module.register_forward_hook(tracer.post_hook, with_kwargs=True))
    model.train(training)
    counter = FlopCounterMode(display=False)
    grad = torch.enable_grad() if training else torch.inference_mode()
    try:
        with grad, tracer, counter:
            model(*args, **kwargs)
    except OpcostError:
        raise
    except Exception as exc:  # a model that cannot take this input: say which and why, on one line
        raise OpcostError(f"{type(model).__name__} cannot run on {what}: {one_line(exc)}") from exc
    finally:
        for h in handles:
            h.remove()
    return Trace(calls=tracer.calls, total_flops=int(counter.get_total_flops()))


def trace(model: nn.Module, input_shape: tuple[int, ...], dtype: str = "float32", training: bool = False) -> Trace:
    """Run one forward pass of `model` on one meta input of `input_shape` (the image form)."""
    x = torch.empty(input_shape, dtype=getattr(torch, dtype), device="meta")
    return trace_call(model, (x,), {}, training, f"input shape {'x'.join(map(str, input_shape))}")
