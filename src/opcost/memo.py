"""A bounded, thread-safe least-recently-used map: the one memo behind the encoded-row cache
(model/basis/features.RowCache) and the predicted-value cache (model/composition/predcache.PredictionCache).

Why one: both keep a few tens of thousands of pure-function results keyed by record content, both
are read by the API's worker threads at once, and both must stay bounded in a long-lived process.
Two hand-written copies had drifted (one refreshed an entry on a hit, the other dropped the oldest
insert); the eviction rule is now the same for both: the least recently used goes first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most `size` entries; `get` refreshes an entry, `put` drops the least recently used beyond `size`."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"memo size {size}: must be at least 1")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
