"""Debugging and reproducibility: NaN tracing, seeds and determinism, leaks, model unit tests, the profiler."""
