"""Autograd traps, each run beside its correct form: .data vs .detach(), updating a leaf, uneven micro-batches."""

import re
import warnings

import torch

from demos.shown import entry
from demos.traps import TrapPair, fmt_list, measure

# ---- .data skips the version check that .detach() keeps ---------------------------------------------------------


def zero_through_data():
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = torch.sigmoid(x)  # sigmoid saves its output y for backward: dy/dx = y * (1 - y)
    y.data.zero_()  # the write bypasses autograd's version counter
    y.sum().backward()
    return {"x.grad": [round(g, 4) for g in x.grad.tolist()], "backward raised": None}


def zero_through_detach():
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = torch.sigmoid(x)
    true_grad = (y * (1 - y)).tolist()  # read before the write
    y.detach().zero_()  # same storage, same version counter: autograd sees the change
    try:
        y.sum().backward()
        error = None
    except RuntimeError as err:
        error = str(err).split(" Hint:")[0]
    return {"true grad": [round(g, 4) for g in true_grad], "backward raised": error}


def _data_sentence(trap: dict, correct: dict) -> str:
    said = (f"Through `.data` the zeroing went unnoticed: backward ran and returned x.grad = "
            f"{fmt_list(trap['x.grad'])}, where the true gradient is {fmt_list(correct['true grad'])}, and no error "
            "was raised. ")
    version = re.search(r"is at version \d+; expected version \d+", correct["backward raised"] or "")
    if version:
        return said + ("Through `.detach()` the same write bumped the version counter it shares with y, so backward "
                       f"refused with a RuntimeError: y {version.group(0)}.")
    return said + f"Through `.detach()` backward did not catch it either ({correct['backward raised'] or 'no error'})."


@entry()
def data_versus_detach() -> TrapPair:
    """Zero a saved tensor in place through .data (silently wrong grads) and through .detach() (caught)."""
    return measure("data", "`.data` versus `.detach()`: an in-place write to a tensor backward needs",
                   ("Trap: `y.data.zero_()`", "Correct: `y.detach().zero_()` is caught"),
                   (zero_through_data, zero_through_detach), _data_sentence)


# ---- an in-place update of a leaf that requires grad --------------------------------------------------------------


def update_outside_no_grad():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w ** 2).sum().backward()
    try:
        w -= 0.1 * w.grad  # in place, recorded by autograd
        inplace = "ran"
    except RuntimeError as err:
        inplace = str(err).splitlines()[0]
    w = w - 0.1 * w.grad  # the "fix" people reach for: w is now an output of SubBackward0, not a leaf
    (w ** 2).sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grad = w.grad  # None: backward fills .grad of leaves only
    try:
        w = w - 0.1 * grad
        next_update = "ran"
    except TypeError as err:
        next_update = f"TypeError: {err}"
    return {"w -= lr * w.grad": inplace, "w = w - lr * w.grad: is_leaf": w.is_leaf,
            "grad_fn": type(w.grad_fn).__name__, "w.grad after the next backward": grad,
            "warning on reading it": str(caught[0].message).split(". ")[0] if caught else None,
            "the update after that": next_update}


def update_under_no_grad():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w ** 2).sum().backward()
    with torch.no_grad():
        w -= 0.1 * w.grad  # what optimizer.step() does
    w.grad = None
    (w ** 2).sum().backward()
    return {"w": [round(v, 4) for v in w.tolist()], "is_leaf": w.is_leaf,
            "w.grad after the next backward": [round(g, 4) for g in w.grad.tolist()]}


def _leaf_sentence(trap: dict, correct: dict) -> str:
    later = trap["w.grad after the next backward"]
    return (f"Outside `no_grad`, `w -= lr * w.grad` raised \"{trap['w -= lr * w.grad']}\"; rebinding with "
            f"`w = w - lr * w.grad` ran but left w a non-leaf (is_leaf {trap['w = w - lr * w.grad: is_leaf']}, "
            f"grad_fn {trap['grad_fn']}), so the next backward gave it w.grad = {later}"
            f"{_warned(trap['warning on reading it'])}, and the update after that raised "
            f"`{trap['the update after that']}`. Under `torch.no_grad()` w became {fmt_list(correct['w'])}, stayed a "
            f"leaf (is_leaf {correct['is_leaf']}) and the next backward filled w.grad = "
            f"{fmt_list(correct['w.grad after the next backward'])}.")


def _warned(warning: str | None) -> str:
    return f" (torch only warned on reading it: \"{warning}\")" if warning else ""


@entry()
def leaf_update() -> TrapPair:
    """A hand-written SGD step on a leaf: in place outside no_grad, rebinding, and the no_grad form."""
    return measure("leaf", "Updating a leaf that requires grad, outside `no_grad`",
                   ("Trap: `w -= lr * w.grad` (or `w = w - lr * w.grad`)", "Correct: under `torch.no_grad()`"),
                   (update_outside_no_grad, update_under_no_grad), _leaf_sentence,
                   imports="import warnings\n\nimport torch")


# ---- accumulating uneven micro-batches ---------------------------------------------------------------------------


def uneven_divide_by_k():
    torch.manual_seed(0)
    x, y = torch.randn(10, 3), torch.randn(10)
    w = torch.zeros(3, requires_grad=True)
    ((x @ w - y) ** 2).mean().backward()  # the gradient of one batch of 10
    full = w.grad.clone()
    w.grad = None
    sizes = (4, 4, 2)  # a last micro-batch that is smaller
    for xb, yb in zip(x.split(sizes), y.split(sizes), strict=True):
        ((xb @ w - yb) ** 2).mean().div(len(sizes)).backward()  # each mean weighted 1/k
    return {"sizes": list(sizes), "max |accumulated - full batch|": (w.grad - full).abs().max().item()}


def uneven_weight_by_count():
    torch.manual_seed(0)
    x, y = torch.randn(10, 3), torch.randn(10)
    w = torch.zeros(3, requires_grad=True)
    ((x @ w - y) ** 2).mean().backward()
    full = w.grad.clone()
    w.grad = None
    sizes = (4, 4, 2)
    for xb, yb in zip(x.split(sizes), y.split(sizes), strict=True):
        ((xb @ w - yb) ** 2).sum().div(len(x)).backward()  # each sample weighted 1/N
    return {"sizes": list(sizes), "max |accumulated - full batch|": (w.grad - full).abs().max().item()}


def _uneven_sentence(trap: dict, correct: dict) -> str:
    key = "max |accumulated - full batch|"
    sizes, wrong, right = " + ".join(map(str, trap["sizes"])), trap[key], correct[key]
    return (f"With micro-batches of {sizes} samples, dividing each micro-batch's mean by k = {len(trap['sizes'])} "
            f"gives the {trap['sizes'][-1]} samples of the last micro-batch as much weight together as the "
            f"{trap['sizes'][0]} of each other one: the accumulated gradient is off the full batch's by up to "
            f"{wrong:.4g}. Summing each micro-batch's losses and dividing by the {sum(trap['sizes'])} samples "
            f"matches it (max difference {right:.2g}).")


@entry()
def uneven_micro_batches() -> TrapPair:
    """Accumulate 4 + 4 + 2 samples: mean / k against sum / N, each compared with the full batch's gradient."""
    return measure("uneven", "Accumulating uneven micro-batches",
                   ("Trap: `loss.mean() / k`", "Correct: `loss.sum() / N`"),
                   (uneven_divide_by_k, uneven_weight_by_count), _uneven_sentence)
