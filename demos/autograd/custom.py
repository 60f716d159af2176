"""Section 4: custom autograd Functions, checked by gradcheck and against autograd on a plain version."""

import inspect
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from demos.autograd.backward import gradcheck_reason, preview


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
    code: str


def run_gradcheck(fn, x: torch.Tensor) -> tuple[bool, str]:
    """gradcheck in float64; on failure, torch's first line of explanation."""
    try:
        ok = torch.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-5)
        return ok, "analytic and numerical gradients agree"
    except GradcheckError as err:
        return False, gradcheck_reason(err)


def _grad(fn, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """d/dx of sum(weights * fn(x)) by backward."""
    x = x.detach().clone().requires_grad_()
    out = fn(x)
    (out if weights is None else out * weights).sum().backward()
    return x.grad


def _inputs(shape=(3, 4), scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).requires_grad_()


def straight_through() -> CustomResult:
    x = _inputs(scale=2.0)
    custom, plain = _grad(RoundSTE.apply, x), _grad(torch.round, x)
    ok, msg = run_gradcheck(RoundSTE.apply, x)
    return CustomResult(
        "Straight-through estimator for rounding", "Quantization-aware training: round forward, identity backward.",
        preview(RoundSTE.apply(x)), preview(custom), "torch.round (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg + " — expected: the STE deliberately reports slope 1 where "
        "the true slope of round is 0",
        (("grad of round by autograd", "zero almost everywhere: nothing upstream would learn"),),
        _code(RoundSTE, "RoundSTE.apply", "torch.round", scale=2.0),
    )


def stable_logsumexp() -> CustomResult:
    x = _inputs()
    custom = _grad(StableLogSumExp.apply, x)
    plain = _grad(lambda t: torch.log(torch.exp(t).sum(dim=-1)), x)
    ok, msg = run_gradcheck(StableLogSumExp.apply, x)
    big = torch.tensor([[1000.0, 1000.5, 999.0]], dtype=torch.float64)
    naive_big = torch.log(torch.exp(big).sum(dim=-1))
    stable_big = StableLogSumExp.apply(big)
    big_grad = _grad(StableLogSumExp.apply, big)
    return CustomResult(
        "Numerically stable log-sum-exp", "Subtract the max before exp; backward is softmax, from the saved output.",
        preview(StableLogSumExp.apply(x)), preview(custom), "log(exp(x).sum(-1)) (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg,
        (("x = [1000, 1000.5, 999]: naive", preview(naive_big)),
         ("x = [1000, 1000.5, 999]: stable", preview(stable_big)),
         ("its gradient (softmax)", preview(big_grad)),
         ("torch.logsumexp agrees", preview(torch.logsumexp(big, dim=-1)))),
        _code(StableLogSumExp, "StableLogSumExp.apply", "lambda t: torch.log(torch.exp(t).sum(dim=-1))"),
    )


def swish() -> CustomResult:
    x = _inputs()
    custom = _grad(Swish.apply, x)
    plain = _grad(lambda t: t * torch.sigmoid(t), x)
    ok, msg = run_gradcheck(Swish.apply, x)
    return CustomResult(
        "Swish with ctx.save_for_backward", "Saved tensors are version-checked and freed with the graph.",
        preview(Swish.apply(x)), preview(custom), "x * sigmoid(x) (autograd)", preview(plain),
        float((custom - plain).abs().max()), ok, msg, (),
        _code(Swish, "Swish.apply", "lambda t: t * torch.sigmoid(t)"),
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
    code: str


def wrong_backward_trap() -> TrapResult:
    """A backward that ignores grad_out passes .sum().backward() (grad_out is all ones) and fails gradcheck."""
    x = _inputs((5,))
    naive_custom = _grad(SquareForgetsGrad.apply, x)
    naive_true = _grad(lambda t: t * t, x)
    w = torch.arange(1.0, 6.0, dtype=torch.float64)
    weighted_custom = _grad(SquareForgetsGrad.apply, x, w)
    weighted_true = _grad(lambda t: t * t, x, w)
    ok, msg = run_gradcheck(SquareForgetsGrad.apply, x)
    return TrapResult(preview(naive_custom), preview(naive_true), bool(torch.allclose(naive_custom, naive_true)),
                      preview(weighted_custom), preview(weighted_true), ok, msg, TRAP_CODE)


def _code(cls, custom: str, plain: str, scale: float = 1.0) -> str:
    """The example as a script; its x is `_inputs(scale=scale)`, the page's x."""
    scaled = "" if scale == 1.0 else f"{scale:g} * "
    return (
        "import torch\n\n\n" + inspect.getsource(cls) + "\n\n"
        "gen = torch.Generator().manual_seed(0)\n"
        f"x = ({scaled}torch.randn((3, 4), generator=gen, dtype=torch.float64)).requires_grad_()\n"
        f"print({custom}(x).flatten()[:6].tolist())  # the forward's first values, as the page lists them\n"
        f"{custom}(x).sum().backward()\n"
        "custom_grad, x.grad = x.grad, None\n"
        f"({plain})(x).sum().backward()\n"
        "print((custom_grad - x.grad).abs().max())\n"
        f"print(torch.autograd.gradcheck({custom}, (x,), eps=1e-6, atol=1e-5, raise_exception=False))\n"
    )


TRAP_CODE = (
    "import torch\n\n\n" + inspect.getsource(SquareForgetsGrad) + "\n\n"
    "gen = torch.Generator().manual_seed(0)  # the page's x\n"
    "x = torch.randn(5, generator=gen, dtype=torch.float64).requires_grad_()\n"
    "SquareForgetsGrad.apply(x).sum().backward()   # naive test: grad_out is all ones\n"
    "print(torch.allclose(x.grad, 2 * x))          # True: the bug is invisible\n"
    "x.grad = None\n"
    "w = torch.arange(1.0, 6.0, dtype=torch.float64)\n"
    "(SquareForgetsGrad.apply(x) * w).sum().backward()\n"
    "print(x.grad, w * 2 * x)                       # differ: grad_out was ignored\n"
    "print(torch.autograd.gradcheck(SquareForgetsGrad.apply, (x,), raise_exception=False))  # False\n"
)


def all_custom() -> tuple[tuple[CustomResult, ...], TrapResult]:
    """The three worked Functions and the planted trap."""
    return (straight_through(), stable_logsumexp(), swish()), wrong_backward_trap()
