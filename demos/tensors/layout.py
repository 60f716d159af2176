"""Memory layout: one storage, many views. Shape, stride, offset, contiguity and sharing after each op."""

import re
import warnings
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.colors import sample_colorscale

from demos.errors import InputError, quoted
from demos.parsing import count_range, format_shape, parse_shape, text_field
from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout, cell_text
from demos.tensors.common import catchable, outcome, torch_error
from demos.traps import TrapPair, measure

MAX_BASE_DIMS = 4
MAX_BASE_NUMEL = 64  # x is drawn cell by cell up to this size; a larger x (e.g. 32, 3, 64, 64) is tabled only
MAX_TABLE_NUMEL = 2**23  # a tabled x or step: real uint8 storage, at most 8 MiB
MAX_BASE_DIM = 4096
MAX_STEPS = 10
MAX_NUMEL = 512  # any step's tensor is drawn cell by cell
MAX_ARG = 4096
FORMATS = {"channels_last": torch.channels_last, "contiguous_format": torch.contiguous_format}
MAX_CHAIN_CHARS = 200
STRIP_WIDTH = 32

# name -> (smallest, largest) number of integer arguments; "T" and slicing are handled apart.
OPS = {
    "view": (1, 6), "reshape": (1, 6), "transpose": (2, 2), "permute": (1, 6), "t": (0, 0), "expand": (1, 6),
    "unsqueeze": (1, 1), "squeeze": (0, 1), "narrow": (3, 3), "flatten": (0, 2), "contiguous": (0, 0),
    "clone": (0, 0), "to": (1, 1),
}
# The menu on the page: label -> (template, hint for the arguments; None when the op takes none).
MENU = {
    "view": (".view({})", "e.g. 4, 3 or -1"),
    "reshape": (".reshape({})", "e.g. 2, 6 or -1"),
    "transpose": (".transpose({})", "two dims, e.g. 0, 1"),
    "permute": (".permute({})", "an order of all dims, e.g. 1, 0"),
    ".T": (".T", None),
    "slice with a step": ("[{}]", "e.g. :, ::2 or 1:, 1:3"),
    "expand": (".expand({})", "e.g. 2, 3, 4 (-1 keeps a dim)"),
    "unsqueeze": (".unsqueeze({})", "a dim, e.g. 0"),
    "narrow": (".narrow({})", "dim, start, length, e.g. 1, 1, 2"),
    "flatten": (".flatten({})", "optional start, end dims"),
    "contiguous": (".contiguous()", None),
    "channels_last": (".to(memory_format=torch.channels_last)", None),
}
_FORMAT_ARG = re.compile(r"\s*memory_format\s*=\s*torch\.(channels_last|contiguous_format)\s*")
_INT = r"[+-]?\d+"
_TOKEN = re.compile(
    r"\s*(?:(?P<T>\.T)(?![\w(])"  # .T
    r"|\.(?P<name>[A-Za-z_]\w*)\s*\((?P<args>[^()]*)\)"  # .name(args)
    r"|\[(?P<index>[^\[\]]*)\])"  # [ints and slices]
)


@dataclass(frozen=True)
class Step:
    """One parsed op: a method call with int args, `.T`, or an index with ints and slices."""

    name: str  # method name, "T", or "index"
    args: tuple  # ints; for "index": ints and (start, stop, step) triples with None for blanks

    @property
    def code(self) -> str:
        if self.name == "T":
            return ".T"
        if self.name == "index":
            return "[" + ", ".join(_slice_text(a) for a in self.args) + "]"
        if self.args and isinstance(self.args[0], str):
            return f".{self.name}(memory_format=torch.{self.args[0]})"
        return f".{self.name}({', '.join(map(str, self.args))})"


def _slice_text(item) -> str:
    if isinstance(item, int):
        return str(item)
    start, stop, step = item
    text = f"{'' if start is None else start}:{'' if stop is None else stop}"
    return text + (f":{step}" if step is not None else "")


