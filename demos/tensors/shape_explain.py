"""What the Shape lab says about a step: the arithmetic behind its shape, the dims that clash, its code, its figure.

Sentences are built from the shapes torch reported and the arguments that ran, never typed in by hand.
"""

import builtins
import math
import re

import pandas as pd
import plotly.graph_objects as go
from torch import nn

from demos.parsing import format_shape
from demos.shown import Script, script
from demos.style import COLORS, base_layout, cell_text
from demos.tensors import shape_grammar as g

REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "std", "var", "prod"}
BROADCASTING = {"+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=", "where", "masked_fill"}
MATMUL = {"@", "matmul", "mm", "bmm"}
REORDER = {"permute", "transpose", "swapaxes", "t", "T", "mT", "movedim"}
UNCHANGED = {"LayerNorm", "BatchNorm1d", "BatchNorm2d", "Dropout", "ReLU", "GELU", "Identity", "relu", "sigmoid",
             "tanh", "exp", "abs", "gelu", "dropout", "neg", "clone", "contiguous", "Softmax"}
CASTS = {"long", "half", "float", "double", "int", "bool", "bfloat16", "to"}


def _dims(shape) -> str:
    return format_shape(shape)


def _aligned(shapes) -> list[tuple]:
    n = max(len(s) for s in shapes)
    return [(None,) * (n - len(s)) + tuple(s) for s in shapes]


def _pad_text(s) -> str:
    return "(" + ", ".join("_" if d is None else str(d) for d in s) + ")"


def _arg(info: dict, position: int, key: str, default=None):
    args, kwargs = info.get("args", ()), info.get("kwargs", {})
    if key in kwargs:
        return kwargs[key]
    return args[position] if len(args) > position else default


def arithmetic(op: str, inputs: tuple, outputs: tuple, info: dict, failed: bool) -> str:
    """One line of arithmetic behind the output shape, with the numbers plugged in ('' when there is none, and for a
    step torch refused: there is no output shape to explain)."""
    if failed or not outputs:
        return ""
    module = info.get("module")
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d,
                           nn.ConvTranspose1d, nn.ConvTranspose2d)) and inputs:
        return _window(module, inputs[0])
    if isinstance(module, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d)):
        return f"adaptive: the output size is set to {module.output_size} whatever the input's spatial size"
    if isinstance(module, nn.Linear) and inputs:
        return (f"last dim {inputs[0][-1] if inputs[0] else '?'} → {module.out_features}: x @ W.T with W of shape "
                f"({module.out_features}, {module.in_features})" + (
                    f"; leading dims {_dims(inputs[0][:-1])} pass through" if len(inputs[0]) > 1 else ""))
    if isinstance(module, nn.Embedding) and inputs:
        return f"each index becomes a row of {module.embedding_dim}: {_dims(inputs[0])} + ({module.embedding_dim},)"
    if isinstance(module, nn.MultiheadAttention) and inputs:
        order = "(N, L, E) batch first" if module.batch_first else "(L, N, E) sequence first (batch_first=False)"
        return f"inputs read as {order}; E = embed_dim = {module.embed_dim}, {module.num_heads} heads of " \
               f"{module.head_dim}"
    if isinstance(module, (nn.Flatten, nn.Unflatten)) and inputs and outputs:
        return _regroup(inputs[0], outputs[0])
    out = outputs[0]
    if op in MATMUL and len(inputs) == 2:
        return _matmul(op, *inputs, out)
    if op in BROADCASTING and len(inputs) >= 2:
        return _broadcast(inputs, out)
    if op in REDUCTIONS and inputs:
        return _reduction(op, inputs[0], info)
    if op in ("softmax", "log_softmax"):
        return f"shape unchanged; each slice along dim {_arg(info, 0, 'dim')} sums to one"
    if op in ("view", "reshape", "flatten", "unflatten", "view_as", "reshape_as") and inputs:
        return _regroup(inputs[0], out)
    if op in REORDER and inputs:
        return _reorder(inputs[0], out)
    if op in ("squeeze", "unsqueeze") and inputs:
        return _squeeze(op, inputs[0], out, info)
    if op in ("cat", "concat", "stack"):
        return _join(op, inputs, out, info)
    if op in ("chunk", "split", "unbind"):
        return f"{len(outputs)} pieces: " + ", ".join(_dims(s) for s in outputs[:6]) + (
            ", …" if len(outputs) > 6 else "")
    if op in ("expand", "expand_as") and inputs:
        return f"size-1 dims of {_dims(inputs[0])} stretch to {_dims(out)} with stride 0: nothing is copied"
    if op in ("repeat", "tile") and inputs:
        return f"{_dims(inputs[0])} copied along each dim to {_dims(out)} ({math.prod(out):,} elements stored)"
    if op == "index" and inputs:
        return _indexing(inputs[0], out, info)
    if op in UNCHANGED:
        return "shape unchanged"
    if op in CASTS:
        return "shape unchanged; " + ("strides reordered for the memory format" if "memory_format" in
                                      info.get("kwargs", {}) else "values converted to the new dtype")
    if op == "einsum":
        return f"'{_arg(info, 0, 'equation')}': letters in the output are kept, the others are summed over"
    if op == "gather":
        return "the output takes the index tensor's shape"
    if op in ("narrow", "select") and inputs:
        d = _arg(info, 0, "dim")
        return f"dim {d} of {_dims(inputs[0])} " + ("keeps a length of " + str(_arg(info, 2, 'length'))
                                                  if op == "narrow" else "is selected away")
    if op == "outer" and len(inputs) == 2:
        return f"({inputs[0][0]},) ⊗ ({inputs[1][0]},) → {_dims(out)}"
    return ""


