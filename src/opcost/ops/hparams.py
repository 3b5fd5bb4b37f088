"""Named hyper-parameters of an operation, for the typed `hp_<name>` columns of operations.parquet.

Module ops: the constructor arguments, plus non-tensor forward arguments named by `forward`'s
signature (`need_weights` of MultiheadAttention). Function ops: the in-place flag and every
non-tensor argument, named by the Python signature or, for builtins, by the ATen schema
(`cat(Tensor[] tensors, int dim)` names `cat(xs, 1)`'s 1 `dim`); `arg<i>` where neither knows.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

import torch

from opcost.ops.keys import NONFINITE_TAG, is_encoded_float

if TYPE_CHECKING:  # pandas only for the extract stage's tables: a prediction does not import it
    import pandas as pd
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, canonical_json, resolve_target


def _is_tensor_ref(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"tensor"}


def _contains_tensor(v: Any) -> bool:
    if _is_tensor_ref(v):
        return True
    if isinstance(v, list):
        return any(_contains_tensor(x) for x in v)
    if isinstance(v, dict):
        return any(_contains_tensor(x) for x in v.values())
    return False


def _python_names(fn: Callable[..., Any], skip_first: bool) -> list[str] | None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if skip_first:
        params = params[1:]
    names = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            break
        names.append(p.name)
    return names


def _aten_names(kind: str, n_args: int) -> list[str] | None:
    """Argument names of the first ATen overload of `kind` that takes at least `n_args` positionals."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{kind}")
    except RuntimeError:
        return None
    for schema in schemas:
        positional = [a.name for a in schema.arguments if not a.kwarg_only]
        if len(positional) >= n_args and not schema.overload_name.endswith("out"):
            return positional
    return None


def _arg_names(spec: OpSpec, n_args: int) -> list[str]:
    names: list[str] | None = None
    try:
        target = resolve_target(spec.target)
    except Exception:
        target = None
    if spec.category == CATEGORY_MODULE and target is not None:
        names = _python_names(target.forward, skip_first=True)
    elif target is not None:
        names = _python_names(target, skip_first=False) or _aten_names(spec.kind, n_args)
    names = list(names or [])
    return names + [f"arg{i}" for i in range(len(names), n_args)]


def _column_value(v: Any) -> Any:
    """Plain scalars and integer lists stay typed; a non-finite float is its text ("-inf"); anything
    structured becomes canonical JSON text."""
    if is_encoded_float(v):
        return v[NONFINITE_TAG]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return v
    return canonical_json(v)


def hyperparameters(spec: OpSpec) -> dict[str, Any]:
    """`{name: value}` of the op's hyper-parameters (tensor arguments excluded)."""
    out: dict[str, Any] = {k: _column_value(v) for k, v in spec.attrs.items()}
    names = _arg_names(spec, len(spec.args))
    for name, value in zip(names, spec.args):
        if not _contains_tensor(value):
            out.setdefault(name, _column_value(value))
    for name, value in spec.kwargs.items():
        if not _contains_tensor(value):
            out.setdefault(name, _column_value(value))
    return out


def typed_hp_columns(rows: list[dict[str, Any]], prefix: str = "hp_") -> "pd.DataFrame":
    """One column per hyper-parameter name, with a dtype that fits every value it holds.

    bool -> boolean, int -> Int64, int/float -> Float64, str -> string, integer lists -> list;
    ints mixed with integer lists (`kernel_size=3` of MaxPool2d beside `[3, 3]` of Conv2d) -> list,
    the scalar as a one-element list; any other mix is stored as canonical JSON text.
    """
    import pandas as pd

    names = sorted({k for r in rows for k in r})
    data: dict[str, pd.Series] = {}
    for name in names:
        values = [r.get(name) for r in rows]
        present = [v for v in values if v is not None]
        kinds = {_value_kind(v) for v in present}
        col = prefix + name
        if kinds == {"bool"}:
            data[col] = pd.Series(values, dtype="boolean")
        elif kinds == {"int"}:
            data[col] = pd.Series(values, dtype="Int64")
        elif kinds <= {"int", "float"} and kinds:
            data[col] = pd.Series([None if v is None else float(v) for v in values], dtype="Float64")
        elif kinds == {"list"} or kinds == {"list", "int"}:
            data[col] = pd.Series([[v] if isinstance(v, int) else v for v in values], dtype=object)
        elif kinds == {"str"} or not kinds:
            data[col] = pd.Series(values, dtype="string")
        else:
            data[col] = pd.Series([None if v is None else canonical_json(v) for v in values], dtype="string")
    return pd.DataFrame(data, index=range(len(rows)))


def _value_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, list):
        return "list"
    return "str"
