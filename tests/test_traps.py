"""Traps beside their correct forms: both sides against torch computed here, the snippet, and the page's sentence."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from demos.autograd.traps import data_versus_detach, leaf_update, uneven_micro_batches
from demos.modules.traps import LinearTimesTwo, backward_hooks, batchnorm_running_var
from demos.saving.traps import best_weights, strict_false
from demos.tensors import broadcasting, devices, dtypes, layout
from demos.tensors.traps import advanced_indexing, squeeze_batch_of_one
from demos.training.traps import clip_before_unscale_trap
from demos.traps import fmt_list
from pages.ui.traps import returned
from tests.conftest import assert_clean, open_page

PAIRS = {f.__name__: f for f in (data_versus_detach, leaf_update, uneven_micro_batches, advanced_indexing,
                                  squeeze_batch_of_one, backward_hooks, batchnorm_running_var, strict_false,
                                  best_weights, clip_before_unscale_trap, *broadcasting.TRAPS, *layout.TRAPS,
                                  *dtypes.TRAPS, *devices.TRAPS)}


@pytest.fixture(scope="module")
def pairs():
    return {name: f() for name, f in PAIRS.items()}


def close(got, want, tol=1e-4) -> bool:
    return torch.allclose(torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64),
                          atol=tol, rtol=0)


@pytest.mark.parametrize("name", PAIRS)
def test_snippet_prints_what_the_page_shows(pairs, name):
    """The code panel's script, run on its own, prints exactly the two dicts the page shows."""
    pair, printed = pairs[name], {}
    exec(compile(pair.code, "<snippet>", "exec"), {"print": lambda label, value: printed.update({label: value}),
                                                    "__name__": "__snippet__"})
    assert printed == {"trap:": pair.trap, "correct:": pair.correct}


def test_data_versus_detach(pairs):
    r = pairs["data_versus_detach"]
    x = torch.tensor([0.5, 1.0, 2.0])
    y = torch.sigmoid(x)
    assert close(r.correct["true grad"], y * (1 - y))
    assert close(r.trap["x.grad"], torch.ops.aten.sigmoid_backward(torch.ones(3), torch.zeros(3)))  # y zeroed
    assert r.trap["backward raised"] is None and "is at version 1; expected version 0" in r.correct["backward raised"]
    assert fmt_list(r.trap["x.grad"]) in r.sentence and fmt_list(r.correct["true grad"]) in r.sentence
    assert "is at version 1; expected version 0" in r.sentence


def test_leaf_update(pairs):
    r = pairs["leaf_update"]
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (grad,) = torch.autograd.grad((w ** 2).sum(), w)
    stepped = (w - 0.1 * grad).detach().requires_grad_()
    (next_grad,) = torch.autograd.grad((stepped ** 2).sum(), stepped)
    assert close(r.correct["w"], stepped) and close(r.correct["w.grad after the next backward"], next_grad)
    assert "leaf Variable that requires grad" in r.trap["w -= lr * w.grad"]
    assert r.trap["w = w - lr * w.grad: is_leaf"] is False and r.trap["w.grad after the next backward"] is None
    assert r.trap["the update after that"].startswith("TypeError") and "not a leaf" in r.trap["warning on reading it"]
    assert fmt_list(r.correct["w"]) in r.sentence and r.trap["w -= lr * w.grad"] in r.sentence
    assert r.trap["the update after that"] in r.sentence


def test_uneven_micro_batches(pairs):
    r = pairs["uneven_micro_batches"]
    torch.manual_seed(0)
    x, y = torch.randn(10, 3), torch.randn(10)
    full = -2 * x.T @ y / 10  # d/dw mean((x @ w - y)^2) at w = 0
    sizes = r.trap["sizes"]
    per_mean = sum(-2 * xb.T @ yb / len(yb) / len(sizes) for xb, yb in zip(x.split(sizes), y.split(sizes),
                                                                            strict=True))
    key = "max |accumulated - full batch|"
    assert r.trap[key] == pytest.approx((per_mean - full).abs().max().item(), abs=1e-5) and r.trap[key] > 0.01
    assert r.correct[key] == pytest.approx(0, abs=1e-6)
    # the correct form is float32 rounding away, not 0: the sentence once said "max difference 0" for 2.98e-08
    assert f"(max difference {r.correct[key]:.2g})" in r.sentence and f"up to {r.trap[key]:.4g}" in r.sentence
    assert ("max difference 0)" in r.sentence) == (r.correct[key] == 0)
    assert f"{r.trap[key]:.4g}" in r.sentence and " + ".join(map(str, sizes)) in r.sentence


