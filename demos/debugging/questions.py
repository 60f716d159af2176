"""Predict-then-run questions about debugging and reproducibility."""

import torch

from demos.quiz import Question


def _log_zero_grad():
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    y = torch.where(x > 0, torch.log(x), torch.zeros(2))
    y.sum().backward()
    return x.grad[0].item()


def _xlogy():
    x = torch.tensor([0.0], requires_grad=True)
    torch.xlogy(x, x).sum().backward()
    return torch.isfinite(x.grad).all().item()


def _nan_equal():
    x = torch.tensor(float("nan"))
    return (x == x).item()


def _fp16_max():
    return torch.tensor(300.0, dtype=torch.float16).pow(2).item()


def _seeded_same():
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    b = torch.rand(3)
    return torch.equal(a, b)


def _rand_after_seed():
    torch.manual_seed(0)
    a = torch.rand(1)
    b = torch.rand(1)
    return torch.equal(a, b)


def _graph_kept():
    w = torch.ones(1, requires_grad=True)
    total = 0
    for _ in range(3):
        total = total + (w * 2).sum()
    return total.requires_grad


def _item_kept():
    w = torch.ones(1, requires_grad=True)
    total = 0.0
    for _ in range(3):
        total += (w * 2).sum().item()
    return type(total).__name__


def _hooks_count():
    lin = torch.nn.Linear(2, 2)
    for _ in range(5):
        lin.register_forward_hook(lambda m, a, o: None)
    return len(lin._forward_hooks)


def _detach_grad_fn():
    w = torch.ones(2, requires_grad=True)
    out = (w * 3).detach()
    return out.grad_fn is None


def _empty_deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        x = torch.empty(3)
    finally:
        torch.use_deterministic_algorithms(before)
    return torch.isnan(x).all().item()


QUESTIONS = (
    Question("where_nan", "torch.where(x > 0, log(x), 0) at x = 0: what is x.grad[0]?", _log_zero_grad,
             "where picks 0 in the forward, but log(0) was still computed: its backward multiplies a zero "
             "gradient by 1/0 = inf, and 0 · inf = nan. Make the unused branch safe too (log(x.clamp_min(eps))).",
             kind="number"),
    Question("xlogy", "Is the gradient of torch.xlogy(x, x) at x = 0 finite?", _xlogy,
             "No. xlogy defines 0 · log 0 = 0 in the forward, but the gradient with respect to its second argument "
             "is x / y = 0 / 0 = nan. It is safe when y is a constant (targets), not when both are the same tensor.",
             choices=("True", "False")),
    Question("nan_equal", "Is nan == nan?", _nan_equal,
             "No: nan compares unequal to everything, itself included. Test with torch.isnan or torch.isfinite.",
             choices=("True", "False")),
    Question("fp16_overflow", "What is 300² computed in float16?", _fp16_max,
             "float16 tops out at 65504, so 90000 overflows to inf. That is why AMP keeps reductions in float32 "
             "and scales the loss.", kind="number"),
    Question("seeded_same", "Reseeding with torch.manual_seed(0) before each torch.rand(3): equal?", _seeded_same,
             "The seed fixes the generator's state, so the same calls in the same order give the same bits.",
             choices=("True", "False")),
    Question("rand_twice", "One torch.manual_seed(0), then torch.rand(1) twice: equal?", _rand_after_seed,
             "The seed fixes the sequence, not each value: the second call draws the next number.",
             choices=("True", "False")),
    Question("graph_kept", "total = total + loss over 3 steps: does total require grad?", _graph_kept,
             "Yes: total is a tensor at the end of a chain that holds every step's graph. Accumulate "
             "loss.item() instead.", choices=("True", "False")),
    Question("item_kept", "total += loss.item() over 3 steps: what type is total?", _item_kept,
             ".item() returns a Python float, which holds no graph at all.",
             choices=("float", "Tensor", "int")),
    Question("hooks_count", "register_forward_hook inside a loop of 5: how many hooks does the layer have?",
             _hooks_count, "Each call adds a hook; nothing removes them unless you keep the handle and call "
             ".remove(). Every forward then runs all of them.", kind="number"),
    Question("detach_grad_fn", "Is (w * 3).detach().grad_fn None?", _detach_grad_fn,
             "detach returns a tensor that shares storage but has no history, so keeping it keeps no graph.",
             choices=("True", "False")),
    Question("empty_nan", "With use_deterministic_algorithms(True), is torch.empty(3) all NaN?",
             _empty_deterministic,
             "Yes: deterministic mode fills uninitialized memory (torch.utils.deterministic.fill_uninitialized_memory) "
             "so reading it by mistake gives the same NaNs every run.", choices=("True", "False")),
)
