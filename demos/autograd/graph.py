"""Section 1: the autograd graph torch records for an expression, drawn by torchviz, with a table of its nodes."""

from dataclasses import dataclass

import pandas as pd
import torch
from torchviz import make_dot

from demos.autograd.expr import (
    BinOp,
    Call,
    Name,
    Num,
    Step,
    children,
    evaluate,
    leaves_code,
    make_leaves,
    parse_expression,
    parse_leaves,
    to_source,
)
from demos.errors import InputError, quoted
from demos.parsing import format_shape
from demos.style import COLORS, over, text_on

MAX_GRAPH_NODES = 80

PRESETS = {
    "Linear layer + MSE loss": ("x: 8,3; W: 3,2 grad; b: 2 grad; y: 8,2", "mean((x @ W + b - y) ** 2)"),
    "Two-layer MLP": ("x: 8,4; W1: 4,16 grad; b1: 16 grad; W2: 16,1 grad; b2: 1 grad; y: 8,1",
                      "mean((relu(x @ W1 + b1) @ W2 + b2 - y) ** 2)"),
    "Residual block": ("x: 4,8 grad; W1: 8,8 grad; W2: 8,8 grad", "sum(tanh(x + relu(x @ W1) @ W2))"),
    "Attention scores": ("q: 3,4 grad; k: 3,4 grad; v: 3,4 grad", "sum(softmax(q @ k.T / 2, dim=-1) @ v)"),
}
DEFAULT_PRESET = "Linear layer + MSE loss"

# torchviz's own colours (its make_dot docstring), named for the page's legend.
# (graphviz colour name as CSS hex, meaning)
TORCHVIZ_LEGEND = (
    ("#add8e6", "lightblue: leaf with requires_grad=True; backward fills its .grad"),
    ("#d3d3d3", "grey: backward node (a grad_fn), run during backward"),
    ("#caff70", "light green: the output tensor backward starts from"),
    ("#a2cd5a", "olive: the base tensor of an output that is a view"),
    ("#ffa500", "orange: a tensor saved for backward (switch on 'Saved tensors')"),
)


@dataclass
class Built:
    """A freshly evaluated expression: leaves, every operation, the output, and the graph traversal."""

    leaves: tuple
    tensors: dict
    steps: list
    out: torch.Tensor
    tree: object
    nodes: list  # grad_fn objects in traversal order


@dataclass(frozen=True)
class GraphResult:
    expression: str
    leaves_text: str
    out_shape: str
    n_nodes: int
    dot: str
    forward_dot: str
    nodes: pd.DataFrame
    notes: tuple[str, ...]
    code: str


def traverse(root) -> list:
    """grad_fn nodes reachable from root through next_functions, depth-first in next_functions order."""
    order, seen, stack = [], set(), [root]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        order.append(fn)
        if len(order) > MAX_GRAPH_NODES:
            raise InputError(f"The autograd graph has more than {MAX_GRAPH_NODES} nodes; the limit is "
                             f"{MAX_GRAPH_NODES}. Shorten the expression.")
        stack.extend(reversed([nxt for nxt, _ in fn.next_functions if nxt is not None]))
    return order


def build(leaves_text: str, expr_text: str, dtype=torch.float32) -> Built:
    """Parse, create seeded leaves, run the expression with torch and walk the recorded graph."""
    leaves = parse_leaves(leaves_text)
    tree = parse_expression(expr_text)
    tensors = make_leaves(leaves, dtype)
    steps: list[Step] = []
    try:
        out = evaluate(tree, tensors, steps)
    except (RuntimeError, IndexError) as err:
        raise InputError(f"torch refused the expression: {str(err).splitlines()[0]}") from None
    if not isinstance(out, torch.Tensor):
        raise InputError("The expression is a plain number; use at least one leaf tensor.")
    if isinstance(tree, Name):
        raise InputError(f"The expression is only the leaf {quoted(tree.name)}: no operation runs, so autograd "
                         f"records no graph; apply one, for example sum({tree.name}).")
    if out.grad_fn is None:
        raise InputError("The result has no grad_fn: no leaf with requires_grad=True reaches it (mark a leaf "
                         "with 'grad', or remove a .detach()).")
    return Built(leaves, tensors, steps, out, tree, traverse(out.grad_fn))


