"""Broadcasting: right-aligned shapes, prepended and stretched dims, the grid of which input element is read."""

import itertools
import re
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from demos.errors import InputError, quoted
from demos.parsing import format_shape, parse_shape, plural, split_entries, strip_brackets, text_field
from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout, category_scale, cell_text
from demos.tensors.common import outcome, torch_error
from demos.traps import TrapPair, measure

MAX_DIMS = 6
MAX_DIM = 4096
NAMES = ("A", "B", "C")
GRID_MAX_SIDE = 8  # the grid view draws results up to 3-D with every dim <= 8
GRID_MAX_NDIM = 3
ROLE_COLORS = {
    "kept": COLORS["data"],
    "stretched": COLORS["activation"],
    "prepended": COLORS["idle"],
    "conflict": COLORS["error"],
    "result": COLORS["parameter"],
}


@dataclass(frozen=True)
class BroadcastResult:
    shapes: tuple[tuple[int, ...], ...]
    ndim: int  # aligned width: the longest shape
    roles: tuple[tuple[str, ...], ...]  # per operand, per aligned column: kept / stretched / prepended / conflict
    result: tuple[int, ...] | None  # from torch.broadcast_shapes; None when incompatible
    conflict: str | None  # our sentence naming every conflicting dimension
    conflict_dims: tuple[int, ...]  # the conflicting aligned dims, counted from the right (-1 is the last)
    torch_error: str | None  # torch's own message for the same shapes
    code: Script


