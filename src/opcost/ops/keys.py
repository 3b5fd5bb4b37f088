"""Canonical keys of operations, without torch: the op_id's JSON form.

`op_id` (ops/spec.py) hashes kind, hyper-parameters, call layout and input shapes and dtypes; the
*layer* identity of grouped cross-validation is in ops/layers.py. Both work on the JSON form of a
spec, so stages that only read tables (evaluate, train) compute them without importing torch.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

# Hyper-parameters kept for rebuilding but left out of every key: `ReLU(inplace=True)` and `ReLU()`
# compute the same function on the same shapes (the thesis logs hold both for one layer).
NON_KEY_ATTRS = frozenset({"inplace"})


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces): the text the ids hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Non-finite floats are not JSON: a spec holds them as {"float": "inf" | "-inf" | "nan"}, so that a
# `masked_fill(mask, float("-inf"))` has an op id, a table row and a JSON answer like any other op.
NONFINITE_TAG = "float"


def encode_float(x: float) -> float | dict[str, str]:
    """A float as JSON: itself when finite, else {"float": "inf" | "-inf" | "nan"}."""
    if math.isfinite(x):
        return float(x)
    return {NONFINITE_TAG: "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def is_encoded_float(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {NONFINITE_TAG} and value[NONFINITE_TAG] in ("inf", "-inf", "nan")


def json_safe(obj: Any) -> Any:
    """`obj` with every non-finite float (numpy's too) replaced by "inf", "-inf" or "nan": what a
    JSON answer prints instead of failing ("Out of range float values") or writing bare NaN/Infinity."""
    scalar = hasattr(obj, "dtype") and getattr(obj, "shape", None) == () and obj.dtype.kind == "f"  # numpy float
    if isinstance(obj, float) or scalar:
        x = float(obj)
        return x if math.isfinite(x) else encode_float(x)[NONFINITE_TAG]  # type: ignore[index]
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
