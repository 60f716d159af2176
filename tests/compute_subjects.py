"""Module-level functions for tests/test_ui_compute.py: ui.compute takes no function a test or page defines."""

import time

CALLS: list = []
SLOW_S = 0.3


def double(x):
    CALLS.append(x)
    return x * 2


class Run:
    """An unhashable result, as a demo's result record with a list in it would be."""

    __hash__ = None

    def __init__(self, values):
        self.values = values


def total(run: Run):
    CALLS.append(run)
    return sum(run.values)


def kept_two(x):
    CALLS.append(x)
    return x


kept_two.cache_entries = 2


def fails_once(x):
    CALLS.append(x)
    if CALLS.count(x) == 1:
        raise ValueError("the first call fails")
    return x


def slow(x):
    CALLS.append(x)
    time.sleep(SLOW_S)
    return x
