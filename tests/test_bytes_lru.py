"""numeric/engine/bytes_lru.py: the byte-bounded LRU cache of the rho tables and the general path's data."""
from __future__ import annotations

import threading

import numpy as np

from resprop.numeric.engine.bytes_lru import BytesLRU, cached


def test_eviction_is_by_bytes_and_least_recently_used_first():
    cache = BytesLRU(lambda: 3000)
    for k in range(3):
        cache.put(k, np.zeros(125))  # 1000 bytes each: all three fit
    assert len(cache) == 3 and cache.nbytes == 3000
    assert cache.get(0) is not None  # 0 is now the most recent
    cache.put(3, np.zeros(125))
    assert cache.get(1) is None and all(cache.get(k) is not None for k in (0, 2, 3))
    cache.put(4, np.zeros(250))  # 2000 bytes: 2 and 0 go (least recent first)
    assert [k for k in range(5) if cache.get(k) is not None] == [3, 4] and cache.nbytes == 3000


def test_an_entry_larger_than_the_limit_is_not_kept_and_replacing_a_key_keeps_the_count_right():
    cache = BytesLRU(lambda: 100)
    cache.put("big", np.zeros(13))  # 104 bytes
    assert cache.get("big") is None and cache.nbytes == 0
    cache.put("a", np.zeros(10))
    cache.put("a", np.zeros(5))
    assert cache.nbytes == 40 and len(cache) == 1
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.hits == 0


def test_the_limit_is_read_at_every_store():
    limit = {"bytes": 10**6}
    cache = BytesLRU(lambda: limit["bytes"])
    cache.put(1, np.zeros(100))
    limit["bytes"] = 0
    cache.put(2, np.zeros(100))  # too large now: not kept; what is there stays until the next store evicts
    assert cache.get(2) is None and cache.get(1) is not None


def test_cached_memoises_and_counts_under_threads():
    calls = []

    @cached(BytesLRU(lambda: 1 << 20))
    def square(n: int) -> np.ndarray:
        calls.append(n)
        return np.full(4, float(n * n))

    threads = [threading.Thread(target=lambda: [square(k % 7) for k in range(200)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(float(square(k)[0]) == k * k for k in range(7))
    assert set(calls) == set(range(7)) and len(calls) <= 7 * 4  # a key is computed at most once per racing thread
    square.cache_clear()
    square(3)
    assert calls.count(3) >= 2