def _int(text: str, where: str) -> int:
    if not re.fullmatch(_INT, text):
        raise InputError(f"{where}: {quoted(text)} is not a whole number.")
    value = int(text)
    if abs(value) > MAX_ARG:
        raise InputError(f"{where}: {quoted(text)} is out of range; arguments here are within ±{MAX_ARG}.")
    return value


def _index_item(text: str, where: str):
    if ":" not in text:
        return _int(text, where)
    parts = [p.strip() for p in text.split(":")]
    if len(parts) > 3:
        raise InputError(f"{where}: a slice has at most two colons (start:stop:step).")
    parts += [""] * (3 - len(parts))
    return tuple(None if not p else _int(p, where) for p in parts)


def _parse_call(name: str, args_text: str, number: int) -> Step:
    where = f"Op chain, step {number} ({quoted('.' + name)})"
    if name not in OPS:
        raise InputError(f"Op chain, step {number}: {quoted('.' + name)} is not one of the ops here; use "
                         f"{', '.join(OPS)}, .T or [slices].")
    memory_format = _FORMAT_ARG.fullmatch(args_text)
    if name in ("to", "contiguous") and memory_format:
        return Step(name, (memory_format.group(1),))
    if name == "to":
        raise InputError(f"{where}: takes memory_format=torch.channels_last or torch.contiguous_format.")
    parts = [p.strip() for p in args_text.split(",")]
    parts = [] if parts == [""] else parts
    low, high = OPS[name]
    if not low <= len(parts) <= high:
        raise InputError(f"{where}: takes {count_range(low, high)} whole-number arguments; got {len(parts)}.")
    return Step(name, tuple(_int(p, where) for p in parts))


def _parse_index(body: str, number: int) -> Step:
    parts = [p.strip() for p in body.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]
    where = f"Op chain, step {number} ({quoted('[' + body + ']')})"
    if not parts or any(p == "" for p in parts):
        raise InputError(f"{where}: each position needs an int or a slice such as ::2.")
    if len(parts) > 6:
        raise InputError(f"{where}: indexes at most 6 dimensions; got {len(parts)}.")
    return Step("index", tuple(_index_item(p, where) for p in parts))


def parse_chain(text: str) -> tuple[Step, ...]:
    """Parse '.transpose(0, 1).contiguous()[:, ::2]' (an optional leading 'x' is allowed). Never eval."""
    body = text_field(text, "Op chain", limit=MAX_CHAIN_CHARS)
    if body[:1] == "x":
        body = body[1:]
    steps, pos = [], 0
    while body[pos:].strip():
        match = _TOKEN.match(body, pos)
        if not match:
            rest = body[pos:].strip()
            raise InputError(f"Op chain: {quoted(rest[:20])} is not a step; each step is one of the ops here with "
                             "whole-number arguments, .T or an index, as in .view(4, 3).T[:, ::2].")
        if len(steps) == MAX_STEPS:
            raise InputError(f"Op chain: more than {MAX_STEPS} steps; the limit is {MAX_STEPS}.")
        number = len(steps) + 1
        if match["T"]:
            steps.append(Step("T", ()))
        elif match["name"]:
            steps.append(_parse_call(match["name"], match["args"], number))
        else:
            steps.append(_parse_index(match["index"], number))
        pos = match.end()
    return tuple(steps)


def menu_step(chain: str, label: str, args_text: str) -> str:
    """The chain with one menu choice appended, checked by the same grammar (errors name the new step)."""
    if label not in MENU:
        raise InputError(f"Op: {quoted(label)} is not in the menu; choose one of {', '.join(MENU)}.")
    template, hint = MENU[label]
    new_chain = str(chain) + (template if hint is None else template.format(str(args_text).strip()))
    parse_chain(new_chain)
    return new_chain