def _window(m, shape) -> str:
    """Each spatial dim's output size with the numbers plugged in."""
    spatial = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3, nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.AvgPool1d: 1,
               nn.AvgPool2d: 2, nn.ConvTranspose1d: 1, nn.ConvTranspose2d: 2}[type(m)]
    names = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}[spatial]
    sizes = tuple(shape[-spatial:]) if len(shape) >= spatial else ()

    def per(value, i):
        v = value if isinstance(value, (tuple, list)) else (value,) * spatial
        return v[i] if i < len(v) else v[-1]

    parts = []
    for i, size in enumerate(sizes):
        k, s, p = per(m.kernel_size, i), per(m.stride or m.kernel_size, i), per(m.padding, i)
        d = per(getattr(m, "dilation", 1), i)
        if isinstance(m, (nn.ConvTranspose1d, nn.ConvTranspose2d)):
            op_ = per(m.output_padding, i)
            value = (size - 1) * s - 2 * p + d * (k - 1) + op_ + 1
            parts.append(f"{names[i]}: ({size} − 1)·{s} − 2·{p} + {d}·({k} − 1) + {op_} + 1 = {value}")
        else:
            top = size + 2 * p - d * (k - 1) - 1
            ceil = getattr(m, "ceil_mode", False)
            value = (-(-top // s) if ceil else top // s) + 1
            bracket = "⌈⌉" if ceil else "⌊⌋"
            parts.append(f"{names[i]}: {bracket[0]}({size} + 2·{p} − {d}·({k} − 1) − 1) / {s}{bracket[1]} + 1 = "
                         f"{value}")
    channels = ""
    if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d)):
        channels = f"; channels {m.in_channels} → {m.out_channels}"
    return "; ".join(parts) + channels


def _matmul(op, a, b, out) -> str:
    if len(a) == 0 or len(b) == 0:
        return ""
    inner_b = b[0] if len(b) == 1 else b[-2]
    text = f"contracts A's last dim ({a[-1]}) with B's {'only' if len(b) == 1 else 'second-to-last'} dim ({inner_b})"
    return text + _batch_note(op, a[:-2], b[:-2]) + f" → {_dims(out)}"


def _batch_note(op, batch_a, batch_b) -> str:
    """What happened to the batch dims: bmm needs them equal; matmul broadcasts them."""
    if not batch_a and not batch_b:
        return ""
    if op == "bmm":
        return f"; batch dims {_dims(batch_a)} and {_dims(batch_b)} are equal, as bmm requires (it never broadcasts)"
    if not batch_a or not batch_b:
        return f"; {'A' if batch_a else 'B'}'s batch dims {_dims(batch_a or batch_b)} carry over"
    if batch_a == batch_b:
        return f"; batch dims {_dims(batch_a)} equal"
    together = _broadcast_shape(batch_a, batch_b)
    return f"; batch dims {_dims(batch_a)} and {_dims(batch_b)} broadcast to {_dims(together)}"


