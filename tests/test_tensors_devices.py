"""Devices demo against torch: placements, identities and errors are what torch reports on this host."""

import pytest
import torch

from demos.tensors import devices as dev
from tests.test_quiz_bank import run_snippet


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


@pytest.mark.parametrize("t", dev.traps(), ids=lambda t: t.key)
def test_traps_snippets_reproduce_their_outputs(t):
    assert str(run_snippet(t.trap.code)) == t.trap.output
    assert str(run_snippet(t.correct.code)) == t.correct.output


def test_tensor_to_is_out_of_place_module_to_in_place():
    traps = {t.key: t for t in dev.traps()}
    assert traps["to"].trap.output.startswith("x on cpu")
    assert "RuntimeError" in traps["mix"].trap.output and "RuntimeError" not in traps["mix"].correct.output


def test_pinned_fix_says_it_needs_an_accelerator_where_there_is_none():
    pinned = {t.key: t for t in dev.traps()}["pinned"]
    assert "RuntimeError" not in pinned.correct.output
    if not torch.cuda.is_available() and not torch.accelerator.is_available():
        assert pinned.correct.output.startswith("needs an accelerator")
        assert "needs an accelerator" in pinned.correct_label
        assert dev.report().pinned.startswith("needs an accelerator")
    else:
        assert pinned.correct_label == "Correct" and pinned.correct.output.startswith("pinned: True")
