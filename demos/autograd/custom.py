"""Section 4: custom autograd Functions, checked by gradcheck and against autograd on a plain version."""

from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from demos.autograd.backward import preview
from demos.shown import Script, entry, script

GRADCHECK_IMPORTS = "import torch\nfrom torch.autograd.gradcheck import GradcheckError"


class RoundSTE(torch.autograd.Function):
    """Round in forward; pass the gradient straight through in backward (a deliberate, biased estimator)."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out  # pretend d round(x)/dx = 1


class StableLogSumExp(torch.autograd.Function):
    """log(sum(exp(x))) over the last dim without overflow; backward is softmax(x) times the incoming gradient."""

    @staticmethod
    def forward(ctx, x):
        m = x.max(dim=-1, keepdim=True).values
        y = m + torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))
        ctx.save_for_backward(x, y)
        return y.squeeze(-1)

    @staticmethod
    def backward(ctx, grad_out):
        x, y = ctx.saved_tensors
        return grad_out.unsqueeze(-1) * torch.exp(x - y)  # softmax, computed stably from the saved output


class Swish(torch.autograd.Function):
    """x * sigmoid(x); save_for_backward keeps x and sigmoid(x) (version-checked) for the hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_out):
        x, s = ctx.saved_tensors
        return grad_out * (s + x * s * (1 - s))


class SquareForgetsGrad(torch.autograd.Function):
    """The trap: x**2 whose backward returns 2x and forgets to multiply by the incoming gradient."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return 2 * x  # wrong: should be grad_out * 2 * x


@dataclass(frozen=True)
class CustomResult:
    name: str
    what: str
    forward: str
    custom_grad: str
    plain_name: str
    plain_grad: str
    max_abs_diff: float
    gradcheck_ok: bool
    gradcheck_message: str
    extra: tuple[tuple[str, str], ...]
    code: Script


def run_gradcheck(fn, x: torch.Tensor) -> tuple[bool, str]:
    """gradcheck in float64; on failure, torch's first line of explanation."""
    try:
        ok = torch.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-5)
        return ok, "analytic and numerical gradients agree"
    except GradcheckError as err:  # torch's first line, without the matrices that follow it
        return False, str(err).strip().splitlines()[0].rstrip(",") + ": the numerical and analytical Jacobians differ"


