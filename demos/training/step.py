"""One training step in order, replayed from a seed up to any sub-step, with the state each sub-step changes."""

import functools
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from torch import nn

from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout, text_on
from demos.threads import single_threaded
from demos.training.common import IMPORTS, SpiralNet, check_choice, check_int, check_range, spiral

SUBSTEPS = ("optimizer.zero_grad()", "forward", "loss", "loss.backward()", "clip_grad_norm_", "optimizer.step()",
            "scheduler.step()")
WALK_OPTIMIZERS = ("SGD + momentum", "Adam", "AdamW")
MAX_ITERATIONS = 30
HIDDEN = 6
BATCH = 64
GAMMA = 0.9
SCHEDULER = f"ExponentialLR(gamma={GAMMA})"  # the walk's scheduler: lr × gamma at every scheduler.step()
SHOWN_PARAM = "fc2.weight"


@dataclass(frozen=True)
class Snapshot:
    """Everything a sub-step can change, as plain lists."""

    params: dict
    grads: dict  # name -> nested list, or None while .grad is None
    state: dict  # name -> {state name: nested list}
    lr: float
    loss: float | None
    logits: list | None
    grad_norm: float | None  # total norm before clipping (set by the clip sub-step)


@dataclass(frozen=True)
class WalkResult:
    index: int
    iteration: int
    substep: str
    before: Snapshot
    after: Snapshot
    changed: tuple[str, ...]
    code: Script


def make_optimizer(name: str, params, lr: float):
    """The optimizer the visitor picked."""
    if name == "SGD + momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "Adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


def setup(optimizer_name: str, lr: float, seed: int):
    """The batch, model, optimizer and scheduler of the walk, from the seed."""
    torch.manual_seed(seed)
    x, y = spiral(BATCH, seed)
    model = SpiralNet(HIDDEN)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=GAMMA)
    return x, y, model, optimizer, scheduler


def train_mode_note() -> str:
    """Why model.train() is not a sub-step of the walk, from the walk's own model: which of its layers the training
    flag would switch, and that the walk never calls eval()."""
    model = setup(WALK_OPTIMIZERS[0], 0.05, 0)[2]
    dropouts = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    layers = (f"{len(norms)} batch-norm layer{'s' if len(norms) != 1 else ''}" if norms else "no batch norm") + (
        f" and dropout with p = {', '.join(f'{p:g}' for p in dropouts)}" if dropouts else " and no dropout")
    inert = not norms and not any(dropouts)
    return ("`model.train()` — dropout and batch norm in training mode; needed again after every `model.eval()`. "
            f"The walk never calls `eval()`, and its net has {layers}" + (
                ", so the call would change nothing here: it is not a sub-step." if inert else
                ": the net starts in training mode and stays there, so the call is not a sub-step."))


def train_step(model, optimizer, scheduler, loss_fn, x, y, max_norm):
    """One training step in its seven sub-steps: a generator that pauses after each, yielding (out, loss, norm)."""
    optimizer.zero_grad()  # 1. clear last step's .grad (set to None)
    yield None, None, None
    out = model(x)  # 2. forward: build the graph
    yield out, None, None
    loss = loss_fn(out, y)  # 3. loss: a scalar
    yield out, loss, None
    loss.backward()  # 4. backward: fill .grad
    yield out, loss, None
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # 5. clip: rescale .grad if too long
    yield out, loss, norm
    optimizer.step()  # 6. update parameters (and optimizer state)
    yield out, loss, norm
    scheduler.step()  # 7. next learning rate
    yield out, loss, norm


def _snapshot(model, opt, out, loss, norm) -> Snapshot:
    named = dict(model.named_parameters())
    params = {n: p.detach().tolist() for n, p in named.items()}
    grads = {n: (None if p.grad is None else p.grad.tolist()) for n, p in named.items()}
    state = {}
    for n, p in named.items():
        st = opt.state.get(p, {})
        state[n] = {k: v.tolist() for k, v in st.items() if torch.is_tensor(v) and v.dim() > 0}
    return Snapshot(params, grads, state, opt.param_groups[0]["lr"],
                    None if loss is None else loss.item(),
                    None if out is None else out[:4].detach().tolist(), None if norm is None else norm.item())


def _changed(a: Snapshot, b: Snapshot) -> tuple[str, ...]:
    fields = (("parameters", a.params != b.params), (".grad", a.grads != b.grads),
              ("optimizer state", a.state != b.state), ("learning rate", a.lr != b.lr),
              ("loss", a.loss != b.loss), ("logits", a.logits != b.logits), ("grad norm", a.grad_norm != b.grad_norm))
    return tuple(name for name, differs in fields if differs)