def _broadcast_shape(*shapes) -> tuple | None:
    """The shapes broadcast together, or None when some aligned dims differ and neither is 1."""
    result = []
    for column in zip(*_aligned(shapes), strict=True):
        sizes = {d for d in column if d not in (None, 1)}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _broadcast(inputs, out) -> str:
    padded = _aligned(inputs)
    stretched = [i for i in range(len(out)) if any(p[i] in (None, 1) and out[i] != 1 for p in padded)]
    where = f"; dims {stretched} stretch" if stretched else "; no dim stretches"
    return "aligned from the right: " + " vs ".join(_pad_text(p) for p in padded) + f" → {_dims(out)}{where}"


def _reduction(op: str, shape, info) -> str:
    dim = _arg(info, 0, "dim")
    keep = bool(_arg(info, 2 if op in ("std", "var") else 1, "keepdim", False))
    if dim is None:
        return f"all {math.prod(shape):,} elements reduce to one value"
    dims = dim if isinstance(dim, tuple) else (dim,)
    sized = ", ".join(f"dim {d} (size {shape[d]})" if -len(shape) <= d < len(shape) else f"dim {d}" for d in dims)
    result = " (values and indices)" if op in ("max", "min") and not isinstance(dim, tuple) else ""
    return f"{sized} {'kept as 1 (keepdim=True)' if keep else 'removed'}{result}"


def _regroup(shape, out) -> str:
    n = math.prod(shape)
    head = 0
    while head < min(len(shape), len(out)) and shape[head] == out[head]:
        head += 1
    tail = 0
    while tail < min(len(shape), len(out)) - head and shape[-1 - tail] == out[-1 - tail]:
        tail += 1
    old, new = shape[head:len(shape) - tail], out[head:len(out) - tail]
    if not old and not new:
        return f"{n:,} elements, the same shape"
    if all(d == 1 for d in old + new):
        return f"{n:,} elements; only size-1 dims {'dropped' if len(old) > len(new) else 'added'}"
    left = "·".join(map(str, old)) or "1"
    right = "·".join(map(str, new)) or "1"
    return f"dims {head} to {len(shape) - tail - 1}: {left} = {math.prod(old):,} elements, regrouped as {right} " \
           f"(all {n:,} kept)"


def _reorder(shape, out) -> str:
    return f"dims reordered: {_dims(shape)} → {_dims(out)}; strides move with them, no data moves"


def _squeeze(op, shape, out, info) -> str:
    dim = _arg(info, 0, "dim")
    if op == "unsqueeze":
        return f"a size-1 dim inserted at position {dim}"
    if dim is None:
        gone = [i for i, s in enumerate(shape) if s == 1]
        return f"every size-1 dim removed (positions {gone})" if gone else "no dim has size 1: unchanged"
    if len(out) == len(shape):
        return f"dim {dim} has size {shape[dim]}, not 1: unchanged"
    return f"dim {dim} (size 1) removed"


def _join(op, inputs, out, info) -> str:
    dim = _arg(info, 1, "dim", 0)
    if op == "stack":
        return f"a new dim {dim} of size {len(inputs)} ({len(inputs)} tensors of {_dims(inputs[0])})"
    sizes = [s[dim] for s in inputs if -len(s) <= dim < len(s)]
    return f"dim {dim}: {' + '.join(map(str, sizes))} = {sum(sizes)}; every other dim must match"


def _indexing(shape, out, info) -> str:
    items = info.get("items", ())
    notes = []
    advanced = [i for i, item in enumerate(items) if _is_tensor(item)]
    for item in items:
        if item is None:
            notes.append("None inserts a 1")
        elif item is Ellipsis:
            notes.append("... stands for the dims not named")
        elif isinstance(item, int):
            notes.append(f"{item} drops its dim")
        elif isinstance(item, slice):
            notes.append(f"slice '{_slice(item)}' keeps its dim")
        elif _is_tensor(item) and str(item.dtype) == "torch.bool":
            notes.append(f"a mask of {_dims(tuple(item.shape))} selects its True positions (known only from data; "
                         f"shown with all {math.prod(item.shape):,} True)")
        else:
            notes.append(f"an index tensor of {_dims(tuple(item.shape))} gathers rows")
    if len(advanced) > 1 and advanced != list(range(advanced[0], advanced[-1] + 1)):
        notes.append("the index tensors are separated by a slice, so their broadcast dims go first")
    return "; ".join(notes) + f" → {_dims(out)}"


