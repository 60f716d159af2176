"""One way to time a small call: warm it up, then take the median of many runs."""

import statistics
import time


def median_ms(fn, runs: int = 30, warmup: int = 1) -> float:
    """Median wall time of fn() in milliseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
