"""Figures for the Modules & hooks page: plotly figures and graphviz DOT built from demo results.

Colours follow demos.style: parameter = blue, gradient = orange, activation = green, buffer = brown,
data = cyan (inputs and pre-forward hooks), temporary = olive (tensor hooks), idle = grey (frozen, unchanged),
error = red (the trap, unregistered layers).
"""

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.modules.containers import ModuleTree
from demos.modules.freezing import FreezeStep, GroupLRs
from demos.modules.hooks import ChannelZeroEffect, HookRun, PileUp, SurgeryResult
from demos.modules.params import TRUE_MEAN, BatchNormTrace
from demos.modules.sharing import TyingResult
from demos.style import COLORS, REFERENCE, SERIES, base_layout

PHASE_COLORS = {"pre-forward": COLORS["data"], "forward": COLORS["activation"], "tensor": COLORS["temporary"],
                "full-backward": COLORS["gradient"]}
PHASE_SYMBOLS = {"pre-forward": "triangle-right", "forward": "circle", "tensor": "diamond",
                 "full-backward": "square"}


def batchnorm_figure(trace: BatchNormTrace) -> go.Figure:
    """running_mean per channel over steps (lines), batch means (crosses), eval steps shaded, true means dotted."""
    steps = list(range(len(trace.modes)))
    fig = go.Figure()
    first_eval = trace.modes.index("eval")
    fig.add_vrect(x0=first_eval - 0.5, x1=steps[-1] + 0.5, fillcolor=COLORS["idle"], opacity=0.15, line_width=0,
                  annotation_text="eval(): running stats frozen", annotation_position="top left")
    for c in range(len(TRUE_MEAN)):
        color = SERIES[c]
        fig.add_scatter(x=steps, y=[r[c] for r in trace.running_means], mode="lines+markers", line_color=color,
                        name=f"running_mean[{c}]")
        fig.add_scatter(x=steps[1:], y=[b[c] for b in trace.batch_means[1:]], mode="markers", marker_color=color,
                        marker_symbol="x", opacity=0.5, name=f"batch mean[{c}]")
        fig.add_hline(y=TRUE_MEAN[c], line_dash="dot", line_color=color, opacity=0.6)
    fig.update_xaxes(title="step (0 = freshly built)", tickmode="linear", dtick=1)
    fig.update_yaxes(title="mean (dotted: the data's true mean)")
    return base_layout(fig, height=380)


def images_figure(images, titles: list[str]) -> go.Figure:
    """RGB images (N, H, W, 3 uint8) side by side."""
    fig = make_subplots(rows=1, cols=len(images), subplot_titles=titles, horizontal_spacing=0.03)
    for i, img in enumerate(images, 1):
        fig.add_trace(go.Image(z=img), row=1, col=i)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig = base_layout(fig, height=260)
    fig.update_layout(margin_t=50)  # the subplot titles sit above the images, not on them
    return fig


