"""A thread-safe least-recently-used cache bounded by the bytes of its entries, not by their number.

`functools.lru_cache(maxsize=n)` bounds the count: a deep run that needs more entries than n (one rho table per
layer at depth 200 against 128 slots) evicts every entry before it is used again, so each call rebuilds all of them
and the cache only adds allocations.  Bounded by bytes, the same memory holds as many entries as fit.

Entries are immutable objects with an ``nbytes`` attribute; a lookup hands out a reference under the lock and never
reads an entry after releasing it, so an entry evicted by another thread stays valid for whoever holds it.  What is
cached never changes a result: the entries are deterministic functions of their keys.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class BytesLRU:
    """LRU cache of at most ``limit()`` bytes (read at every store, so a module constant can be patched).  An entry
    larger than the limit on its own is not kept."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return hit

    def put(self, key: Hashable, value: Any) -> None:
        size, limit = int(value.nbytes), int(self._limit())
        if size > limit:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._nbytes -= int(old.nbytes)
            self._entries[key] = value
            self._nbytes += size
            while self._nbytes > limit and len(self._entries) > 1:
                _, evicted = self._entries.popitem(last=False)
                self._nbytes -= int(evicted.nbytes)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._nbytes = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._nbytes


def cached(cache: BytesLRU) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: memoise a function of hashable positional arguments in ``cache`` (two threads that miss the same
    key at once both compute it; the values are equal, one of them is kept).  The wrapper has ``cache_clear()``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Hashable) -> Any:
            hit = cache.get(args)
            if hit is not None:
                return hit
            value = fn(*args)
            cache.put(args, value)
            return value

        functools.update_wrapper(wrapper, fn)  # name, doc and __wrapped__
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper

    return wrap


__all__ = ["BytesLRU", "cached"]