def grad_of(fn, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """d/dx of sum(weights * fn(x)) by backward."""
    x = x.detach().clone().requires_grad_()
    out = fn(x)
    (out if weights is None else out * weights).sum().backward()
    return x.grad


def inputs(shape=(3, 4), scale: float = 1.0) -> torch.Tensor:
    """The page's x: seeded float64 values (float64, so gradcheck's finite differences are precise)."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).requires_grad_()


def round_by_autograd(t):
    return torch.round(t)


def logsumexp_by_autograd(t):
    return torch.log(torch.exp(t).sum(dim=-1))


def swish_by_autograd(t):
    return t * torch.sigmoid(t)


def square(t):
    return t * t


def against_autograd(fn, plain, x: torch.Tensor):
    """A custom Function beside autograd on a plain version of it: its forward, both gradients of the sum, and
    gradcheck's verdict with its reason."""
    return fn(x), grad_of(fn, x), grad_of(plain, x), *run_gradcheck(fn, x)


def _script(cls, plain, scale: float = 1.0) -> Script:
    """The worked example as a script; its x is the page's x."""
    return script(cls, run_gradcheck, grad_of, inputs, plain, against_autograd,
                  imports=GRADCHECK_IMPORTS, settings={"scale": scale}, run=f"""
forward, custom, plain, ok, message = against_autograd({cls.__name__}.apply, {plain.__name__}, inputs(scale=scale))
print(forward.flatten()[:6].tolist())  # the forward's first values, as the page lists them
print((custom - plain).abs().max().item(), ok, message)""")


@entry()
def straight_through() -> CustomResult:
    forward, custom, plain, ok, msg = against_autograd(RoundSTE.apply, round_by_autograd, inputs(scale=2.0))
    return CustomResult(
        "Straight-through estimator for rounding", "Quantization-aware training: round forward, identity backward.",
        preview(forward), preview(custom), "torch.round (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg + " — expected: the STE deliberately reports slope 1 where "
        "the true slope of round is 0",
        (("grad of round by autograd", "zero almost everywhere: nothing upstream would learn"),),
        _script(RoundSTE, round_by_autograd, scale=2.0),
    )


@entry()
def stable_logsumexp() -> CustomResult:
    forward, custom, plain, ok, msg = against_autograd(StableLogSumExp.apply, logsumexp_by_autograd, inputs())
    big = torch.tensor([[1000.0, 1000.5, 999.0]], dtype=torch.float64)
    naive_big = torch.log(torch.exp(big).sum(dim=-1))
    stable_big = StableLogSumExp.apply(big)
    big_grad = grad_of(StableLogSumExp.apply, big)
    return CustomResult(
        "Numerically stable log-sum-exp", "Subtract the max before exp; backward is softmax, from the saved output.",
        preview(forward), preview(custom), "log(exp(x).sum(-1)) (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg,
        (("x = [1000, 1000.5, 999]: naive", preview(naive_big)),
         ("x = [1000, 1000.5, 999]: stable", preview(stable_big)),
         ("its gradient (softmax)", preview(big_grad)),
         ("torch.logsumexp agrees", preview(torch.logsumexp(big, dim=-1)))),
        _script(StableLogSumExp, logsumexp_by_autograd),
    )


@entry()
def swish() -> CustomResult:
    forward, custom, plain, ok, msg = against_autograd(Swish.apply, swish_by_autograd, inputs())
    return CustomResult(
        "Swish with ctx.save_for_backward", "Saved tensors are version-checked and freed with the graph.",
        preview(forward), preview(custom), "x * sigmoid(x) (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg, (),
        _script(Swish, swish_by_autograd),
    )


@dataclass(frozen=True)
class TrapResult:
    naive_custom: str
    naive_true: str
    naive_passes: bool
    weighted_custom: str
    weighted_true: str
    gradcheck_ok: bool
    gradcheck_message: str
    code: Script


@entry()
def wrong_backward_trap() -> TrapResult:
    """A backward that ignores grad_out passes .sum().backward() (grad_out is all ones) and fails gradcheck."""
    (naive_custom, naive_true), (weighted_custom, weighted_true), (ok, msg) = forgotten_grad_out()
    code = script(SquareForgetsGrad, run_gradcheck, grad_of, inputs, square, forgotten_grad_out,
                  imports=GRADCHECK_IMPORTS, run="""
naive, weighted, gradcheck = forgotten_grad_out()
print(torch.allclose(*naive))  # True: under .sum() the bug is invisible
print(weighted[0].tolist(), weighted[1].tolist())  # differ: grad_out was ignored
print(gradcheck)""")
    return TrapResult(preview(naive_custom), preview(naive_true), bool(torch.allclose(naive_custom, naive_true)),
                      preview(weighted_custom), preview(weighted_true), ok, msg, code)


def forgotten_grad_out():
    """SquareForgetsGrad against autograd on x * x: the gradients under .sum() (grad_out all ones), under a weighted
    sum (grad_out = w), and gradcheck's verdict with its reason."""
    x = inputs((5,))
    w = torch.arange(1.0, 6.0, dtype=torch.float64)
    naive = grad_of(SquareForgetsGrad.apply, x), grad_of(square, x)
    weighted = grad_of(SquareForgetsGrad.apply, x, w), grad_of(square, x, w)
    return naive, weighted, run_gradcheck(SquareForgetsGrad.apply, x)


def all_custom() -> tuple[tuple[CustomResult, ...], TrapResult]:
    """The three worked Functions and the planted trap."""
    return (straight_through(), stable_logsumexp(), swish()), wrong_backward_trap()
