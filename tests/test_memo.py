"""opcost.memo.BoundedLRU: the eviction order both caches rely on, by hand."""

from __future__ import annotations

import threading

import pytest

from opcost.memo import BoundedLRU


def test_least_recently_used_goes_first_and_a_hit_refreshes() -> None:
    memo: BoundedLRU[str, int] = BoundedLRU(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # a is now the most recent
    memo.put("c", 3)  # over size: b (least recently used) goes, not a (oldest insert)
    assert (memo.get("a"), memo.get("b"), memo.get("c"), len(memo)) == (1, None, 3, 2)
    memo.put("a", 10)  # a re-put replaces and refreshes
    memo.put("d", 4)
    assert (memo.get("a"), memo.get("c"), memo.get("d")) == (10, None, 4)
    memo.clear()
    assert len(memo) == 0 and memo.get("a") is None


def test_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="memo size 0: must be at least 1"):
        BoundedLRU(0)


def test_concurrent_puts_stay_bounded() -> None:
    memo: BoundedLRU[int, int] = BoundedLRU(50)

    def work(base: int) -> None:
        for i in range(2000):
            memo.put(base + i, i)
            memo.get(base + i // 2)

    threads = [threading.Thread(target=work, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(memo) == 50
