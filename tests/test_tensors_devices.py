"""Devices demo against torch: placements, identities and errors are what torch reports on this host."""

import pytest
import torch

from demos.tensors import devices as dev


def test_report_matches_torch_here():
    r = dev.report()
    target = "cuda" if torch.cuda.is_available() else "meta"
    assert r.target == target
    x = torch.ones(2, 3)
    y = x.to(target)
    assert r.tensor_after.startswith(y.device.type) and r.tensor_same_object is (y is x) is False
    assert r.x_still_on == "cpu"
    model = torch.nn.Linear(3, 2)
    assert r.module_same_object is (model.to(target) is model) is True
    assert r.module_after.startswith(next(model.parameters()).device.type)
    expected = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
    assert r.chosen == str(expected)
    if target == "meta":
        with pytest.raises(RuntimeError) as err:
            x + y
        assert r.mixing_error == f"RuntimeError: {str(err.value).splitlines()[0]}"
    assert "digraph" in dev.placement_dot(r)


def test_tensor_to_is_out_of_place_module_to_in_place():
    to, mix = dev.to_without_keeping(), dev.mixed_devices()
    target = "cuda" if torch.cuda.is_available() else "meta"
    assert to.trap["x on"] == "cpu" and to.trap["model on"].startswith(target) and to.correct["x on"].startswith(target)
    assert mix.trap["weights * batch"].startswith("RuntimeError") and mix.correct["weights * batch"].startswith(target)
    assert "raised a RuntimeError" in mix.sentence and f"x is still on {to.trap['x on']}" in to.sentence


def test_pinned_fix_says_it_needs_an_accelerator_where_there_is_none():
    pinned = dev.non_blocking_unpinned()
    assert pinned.trap == {"x.is_pinned()": False} and "RuntimeError" not in pinned.correct["outcome"]
    if not torch.cuda.is_available() and not torch.accelerator.is_available():
        assert pinned.correct["outcome"].startswith("needs an accelerator")
        assert "needs an accelerator" in pinned.correct_label and "has no accelerator" in pinned.sentence
        assert dev.report().pinned.startswith("needs an accelerator")
    else:
        assert "needs an accelerator" not in pinned.correct_label and pinned.correct["x.is_pinned()"] is True
        assert pinned.correct["outcome"].startswith("copy queued to") and pinned.correct["outcome"] in pinned.sentence
