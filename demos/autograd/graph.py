"""Section 1: the autograd graph torch records for an expression, drawn by torchviz, with a table of its nodes."""

import builtins
import dataclasses
import keyword
import re
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
    make_leaves,
    parse_expression,
    parse_leaves,
    seeded_leaves,
    to_source,
)
from demos.errors import InputError, quoted
from demos.parsing import format_shape
from demos.shown import Script, entry, script
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
    code: Script


def graph_nodes(out):
    """The grad_fn nodes reachable from out.grad_fn through next_functions, depth-first in next_functions order:
    node i of the node table is graph_nodes(out)[i]."""
    nodes, stack = [], [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in nodes:
            nodes.append(fn)
            stack.extend(reversed([nxt for nxt, _ in fn.next_functions if nxt is not None]))
    return nodes


def node_rows(nodes):
    """The node table: each node's number, its class, and the numbered nodes it passes gradients on to."""
    number = {fn: i for i, fn in enumerate(nodes)}
    return [{"node": f"#{i}", "grad_fn": type(fn).__name__,
             "next functions": ", ".join(f"#{number[nxt]} {type(nxt).__name__}"
                                         for nxt, _ in fn.next_functions if nxt is not None) or "—"}
            for i, fn in enumerate(nodes)]


def draw_graph(out, leaves, show_saved):
    """torchviz's picture of the recorded graph, the leaves that require grad labelled with their names."""
    params = {name: t for name, t in leaves.items() if t.requires_grad}
    return make_dot(out, params=params, show_saved=show_saved)


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
    nodes = graph_nodes(out)  # at most a few hundred: the expression itself is limited to MAX_NODES
    if len(nodes) > MAX_GRAPH_NODES:
        raise InputError(f"The autograd graph has more than {MAX_GRAPH_NODES} nodes; the limit is "
                         f"{MAX_GRAPH_NODES}. Shorten the expression.")
    return Built(leaves, tensors, steps, out, tree, nodes)


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
    """One row per node: number, class, what it creates, next functions, saved tensors, leaf or not, retains grad."""
    made = creators(b)
    tensor_of = {s.out.grad_fn: s.out for s in b.steps if s.out.grad_fn is not None}
    rows = []
    for fn, row in zip(b.nodes, node_rows(b.nodes), strict=True):
        is_leaf = hasattr(fn, "variable")
        tensor = fn.variable if is_leaf else tensor_of.get(fn)
        rows.append({
            "node": row["node"],
            "grad_fn": row["grad_fn"],
            "creates": made.get(fn, "(part of an indexing step)"),
            "next functions": row["next functions"],
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


# ---- the snippet: the functions above that drew the page, and the visitor's expression as torch code -----------

def variable_names(leaves, taken) -> dict[str, str]:
    """A Python variable per leaf for a snippet: its own name, or with '_' appended where that name is a keyword, a
    builtin or a name in `taken` (one the snippet binds or calls), so a leaf called out or print cannot break it."""
    taken = set(taken) | set(dir(builtins)) | {"__builtins__"}
    used = taken | {leaf.name for leaf in leaves}
    names = {}
    for leaf in leaves:
        name = leaf.name
        if keyword.iskeyword(name) or name in taken:
            while name in used:
                name += "_"
            used.add(name)
        names[leaf.name] = name
    return names


def renamed(node, names: dict):
    """The syntax tree with each leaf's Name replaced by its snippet variable."""
    if isinstance(node, Name):
        return Name(names.get(node.name, node.name))
    fields = {f: renamed(getattr(node, f), names) for f in ("left", "right", "operand", "arg") if hasattr(node, f)}
    return dataclasses.replace(node, **fields) if fields else node


def code_lines(head: str, code: str, width: int = 120) -> str:
    """`head + code` on one line if it fits, else code broken after a space, '(' or '[', between tokens: inside
    brackets (the one head ends with, or added around code), or as comment lines when head is a comment."""
    if len(head) + len(code) <= width:
        return head + code
    comment = head.startswith("#")
    indent = " " * len(head) if comment else "    "
    lines, line = [], ""
    for piece in re.split(r"(?<=[ (\[])", code):
        if line and len(indent) + len(line + piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    if comment:
        return head + f"\n#{indent[1:]}".join(lines)
    if head.endswith(("(", "[")):  # already inside a bracket
        return head + "\n" + "\n".join(indent + part for part in lines)
    return head + "(\n" + "\n".join(indent + part for part in lines) + "\n)"


def unpacking(names: dict) -> str:
    """`x, W = leaves.values()`: the leaves as the variables the visitor's expression names."""
    targets = ", ".join(names.values())
    return f"({targets},)" if len(names) == 1 else targets


GRAPH_SHOWN = (seeded_leaves, graph_nodes, node_rows, draw_graph)


def graph_code(leaves, tree, show_saved: bool) -> Script:
    """The snippet: the functions that made the leaves, drew the graph and numbered its nodes, then the visitor's
    expression as torch code."""
    names = variable_names(leaves, {"torch", "make_dot", "shapes", "requires_grad", "show_saved", "leaves", "out",
                                    "dot", "row", *(f.__name__ for f in GRAPH_SHOWN)})
    settings = {"shapes": {leaf.name: leaf.shape for leaf in leaves},
                "requires_grad": [leaf.name for leaf in leaves if leaf.requires_grad], "show_saved": show_saved}
    run = "\n".join([
        "leaves = seeded_leaves(shapes, requires_grad)",
        f"{unpacking(names)} = leaves.values()",
        code_lines("# as typed: ", to_source(tree)),
        code_lines("out = ", to_source(renamed(tree, names), torch_style=True)),
        'dot = draw_graph(out, leaves, show_saved)  # dot.render("graph", format="png") writes graph.png',
        "for row in node_rows(graph_nodes(out)):",
        "    print(row)",
    ])
    return script(*GRAPH_SHOWN, imports="import torch\nfrom torchviz import make_dot", settings=settings, run=run)


@entry("w: 3 grad; leaves: 3", "sum(w * (w * 2).detach() + leaves * w)", True, entries=64)
def graph_view(leaves_text: str, expr_text: str, show_saved: bool = False) -> GraphResult:
    """Run the expression, then draw the backward graph torch recorded (torchviz) and list its nodes."""
    b = build(leaves_text, expr_text)
    dot = draw_graph(b.out, b.tensors, show_saved)
    dot.graph_attr.update(size="9,9")
    notes = []
    origin = first_non_finite(b.steps)
    if origin is not None:
        where = ("The output contains inf or nan" if not bool(torch.isfinite(b.out).all())
                 else "The output is finite, but an intermediate result is not")
        notes.append(f"{where}: the first operation whose result holds an inf or a nan is {quoted(origin.text)} "
                     f"({_non_finite_kind(origin.out)}).")
    unused = [name for name, t in b.tensors.items() if t.requires_grad and name not in _reached_leaf_names(b)]
    if unused:
        notes.append(f"Not in the graph although requires_grad=True: {', '.join(unused)} (unused or detached).")
    shapes = {s.node: s.out.shape for s in b.steps}
    return GraphResult(
        expression=to_source(b.tree), leaves_text=leaves_text, out_shape=format_shape(b.out.shape),
        n_nodes=len(b.nodes), dot=dot.source, forward_dot=forward_dot(b.tree, b.tensors, shapes),
        nodes=node_table(b), notes=tuple(notes), code=graph_code(b.leaves, b.tree, show_saved),
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