def _slice(s: slice) -> str:
    return ":".join("" if v is None else str(v) for v in (s.start, s.stop)) + (f":{s.step}" if s.step else "")


def _is_tensor(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


# ---- the dims that clash -----------------------------------------------------------------------------------------


def clash(op: str, inputs: tuple, info: dict, err: BaseException) -> str:
    """One sentence naming the dims that clash in a step torch refused."""
    module = info.get("module")
    message = str(err)
    if "dtype" in message and ("same" in message or "expected" in message):
        return "The shapes fit but the dtypes differ: matmul, Linear and conv take one dtype and do not promote; " \
               "cast with .float() or .to(dtype)."
    if isinstance(module, nn.Linear) and inputs:
        return f"The input's last dim is {inputs[0][-1] if inputs[0] else 'missing'} but the layer's in_features " \
               f"is {module.in_features}."
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d)) and inputs:
        return _conv_clash(module, inputs[0], str(err))
    if isinstance(module, nn.Embedding) and inputs:
        return "Embedding takes integer indices; the input is a float tensor, so torch refuses it."
    if isinstance(module, (nn.LayerNorm,)) and inputs:
        return f"LayerNorm normalises the last dims {module.normalized_shape}; the input ends in " \
               f"{_dims(inputs[0][-len(module.normalized_shape):])}."
    if op in MATMUL and len(inputs) == 2:
        return _matmul_clash(op, *inputs)
    if op in BROADCASTING and len(inputs) >= 2:
        return _broadcast_clash(inputs)
    if op in ("view", "reshape") and inputs:
        return _view_clash(op, inputs[0], info, str(err))
    if op in ("cat", "concat", "stack") and len(inputs) >= 2:
        return _join_clash(op, inputs, info)
    if "out of range" in str(err) and inputs:
        return f"A dim or index is outside {_dims(inputs[0])}, which has {len(inputs[0])} dims."
    return fallback_clash(inputs)


def fallback_clash(inputs) -> str:
    """The page shows torch's own message below this sentence."""
    if not inputs:
        return "torch refused the arguments themselves, before any tensor reached the op."
    shapes = ", ".join(_dims(s) for s in inputs)
    return f"torch refused inputs of shape {shapes}; its own message, below, says what it checked."


def _matmul_clash(op, a, b) -> str:
    """The contracted dims that differ, or the batch dims that bmm needs equal or that matmul cannot broadcast."""
    if op == "bmm" and (len(a) != 3 or len(b) != 3):
        return f"bmm needs two 3-D tensors; got {len(a)}-D and {len(b)}-D."
    if not a or not b:
        return fallback_clash((a, b))
    inner = b[0] if len(b) == 1 else b[-2]
    if a[-1] != inner:
        return f"A's last dim ({a[-1]}) and B's {'only' if len(b) == 1 else 'second-to-last'} dim " \
               f"({inner}) are the contracted dims and must be equal."
    batch_a, batch_b = a[:-2], b[:-2]
    if op == "bmm" and batch_a != batch_b:
        return f"bmm never broadcasts: its batch dims must be equal, and here they are {batch_a[0]} and {batch_b[0]} " \
               "(torch.matmul would broadcast them)."
    if op != "bmm" and _broadcast_shape(batch_a, batch_b) is None:
        pairs = [f"{x} vs {y}" for x, y in zip(*_aligned((batch_a, batch_b)), strict=True)
                 if None not in (x, y) and 1 not in (x, y) and x != y]
        return f"The batch dims {_dims(batch_a)} and {_dims(batch_b)} do not broadcast: aligned from the right, " \
               f"{', '.join(pairs)} differ and neither size is 1."
    return fallback_clash((a, b))


