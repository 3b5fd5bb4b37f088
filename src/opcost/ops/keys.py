"""Canonical keys of operations, without torch: the op_id's JSON form.

`op_id` (ops/spec.py) hashes kind, hyper-parameters, call layout and input shapes and dtypes; the
*layer* identity of grouped cross-validation is in ops/layers.py. Both work on the JSON form of a
spec, so stages that only read tables (evaluate, train) compute them without importing torch.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Hyper-parameters kept for rebuilding but left out of every key: `ReLU(inplace=True)` and `ReLU()`
# compute the same function on the same shapes (the thesis logs hold both for one layer).
NON_KEY_ATTRS = frozenset({"inplace"})


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces): the text the ids hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
