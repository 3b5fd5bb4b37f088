"""Canonical keys of operations, without torch: the op_id's JSON form and the *layer* identity.

`op_id` (ops/spec.py) hashes kind, hyper-parameters, call layout and input shapes and dtypes. The
`layer_id` hashes the same without the input shapes: one layer seen at several input sizes. Honest
cross-validation keeps a layer's shapes in one fold, so a model is never scored on a shape of a
layer whose other shapes it trained on. Both work on the JSON form of a spec, so stages that only
read tables (evaluate, train) compute them without importing torch.
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


def layer_key(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec's key without input shapes (dtypes and rank stay: a 2-D and a 4-D LayerNorm differ)."""
    return {
        "kind": spec["kind"],
        "attrs": {k: v for k, v in spec.get("attrs", {}).items() if k not in NON_KEY_ATTRS},
        "args": spec.get("args", []),
        "kwargs": spec.get("kwargs", {}),
        "inputs": [{"rank": len(i["shape"]), "dtype": i["dtype"]} for i in spec.get("inputs", [])],
    }


def layer_id(spec_json: str) -> str:
    """First 16 hex digits of SHA-256 over the layer key of a spec (given as its JSON text)."""
    return short_hash(canonical_json(layer_key(json.loads(spec_json))))