def node_ids(nodes: list) -> dict:
    return {fn: i for i, fn in enumerate(nodes)}


def fn_name(fn) -> str:
    return type(fn).__name__


def saved_tensors(fn) -> list[tuple[str, tuple]]:
    """(name, shape) of each tensor a backward node saved, read from its _saved_* attributes."""
    found = []
    for attr in sorted(a for a in dir(fn) if a.startswith("_saved_")):
        try:
            value = getattr(fn, attr)
        except RuntimeError:  # freed after backward
            continue
        values = value if isinstance(value, tuple) else (value,)
        for j, v in enumerate(values):
            if isinstance(v, torch.Tensor):
                name = attr[len("_saved_"):] + (f"[{j}]" if isinstance(value, tuple) else "")
                found.append((name, tuple(v.shape)))
    return found


def creators(b: Built) -> dict:
    """grad_fn -> the sub-expression (or leaf name) whose tensor it produces or accumulates into."""
    names = {id(t): name for name, t in b.tensors.items()}
    made = {}
    for step in b.steps:
        if step.out.grad_fn is not None:
            made[step.out.grad_fn] = step.text
    for fn in b.nodes:
        if hasattr(fn, "variable"):
            made[fn] = f"leaf {names.get(id(fn.variable), '?')}"
    return made


def node_table(b: Built) -> pd.DataFrame:
    """One row per node: class, next functions, saved tensors, what it creates, leaf or not, retains grad."""
    ids = node_ids(b.nodes)
    made = creators(b)
    tensor_of = {s.out.grad_fn: s.out for s in b.steps if s.out.grad_fn is not None}
    rows = []
    for fn in b.nodes:
        is_leaf = hasattr(fn, "variable")
        tensor = fn.variable if is_leaf else tensor_of.get(fn)
        rows.append({
            "node": f"#{ids[fn]}",
            "grad_fn": fn_name(fn),
            "creates": made.get(fn, "(part of an indexing step)"),
            "next functions": ", ".join(f"#{ids[n]} {fn_name(n)}" for n, _ in fn.next_functions if n is not None)
            or "—",
            "saved tensors": ", ".join(f"{k} {format_shape(s)}" for k, s in saved_tensors(fn)) or "—",
            "leaf": "yes" if is_leaf else "no",
            "retains grad": "leaf: .grad is filled" if is_leaf else (
                "—" if tensor is None else ("yes" if tensor.retains_grad else "no")),
        })
    return pd.DataFrame(rows)


# The forward graph's node fills, one source for the drawing and the colour chips beside it.
FORWARD_LEGEND = {
    "leaf with requires_grad=True": COLORS["parameter"],
    "leaf without grad": COLORS["data"],
    "operation (its output shape)": over("rgba(44, 160, 44, 0.2)", "#ffffff"),  # activation green, light
}
_LEAF_GRAD, _LEAF, _OP = FORWARD_LEGEND.values()


def forward_dot(tree, tensors: dict, shapes: dict | None = None) -> str:
    """The forward computation as parsed (what you wrote), as DOT: leaves, numbers and operations."""
    lines = ['digraph forward {', 'rankdir=BT; node [shape=box, style="rounded,filled", fontname="monospace", '
             'fontsize=10];']
    counter = [0]

    def add(node) -> str:
        counter[0] += 1
        nid = f"n{counter[0]}"
        if isinstance(node, Name):
            t = tensors[node.name]
            fill = _LEAF_GRAD if t.requires_grad else _LEAF
            label = f"{node.name}\\n{format_shape(t.shape)}"
            lines.append(f'{nid} [label="{label}", fillcolor="{fill}", fontcolor="{text_on(fill)}"];')
            return nid
        if isinstance(node, Num):
            lines.append(f'{nid} [label="{to_source(node)}", fillcolor="white"];')
            return nid
        label = _op_label(node) + (f"\\n{format_shape(shapes[node])}" if shapes and node in shapes else "")
        lines.append(f'{nid} [label="{label}", fillcolor="{_OP}"];')
        for child in children(node):
            lines.append(f"{add(child)} -> {nid};")
        return nid

    add(tree)
    lines.append("}")
    return "\n".join(lines)


