"""PyTorch module reprs -> operation specs, whatever PyTorch version printed them.

`Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)` is parsed with
Python's own parser into positional and keyword arguments (bare words such as `mode=row` of
torchvision's StochasticDepth become strings), the class is looked up by name in torch.nn,
torchvision.ops and torchvision.models, a module is constructed on the meta device from those
arguments, and its constructor arguments are read back with `module_attrs`, exactly as `extract`
does for a traced layer. So the spec, and its op_id, depend on what the layer is, not on how a
PyTorch version printed it: an early-2025 `BatchNorm2d(64, eps=1e-05, ...)` without today's
`bias=True` gets today's default and the same op_id as the layer `extract` finds.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from functools import lru_cache
from typing import Any

from torch import nn

from opcost.errors import OpcostError
from opcost.ops.spec import (
    CATEGORY_MODULE,
    OpSpec,
    TensorInput,
    meta_parameters,
    module_attrs,
    target_of_class,
)


@lru_cache(maxsize=1)
def module_classes() -> dict[str, type]:
    """Module classes by name: torch.nn first, then torchvision.ops, then torchvision.models."""
    import torchvision

    found: dict[str, type] = {}

    def scan(mod: Any) -> None:
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, nn.Module) and name not in found:
                found[name] = obj

    scan(nn)
    scan(torchvision.ops)
    scan(importlib.import_module("torchvision.ops.misc"))
    for info in pkgutil.iter_modules(torchvision.models.__path__):
        if not info.ispkg:
            scan(importlib.import_module(f"torchvision.models.{info.name}"))
    return found


def _value(node: ast.AST, text: str) -> Any:
    if isinstance(node, ast.Name):  # a bare word in a repr (`mode=row`) is a string
        return node.id
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise OpcostError(f"cannot parse argument {ast.get_source_segment(text, node)!r} in {text!r}") from None


def parse_repr(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """`Name(a, b, k=v)` -> ("Name", [a, b], {"k": v})."""
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise OpcostError(f"not a module repr: {text!r}") from None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise OpcostError(f"not a module repr: {text!r}")
    args = [_value(a, text) for a in tree.args]
    kwargs = {k.arg: _value(k.value, text) for k in tree.keywords if k.arg is not None}
    return tree.func.id, args, kwargs


def spec_from_repr(text: str, input_shape: tuple[int, ...], dtype: str = "float32") -> OpSpec:
    """The canonical spec of the layer `text` applied to one input of `input_shape`."""
    name, args, kwargs = parse_repr(text)
    cls = module_classes().get(name)
    if cls is None:
        raise OpcostError(
            f"unknown module class {name!r} in {text!r}: not in torch.nn, torchvision.ops or torchvision.models"
        )
    try:
        with meta_parameters():
            module = cls(*args, **kwargs)
    except TypeError as exc:
        raise OpcostError(f"cannot build {text!r} with today's {name}: {exc}") from None
    return OpSpec(
        kind=name,
        category=CATEGORY_MODULE,
        target=target_of_class(cls),
        attrs=module_attrs(module),
        args=[{"tensor": 0}],
        inputs=(TensorInput(tuple(int(s) for s in input_shape), dtype),),
    )