def safely(explain, default: str, *args) -> str:
    """An explanation, or `default` when the arguments are too odd for it (torch's own answer still stands)."""
    try:
        return explain(*args)
    except Exception:  # an explanation is a gloss on torch's answer; it must never replace it with a crash
        return default


def _conv_clash(m, shape, message: str) -> str:
    spatial = len(m.kernel_size)
    if len(shape) not in (spatial + 1, spatial + 2):
        return f"{type(m).__name__} takes {spatial + 1}-D or {spatial + 2}-D input; this one is {len(shape)}-D " \
               f"{_dims(shape)}."
    channels = shape[-spatial - 1]
    if channels != m.in_channels:
        return f"The input has {channels} channels at dim {len(shape) - spatial - 1} but the layer expects " \
               f"in_channels={m.in_channels}."
    if "Kernel size" in message or "too small" in message:
        return f"A spatial dim of {_dims(shape[-spatial:])} plus padding is smaller than the kernel " \
               f"{m.kernel_size} reaches."
    return f"The input {_dims(shape)} does not fit {type(m).__name__}{m.kernel_size}."


def _broadcast_clash(inputs) -> str:
    padded = _aligned(inputs)
    n = len(padded[0])
    bad = []
    for i in range(n):
        sizes = {p[i] for p in padded if p[i] not in (None, 1)}
        if len(sizes) > 1:
            bad.append(f"dim {i - n} ({' vs '.join(str(p[i]) for p in padded if p[i] is not None)})")
    if not bad:
        return f"The shapes {' and '.join(_dims(s) for s in inputs)} broadcast, but torch refused this op."
    return f"Aligned from the right, {', '.join(bad)} differ and neither size is 1."


def _view_clash(op, shape, info, message: str) -> str:
    n = math.prod(shape)
    if "invalid for input of size" in message:
        asked = re.search(r"shape '\[(.*?)\]'", message)
        return f"{n:,} elements cannot be arranged as ({asked.group(1) if asked else '?'}): the sizes must " \
               "multiply to the same count."
    strides, target = info.get("strides", ()), _view_target(shape, info)
    if op != "view" or "not compatible" not in message or not strides or target is None:
        return fallback_clash((shape,))
    return _no_strides_for(shape, strides[0], target)