def parse_shapes(texts: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Two shapes, and a third unless its field is blank; '[]' or '()' is a scalar."""
    if not 2 <= len(texts) <= 3:
        raise InputError(f"Broadcasting here takes 2 or 3 shapes; got {len(texts)}.")
    return tuple(parse_shape(text, MAX_DIMS, MAX_DIM, field=f"Shape {NAMES[i]}") for i, text in enumerate(texts)
                 if i < 2 or str(text).strip())


def _padded(shape: tuple[int, ...], ndim: int) -> tuple[int | None, ...]:
    return (None,) * (ndim - len(shape)) + shape


def _column_roles(column: list[int | None]) -> tuple[list[str], int | None]:
    """Roles of one aligned column and its broadcast size (None on a conflict)."""
    sizes = {d for d in column if d is not None and d != 1}
    size = sizes.pop() if len(sizes) == 1 else (1 if not sizes else None)
    roles = []
    for d in column:
        if d is None:
            roles.append("prepended")
        elif size is None and d != 1:
            roles.append("conflict")
        elif d == 1 and size not in (1, None):
            roles.append("stretched")
        else:
            roles.append("kept")
    return roles, size


def _conflict_parts(shapes, ndim: int, col: int) -> str:
    """'A's dim 0 is 2, B's dim 0 is 4': every operand whose size in this aligned column is not 1."""
    offset = col - ndim
    parts = []
    for name, shape in zip(NAMES, shapes, strict=False):
        own = len(shape) + offset
        if own >= 0 and shape[own] != 1:
            parts.append(f"{name}'s dim {own} is {shape[own]}")
    return ", ".join(parts)


def _conflict_sentence(shapes, ndim: int, cols: list[int]) -> str:
    """Name every conflicting column (torch's own message names only the first one it meets)."""
    rule = "sizes must be equal or one of them must be 1."
    if len(cols) == 1:
        return (f"Dimension {cols[0] - ndim} (counting from the right) conflicts: "
                f"{_conflict_parts(shapes, ndim, cols[0])}; {rule}")
    labels = [str(c - ndim) for c in cols]
    names = ", ".join(labels[:-1]) + f" and {labels[-1]}"
    each = "; ".join(f"at {c - ndim}, {_conflict_parts(shapes, ndim, c)}" for c in cols)
    return (f"Dimensions {names} (counting from the right) conflict: {each}. In each dimension the {rule} "
            "torch's message names only the first conflict it meets.")


def broadcast_result(shapes):
    """torch's broadcast shape for these shapes and None, or None and the error torch raised."""
    try:
        return tuple(torch.broadcast_shapes(*shapes)), None
    except RuntimeError as err:
        return None, err


@entry(("8, 1, 6, 1", "7, 1, 5", ""), entries=64)
def broadcast(texts: tuple[str, ...]) -> BroadcastResult:
    """Align the shapes from the right, name each dim's role, and ask torch for the result (or its error)."""
    shapes = parse_shapes(texts)
    ndim = max(len(s) for s in shapes)
    padded = [_padded(s, ndim) for s in shapes]
    roles = [[] for _ in shapes]
    clashes = []
    for col in range(ndim):
        column_roles, size = _column_roles([p[col] for p in padded])
        for i, role in enumerate(column_roles):
            roles[i].append(role)
        if size is None:
            clashes.append(col)
    conflict = _conflict_sentence(shapes, ndim, clashes) if clashes else None
    result, error = broadcast_result(shapes)
    code = script(broadcast_result, settings={"shapes": tuple(shapes)}, run="print(*broadcast_result(shapes))")
    return BroadcastResult(tuple(shapes), ndim, tuple(tuple(r) for r in roles), result, conflict,
                           tuple(c - ndim for c in clashes), error and torch_error(error), code)


def alignment_figure(r: BroadcastResult) -> go.Figure:
    """Right-aligned table: grey = prepended 1, green = stretched from 1, cyan = kept, red = conflict, blue = result."""
    rows = list(NAMES[: len(r.shapes)]) + ["result"]
    kinds = list(ROLE_COLORS)
    z, text, hover = [], [], []
    for name, shape, roles in zip(NAMES, r.shapes, r.roles, strict=False):
        padded = _padded(shape, r.ndim)
        z.append([kinds.index(role) for role in roles])
        text.append(["1" if d is None else str(d) for d in padded])
        hover.append([f"{name} {format_shape(shape)}: {role}" for role in roles])
    # The result row: torch's answer, or per column the size it would take and '?' where the column conflicts.
    clash = [any(roles[c] == "conflict" for roles in r.roles) for c in range(r.ndim)]
    if r.result is not None:
        result = [str(d) for d in r.result]
    else:
        columns = [[_padded(s, r.ndim)[c] for s in r.shapes] for c in range(r.ndim)]
        result = ["?" if clash[c] else str(max(d for d in col if d is not None)) for c, col in enumerate(columns)]
    z.append([kinds.index("conflict" if bad else "result") for bad in clash])
    text.append(result)
    hover.append(["no result: sizes conflict" if bad else "result size" for bad in clash])
    scale = []
    for i, kind in enumerate(kinds):
        scale += [[i / len(kinds), ROLE_COLORS[kind]], [(i + 1) / len(kinds), ROLE_COLORS[kind]]]
    columns = [f"dim {c - r.ndim}" for c in range(r.ndim)] or ["(scalar)"]
    if r.ndim == 0:
        z, text, hover = [[kinds.index("kept")] for _ in rows], [["scalar"] for _ in rows], [[""] for _ in rows]
    fig = go.Figure(go.Heatmap(
        z=z[::-1], x=columns, y=rows[::-1], hovertext=hover[::-1], hoverinfo="text", colorscale=scale, zmin=0,
        zmax=len(kinds), showscale=False, xgap=3, ygap=3,
    ))
    cells = [(columns[c], rows[i], text[i][c], ROLE_COLORS[kinds[z[i][c]]])
             for i in range(len(rows)) for c in range(len(columns))]
    fig.add_trace(cell_text(*map(list, zip(*cells, strict=True)), size=18))
    fig.update_xaxes(side="top")
    return base_layout(fig, height=90 + 55 * len(rows))


# ---------------------------------------------------------------- grid view: which input element does out[i] read?


@dataclass(frozen=True)
class GridResult:
    shapes: tuple[tuple[int, ...], ...]
    result: tuple[int, ...]
    index: tuple[int, ...]  # the picked element of the result, normalised to non-negative
    reads: tuple[tuple[int, ...], ...]  # per operand: the index of the element that out[index] reads
    code: Script


def grid_available(r: BroadcastResult) -> bool:
    """The grid view draws small compatible cases: result up to 3-D, every dim between 1 and 8."""
    return (r.result is not None and len(r.result) <= GRID_MAX_NDIM
            and all(1 <= d <= GRID_MAX_SIDE for d in r.result))


def parse_index(text: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """'1, 2' -> (1, 2) within the result shape; negatives count from the end; blank means the last element."""
    field = "Element of the result"
    raw = text_field(str(text), field, limit=60)
    body = strip_brackets(raw, field)
    if not body:
        return tuple(d - 1 for d in shape)
    parts = split_entries(body, field, raw)
    if len(parts) != len(shape):
        raise InputError(f"{field} {quoted(raw)}: the result {format_shape(shape)} has "
                         f"{plural(len(shape), 'dimension')}, so the index needs {plural(len(shape), 'number')}; "
                         f"got {len(parts)}.")
    index = []
    for dim, (part, size) in enumerate(zip(parts, shape, strict=True)):
        if not re.fullmatch(r"[+-]?\d+", part):
            raise InputError(f"{field} {quoted(raw)}: entry {dim} ({quoted(part)}) is not a whole number.")
        if len(part) > 12 or not -size <= int(part) < size:
            raise InputError(f"{field} {quoted(raw)}: {quoted(part)} is out of range for dim {dim}, which has size "
                             f"{size} (valid: {-size} to {size - 1}).")
        index.append(int(part) % size)
    return tuple(index)


def element_reads(shapes, index):
    """For out[index], the index of the element each input supplies: broadcast arange(n) (each element holds its
    own flat position), read the position at `index`, and unravel it in that input's shape."""
    operands = [torch.arange(max(1, torch.Size(s).numel())).reshape(s) for s in shapes]
    reads = []
    for shape, big in zip(shapes, torch.broadcast_tensors(*operands), strict=True):
        flat = big[index].item()
        reads.append(tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ())
    return reads


@entry(("2, 1, 4", "3, 1", "[]"), "1, 2, 3", entries=64)
def grid(texts: tuple[str, ...], index_text: str) -> GridResult:
    """Which element of each input out[index] reads, found by torch: broadcast arange(n) and index it."""
    r = broadcast(texts)
    if not grid_available(r):
        raise InputError(f"The grid view draws compatible results up to {GRID_MAX_NDIM}-D with every dim "
                         f"between 1 and {GRID_MAX_SIDE}.")
    index = parse_index(index_text, r.result)
    reads = element_reads(r.shapes, index)
    code = script(element_reads, settings={"shapes": r.shapes, "index": index},
                  run="print(element_reads(shapes, index))")
    return GridResult(r.shapes, r.result, index, tuple(reads), code)


def _cells(shape: tuple[int, ...]):
    """Lay an up-to-3-D shape out on a 2-D grid: dim 0 of a 3-D shape stacks blocks with a gap row."""
    if len(shape) == 0:
        return 1, 1, lambda idx: (0, 0)
    if len(shape) == 1:
        return 1, shape[0], lambda idx: (0, idx[0])
    if len(shape) == 2:
        return shape[0], shape[1], lambda idx: idx
    return shape[0] * (shape[1] + 1) - 1, shape[2], lambda idx: (idx[0] * (shape[1] + 1) + idx[1], idx[2])


def grid_figure(g: GridResult) -> go.Figure:
    """The result with the picked element (blue) and each input with the element it reads (green).

    One heatmap holds every panel side by side, so all cells have the same size and a stretched input is visibly
    smaller than the result.
    """
    shapes = (*g.shapes, g.result)
    names = [f"{n}" for n in NAMES[: len(g.shapes)]] + ["out"]
    hots = (*g.reads, g.index)
    rows = max(_cells(s)[0] for s in shapes)
    width = sum(_cells(s)[1] for s in shapes) + len(shapes) - 1
    z = [[None] * width for _ in range(rows)]
    text = [[""] * width for _ in range(rows)]
    hover = [[""] * width for _ in range(rows)]
    left, titles = 0, []
    for i, (name, shape, hot) in enumerate(zip(names, shapes, hots, strict=True)):
        _, cols, place = _cells(shape)
        for idx in itertools.product(*[range(d) for d in shape]):
            r, c = place(idx)
            label = ",".join(map(str, idx))
            z[r][left + c] = (2 if i == len(shapes) - 1 else 1) if idx == hot else 0
            text[r][left + c] = label or "·"
            hover[r][left + c] = f"{name}[{label}]"
        titles.append(dict(x=left + (cols - 1) / 2, y=-0.8, text=f"{name} {format_shape(shape)}", showarrow=False,
                           yanchor="bottom", font=dict(size=14)))
        left += cols + 1
    kinds = {"not read": "#e8eaed", "read by the element": COLORS["activation"], "the element": COLORS["parameter"]}
    fills = list(kinds.values())
    fig = go.Figure(go.Heatmap(z=z, hovertext=hover, hoverinfo="text", xgap=3, ygap=3, **category_scale(kinds)))
    cells = [(c, r, label, fills[z[r][c]]) for r, row in enumerate(text) for c, label in enumerate(row) if label]
    fig.add_trace(cell_text(*map(list, zip(*cells, strict=True)), size=13))
    fig.update_layout(annotations=titles)
    fig.update_yaxes(range=[rows - 0.5, -1.2], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(range=[-0.5, width - 0.5], showticklabels=False, showgrid=False, zeroline=False)
    return base_layout(fig, height=110 + 46 * rows)


# ---------------------------------------------------------------- traps


def mse_against_column_target():
    torch.manual_seed(0)
    pred = torch.randn(4)  # model output, shape (B,)
    target = torch.randn(4, 1)  # labels loaded as (B, 1)
    diff = pred - target  # (B,) - (B, 1) broadcasts to (B, B)
    loss = (diff**2).mean()
    return {"diff.shape": list(diff.shape), "loss": round(loss.item(), 4)}


def mse_against_flat_target():
    torch.manual_seed(0)
    pred = torch.randn(4)
    target = torch.randn(4, 1)
    diff = pred - target.squeeze(1)  # both (B,): one error per sample
    loss = (diff**2).mean()
    return {"diff.shape": list(diff.shape), "loss": round(loss.item(), 4)}


def _loss_sentence(trap: dict, correct: dict) -> str:
    return (f"`pred - target` broadcast (4,) against (4, 1) to a {format_shape(trap['diff.shape'])} difference, so "
            f"the loss {trap['loss']:g} averages every prediction against every target, and no error was raised. "
            f"With the target squeezed the difference is {format_shape(correct['diff.shape'])}, one error per "
            f"sample, and the loss {correct['loss']:g}. `F.mse_loss` at least warns about the size mismatch; a "
            "hand-written loss does not.")


@entry()
def loss_against_column_target() -> TrapPair:
    """A (B,) prediction minus a (B, 1) target: a B x B loss, silently; squeezing the target gives B errors."""
    return measure("loss", "A (B,) prediction against a (B, 1) target",
                   ("Trap: `pred - target`", "Correct: `pred - target.squeeze(1)`"),
                   (mse_against_column_target, mse_against_flat_target), _loss_sentence)


def add_into_the_smaller():
    a = torch.ones(3)
    b = torch.ones(2, 3)
    try:
        a += b  # the left side would have to grow to (2, 3)
        raised = None
    except RuntimeError as err:
        raised = f"RuntimeError: {err}"
    return {"a.shape": list(a.shape), "raised": raised}


def add_into_the_larger():
    a = torch.ones(3)
    b = torch.ones(2, 3)
    b += a  # the right side broadcasts into b's shape
    c = a + b  # or make a new tensor
    return {"b.shape": list(b.shape), "c.shape": list(c.shape)}


def _inplace_sentence(trap: dict, correct: dict) -> str:
    return (f"`a += b` with a (3,) and b (2, 3) {outcome(trap['raised'])}: an in-place op writes into the left "
            f"tensor's memory, so only the right side may broadcast. `b += a` keeps b at "
            f"{format_shape(correct['b.shape'])}, and `a + b` makes a new {format_shape(correct['c.shape'])} tensor.")


@entry()
def inplace_broadcast() -> TrapPair:
    """An in-place op whose left side would have to grow, beside the two forms that work."""
    return measure("inplace", "In-place op whose left side would need to broadcast",
                   ("Trap: `a += b`, a the smaller", "Correct: `b += a`, or `c = a + b`"),
                   (add_into_the_smaller, add_into_the_larger), _inplace_sentence)


TRAPS = (loss_against_column_target, inplace_broadcast)  # in the order the tab shows them
