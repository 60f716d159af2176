"""Predict-then-run questions about gradient flow."""

import torch

from demos.quiz import Question


def _sigmoid_grad_max():
    x = torch.zeros(1, requires_grad=True)
    torch.sigmoid(x).backward()
    return x.grad.item()


def _sigmoid_chain():
    x = torch.zeros(1, requires_grad=True)
    h = x
    for _ in range(10):
        h = torch.sigmoid(h) - 0.5
    h.backward()
    return x.grad.item()


def _clip_norm_returns():
    w = torch.nn.Parameter(torch.zeros(2))
    w.grad = torch.tensor([3.0, 4.0])
    return torch.nn.utils.clip_grad_norm_([w], max_norm=1.0).item()


def _clip_norm_after():
    w = torch.nn.Parameter(torch.zeros(2))
    w.grad = torch.tensor([3.0, 4.0])
    torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    return round(w.grad[0].item(), 4)


def _clip_value_after():
    w = torch.nn.Parameter(torch.zeros(2))
    w.grad = torch.tensor([3.0, 0.5])
    torch.nn.utils.clip_grad_value_([w], clip_value=1.0)
    return w.grad.tolist()


def _relu_grad_at_zero():
    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    torch.relu(x).sum().backward()
    return x.grad.tolist()


def _dead_unit_grad():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 1)
    with torch.no_grad():
        lin.bias.fill_(-100.0)
    x = torch.randn(8, 4)
    torch.relu(lin(x)).sum().backward()
    return lin.weight.grad.abs().sum().item()


def _normal_init_std():
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 256)
    torch.nn.init.normal_(lin.weight, 0.0, 1.0)
    x = torch.randn(1024, 256)
    return round(lin(x).std().item() / 16) * 16


def _kaiming_std():
    torch.manual_seed(0)
    w = torch.empty(512, 512)
    torch.nn.init.kaiming_normal_(w, nonlinearity="relu")
    return round(w.std().item() * (512 ** 0.5), 1)


def _tanh_saturated():
    x = torch.tensor([10.0], requires_grad=True)
    torch.tanh(x).backward()
    return x.grad.item() < 1e-6


QUESTIONS = (
    Question("sigmoid_max", "What is the derivative of sigmoid at 0 (its largest value)?", _sigmoid_grad_max,
             "σ'(x) = σ(x)(1 − σ(x)) peaks at 0.25 when x = 0. Every sigmoid layer multiplies the backward signal "
             "by at most 0.25 (times the weights), which is why deep sigmoid stacks vanish.", kind="number"),
    Question("sigmoid_chain", "Ten stacked sigmoids (centred by −0.5) at x = 0: what is dh/dx?", _sigmoid_chain,
             "Each layer contributes a factor of 0.25, so ten layers give 0.25¹⁰ ≈ 9.5e-7: gradients vanish "
             "geometrically with depth.", kind="number"),
    Question("clip_returns", "clip_grad_norm_ with max_norm=1 on grad [3, 4]: what does it return?",
             _clip_norm_returns,
             "It returns the total norm measured BEFORE clipping (5.0), which is what you should log to spot spikes.",
             kind="number"),
    Question("clip_after", "After clip_grad_norm_(max_norm=1) on grad [3, 4], what is grad[0]?", _clip_norm_after,
             "All gradients are scaled by max_norm / total_norm = 1/5 (plus a tiny epsilon), so [3, 4] becomes "
             "[0.6, 0.8]: same direction, norm 1.", kind="number"),
    Question("clip_value", "clip_grad_value_(clip_value=1) on grad [3.0, 0.5]: what is the grad?", _clip_value_after,
             "Value clipping clamps each entry independently to [−1, 1]: the small entry is untouched, the large one "
             "is cut, so the direction changes.",
             choices=("[1.0, 0.5]", "[0.6, 0.1]", "[0.9864, 0.1644]", "[1.0, 1.0]")),
    Question("relu_zero", "What gradient does torch give ReLU at exactly 0?", _relu_grad_at_zero,
             "torch defines relu'(0) = 0, so a unit sitting at 0 passes no gradient either.",
             choices=("[0.0, 0.0, 1.0]", "[0.0, 0.5, 1.0]", "[0.0, 1.0, 1.0]")),
    Question("dead_unit", "A ReLU unit with bias −100 on standard-normal inputs: total |grad| of its weights?",
             _dead_unit_grad,
             "The unit never fires, so no gradient reaches its weights or bias: SGD cannot revive it directly, only "
             "a change in its inputs (from the layers below) that makes its pre-activation positive somewhere.",
             kind="number"),
    Question("normal_std", "Linear(256, 256) with N(0, 1) weights on unit-variance input: output std, to the "
             "nearest 16?", _normal_init_std,
             "Each output sums 256 terms of variance 1, so its std is √256 = 16 per layer: N(0, 1) init explodes "
             "activations unless the width is tiny.", kind="number"),
    Question("kaiming_std", "kaiming_normal_ (ReLU) on a 512×512 weight: std × √fan_in, to one decimal?",
             _kaiming_std,
             "Kaiming uses std = √(2 / fan_in), so std·√fan_in ≈ √2 ≈ 1.4: the factor 2 makes up for ReLU "
             "zeroing half the inputs.", kind="number"),
    Question("tanh_saturated", "Is the gradient of tanh at x = 10 below 1e-6?", _tanh_saturated,
             "tanh'(10) = 1 − tanh²(10) ≈ 8e-9: a saturated unit stops passing gradient, the same mechanism as "
             "sigmoid vanishing.", choices=("True", "False")),
)
