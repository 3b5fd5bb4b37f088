"""The *layer* identity of an op: the unit of grouped cross-validation (data/targets.py, model/training/fit.py).

`op_id` (ops/keys.py) hashes kind, hyper-parameters, call layout and input shapes and dtypes. The
`layer_id` hashes the same without the batch and spatial (or sequence) sizes of the inputs: one
layer of a network seen at several batch sizes and resolutions. Honest cross-validation keeps a
layer's shapes in one fold, so a model is never scored on a shape of a layer whose other shapes it
trained on. A layer keeps its width (channels of an image or video input, features of a 2-D or
token input): a convolution's width is in its hyper-parameters anyway, and without it every
parameter-free op of a kind (all ReLUs, all pools, all residual adds) would be one "layer", so the
grouped split would hold out every ReLU at once and score a model that never saw the kind: a
leave-one-kind-out test, not the one asked for. Works on the JSON form of a spec, without torch.
"""

from __future__ import annotations

import json
from typing import Any

from opcost.ops.keys import NON_KEY_ATTRS, canonical_json, short_hash


def width(shape: list[int]) -> int | None:
    """The size a layer keeps at every batch size and resolution: channels of an N x C x ... input
    (rank 4 and 5), the last dimension otherwise (features of N x F, embedding of N x L x E)."""
    if len(shape) >= 4:
        return int(shape[1])
    return int(shape[-1]) if len(shape) >= 2 else None


def layer_key(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec's key without batch and spatial sizes (dtype, rank and width stay: a 2-D and a 4-D
    LayerNorm differ, and so do a ReLU over 64 and one over 512 channels)."""
    return {
        "kind": spec["kind"],
        "attrs": {k: v for k, v in spec.get("attrs", {}).items() if k not in NON_KEY_ATTRS},
        "args": spec.get("args", []),
        "kwargs": spec.get("kwargs", {}),
        "inputs": [
            {"rank": len(i["shape"]), "dtype": i["dtype"], "width": width(i["shape"])} for i in spec.get("inputs", [])
        ],
    }


def layer_id(spec_json: str) -> str:
    """First 16 hex digits of SHA-256 over the layer key of a spec (given as its JSON text)."""
    return short_hash(canonical_json(layer_key(json.loads(spec_json))))
