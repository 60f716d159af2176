"""The heap freeze that keeps Streamlit's post-run full collection cheap."""

import gc
import sys
import types

import pytest

from pages.shell import heap


@pytest.fixture
def unfrozen(monkeypatch):
    """A heap with nothing frozen, as when the server starts; unfrozen again afterwards."""
    gc.unfreeze()
    monkeypatch.setattr(heap, "_modules_at_freeze", 0)
    yield
    gc.unfreeze()


def test_freezes_once_per_batch_of_new_modules(unfrozen, monkeypatch):
    assert heap.freeze_loaded_code() is True  # whatever this process has imported so far
    frozen = gc.get_freeze_count()
    assert frozen > 10_000, "torch and friends should be in the permanent generation"
    assert heap.freeze_loaded_code() is False, "nothing new imported: no second freeze"

    monkeypatch.setitem(sys.modules, "wb_module_loaded_later", types.ModuleType("wb_module_loaded_later"))
    assert heap.freeze_loaded_code() is True
    assert gc.get_freeze_count() >= frozen


def test_frozen_objects_are_left_out_of_a_full_collection(unfrozen):
    tracked_before = len(gc.get_objects())
    assert heap.freeze_loaded_code() is True
    assert len(gc.get_objects()) < tracked_before / 10, "a full pass now walks a small fraction of the heap"


def test_garbage_made_after_the_freeze_is_still_collected(unfrozen):
    heap.freeze_loaded_code()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a reference cycle: only the cyclic GC can free it
    del a, b
    assert gc.collect() >= 2