def apply(t: torch.Tensor, step: Step) -> torch.Tensor:
    """Run one step on a tensor; torch raises its own errors."""
    if step.name == "T":
        return t.T
    if step.name == "index":
        return t[tuple(a if isinstance(a, int) else slice(*a) for a in step.args)]
    if step.args and isinstance(step.args[0], str):
        return getattr(t, step.name)(memory_format=FORMATS[step.args[0]])
    return getattr(t, step.name)(*step.args)


@dataclass(frozen=True)
class View:
    """What torch reports about one tensor of the chain."""

    code: str  # the expression that made it, e.g. "x.T.reshape(12)"
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    contiguous: bool
    shares: bool  # same storage as x: the storages' data pointers are equal
    values: tuple[int, ...]  # elements in index order (flattened)
    positions: tuple[int, ...]  # the storage position each element reads, in index order
    storage: tuple[int, ...]  # this tensor's whole storage, in memory order


@dataclass(frozen=True)
class LayoutResult:
    base_shape: tuple[int, ...]
    views: tuple[View, ...]  # x first, then one per step that ran
    drawn: bool  # whether the views carry their values (small enough to draw cell by cell)
    error: str | None  # torch's message when a step failed
    failed: str | None  # the step torch refused
    warnings: tuple[str, ...]  # what torch warned about along the way (e.g. .T on a non-2-D tensor)
    code: Script


def make_x(shape, drawn):
    """x = arange(n) in the given shape, so each value is its own storage position; too large to draw, x is
    uninitialised bytes (its layout needs no values)."""
    if drawn:
        return torch.arange(torch.Size(shape).numel()).reshape(shape)
    return torch.empty(shape, dtype=torch.uint8)


