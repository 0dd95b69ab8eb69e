"""One small thread-safe least-recently-used map, for the explorer's per-snapshot caches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LRU"]

_ABSENT = object()


class LRU:
    """Keeps the ``size`` most recently used entries (none when ``size`` <= 0)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        """The value under ``key`` (marked most recently used), else ``default``."""
        with self.lock:
            value = self.items.get(key, _ABSENT)
            if value is _ABSENT:
                return default
            self.items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