def test_advanced_indexing(pairs):
    r = pairs["advanced_indexing"]
    assert r.trap["x"] == torch.zeros(5).tolist()
    assert r.correct["x"] == torch.zeros(5).index_put((torch.tensor([1, 3]),), torch.tensor([5.0, 7.0])).tolist()
    assert r.trap["x[idx] shares x's memory"] is False and r.correct["x[1:4] shares x's memory"] is True
    assert fmt_list(r.trap["x"]) in r.sentence and fmt_list(r.correct["x"]) in r.sentence


def test_squeeze_batch_of_one(pairs):
    r = pairs["squeeze_batch_of_one"]
    torch.manual_seed(0)
    features = torch.randn(1, 1, 4).flatten()
    assert r.trap["h.shape"] == [4] and r.correct["h.shape"] == [1, 4]
    assert r.trap["max |centered|"] == pytest.approx((features - features.mean()).abs().max().item(), abs=1e-4)
    assert r.correct["max |centered|"] == 0
    assert "shape (4,) instead of (1, 4)" in r.sentence and f"{r.trap['max |centered|']:.4g}" in r.sentence


def test_backward_hooks(pairs):
    r = pairs["backward_hooks"]
    torch.manual_seed(0)
    model, x = LinearTimesTwo(), torch.randn(1, 3, requires_grad=True)
    hidden = model.fc(x)
    dx, dhidden = torch.autograd.grad((hidden * 2).sum(), (x, hidden))
    assert close(r.correct["grad_input[0]"], dx) and r.correct["grad_input shapes"] == [[1, 3]]
    assert close(r.trap["grad_input[0]"], dhidden) and r.trap["grad_input shapes"] == [[1, 2], None]
    assert close(r.trap["x.grad"], dx) and "non-full backward hook" in r.trap["warning"]
    assert "shape (1, 2)" in r.sentence and "shape (1, 3)" in r.sentence and fmt_list(r.trap["x.grad"]) in r.sentence


def test_batchnorm_running_var(pairs):
    r = pairs["batchnorm_running_var"]
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    mean, biased, unbiased = x.mean(0), x.var(0, correction=0), x.var(0, correction=1)
    train = F.batch_norm(x, None, None, training=True)
    evaluated = F.batch_norm(x, mean, unbiased, training=False)
    assert close(r.trap["running_var"], unbiased) and close(r.correct["var(correction=0)"], biased)
    assert r.trap["max |train out - eval out|"] == pytest.approx((train - evaluated).abs().max().item(), abs=1e-4)
    assert r.correct["max |train out - by hand with correction=0|"] < 1e-5
    assert fmt_list(r.trap["running_var"]) in r.sentence and f"{r.trap['max |train out - eval out|']:.4g}" in r.sentence
    assert "1.333×" in r.sentence


def test_strict_false(pairs):
    r = pairs["strict_false"]
    torch.manual_seed(0)
    trained = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    keys = list(trained.state_dict())
    assert r.trap["missing_keys"] == keys and r.trap["unexpected_keys"] == ["module." + k for k in keys]
    gap = max((a - b).abs().max().item() for a, b in zip(fresh.parameters(), trained.parameters(), strict=True))
    assert r.trap["max |fresh - trained|"] == pytest.approx(gap, abs=1e-4)
    assert r.correct["missing_keys"] == [] and r.correct["max |fresh - trained|"] == 0
    assert r.trap["keys loaded"] == 0 and "having loaded 0 keys" in r.sentence
    assert f"{len(keys)} missing" in r.sentence and f"{gap:.4g}" in r.sentence


