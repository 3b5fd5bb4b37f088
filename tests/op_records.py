"""One op record from a real module and input shape, as extraction would build it (no trace): the tests of
the warm-path caches (row cache, prediction cache) share it."""

from __future__ import annotations

from torch import nn

from opcost.model.features import OpRecord, op_record
from opcost.ops.features import op_metrics
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class


def module_record(module: nn.Module, shape: tuple[int, ...]) -> OpRecord:
    spec = OpSpec(type(module).__name__, CATEGORY_MODULE, target_of_class(type(module)), module_attrs(module),
                  [{"tensor": 0}], {}, (TensorInput(shape, "float32"),))  # fmt: skip
    return op_record(spec, {**op_metrics(spec).as_dict(), "parts": []})