def feature_maps_figure(run: HookRun, layer: str) -> go.Figure:
    """One heatmap per channel of a conv layer's output for image 0, as the forward hook caught it."""
    maps = dict(run.feature_maps)[layer]
    n = maps.shape[0]
    cols = min(n, 8)
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"ch {c}" for c in range(n)],
                        horizontal_spacing=0.01, vertical_spacing=min(0.3, 0.35 / rows))
    lo, hi = float(maps.min()), float(maps.max())
    for c in range(n):
        fig.add_trace(go.Heatmap(z=maps[c][::-1], zmin=lo, zmax=hi, colorscale="Viridis", showscale=c == 0,
                                 colorbar=dict(title="value", len=0.9)), row=c // cols + 1, col=c % cols + 1)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    # Square-ish maps on a full-width figure (~1150 px of plot) without scaleanchor, which would float each map
    # away from its title.
    fig = base_layout(fig, height=rows * (1150 // cols + 40) + 30)
    fig.update_layout(margin_t=50)  # room for the first row's titles
    return fig


def histograms_figure(run: HookRun) -> go.Figure:
    """Each layer's output value histogram (torch.histogram of what the forward hook received)."""
    layers = run.layers
    cols = 4
    rows = math.ceil(len(layers) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"{v.name.split('.')[-1]} ({v.kind})" for v in layers],
                        vertical_spacing=0.18, horizontal_spacing=0.05)
    for i, v in enumerate(layers):
        centers = [(a + b) / 2 for a, b in zip(v.hist_edges[:-1], v.hist_edges[1:], strict=True)]
        fig.add_bar(x=centers, y=v.hist_counts, marker_color=COLORS["activation"], showlegend=False,
                    row=i // cols + 1, col=i % cols + 1, hovertemplate="value %{x:.3g}: %{y} values<extra></extra>")
    fig.update_layout(bargap=0)
    return base_layout(fig, height=210 * rows + 40)


def grad_norms_figure(run: HookRun) -> go.Figure:
    """grad_output norm per layer, from full backward hooks, in forward order."""
    names = [v.name for v in run.layers]
    fig = go.Figure()
    fig.add_bar(x=names, y=[v.grad_output_norm for v in run.layers], marker_color=COLORS["gradient"],
                name="‖grad_output‖")
    fig.update_yaxes(title="norm")
    return base_layout(fig, height=320)


def timeline_figure(run: HookRun) -> go.Figure:
    """Every hook call in firing order: one row per layer, marker by hook kind, hover shows what it received."""
    fig = go.Figure()
    for phase in PHASE_COLORS:
        events = [e for e in run.events if e.phase == phase]
        fig.add_scatter(x=[e.order for e in events], y=[e.layer for e in events], mode="markers", name=phase,
                        marker=dict(color=PHASE_COLORS[phase], symbol=PHASE_SYMBOLS[phase], size=12),
                        customdata=[e.received for e in events],
                        hovertemplate="#%{x} %{y}<br>%{customdata}<extra>" + phase + "</extra>")
    order = [v.name for v in run.layers]
    fig.update_yaxes(categoryorder="array", categoryarray=order[::-1], title=None)
    fig.update_xaxes(title="call order (forward left, backward right)")
    return base_layout(fig, height=60 + 34 * len(order))


def channel_effect_figure(effect: ChannelZeroEffect) -> go.Figure:
    """Relative change of each layer's output when a forward hook zeroes one channel."""
    names = [n for n, _ in effect.relative_change]
    hooked = f"features.{effect.layer}"
    colors = [COLORS["error"] if n == hooked else COLORS["activation"] for n in names]
    fig = go.Figure()
    fig.add_bar(x=names, y=[c for _, c in effect.relative_change], marker_color=colors,
                hovertemplate="%{x}: %{y:.3g}<extra></extra>")
    fig.update_yaxes(title="‖hooked − plain‖ / ‖plain‖")
    return base_layout(fig, height=300)


def surgery_figure(result: SurgeryResult) -> go.Figure:
    """Gradient norm of every parameter without and with the tensor hook."""
    names = [n for n, _, _ in result.param_grad_norms]
    fig = go.Figure()
    fig.add_bar(x=names, y=[p for _, p, _ in result.param_grad_norms], name="no hook", marker_color=COLORS["idle"])
    fig.add_bar(x=names, y=[h for _, _, h in result.param_grad_norms],
                name=f"with {result.mode} hook" if result.enabled else "hook not registered",
                marker_color=COLORS["gradient"])
    fig.update_yaxes(title="‖.grad‖")
    return base_layout(fig, height=320)


def pileup_figure(p: PileUp) -> go.Figure:
    """Hook firings per call and hooks left registered, for the leaky and the clean predict function."""
    calls = list(range(1, p.calls + 1))
    fig = go.Figure()
    fig.add_bar(x=calls, y=p.fires_trap, name="fires per call (never removed)", marker_color=COLORS["error"])
    fig.add_bar(x=calls, y=p.fires_correct, name="fires per call (handle.remove())", marker_color=COLORS["activation"])
    fig.add_scatter(x=calls, y=p.registered_trap, name="registered after call (never removed)", mode="lines+markers",
                    line=dict(color=COLORS["error"], dash="dot"))
    fig.add_scatter(x=calls, y=p.registered_correct, name="registered after call (handle.remove())",
                    mode="lines+markers", line=dict(color=COLORS["activation"], dash="dot"))
    fig.update_xaxes(title="call", tickmode="linear", dtick=1)
    fig.update_yaxes(title="count")
    return base_layout(fig, height=340)


def freeze_figure(step: FreezeStep) -> go.Figure:
    """How far one optimizer step moved each parameter; frozen ones in grey."""
    names = [p.name for p in step.params]
    colors = [COLORS["idle"] if not p.requires_grad else COLORS["parameter"] for p in step.params]
    fig = go.Figure()
    fig.add_bar(x=names, y=[p.change_norm for p in step.params], marker_color=colors,
                text=["frozen" if not p.requires_grad else "" for p in step.params], textposition="outside",
                customdata=["frozen" if not p.requires_grad else "trainable" for p in step.params],
                hovertemplate="%{x} (%{customdata}): ‖Δ‖ = %{y:.4g}<extra></extra>")
    fig.update_yaxes(title="‖after − before‖")
    return base_layout(fig, height=300)


def group_lr_figure(g: GroupLRs) -> go.Figure:
    """Measured ‖Δ‖ / ‖grad‖ per parameter against its group's learning rate (log scale)."""
    names = [n for n, _, _, _ in g.effective]
    fig = go.Figure()
    for group in sorted({i for _, i, _, _ in g.effective}):  # one legend entry per group, in its bars' colour
        rows = [(n, r) for n, i, r, _ in g.effective if i == group]
        fig.add_bar(x=[n for n, _ in rows], y=[r for _, r in rows], marker_color=SERIES[group],
                    name=f"group {group}: measured ‖Δ‖ / ‖grad‖")
    fig.add_scatter(x=names, y=[lr for _, _, _, lr in g.effective], name="the group's lr", mode="markers",
                    marker=dict(symbol="line-ew-open", size=28, color=REFERENCE, line=dict(width=3)))
    fig.update_xaxes(categoryorder="array", categoryarray=names)
    fig.update_yaxes(title="step size", type="log", dtick=1)
    return base_layout(fig, height=300)


def drift_figure(t: TyingResult) -> go.Figure:
    """‖embed.weight − out.weight‖ after each SGD step: tied stays 0, a copy drifts apart."""
    steps = list(range(1, len(t.drift_tied) + 1))
    fig = go.Figure()
    fig.add_scatter(x=steps, y=t.drift_copied, name="copied (the trap)", mode="lines+markers",
                    line_color=COLORS["error"])
    fig.add_scatter(x=steps, y=t.drift_tied, name="tied (one Parameter)", mode="lines+markers",
                    line_color=COLORS["parameter"])
    fig.update_xaxes(title="SGD step")
    fig.update_yaxes(title="‖embed.weight − out.weight‖")
    return base_layout(fig, height=300)


_NODE_STYLE = {
    "container": f'shape=folder, style=filled, fillcolor="#eeeeee", color="{COLORS["idle"]}"',
    "layer": f'shape=box, style="rounded,filled", fillcolor="{COLORS["parameter"]}22", color="{COLORS["parameter"]}"',
    "parameter": f'shape=ellipse, style=filled, fillcolor="{COLORS["parameter"]}44", color="{COLORS["parameter"]}"',
    "unregistered": f'shape=box, style="dashed", color="{COLORS["error"]}", fontcolor="{COLORS["error"]}"',
}


def tree_dot(tree: ModuleTree) -> str:
    """The module tree as DOT: folders = containers, boxes = layers, ellipses = ParameterList entries,
    red dashed = layers in a plain list, which named_modules() never reaches."""
    ids = {n.name: f"n{i}" for i, n in enumerate(tree.nodes)}
    lines = ["digraph modules {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=11];',
             '  edge [color="#888888", arrowsize=0.6];']
    for n in tree.nodes:
        short = n.name.rpartition(".")[2] if n.name else "model"
        unit = "values" if n.kind == "parameter" else "params"
        count = f"\\n{n.params} {unit}" if n.params else ""
        label = f"{short}\\n{n.label}{count}"
        if n.kind == "unregistered" and n.label == "plain list":
            label = f"{short}\\nplain list\\n(not registered)"
        lines.append(f'  {ids[n.name]} [label="{label}", {_NODE_STYLE[n.kind]}];')
    for n in tree.nodes:
        if n.parent is not None:
            style = f' [style=dashed, color="{COLORS["error"]}"]' if n.kind == "unregistered" else ""
            lines.append(f"  {ids[n.parent]} -> {ids[n.name]}{style};")
    lines.append("}")
    return "\n".join(lines)