def test_best_weights(pairs):
    r = pairs["best_weights"]
    torch.manual_seed(2)  # the same run as the demo, by hand: plain SGD on a Linear, copying the best weights
    w_true = torch.randn(8, 1)
    x, x_val = torch.randn(10, 8), torch.randn(64, 8)
    y, y_val = x @ w_true + torch.randn(10, 1), x_val @ w_true + torch.randn(64, 1)
    model = nn.Linear(8, 1)
    losses, snapshots = [], []
    for _ in range(30):
        grads = torch.autograd.grad(F.mse_loss(model(x), y), list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= 0.1 * g
            losses.append(F.mse_loss(model(x_val), y_val).item())
        snapshots.append(copy.deepcopy(model.state_dict()))
    best = min(range(30), key=losses.__getitem__)
    assert r.trap["best step"] == best and r.correct["best val loss"] == pytest.approx(losses[best], abs=1e-4)
    assert r.trap["val loss after restoring the best"] == pytest.approx(losses[-1], abs=1e-4)
    assert r.correct["val loss after restoring the best"] == pytest.approx(losses[best], abs=1e-4)
    assert losses[-1] > losses[best] + 0.1, "the demo needs a best step that training moved away from"
    assert f"step {best}" in r.sentence and f"{losses[-1]:.4g}" in r.sentence and f"{losses[best]:.4g}" in r.sentence


def test_clip_before_unscale(pairs):
    r = pairs["clip_before_unscale_trap"]
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x, y = torch.randn(32, 4), 10 * torch.randn(32, 1)
    grads = torch.autograd.grad(F.mse_loss(model(x), y), list(model.parameters()))
    true_norm = torch.cat([g.flatten() for g in grads]).norm().item()
    scale = 2.0 ** 16
    assert r.trap["scale"] == scale and r.correct["norm clip_grad_norm_ saw"] == pytest.approx(true_norm, abs=1e-3)
    assert r.trap["norm clip_grad_norm_ saw"] == pytest.approx(true_norm * scale, rel=1e-4)
    assert r.correct["parameters moved (norm)"] == pytest.approx(0.1 * 1.0, rel=1e-3)  # lr × max_norm
    assert r.trap["parameters moved (norm)"] == pytest.approx(0.1 / scale, rel=1e-3)
    assert f"{r.trap['norm clip_grad_norm_ saw']:,.1f}" in r.sentence and "65,536" in r.sentence


@pytest.mark.parametrize("page, query, names", [
    ("pages/autograd.py", {"ag_tab": "no_grad & detach"}, ("data_versus_detach", "leaf_update")),
    ("pages/autograd.py", {"ag_tab": "Accumulation"}, ("uneven_micro_batches",)),
    ("pages/tensors.py", {"tensors_tab": "Broadcasting"},
     ("loss_against_column_target", "inplace_broadcast", "squeeze_batch_of_one")),
    ("pages/tensors.py", {"tensors_tab": "Memory layout"},
     ("view_of_transpose", "write_into_expand", "write_through_view", "advanced_indexing")),
    ("pages/tensors.py", {"tensors_tab": "dtypes"}, tuple(fn.__name__ for fn in dtypes.TRAPS)),
    ("pages/tensors.py", {"tensors_tab": "Devices"}, tuple(fn.__name__ for fn in devices.TRAPS)),
    ("pages/modules.py", {"modules_tab": "Parameters & buffers"}, ("batchnorm_running_var",)),
    ("pages/modules.py", {"modules_tab": "Hooks"}, ("backward_hooks",)),
    ("pages/saving.py", {"sv_tab": "state_dict"}, ("strict_false", "best_weights")),
    ("pages/training-loop.py", {"tl_tab": "Mixed precision"}, ("clip_before_unscale_trap",)),
])
def test_page_shows_each_trap_and_its_sentence(pairs, page, query, names):
    """The page shows both sides' numbers and the sentence built from them."""
    at = open_page(page, query=query)
    assert_clean(at)
    shown = [m.value for m in at.markdown]
    for name in names:
        pair = pairs[name]
        assert pair.sentence in shown, name
        for side in (pair.trap, pair.correct):
            assert returned(side) in shown, name
