"""no_grad, detach, inference_mode, requires_grad_(False), and version counters, checked against torch."""

import pytest
import torch

from demos.autograd.modes import MODES, compare_modes, detach_shares_storage, version_counter_trap
from demos.errors import InputError
from pages.ui.quiz import model_answers


def test_only_grad_mode_records_a_graph():
    r = compare_modes(32)
    table = r.table.set_index("mode")
    assert table.loc["grad enabled", "graph recorded"]
    assert not table.drop("grad enabled")["graph recorded"].any()
    assert table.loc["torch.inference_mode()", "out.is_inference()"]
    assert "Inference tensors cannot be saved for backward" in table.loc[
        "torch.inference_mode()", "later: (out * W).sum().backward()"]
    assert list(table.index) == list(MODES)


def test_saved_bytes_match_what_autograd_saves():
    n = 32
    r = compare_modes(n)
    torch.manual_seed(0)
    x, w = torch.randn(n, n), torch.randn(n, n, requires_grad=True)
    out = torch.relu(x @ w).mean()
    mm = out.grad_fn.next_functions[0][0].next_functions[0][0]  # Mean <- Relu <- Mm
    expected = mm._saved_self.nbytes + out.grad_fn.next_functions[0][0]._saved_result.nbytes
    assert r.saved_bytes[0] == expected
    assert r.saved_bytes[1:] == (0, 0, 0, 0)


def test_size_is_bounded():
    with pytest.raises(InputError, match="between"):
        compare_modes(100000)


def test_detach_shares_storage_and_version():
    s = detach_shares_storage()
    assert s.same_storage and s.original_after == 100.0 and s.detached_after == 100.0
    assert s.version_after == s.version_before + 1
    assert s.clone_original_after != -100.0


def test_inplace_on_a_saved_tensor_raises_torchs_error():
    v = version_counter_trap()
    assert "modified by an inplace operation" in v.trap_error
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    (torch.sigmoid(x) * 2).sum().backward()
    assert v.correct_grad == pytest.approx(x.grad.tolist())


def test_interview_answer_says_when_an_inference_tensor_raises():
    """The model answer's two computations, run: mul (saves t) raises, add (saves nothing) works."""
    answer = dict(model_answers("autograd"))["What is the difference between no_grad and inference_mode?"]
    assert "`(t * W).sum().backward()` raises" in answer and "`(t + W).sum().backward()` works" in answer
    with torch.inference_mode():
        t = torch.randn(3)
    w = torch.randn(3, requires_grad=True)
    (t + w).sum().backward()
    assert torch.equal(w.grad, torch.ones(3))
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        (t * w).sum().backward()