def _view_target(shape, info) -> tuple | None:
    """The shape view was asked for, its -1 worked out (None when the arguments are not plain sizes)."""
    args = info.get("args", ())
    sizes = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes) or list(sizes).count(-1) > 1:
        return None
    known = math.prod(s for s in sizes if s != -1)
    return tuple(math.prod(shape) // known if s == -1 else s for s in sizes) if known else None


def stride_breaks(shape, strides) -> list[tuple[int, int, int]]:
    """(i, j, count) for each pair of neighbouring dims i < j (size-1 dims skipped) that no single stride walks: the
    outer stride is not the inner stride × the inner size. count: the elements up to dim i, where the break falls."""
    dims = [d for d, size in enumerate(shape) if size != 1]
    return [(i, j, math.prod(shape[:i + 1])) for i, j in zip(dims, dims[1:], strict=False)
            if strides[i] != strides[j] * shape[j]]


def _no_strides_for(shape, strides, target) -> str:
    """Why view found no strides: one dim of the target spans a break between two dims of the input."""
    ends = {math.prod(target[:k + 1]) for k in range(len(target))}
    broken = next(((i, j, at) for i, j, at in stride_breaks(shape, strides) if at not in ends), None)
    if broken is None:
        return f"view finds no strides that give {_dims(shape)} (strides {_dims(strides)}) the shape " \
               f"{_dims(target)}; it never copies (reshape would)."
    i, j, at = broken
    k = next(k for k in range(len(target)) if math.prod(target[:k + 1]) > at)
    return (f"Dim {k} of {_dims(target)} (size {target[k]}) would span dims {i} and {j} of {_dims(shape)}, whose "
            f"strides are {strides[i]} and {strides[j]}. One stride walks two dims only when the outer stride equals "
            f"the inner stride × the inner size ({strides[j]} × {shape[j]} = {strides[j] * shape[j]}); here it is "
            f"{strides[i]}, so view, which never copies, has no strides for this shape (reshape would copy)."
            + _split_example(shape))


def split_view(shape) -> tuple | None:
    """The shape with its first splittable dim split in two (smallest factor first); None when no dim splits."""
    for d, size in enumerate(shape):
        factor = next((f for f in range(2, math.isqrt(size) + 1) if size % f == 0), None)
        if factor:
            return (*shape[:d], factor, size // factor, *shape[d + 1:])
    return None


def _split_example(shape) -> str:
    example = split_view(shape)
    return "" if example is None else \
        f" Splitting a dim always finds strides: view{_dims(example)} works on this same tensor."


def _join_clash(op, inputs, info) -> str:
    if op == "stack":
        return f"stack needs equal shapes; got {', '.join(_dims(s) for s in inputs)}."
    dim = _arg(info, 1, "dim", 0)
    first = inputs[0]
    for s in inputs[1:]:
        if len(s) != len(first):
            return f"cat needs the same number of dims; got {len(first)} and {len(s)}."
        for i, (a, b) in enumerate(zip(first, s, strict=True)):
            if a != b and i != dim % len(first):
                return f"Dim {i} differs ({a} vs {b}); only dim {dim} may differ in cat."
    return f"cat along dim {dim} refused {', '.join(_dims(s) for s in inputs)}."


# ---- the code that ran -------------------------------------------------------------------------------------------


# Names the snippet itself uses: a declared tensor with one of these names (or a Python builtin's) is renamed there.
SNIPPET_NAMES = {"tensors", "device", "declare", "tensors_in", "describe", "index_with_mask", "torch_error", "err",
                 "out"}


def _renames(decls, n_steps: int) -> dict[str, str]:
    """Each declared name as the snippet writes it: itself, or with '_' appended where the snippet needs the name."""
    taken = SNIPPET_NAMES | {f"s{i}" for i in range(1, n_steps + 1)} | set(dir(builtins))
    declared = {d.name for d in decls}
    renames: dict[str, str] = {}
    for d in decls:
        name = d.name
        while name in taken or name in renames.values() or (name != d.name and name in declared):
            name += "_"
        renames[d.name] = name
    return renames


def _root(node) -> str:
    while isinstance(node, g.Attr):
        node = node.obj
    return node.name if isinstance(node, g.Name) else ""


def _takes_device(node) -> bool:
    """Whether the engine passed device= to this call: parameter layers and torch's creation functions."""
    from demos.tensors import shapes as engine

    return isinstance(node.func, g.Attr) and (node.func.name in engine.PARAM_LAYERS or (
        node.func.name in engine.CREATION and _root(node.func) == "torch"))


def _is_sequential_call(node) -> bool:
    """nn.Sequential(...)(x): the engine runs each layer as a step of its own."""
    return (isinstance(node, g.Call) and isinstance(node.func, g.Call) and isinstance(node.func.func, g.Attr)
            and node.func.func.name == "Sequential")


class _Renderer:
    """The expression's nodes as the code that ran: a node that was a step is its variable (s1, s2, ...), a
    parameter layer or creation function gets device=device, a masked index on meta calls index_with_mask."""

    def __init__(self, names: dict[int, str], renames: dict[str, str], masked: set[int]):
        self.names, self.renames, self.masked = names, renames, masked

    def __call__(self, node) -> str:
        return g.to_source(self.tree(node))

    def tree(self, node):
        again = self.tree
        if id(node) in self.names:
            return g.Name(self.names[id(node)])
        if isinstance(node, g.Name):
            return g.Name(self.renames.get(node.name, node.name))
        if isinstance(node, g.Call):
            kwargs = tuple((k, again(v)) for k, v in node.kwargs)
            if _takes_device(node):
                kwargs += (("device", g.Name("device")),)
            return g.Call(again(node.func), tuple(again(a) for a in node.args), kwargs)
        if isinstance(node, g.Attr):
            return g.Attr(again(node.obj), node.name)
        if isinstance(node, g.Index):
            if id(node) in self.masked:
                return g.Call(g.Name("index_with_mask"), (again(node.obj), g.Seq(tuple(
                    self.key_item(i) for i in node.items), "()")), ())
            return g.Index(again(node.obj), tuple(again(i) for i in node.items))
        if isinstance(node, g.BinOp):
            return g.BinOp(node.op, again(node.left), again(node.right))
        if isinstance(node, g.Neg):
            return g.Neg(again(node.operand))
        if isinstance(node, g.Seq):
            return g.Seq(tuple(again(i) for i in node.items), node.brackets)
        if isinstance(node, g.Slice):
            return g.Slice(*(None if v is None else again(v) for v in (node.start, node.stop, node.step)))
        return node

    def key_item(self, item):
        """An index item as a value in a tuple: 1:3 is slice(1, 3, None); a list of ints the tensor the engine made."""
        if isinstance(item, g.Slice):
            return g.Call(g.Name("slice"), tuple(g.Const(None) if v is None else self.tree(v)
                                                 for v in (item.start, item.stop, item.step)), ())
        if isinstance(item, g.Seq):  # the engine took it only as whole numbers
            return g.Call(g.Attr(g.Name("torch"), "tensor"), (g.Seq(item.items, "[]"),),
                          (("device", g.Name("device")),))
        return self.tree(item)


def _uses(tree, name: str) -> bool:
    if isinstance(tree, g.Name):
        return tree.name == name
    children = [getattr(tree, f) for f in ("obj", "func", "left", "right", "operand", "start", "stop", "step")
                if getattr(tree, f, None) is not None]
    for field in ("args", "items"):
        children += list(getattr(tree, field, ()))
    children += [v for _, v in getattr(tree, "kwargs", ())]
    return any(_uses(c, name) for c in children)


def _tensor_names(line: str, tensors: set[str]) -> list[str]:
    """The tensor variables a step's line reads (not attribute names after a dot), in order: the step's inputs."""
    found = re.findall(r"(?<![.\w])([A-Za-z_]\w*)", line)
    return list(dict.fromkeys(name for name in found if name in tensors))


def code(decls, tree, run) -> Script:
    """The code that ran: the declared tensors made by declare on the run's device, then each step of the
    expression as a line of torch code (the expression is the visitor's; each of its steps as the engine ran it),
    each followed by its row of the table (describe, and whether it is a view of its inputs or a copy), or torch's
    error at the step it refused."""
    from demos.tensors import shapes as engine
    from demos.tensors.common import catchable, torch_error

    renames = _renames(decls, len(run.steps))
    tensors = {renames[d.name] for d in decls} | {f"s{step.number}" for step in run.steps}
    names: dict[int, str] = {}
    render = _Renderer(names, renames, run.masked)
    lines = [f"{renames[d.name]} = declare(*tensors[{d.name!r}], device)" for d in decls]
    layers_done: dict[int, int] = {}
    for step, node in zip(run.steps, run.nodes, strict=True):
        var = f"s{step.number}"
        if _is_sequential_call(node):  # layer j of the Sequential, applied to the previous layer's output
            j = layers_done.get(id(node), 0)
            layers_done[id(node)] = j + 1
            value = f"{render(node.func.args[j])}({names[id(node)] if j else render(node.args[0])})"
        else:
            value = render(node)
        names[id(node)] = var
        if step.error is None:
            view = (f", view_or_copy(tensors_in([{', '.join(_tensor_names(value, tensors))}]), tensors_in({var}))"
                    if step.outputs else "")
            lines += [f"{var} = {value}", f"print({step.number}, describe({var}){view})"]
        else:
            lines += ["try:", f"    {var} = {value}", f"except {catchable(run.failure)} as err:",
                      f"    print({step.number}, torch_error(err))"]
    if run.failure is None and id(tree) not in names:
        lines += [f"out = {render(tree)}", 'print("out", describe(out))']
    shown = [engine.declare] if decls else []
    shown += [engine.tensors_in, engine.describe] if any("describe(" in line for line in lines) else []
    shown += [engine.view_or_copy] if any("view_or_copy(" in line for line in lines) else []
    shown += [engine.index_with_mask] if run.masked else []
    shown += [torch_error] if run.failure is not None else []
    imports = ["import torch"]
    imports += ["from torch import nn"] if _uses(tree, "nn") else []
    imports += ["from torch.nn import functional as F"] if _uses(tree, "F") else []
    settings = {"tensors": {d.name: (d.shape, d.dtype) for d in decls}} if decls else {}
    return script(*shown, imports="\n".join(imports), settings={**settings, "device": run.device},
                  run="\n".join(lines))


# ---- the figure --------------------------------------------------------------------------------------------------

KEPT = COLORS["idle"]
CHANGED = COLORS["activation"]
FAILED = COLORS["error"]
INPUT = COLORS["data"]
LEGEND = {"input tensor": INPUT, "dim unchanged from the step's input": KEPT,
          "dim changed by the step": CHANGED, "the step torch refused (its input drawn)": FAILED}
SCALE_NOTE = "A box per dim, its width 1 + log2(size) / 2: size 1 is 1 wide, 64 is 4, a billion is 16."


def box_width(size: int) -> float:
    """A dim's box width: 1 for size 1, growing with log2 of the size."""
    return 1 + math.log2(max(size, 1)) / 2


def changed_dims(before: tuple, after: tuple) -> set[int]:
    """Output dims not matched to the input from either end (the dims the step changed)."""
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return set(range(head, len(after) - tail))


def chain_rows(result) -> list[tuple[str, tuple, str, set]]:
    """(label, shape, kind, changed dims) per row: the declared tensors the chain uses, then every step."""
    rows = [(d.name, d.shape, "input", set()) for d in result.tensors if re.search(
        rf"\b{re.escape(d.name)}\b", result.expression)]
    for s in result.steps:
        label = f"{s.number}. {s.short if len(s.short) <= 34 else s.short[:33] + '…'}"
        if s.error:
            rows.append((label, s.inputs[0] if s.inputs else (), "failed", set()))
        else:
            for j, out in enumerate(s.outputs[:4]):
                before = s.inputs[0] if s.inputs else ()
                rows.append((label if j == 0 else f"   [{j}]", out, "step", changed_dims(before, out)))
    return rows


def chain_figure(result) -> go.Figure:
    """Each step a row of boxes, one box per dim, its width on a log scale; changed dims in colour, a failure red.

    Legend: cyan = a declared input, grey = a dim the step left as it was, green = a dim the step changed,
    red = the input of the step torch refused (its shapes).
    """
    xs, ys, texts, fills, boxes, notes = [], [], [], [], [], []
    rows = chain_rows(result)
    for r, (label, shape, kind, changed) in enumerate(rows):
        x = 0.0
        notes.append(dict(x=-0.4, y=r, text=label, showarrow=False, xanchor="right", font=dict(size=12)))
        for i, size in enumerate(shape if shape else (None,)):
            w = box_width(size or 1)
            fill = {"input": INPUT, "failed": FAILED}.get(kind, CHANGED if i in changed else KEPT)
            boxes.append(dict(type="rect", x0=x, x1=x + w, y0=r - 0.38, y1=r + 0.38, fillcolor=fill,
                              line=dict(width=1, color="#ffffff"), layer="below"))
            xs.append(x + w / 2)
            ys.append(r)
            empty = "no tensor" if kind == "failed" else "scalar"  # a refused layer never received one
            texts.append(empty if size is None else f"{size:,}" if size < 10**6 else f"{size:.2g}")
            fills.append(fill)
            x += w
        if kind == "failed":
            notes.append(dict(x=x + 0.3, y=r, text="torch raised here", showarrow=False, xanchor="left",
                              font=dict(color=FAILED, size=12)))
    # one layout update for every box and label: add_shape per box validates the whole layout each time
    fig = go.Figure(cell_text(xs, ys, texts, fills, size=12))
    fig.update_layout(shapes=boxes, annotations=notes)
    width = max((sum(box_width(s) for s in shape) if shape else 1 for _, shape, _, _ in rows), default=1)
    fig.update_xaxes(range=[-12, width + 6], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(range=[len(rows) - 0.4, -0.6], showticklabels=False, showgrid=False, zeroline=False)
    return base_layout(fig, height=80 + 38 * len(rows))


def steps_table(result) -> pd.DataFrame:
    """The lab's table: per step its shape(s), strides, contiguity, view or copy, and dtype."""
    return pd.DataFrame([{
        "step": f"{s.number}. {s.short}", "shape": " | ".join(format_shape(o) for o in s.outputs) or "raised",
        "stride": format_shape(s.stride) if s.outputs else "", "contiguous": s.contiguous,
        "view or copy": s.view, "dtype": s.dtype,
    } for s in result.steps])
