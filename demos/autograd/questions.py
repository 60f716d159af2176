"""Predict-then-run questions for the autograd page; torch decides every answer."""

import torch

from demos.quiz import Question

TF = ("True", "False")


def _op_output_is_leaf():
    w = torch.randn(3, requires_grad=True)
    y = w * 2
    return y.is_leaf


def _no_grad_tensor_is_leaf():
    x = torch.randn(3)
    y = x * 2
    return y.is_leaf


def _grad_after_two_calls():
    w = torch.tensor(2.0, requires_grad=True)
    for _ in range(2):
        (w * 3).backward()
    return w.grad


def _detach_copies():
    w = torch.zeros(3, requires_grad=True)
    d = w.detach()
    d[0] = 5.0
    return w[0].item()


def _no_grad_requires_grad():
    w = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        y = w * 2
    return y.requires_grad


def _intermediate_grad_is_none():
    x = torch.ones(2, requires_grad=True)
    h = x * 3
    h.sum().backward()
    return h.grad is None


def _weight_grad_shape():
    torch.manual_seed(0)
    W = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(5, 4)
    (x @ W).sum().backward()
    return W.grad.shape


def _used_twice():
    x = torch.tensor(3.0, requires_grad=True)
    y = x * x + x
    y.backward()
    return x.grad


def _detach_inside():
    x = torch.tensor(2.0, requires_grad=True)
    y = x.detach() * x
    y.backward()
    return x.grad


def _inference_tensor_in_autograd():
    x = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        c = torch.ones(2)
    outcome = "works"
    try:
        (x * c).sum().backward()
    except RuntimeError:
        outcome = "RuntimeError"
    return outcome


def _second_backward():
    x = torch.tensor(1.0, requires_grad=True)
    y = x.exp()
    y.backward()
    outcome = "works"
    try:
        y.backward()
    except RuntimeError:
        outcome = "RuntimeError"
    return outcome


def _grad_through_data():
    x = torch.tensor(0.0, requires_grad=True)
    y = torch.sigmoid(x)  # sigmoid saves y; its backward is y * (1 - y)
    y.data.zero_()
    y.backward()
    return x.grad


def _leaf_inplace_update():
    w = torch.ones(2, requires_grad=True)
    (w * w).sum().backward()
    outcome = "works"
    try:
        w -= 0.1 * w.grad
    except RuntimeError:
        outcome = "RuntimeError"
    return outcome


def _uneven_mean_over_k():
    w = torch.tensor(0.0, requires_grad=True)
    x = torch.tensor([1.0, 2.0, 3.0, 10.0])
    for xb in x.split([3, 1]):  # micro-batches of 3 and 1
        (w * xb).mean().div(2).backward()  # each mean divided by k = 2
    return w.grad


QUESTIONS = (
    Question("op_leaf", "w requires grad. Is y = w * 2 a leaf?", _op_output_is_leaf,
             "y was produced by an operation that autograd recorded (y.grad_fn is MulBackward0), so it is not a "
             "leaf. Leaves are tensors you created yourself.", choices=TF),
    Question("plain_leaf", "x does not require grad. Is y = x * 2 a leaf?", _no_grad_tensor_is_leaf,
             "A tensor that does not require grad has no grad_fn, and by convention every such tensor is a leaf.",
             choices=TF),
    Question("two_calls", "What is w.grad after calling (w * 3).backward() twice without zeroing?",
             _grad_after_two_calls,
             "Each backward adds into .grad: 3 + 3 = 6. That is why a training loop zeroes gradients every step.",
             kind="number"),
    Question("detach_copy", "After d = w.detach(); d[0] = 5.0, what is w[0]?", _detach_copies,
             "detach() returns a view of the same storage without a graph: writing d writes w. Use "
             "w.detach().clone() for an independent copy.", kind="number"),
    Question("no_grad_flag", "Does y = w * 2 computed inside torch.no_grad() require grad?", _no_grad_requires_grad,
             "Inside no_grad nothing is recorded, so results have requires_grad=False and no grad_fn, even though "
             "w requires grad.", choices=TF),
    Question("intermediate_grad", "After h.sum().backward(), is h.grad None for the intermediate h = x * 3?",
             _intermediate_grad_is_none,
             "Only leaves keep .grad. Call h.retain_grad() before backward (or register a hook) to keep an "
             "intermediate's gradient.", choices=TF),
    Question("grad_shape", "W has shape (4, 3) and x has shape (5, 4). What is the shape of W.grad after "
             "(x @ W).sum().backward()?", _weight_grad_shape,
             "A gradient always has the shape of the tensor it belongs to: here xᵀ @ ones(5, 3), shape (4, 3).",
             kind="shape"),
    Question("used_twice", "x = 3 and y = x * x + x. What is x.grad after y.backward()?", _used_twice,
             "Every use of x contributes: 2x from x * x plus 1 from + x, summed by the engine: 2·3 + 1 = 7.",
             kind="number"),
    Question("detach_inside", "x = 2 and y = x.detach() * x. What is x.grad after y.backward()?", _detach_inside,
             "x.detach() is a constant to autograd, so dy/dx is only that constant, 2 (not 2x = 4).", kind="number"),
    Question("inference_tensor", "c was created under torch.inference_mode(). What happens on "
             "(x * c).sum().backward() where x requires grad?", _inference_tensor_in_autograd,
             "mul must save c to compute x's gradient, and inference tensors cannot be saved for backward: "
             "RuntimeError. no_grad would have worked; or use c.clone().", choices=("works", "RuntimeError")),
    Question("second_backward", "y = x.exp(). What does a second y.backward() do?", _second_backward,
             "exp saved its result for backward; the first backward freed it. Pass retain_graph=True to the first "
             "call if you really need two.", choices=("works", "RuntimeError")),
    Question("data_zero", "y = sigmoid(x) at x = 0, then y.data.zero_() and y.backward(). What is x.grad?",
             _grad_through_data,
             "0, silently. sigmoid's backward reads its saved output y: y·(1 − y) with y now 0. The true gradient "
             "is 0.25. Through y.detach().zero_() the version counter would catch it and backward would raise.",
             kind="number"),
    Question("leaf_inplace", "w requires grad and has a .grad. What does `w -= 0.1 * w.grad` do outside "
             "torch.no_grad()?", _leaf_inplace_update,
             "RuntimeError: a leaf that requires grad cannot be changed in place while autograd records. Wrap the "
             "update in torch.no_grad(), as optimizer.step() does.", choices=("works", "RuntimeError")),
    Question("uneven_k", "x = [1, 2, 3, 10] split into micro-batches of 3 and 1; each (w·xb).mean() is divided by "
             "k = 2 and backpropagated. What is w.grad? (One batch's mean would give 4.)", _uneven_mean_over_k,
             "mean([1, 2, 3]) / 2 + 10 / 2 = 1 + 5 = 6: the lone sample weighs as much as the other three. Sum each "
             "micro-batch's losses and divide by the 4 samples to get 4.", kind="number"),
)
