"""The backward graph as the engine ran it: each grad_fn node, its place in the engine's order, and the gradient
flowing along each edge (recorded by a hook on every node during one real backward)."""

from dataclasses import dataclass

import torch

from demos.autograd.backward import preview, run_backward
from demos.autograd.graph import build, creators, fn_name, node_ids
from demos.parsing import format_shape
from demos.style import COLORS, dot_fill, over

# Fills: torchviz's own grey for a backward node and light blue for a leaf's AccumulateGrad (the Graph tab's
# legend), the gradient colour for the seed; edges carry the gradient, so they take the gradient colour too.
NODE_FILL = "#d3d3d3"
LEAF_FILL = "#add8e6"
SEED_FILL = over("rgba(255, 127, 14, 0.35)", "#ffffff")


@dataclass(frozen=True)
class FlowEdge:
    src: int  # node index (-1: the seed, out.backward's gradient)
    dst: int
    grad: torch.Tensor | None  # what src passed to dst (None: nothing flows on this edge)


@dataclass(frozen=True)
class BackwardFlow:
    names: tuple[str, ...]  # grad_fn class per node, in the Graph tab's numbering
    creates: tuple[str, ...]  # the sub-expression (or leaf) each node produces or accumulates into
    ran: tuple[int | None, ...]  # 1-based place in the engine's order; None if the engine never ran it
    edges: tuple[FlowEdge, ...]
    leaf_grads: dict  # leaf name -> its .grad after backward
    seed: torch.Tensor


def backward_flow(leaves_text: str, expr_text: str) -> BackwardFlow:
    """One backward with a post-hook on every node: grad_inputs[i] is what the node passed to next_functions[i]."""
    b = build(leaves_text, expr_text)
    ids = node_ids(b.nodes)
    passed: dict[int, tuple] = {}
    handles = [fn.register_hook(lambda grad_in, grad_out, fn=fn: passed.__setitem__(ids[fn], grad_in))
               for fn in b.nodes]
    seed, order = run_backward(b)
    for h in handles:
        h.remove()
    ran = {k: i + 1 for i, k in enumerate(order)}
    edges = [FlowEdge(-1, 0, seed.detach())]
    for fn in b.nodes:
        grads = passed.get(ids[fn], ())
        for i, (nxt, _) in enumerate(fn.next_functions):
            if nxt is not None:
                g = grads[i] if i < len(grads) else None
                edges.append(FlowEdge(ids[fn], ids[nxt], None if g is None else g.detach()))
    made = creators(b)
    return BackwardFlow(
        names=tuple(fn_name(fn) for fn in b.nodes),
        creates=tuple(made.get(fn, "(part of an indexing step)") for fn in b.nodes),
        ran=tuple(ran.get(k) for k in range(len(b.nodes))),
        edges=tuple(edges),
        leaf_grads={n: t.grad for n, t in b.tensors.items() if t.requires_grad},
        seed=seed,
    )


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def edge_label(g: torch.Tensor | None) -> str:
    if g is None:
        return "None"
    return f"{format_shape(g.shape)}\\n{_quote(preview(g, 3))}"


def flow_dot(flow: BackwardFlow) -> str:
    """DOT of the backward graph, top to bottom in the direction gradients flow. Grey: a grad_fn node, with its
    place in the engine's order; light blue: AccumulateGrad, which adds into a leaf's .grad; orange: the seed.
    Each edge is labelled with the gradient that flowed along it (shape, first values)."""
    lines = ["digraph backward {", 'rankdir=TB; ranksep=0.45; nodesep=0.6; node [shape=box, style="rounded,filled", '
             'fontname="Helvetica", fontsize=14]; edge [fontname="Helvetica", fontsize=12, penwidth=1.5, color="'
             + COLORS["gradient"] + '"];',
             f'seed [label="out.backward(ones)", {dot_fill(SEED_FILL)}];']
    for k, (name, what, ran) in enumerate(zip(flow.names, flow.creates, flow.ran, strict=True)):
        fill = LEAF_FILL if name == "AccumulateGrad" else NODE_FILL
        order = "not run" if ran is None else f"engine step {ran}"
        lines.append(f'n{k} [label="#{k} {name}\\n{_quote(what)}\\n{order}", {dot_fill(fill)}];')
    for e in flow.edges:
        src = "seed" if e.src < 0 else f"n{e.src}"
        style = "" if e.grad is not None else ', style="dashed"'
        lines.append(f'{src} -> n{e.dst} [label="{edge_label(e.grad)}"{style}];')
    lines.append("}")
    return "\n".join(lines)


def flow_view(leaves_text: str, expr_text: str) -> str:
    """The Backward tab's graph: one backward with every edge's gradient recorded, drawn as DOT. Only the drawing
    is returned, so what a page keeps per expression is text, not the gradients themselves."""
    return flow_dot(backward_flow(leaves_text, expr_text))
