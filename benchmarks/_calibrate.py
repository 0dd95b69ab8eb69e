"""How fast this machine runs plain Python right now (shared machines vary over time)."""

from __future__ import annotations

import time


def python_loop_ms(n: int = 3_000_000) -> float:
    """Milliseconds for a fixed pure-Python loop (best of three): print it beside timings so
    runs on a busy or a quiet host can be compared."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        x = 0
        for i in range(n):
            x += i * i
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000, 1)