def describe(t, x, drawn):
    """What torch says about t: shape, stride, storage offset, contiguity, and whether t still reads x's memory.
    Drawn, also t's whole storage in memory order, and the storage position each element of t reads (in index
    order): element [i, j] reads storage[offset + i * stride[0] + j * stride[1]]."""
    facts = dict(shape=tuple(t.shape), stride=t.stride(), offset=t.storage_offset(), contiguous=t.is_contiguous(),
                 shares_x=t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
    if drawn:
        n = t.untyped_storage().nbytes() // t.element_size()
        facts["storage"] = torch.as_strided(t, (n,), (1,), 0).tolist()
        facts["reads"] = torch.as_strided(torch.arange(n), t.shape, t.stride(), t.storage_offset()).flatten().tolist()
    return facts


def _view(code: str, t: torch.Tensor, x: torch.Tensor, drawn: bool) -> View:
    f = describe(t, x, drawn)
    values = tuple(t.reshape(-1).tolist()) if drawn else ()
    return View(code, f["shape"], tuple(f["stride"]), f["offset"], f["contiguous"], f["shares_x"], values,
                tuple(f.get("reads", ())), tuple(f.get("storage", ())))


def parse_base(text: str) -> tuple[int, ...]:
    """The starting tensor's shape: up to 4 dims; drawn up to 64 elements, tabled up to 2**23."""
    shape = parse_shape(text, MAX_BASE_DIMS, MAX_BASE_DIM, field="Shape of x")
    numel = torch.Size(shape).numel()
    if not 1 <= numel <= MAX_TABLE_NUMEL:
        raise InputError(f"Shape of x: {format_shape(shape)} has {numel:,} elements; x must have 1 to "
                         f"{MAX_TABLE_NUMEL:,}.")
    return shape


def _run_lines(steps, ran: int, error: BaseException | None) -> str:
    """The visitor's chain as torch code, one step per line (y1 = x.T, y2 = y1.reshape(12), ...), each followed by
    what torch says about its result; a step torch refused prints torch's error instead."""
    lines = ["x = make_x(shape, drawn)", 'print("x", describe(x, x, drawn))']
    for i, step in enumerate(steps[:ran]):
        name = f"y{i + 1}"
        lines += [f"{name} = {f'y{i}' if i else 'x'}{step.code}", f'print("{name}", describe({name}, x, drawn))']
    if error is not None:
        name = f"y{ran + 1}"
        lines += ["try:", f"    {name} = {f'y{ran}' if ran else 'x'}{steps[ran].code}",
                  f"except {catchable(error)} as err:", f'    print("{name}", torch_error(err))']
    return "\n".join(lines)


def _script(base_shape, drawn: bool, views, steps, error: BaseException | None) -> Script:
    shown = (make_x, describe, torch_error) if error is not None else (make_x, describe)
    return script(*shown, settings={"shape": base_shape, "drawn": drawn},
                  run=_run_lines(steps, len(views) - 1, error))


@entry("3, 4", ".T.view(12)", entries=64)
def layout(base_text: str, chain_text: str) -> LayoutResult:
    """Apply the chain to x = arange(n).reshape(base) and record torch's view of every tensor along the way."""
    base_shape = parse_base(base_text)
    steps = parse_chain(chain_text)
    drawn = torch.Size(base_shape).numel() <= MAX_BASE_NUMEL
    x = make_x(base_shape, drawn)
    views, t, expr = [_view("x", x, x, drawn)], x, "x"
    error = failed = refused = None
    notes = []
    for i, step in enumerate(steps):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t = apply(t, step)
            notes += [f"step {i + 1} ({step.code}): {str(w.message).split('(Triggered')[0].strip()}" for w in caught]
        except (RuntimeError, IndexError, ValueError, TypeError) as err:
            refused, error, failed = err, torch_error(err), f"step {i + 1}: {step.code}"
            break
        limit = MAX_NUMEL if drawn else MAX_TABLE_NUMEL
        if t.numel() > limit:
            raise InputError(f"Op chain, step {i + 1} ({quoted(step.code)}) makes {t.numel():,} elements; this view "
                             f"{'draws' if drawn else 'tables'} at most {limit:,}.")
        expr += step.code
        views.append(_view(expr, t, x, drawn))
    return LayoutResult(base_shape, tuple(views), drawn, error, failed, tuple(notes),
                        _script(base_shape, drawn, views, steps, refused))


# ---------------------------------------------------------------- figure


def layout_table(r: LayoutResult) -> pd.DataFrame:
    """The table above the drawing: one row per tensor of the chain, as torch reported its layout."""
    return pd.DataFrame([{
        "tensor": v.code, "shape": format_shape(v.shape), "stride": format_shape(v.stride),
        "storage_offset": v.offset, "is_contiguous()": v.contiguous, "shares x's storage": v.shares,
    } for v in r.views])


UNREAD = "#e8eaed"  # a storage cell this view does not read


def _value_scale():
    stops = [COLORS["parameter"], COLORS["data"], COLORS["activation"], COLORS["temporary"], COLORS["gradient"]]
    return [[i / (len(stops) - 1), c] for i, c in enumerate(stops)]


def _grid_cells(shape: tuple[int, ...]):
    """Place each element on a 2-D grid: the last two dims as rows x cols, leading dims as blocks stacked down."""
    if len(shape) == 0:
        return 1, 1, lambda flat: (0, 0)
    if len(shape) == 1:
        return 1, shape[0], lambda flat: (0, flat)
    rows, cols = shape[-2], shape[-1]
    blocks = torch.Size(shape[:-2]).numel()

    def place(flat: int):
        block, rest = divmod(flat, max(1, rows * cols))
        return block * (rows + 1) + rest // max(1, cols), rest % max(1, cols)

    return max(1, blocks * (rows + 1) - 1), max(1, cols), place


def layout_figure(r: LayoutResult, which: int, n_values: int) -> go.Figure:
    """Top: the storage strip (cells this tensor reads in colour, the rest grey). Below: its index grid.

    A cell's colour is its value, which is the storage position it had in x, so a colour marks one memory element.
    """
    v = r.views[which]
    width = min(STRIP_WIDTH, max(1, len(v.storage)))
    strip_rows = -(-len(v.storage) // width)
    rows, cols, place = _grid_cells(v.shape)
    top = strip_rows + 1  # the grid starts below the strip and one blank row for its title
    total_rows, total_cols = top + rows, max(width, cols)
    grey = [[None] * total_cols for _ in range(total_rows)]
    z = [[None] * total_cols for _ in range(total_rows)]
    text = [[""] * total_cols for _ in range(total_rows)]
    hover = [[""] * total_cols for _ in range(total_rows)]
    read = set(v.positions)
    for pos, value in enumerate(v.storage):
        rr, cc = divmod(pos, width)
        grey[rr][cc] = 0
        text[rr][cc] = str(value)
        hover[rr][cc] = f"storage[{pos}] = {value}" + (" (read)" if pos in read else " (not read by this view)")
        if pos in read:
            z[rr][cc] = value
    for flat, (value, pos) in enumerate(zip(v.values, v.positions, strict=True)):
        rr, cc = place(flat)
        z[top + rr][cc] = value
        text[top + rr][cc] = str(value)
        hover[top + rr][cc] = f"element {flat} in index order reads storage[{pos}] = {value}"
    fig = go.Figure()
    fig.add_heatmap(z=grey, colorscale=[[0, UNREAD], [1, UNREAD]], showscale=False, hoverinfo="skip",
                    xgap=2, ygap=2)
    top_value = max(1, n_values - 1)
    fig.add_heatmap(z=z, hovertext=hover, hoverinfo="text", colorscale=_value_scale(), zmin=0, zmax=top_value,
                    colorbar=dict(title="value", thickness=12), xgap=2, ygap=2)
    cells = [(c, r, label, UNREAD if z[r][c] is None else sample_colorscale(_value_scale(), z[r][c] / top_value)[0])
             for r, row in enumerate(text) for c, label in enumerate(row) if label]
    fig.add_trace(cell_text(*map(list, zip(*cells, strict=True)), size=14))
    storage_title = f"storage of {v.code}: " + ("shares x's storage" if v.shares else "new storage (copied)")
    grid_title = f"{v.code}: shape {format_shape(v.shape)}, stride {format_shape(v.stride)}, offset {v.offset}"
    fig.update_layout(annotations=[
        dict(x=-0.5, y=-0.6, text=storage_title, showarrow=False, xanchor="left", yanchor="bottom"),
        dict(x=-0.5, y=top - 0.6, text=grid_title, showarrow=False, xanchor="left", yanchor="bottom"),
    ])
    fig.update_yaxes(range=[total_rows - 0.5, -1.1], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(range=[-0.5, total_cols - 0.5], showticklabels=False, showgrid=False, zeroline=False)
    return base_layout(fig, height=90 + 42 * total_rows)


# ---------------------------------------------------------------- traps


def view_after_transpose():
    x = torch.arange(12).reshape(3, 4)
    try:
        outcome = x.T.view(12).tolist()  # x.T walks memory with stride (1, 4)
    except RuntimeError as err:
        outcome = f"RuntimeError: {err}"
    return {"x.T.stride()": list(x.T.stride()), "x.T.view(12)": outcome}


def reshape_after_transpose():
    x = torch.arange(12).reshape(3, 4)
    y = x.T.reshape(12)  # reshape copies when a view is impossible
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    return {"x.T.reshape(12)": y.tolist(), "shares x's memory": shares}


SHARES = "shares x's memory"


def _view_sentence(trap: dict, correct: dict) -> str:
    return (f"`x.T` walks x's memory with strides {format_shape(trap['x.T.stride()'])}, and no strides walk that "
            f"memory as one flat row, so `view(12)` {outcome(trap['x.T.view(12)'])}: `view` never copies. "
            f"`reshape(12)` returned {correct['x.T.reshape(12)']} in new memory (shares x's memory: "
            f"{correct[SHARES]}): it returns a view when it can and a copy when it must.")


@entry()
def view_of_transpose() -> TrapPair:
    """view after a transpose raises; reshape copies."""
    return measure("view", "view after a transpose", ("Trap: `x.T.view(12)`", "Correct: `x.T.reshape(12)`"),
                   (view_after_transpose, reshape_after_transpose), _view_sentence)


def write_into_expanded():
    x = torch.arange(3).unsqueeze(0).expand(1000, 3)  # stride (0, 1): one row, seen 1000 times
    x[0, 0] = 7  # every row is the same memory, so row 999 changes too
    try:
        x.add_(1)  # in-place on the whole tensor
        added = "done"
    except RuntimeError as err:
        added = f"RuntimeError: {err}"
    return {"stride": list(x.stride()), "bytes": x.untyped_storage().nbytes(), "x[999, 0]": x[999, 0].item(),
            "x.add_(1)": added}


def write_into_repeated():
    x = torch.arange(3).unsqueeze(0).repeat(1000, 1)  # a real copy per row
    x[0, 0] = 7
    x.add_(1)
    return {"stride": list(x.stride()), "bytes": x.untyped_storage().nbytes(), "x[999, 0]": x[999, 0].item(),
            "x.add_(1)": "done"}


def _expand_sentence(trap: dict, correct: dict) -> str:
    return (f"`expand(1000, 3)` gave stride {format_shape(trap['stride'])}: 1000 rows in {trap['bytes']:,} bytes, "
            f"the memory of one. Writing x[0, 0] = 7 changed every row (x[999, 0] is {trap['x[999, 0]']}), and the "
            f"whole-tensor `add_` {outcome(trap['x.add_(1)'])}, because many indices share one element. `repeat` "
            f"allocated every row ({correct['bytes']:,} bytes, stride {format_shape(correct['stride'])}), so the "
            f"write stayed in row 0 and x[999, 0] is {correct['x[999, 0]']} after `add_(1)`.")


@entry()
def write_into_expand() -> TrapPair:
    """An expanded tensor is one row seen many times: a write reaches every row, add_ is refused; repeat copies."""
    return measure("expand", "expand is free, until you write into it",
                   ("Trap: write into `x.expand(1000, 3)`", "Correct: `x.repeat(1000, 1)` when rows must differ"),
                   (write_into_expanded, write_into_repeated), _expand_sentence)


def write_through_row_view():
    x = torch.zeros(2, 3)
    row = x[0]  # basic indexing returns a view
    row[1] = 5.0  # writes into x's storage
    return {"x": x.tolist()}


def write_through_row_copy():
    x = torch.zeros(2, 3)
    row = x[0].clone()  # an independent copy
    row[1] = 5.0
    return {"x": x.tolist()}


def _write_sentence(trap: dict, correct: dict) -> str:
    return (f"`row = x[0]` is a view, so `row[1] = 5` changed x to {trap['x']}; through `x[0].clone()` x stayed "
            f"{correct['x']}. Slicing, `view`, `T`, `expand` and `narrow` share storage with the base; `clone()` "
            "when you need an independent tensor.")


@entry()
def write_through_view() -> TrapPair:
    """A write through a slice lands in the base tensor; through a clone it does not."""
    return measure("write", "A write through a view changes the base", ("Trap: `row = x[0]`", "Correct: "
                   "`row = x[0].clone()`"), (write_through_row_view, write_through_row_copy), _write_sentence)


TRAPS = (view_of_transpose, write_into_expand, write_through_view)  # in the order the tab shows them


# Worst cases allowed by the limits, timed by `python -m bench`.
BENCH_CASES = {
    "5-step chain to 512 elements, drawn": lambda: layout_figure(
        layout("4, 4, 4", ".unsqueeze(0).expand(8, 4, 4, 4)[:, ::1].contiguous().T.reshape(512)"), 5, 64),
}
