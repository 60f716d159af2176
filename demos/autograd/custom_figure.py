"""The custom Functions over a sweep of inputs: forward output, and the gradient each backward returns next to
the one autograd derives for the plain version."""

from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from demos.autograd.custom import RoundSTE, StableLogSumExp, Swish, grad_of
from demos.style import COLORS, base_layout, legend_on_top

SWEEP = (-3.0, 3.0, 121)  # linspace of x


def _row_lse(fn):
    """t -> fn applied to each row [t, 0, 1]: log-sum-exp as a function of its first entry."""
    return lambda t: fn(torch.stack([t, torch.zeros_like(t), torch.ones_like(t)], dim=-1))


# example name -> (custom forward, plain version autograd differentiates, what x is)
CASES = {
    "Straight-through estimator for rounding": (RoundSTE.apply, torch.round, "x"),
    "Numerically stable log-sum-exp": (_row_lse(StableLogSumExp.apply),
                                       _row_lse(lambda t: torch.log(torch.exp(t).sum(dim=-1))),
                                       "t in the row [t, 0, 1]"),
    "Swish with ctx.save_for_backward": (Swish.apply, lambda t: t * torch.sigmoid(t), "x"),
}


@dataclass(frozen=True)
class CustomCurves:
    name: str
    x_label: str
    x: tuple[float, ...]
    forward: tuple[float, ...]
    custom_grad: tuple[float, ...]  # d/dx from the Function's own backward
    plain_grad: tuple[float, ...]  # d/dx autograd derives for the plain version

    @property
    def max_abs_diff(self) -> float:
        return max(abs(a - b) for a, b in zip(self.custom_grad, self.plain_grad, strict=True))


def custom_curves(name: str) -> CustomCurves:
    """Run the example's Function and its plain version on every x of the sweep, in float64, with backward."""
    custom, plain, x_label = CASES[name]
    x = torch.linspace(*SWEEP, dtype=torch.float64)
    with torch.no_grad():
        out = custom(x)
    return CustomCurves(name, x_label, tuple(x.tolist()), tuple(out.tolist()), tuple(grad_of(custom, x).tolist()),
                        tuple(grad_of(plain, x).tolist()))


def custom_figure(c: CustomCurves) -> go.Figure:
    """Left: the forward output; right: the custom backward's gradient (solid) and autograd's for the plain
    version (dashed), so where they part the custom rule differs."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("forward output", "gradient of the output"))
    fig.add_scatter(x=c.x, y=c.forward, name="forward", mode="lines", line=dict(color=COLORS["activation"], width=3),
                    row=1, col=1)
    fig.add_scatter(x=c.x, y=c.custom_grad, name="custom backward", mode="lines",
                    line=dict(color=COLORS["gradient"], width=6), row=1, col=2)
    fig.add_scatter(x=c.x, y=c.plain_grad, name="autograd, plain version", mode="lines",
                    line=dict(color=COLORS["parameter"], width=2, dash="dash"), row=1, col=2)
    fig.update_xaxes(title=c.x_label)
    return legend_on_top(base_layout(fig, height=320), top=80)