def validate_walk(optimizer: str, lr: float, max_norm: float, seed: int) -> None:
    check_choice(optimizer, "Optimizer", WALK_OPTIMIZERS)
    check_range(lr, "Learning rate", 1e-4, 1.0)
    check_range(max_norm, "Clip max_norm", 0.01, 100.0)
    check_int(seed, "Seed", 0, 10_000)


@entry(2 * len(SUBSTEPS) + 6, "SGD + momentum", 0.1, 0.5, 2, entries=256)  # small results; a walk visits many
@single_threaded
def walk(index: int, optimizer: str = "Adam", lr: float = 0.05, max_norm: float = 0.05, seed: int = 0) -> WalkResult:
    """Replay sub-steps 0..index of the loop from the seed; return the state before and after sub-step `index`."""
    validate_walk(optimizer, lr, max_norm, seed)
    check_int(index, "Sub-step", 0, MAX_ITERATIONS * len(SUBSTEPS) - 1)
    x, y, model, opt, sched = setup(optimizer, lr, seed)
    loss_fn = nn.CrossEntropyLoss()
    state, substeps = (None, None, None), iter(())
    for i in range(index + 1):
        if i % len(SUBSTEPS) == 0:
            substeps = train_step(model, opt, sched, loss_fn, x, y, max_norm)
        if i == index:
            before = _snapshot(model, opt, *state)
        state = next(substeps)
    after = _snapshot(model, opt, *state)
    iterations = index // len(SUBSTEPS) + 1
    return WalkResult(index, index // len(SUBSTEPS), SUBSTEPS[index % len(SUBSTEPS)], before, after,
                      _changed(before, after), walk_script(optimizer, lr, max_norm, seed, iterations))


def walk_script(optimizer: str, lr: float, max_norm: float, seed: int, iterations: int) -> Script:
    """The walk's code run for whole iterations, printing each one's loss, gradient norm and next learning rate."""
    return script(spiral, SpiralNet, make_optimizer, setup, train_step, imports=IMPORTS,
                  settings={"BATCH": BATCH, "HIDDEN": HIDDEN, "GAMMA": GAMMA, "optimizer_name": optimizer, "lr": lr,
                            "max_norm": max_norm, "seed": seed, "iterations": iterations},
                  run="""
x, y, model, optimizer, scheduler = setup(optimizer_name, lr, seed)
loss_fn = nn.CrossEntropyLoss()
for it in range(iterations):
    for out, loss, norm in train_step(model, optimizer, scheduler, loss_fn, x, y, max_norm):
        pass  # the page pauses here, after each sub-step, to draw the state
    print(it, loss.item(), norm.item(), scheduler.get_last_lr())""")