def _op_label(node) -> str:
    if isinstance(node, BinOp):
        return node.op
    if isinstance(node, Call):
        return node.func + ("" if node.dim is None or node.func not in ("sum", "mean", "softmax")
                            else f"(dim={node.dim})")
    text = to_source(node)
    kind = type(node).__name__
    return {"Neg": "neg", "Detach": ".detach()", "Transpose": ".T"}.get(kind, text[text.rfind("["):])


def graph_code(leaves, expr_text: str, tree, show_saved: bool) -> str:
    """The runnable snippet that draws the same graph."""
    params = ", ".join(f'"{leaf.name}": {leaf.name}' for leaf in leaves if leaf.requires_grad)
    return (
        "import torch\nfrom torchviz import make_dot\n\n"
        f"{leaves_code(leaves)}\n"
        f"out = {to_source(tree, torch_style=True)}  # {expr_text.strip()}\n"
        f"dot = make_dot(out, params={{{params}}}, show_saved={show_saved})  # dot.render('graph', format='png') "
        "draws it\n\n"
        "# the node table: a depth-first walk of next_functions, numbering each node the first time it is met\n"
        "order, stack = [], [out.grad_fn]\n"
        "while stack:\n"
        "    fn = stack.pop()\n"
        "    if fn is not None and fn not in order:\n"
        "        order.append(fn)\n"
        "        stack.extend(reversed([n for n, _ in fn.next_functions if n is not None]))\n"
        "for i, fn in enumerate(order):\n"
        "    nxt = [f'#{order.index(n)} {type(n).__name__}' for n, _ in fn.next_functions if n is not None]\n"
        "    print(f'#{i}', type(fn).__name__, '->', ', '.join(nxt) or '—')\n"
    )


def graph_view(leaves_text: str, expr_text: str, show_saved: bool = False) -> GraphResult:
    """Run the expression, then draw the backward graph torch recorded (torchviz) and list its nodes."""
    b = build(leaves_text, expr_text)
    params = {name: t for name, t in b.tensors.items() if t.requires_grad}
    dot = make_dot(b.out, params=params, show_saved=show_saved)
    dot.graph_attr.update(size="9,9")
    notes = []
    origin = first_non_finite(b.steps)
    if origin is not None:
        where = ("The output contains inf or nan" if not bool(torch.isfinite(b.out).all())
                 else "The output is finite, but an intermediate result is not")
        notes.append(f"{where}: the first operation whose result holds an inf or a nan is {quoted(origin.text)} "
                     f"({_non_finite_kind(origin.out)}).")
    unused = [name for name in params if name not in _reached_leaf_names(b)]
    if unused:
        notes.append(f"Not in the graph although requires_grad=True: {', '.join(unused)} (unused or detached).")
    shapes = {s.node: s.out.shape for s in b.steps}
    return GraphResult(
        expression=to_source(b.tree), leaves_text=leaves_text, out_shape=format_shape(b.out.shape),
        n_nodes=len(b.nodes), dot=dot.source, forward_dot=forward_dot(b.tree, b.tensors, shapes),
        nodes=node_table(b), notes=tuple(notes), code=graph_code(b.leaves, expr_text, b.tree, show_saved),
    )


def first_non_finite(steps: list) -> Step | None:
    """The first operation, in evaluation order, whose result holds an inf or a nan."""
    return next((s for s in steps if not bool(torch.isfinite(s.out).all())), None)


def _non_finite_kind(t: torch.Tensor) -> str:
    n_inf, n_nan = int(torch.isinf(t).sum()), int(torch.isnan(t).sum())
    parts = [f"{n} {word}" for n, word in ((n_inf, "inf"), (n_nan, "nan")) if n]
    return f"{' and '.join(parts)}, out of {t.numel()} elements"


def _reached_leaf_names(b: Built) -> set:
    names = {id(t): name for name, t in b.tensors.items()}
    return {names.get(id(fn.variable)) for fn in b.nodes if hasattr(fn, "variable")}
