"""Module traps, each run beside its correct form: the old backward hook, BatchNorm's unbiased running_var."""

import warnings

import torch
from torch import nn

from demos.shown import entry
from demos.traps import TrapPair, fmt_list, measure

# ---- register_backward_hook sees the last operation, not the module ----------------------------------------------


class LinearTimesTwo(nn.Module):
    """Two autograd nodes in forward: the Linear's and the multiplication's."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x) * 2


def old_backward_hook():
    torch.manual_seed(0)
    model, x = LinearTimesTwo(), torch.randn(1, 3, requires_grad=True)
    seen = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.register_backward_hook(lambda m, grad_in, grad_out: seen.update(grad_in=grad_in))
        model(x).sum().backward()
    return {"grad_input shapes": [None if g is None else list(g.shape) for g in seen["grad_in"]],
            "grad_input[0]": [round(v, 4) for v in seen["grad_in"][0].flatten().tolist()],
            "x.grad": [round(v, 4) for v in x.grad.flatten().tolist()],
            "warning": str(caught[0].message).split(". ")[0] if caught else None}


def full_backward_hook():
    torch.manual_seed(0)
    model, x = LinearTimesTwo(), torch.randn(1, 3, requires_grad=True)
    seen = {}
    model.register_full_backward_hook(lambda m, grad_in, grad_out: seen.update(grad_in=grad_in))
    model(x).sum().backward()
    return {"grad_input shapes": [None if g is None else list(g.shape) for g in seen["grad_in"]],
            "grad_input[0]": [round(v, 4) for v in seen["grad_in"][0].flatten().tolist()],
            "x.grad": [round(v, 4) for v in x.grad.flatten().tolist()]}


def _hook_sentence(trap: dict, correct: dict) -> str:
    old, full = trap["grad_input shapes"][0], correct["grad_input shapes"][0]
    warned = f"torch only warned: \"{trap['warning']}\"" if trap["warning"] else "torch did not even warn"
    return (f"`register_backward_hook` hooked the last operation in forward (the `* 2`), so its grad_input[0] has "
            f"shape {tuple(old)} with values {fmt_list(trap['grad_input[0]'])}: the gradient of fc's output, not of "
            f"the module's input x, whose gradient is {fmt_list(trap['x.grad'])}; {warned}. "
            f"`register_full_backward_hook` received shape {tuple(full)}, {fmt_list(correct['grad_input[0]'])}: "
            f"exactly x.grad.")


@entry()
def backward_hooks() -> TrapPair:
    """The same module and input under register_backward_hook and register_full_backward_hook."""
    return measure("hooks", "`register_backward_hook` versus `register_full_backward_hook`",
                   ("Trap: `register_backward_hook`", "Correct: `register_full_backward_hook`"),
                   (old_backward_hook, full_backward_hook), _hook_sentence,
                   imports="import warnings\n\nimport torch\nfrom torch import nn", helpers=(LinearTimesTwo,))


# ---- BatchNorm normalizes with the biased variance and stores the unbiased one --------------------------------------


def eval_on_the_training_batch():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    bn = nn.BatchNorm1d(3, momentum=1.0)  # momentum 1: the running statistics become this batch's
    train_out = bn(x)
    bn.eval()
    eval_out = bn(x)  # the same batch, normalized with running_mean and running_var
    return {"batch": x.shape[0], "running_var": [round(v, 4) for v in bn.running_var.tolist()],
            "max |train out - eval out|": round((train_out - eval_out).abs().max().item(), 4)}


def statistics_by_hand():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    bn = nn.BatchNorm1d(3, momentum=1.0)
    train_out = bn(x)
    biased, unbiased = x.var(dim=0, correction=0), x.var(dim=0, correction=1)
    by_hand = (x - x.mean(dim=0)) / torch.sqrt(biased + bn.eps)  # what the train-mode forward computed
    return {"var(correction=0)": [round(v, 4) for v in biased.tolist()],
            "var(correction=1)": [round(v, 4) for v in unbiased.tolist()],
            "max |running_var - var(correction=1)|": round((bn.running_var - unbiased).abs().max().item(), 6),
            "max |train out - by hand with correction=0|": round((train_out - by_hand).abs().max().item(), 6)}


def _batchnorm_sentence(trap: dict, correct: dict) -> str:
    n = trap["batch"]
    ratio = correct["var(correction=1)"][0] / correct["var(correction=0)"][0]
    by_hand = correct["max |train out - by hand with correction=0|"]
    return (f"After one train-mode batch of {n} with momentum 1, running_var is {fmt_list(trap['running_var'])}: "
            f"x.var(correction=1) (max difference {correct['max |running_var - var(correction=1)|']:.2g}), "
            f"{ratio:.4g}× (N/(N−1) = {n}/{n - 1}) the biased {fmt_list(correct['var(correction=0)'])} that the "
            f"train-mode forward divided by (max difference {by_hand:.2g} from doing that by hand). So eval() on the "
            f"very batch it was trained on differs from the train-mode output by up to "
            f"{trap['max |train out - eval out|']:.4g}: a hand-written or fused BatchNorm must "
            "normalize with the biased variance in training and keep the unbiased one in running_var.")


@entry()
def batchnorm_running_var() -> TrapPair:
    """A batch of 4 through BatchNorm1d with momentum 1: train output, eval output, and both variances."""
    return measure("running_var", "BatchNorm's running_var is unbiased",
                   ("Trap: expecting eval() to reproduce train() on the same batch",
                    "Correct: train uses var(correction=0), running_var stores var(correction=1)"),
                   (eval_on_the_training_batch, statistics_by_hand), _batchnorm_sentence,
                   imports="import torch\nfrom torch import nn")