def loop_dot(result: WalkResult) -> str:
    """The loop as a cycle; the sub-step just run is filled, the one run next is outlined."""
    current = result.index % len(SUBSTEPS)
    lines = ["digraph loop {", "  rankdir=TB; nodesep=0.25; ranksep=0.22;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fillcolor="#f4f4f4", color="#9e9e9e"];']
    for i, name in enumerate(SUBSTEPS):
        attrs = f'label="{i + 1}. {name}"'
        if i == current:
            attrs += f', fillcolor="{COLORS["optimizer_state"]}", fontcolor="{text_on(COLORS["optimizer_state"])}", '
            attrs += "penwidth=2"
        elif i == (current + 1) % len(SUBSTEPS):
            attrs += f', color="{COLORS["optimizer_state"]}", penwidth=2, style="rounded,dashed,filled"'
        lines.append(f"  s{i} [{attrs}];")
    for i in range(len(SUBSTEPS) - 1):
        lines.append(f"  s{i} -> s{i + 1};")
    lines.append(f'  s{len(SUBSTEPS) - 1} -> s0 [constraint=false, style=dashed, label="next batch"];')
    lines.append("}")
    return "\n".join(lines)


# The state panels' colours by what they hold, one source for the heatmaps and the colour chips above them.
WALK_LEGEND = {"parameter": "parameter", ".grad": "gradient", "optimizer state": "optimizer_state"}


def _state_panels(snap: Snapshot) -> list[tuple[str, list | None, str]]:
    panels = [("parameter", snap.params[SHOWN_PARAM], WALK_LEGEND["parameter"]),
              (".grad", snap.grads[SHOWN_PARAM], WALK_LEGEND[".grad"])]
    state = snap.state[SHOWN_PARAM]
    names = [k for k in ("momentum_buffer", "exp_avg", "exp_avg_sq") if k in state] or ["optimizer state"]
    for name in names[:2]:
        panels.append((name, state.get(name), WALK_LEGEND["optimizer state"]))
    return panels


PANEL_SPACING = 0.1  # between the heatmaps, as a fraction of the figure's width


def state_figure(result: WalkResult) -> go.Figure:
    """Heatmaps of fc2.weight, its .grad and its optimizer state after the sub-step; changed panels say so.

    Colour: the concept's colour for positive entries, dark grey for negative, white at zero (a panel with no
    negative entry, such as exp_avg_sq, runs from white at zero only); each panel has its own colour scale beside
    it. The figure is built in one go from plain dicts (the layout make_subplots and base_layout would make): every
    press of the walk's buttons draws a new one, and make_subplots with per-panel updates costs several times as
    long.
    """
    before, after = _state_panels(result.before), _state_panels(result.after)
    old = {name: value for name, value, _ in before}
    width = (1 - PANEL_SPACING * (len(after) - 1)) / len(after)
    styled = _styled_layout()
    layout = {k: v for k, v in styled.items() if k not in ("xaxis", "yaxis")} | {"annotations": []}
    layout["margin"] = styled["margin"] | dict(t=60, r=50)  # two-line titles above, the last colour scale right
    data = []
    for i, (name, value, concept) in enumerate(after):
        left = sum([width] * i) + i * PANEL_SPACING  # summed as make_subplots sums it: the same domains
        x, y = f"x{i + 1 if i else ''}", f"y{i + 1 if i else ''}"
        bare = dict(showticklabels=False, showgrid=False, zeroline=False)
        layout[f"xaxis{x[1:]}"] = styled["xaxis"] | dict(anchor=y, domain=[left, left + width], **bare)
        layout[f"yaxis{y[1:]}"] = styled["yaxis"] | dict(anchor=x, domain=[0.0, 1.0], autorange="reversed", **bare)
        title = f"{name}<br>changed" if value != old.get(name) else name  # one panel wide: a name per line
        layout["annotations"].append(dict(text=title, x=(left + left + width) / 2, xref="paper", xanchor="center",
                                          y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                                          font=dict(size=16)))
        data.append(_panel(name, value, concept, colorbar_x=left + width + 0.005) | dict(xaxis=x, yaxis=y))
    return go.Figure(data=data, layout=layout)


@functools.cache
def _styled_layout() -> dict:
    """What base_layout sets on a figure of the walk's height, and on each of its axes, read once from a one-panel
    figure it styled: base_layout's per-axis updates cost more than building the four-panel figure itself."""
    styled = base_layout(go.Figure(layout=dict(xaxis={}, yaxis={})), height=280).to_plotly_json()["layout"]
    styled.pop("template", None)  # the figure gets its default template anyway
    return styled


def _panel(name: str, value: list | None, concept: str, colorbar_x: float) -> dict:
    """One panel's trace: the heatmap, or a line of text where there is nothing to draw yet."""
    if value is None:
        empty = "None (zero_grad)" if name == ".grad" else "empty until step()"
        return dict(type="scatter", x=[0], y=[0], mode="text", text=[empty], textfont=dict(size=15),
                    showlegend=False, hoverinfo="skip")
    flat = [v for row in value for v in row]
    top = max(abs(v) for v in flat) or 1.0
    if min(flat) >= 0:  # a non-negative quantity (exp_avg_sq): white at 0 up to the colour, no negative half
        scale, low = [[0, "#ffffff"], [1, COLORS[concept]]], 0.0
    else:
        scale, low = [[0, "#4d4d4d"], [0.5, "#ffffff"], [1, COLORS[concept]]], -top
    return dict(type="heatmap", z=value, colorscale=scale, zmin=low, zmax=top,
                colorbar=dict(x=colorbar_x, xanchor="left", thickness=10, len=1, tickformat=".2g"),
                hovertemplate=f"{name}[%{{y}}, %{{x}}] = %{{z:.4g}}<extra></extra>")


def parameter_table(result: WalkResult) -> list[dict]:
    """One row per parameter: value, .grad and optimizer state (first entries) after the sub-step."""
    rows = []
    for name, value in result.after.params.items():
        p = torch.tensor(value)
        g = result.after.grads[name]
        state = result.after.state[name]
        row = {
            "parameter": name,
            "shape": str(tuple(p.shape)),
            "value (first 3)": _first(p),
            ".grad (first 3)": "None" if g is None else _first(torch.tensor(g)),
        }
        for key, v in state.items():
            row[f"{key} (first 3)"] = _first(torch.tensor(v))
        if not state:
            row["optimizer state"] = "empty until the first step()"
        rows.append(row)
    return rows


def _first(t: torch.Tensor, n: int = 3) -> str:
    flat = t.flatten()[:n].tolist()
    return "[" + ", ".join(f"{v:+.4g}" for v in flat) + (", …]" if t.numel() > n else "]")  # 1e-9 stays 1e-9
