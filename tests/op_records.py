"""One op record from a real module and input shape, as extraction would build it (no trace): the tests of
the warm-path caches (row cache, prediction cache) share it; `catalog_row` is the same op as a row of the
operations table (schemas.OPERATIONS), what a registered pyfunc model takes."""

from __future__ import annotations

import json
from typing import Any

from torch import nn

from opcost.model.features import OpRecord, op_record
from opcost.ops.features import op_metrics
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class


def module_spec(module: nn.Module, shape: tuple[int, ...]) -> OpSpec:
    return OpSpec(type(module).__name__, CATEGORY_MODULE, target_of_class(type(module)), module_attrs(module),
                  [{"tensor": 0}], {}, (TensorInput(shape, "float32"),))  # fmt: skip


def module_record(module: nn.Module, shape: tuple[int, ...]) -> OpRecord:
    spec = module_spec(module, shape)
    return op_record(spec, {**op_metrics(spec).as_dict(), "parts": []})


def catalog_row(module: nn.Module, shape: tuple[int, ...]) -> dict[str, Any]:
    """The op as the operations table holds it, output shapes as JSON text (a pyfunc signature column is a scalar)."""
    spec = module_spec(module, shape)
    metrics = op_metrics(spec).as_dict()
    return {"spec_json": json.dumps(spec.to_json()), **metrics, "output_shapes": json.dumps(metrics["output_shapes"]),
            "parts_json": ""}  # fmt: skip
