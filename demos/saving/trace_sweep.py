"""Trace vs script across a sweep of inputs: where tracing baked in one branch, its outputs leave eager's."""

from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from demos.saving.export import _branchy, _warnings_of, example_inputs
from demos.style import COLORS, base_layout, legend_on_top

SWEEP = tuple(v / 2 for v in range(-10, 11))  # every entry of the (2, 4) input equals v: -5, -4.5, ..., 5


@dataclass(frozen=True)
class TraceSweep:
    values: tuple[float, ...]  # v: the input is torch.full((2, 4), v)
    eager: tuple[float, ...]  # output sums
    traced: tuple[float, ...]
    scripted: tuple[float, ...]
    traced_wrong: tuple[float, ...]  # the values of v where traced differs from eager


def trace_sweep(values: tuple[float, ...] = SWEEP) -> TraceSweep:
    """Trace once on a positive example, script once, then run eager, traced and scripted on each input."""
    model = _branchy()
    traced, _ = _warnings_of(lambda: torch.jit.trace(model, example_inputs(+1)))  # its TracerWarning is shown above
    scripted, _ = _warnings_of(lambda: torch.jit.script(model))
    sums = {"eager": [], "traced": [], "scripted": []}
    wrong = []
    with torch.no_grad():
        for v in values:
            x = torch.full((2, 4), float(v))
            outs = {"eager": model(x), "traced": traced(x), "scripted": scripted(x)}
            for name, out in outs.items():
                sums[name].append(out.sum().item())
            if not torch.allclose(outs["eager"], outs["traced"]):
                wrong.append(v)
    return TraceSweep(tuple(values), *(tuple(sums[k]) for k in ("eager", "traced", "scripted")), tuple(wrong))


def trace_sweep_figure(s: TraceSweep, test_value: float | None = None) -> go.Figure:
    """Output sum against the input value: eager and scripted switch branch at 0, traced stays on h * 2."""
    fig = go.Figure()
    fig.add_scatter(x=s.values, y=s.eager, name="eager (the Python if)", mode="lines",
                    line=dict(color=COLORS["parameter"], width=6))
    fig.add_scatter(x=s.values, y=s.scripted, name="torch.jit.script", mode="markers",
                    marker=dict(color=COLORS["activation"], size=9, symbol="circle"))
    fig.add_scatter(x=s.values, y=s.traced, name="torch.jit.trace (example: all +1)", mode="lines+markers",
                    line=dict(color=COLORS["error"], dash="dash"), marker=dict(size=6, symbol="x"))
    if test_value is not None and s.values[0] <= test_value <= s.values[-1]:
        fig.add_vline(x=test_value, line=dict(color=COLORS["idle"], dash="dot"))
    fig.update_xaxes(title="every entry of the (2, 4) input equals")
    fig.update_yaxes(title="output.sum()")
    return legend_on_top(base_layout(fig, height=360), top=70)
