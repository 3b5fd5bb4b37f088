"""Predicted quantities of ops, memoised per trained model: what a warm sequential prediction asks again.

Why: a warm `predict()` per network and device costs the same few hundred ops at every call, and the tree
evaluation (model/basis/trees.py) plus the roofline offsets were most of a warm sequential pass after the row
cache (model/basis/features.ROW_CACHE) took the encoding away. An op's predicted value is a pure function of
the model's trees, its encoding and target transform, the device table entry its physics features read,
the clock and the record's content, so it is cached under exactly those:
- the cache lives on the `QuantityModel` instance: a retrained or reloaded bundle is a new instance with
  an empty cache, never served the old numbers;
- its stamp holds the ensemble object, the encoding, the transform and the device table entry; any of
  them changed (a test patching the table, a model swapped in place) empties it;
- the tree arrays of a cached model are made read-only, so they cannot change under the cache;
- a record is keyed by its content (features.record_key: kind and canonical JSON), not its op_id; a
  record JSON cannot say exactly is evaluated every time.
Each row of a tree ensemble is evaluated independently of the others, so the cached value is the value
an uncached batch gives, bit for bit.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from opcost.memo import BoundedLRU
from opcost.model.basis.features import OpRecord, record_key

PREDICTION_CACHE_SIZE = 65536  # op values per model (a float each), least recently used dropped first

Items = Sequence[tuple[OpRecord, "float | None"]]


class PredictionCache:
    """A bounded memo of one model's predicted values keyed by (clock, record content); thread-safe."""

    def __init__(self, size: int = PREDICTION_CACHE_SIZE) -> None:
        self._anchor: object | None = None  # the ensemble the values came from, held so its id is never reused
        self._stamp: tuple[Any, ...] | None = None
        self._values: BoundedLRU[tuple[Hashable, ...], float] = BoundedLRU(size)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._anchor = self._stamp = None

    def values(
        self, anchor: object, stamp: tuple[Any, ...], items: Items, compute: Callable[[Items], np.ndarray]
    ) -> np.ndarray:
        """The values of `items` under the model `anchor` (its ensemble) with `stamp` (model_stamp); those
        not cached are computed by `compute` (one call, in the given order)."""
        out = np.empty(len(items), dtype=np.float64)
        keys: list[tuple[Hashable, ...] | None] = []
        missing: list[int] = []
        with self._lock:
            if self._anchor is not anchor or self._stamp != stamp:
                self._values.clear()
                self._anchor, self._stamp = anchor, stamp
            for i, (rec, clock) in enumerate(items):
                content = record_key(rec)
                key = (clock, *content) if content is not None else None
                keys.append(key)
                value = self._values.get(key) if key is not None else None
                if value is None:
                    missing.append(i)
                else:
                    out[i] = value
        if missing:
            fresh = np.asarray(compute([items[i] for i in missing]), dtype=np.float64)
            out[missing] = fresh
            with self._lock:
                if self._anchor is anchor and self._stamp == stamp:
                    for i, v in zip(missing, fresh):
                        k = keys[i]
                        if k is not None:
                            self._values.put(k, float(v))
        return out


def model_stamp(encoding: Any, transform: str) -> tuple[Any, ...]:
    """What a model's predicted values depend on besides its trees, the record and the clock."""
    return (encoding, transform, encoding.device)


def freeze(ensemble: Any) -> None:
    """Make a tree ensemble's arrays (and their flat views, model/basis/trees.py) read-only: cached values
    can then not go stale by an in-place edit; a write fails loudly instead."""
    for name in ("feature", "threshold", "left", "right", "value", "_feature", "_threshold", "_children", "_value",
                 "_roots"):  # fmt: skip
        arr = getattr(ensemble, name, None)
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
