"""The Shape lab: any shape question, run step by step by torch on meta tensors (sizes cost no memory).

`evaluate(tensors, expression)` parses both texts (demos.tensors.shape_grammar, never eval), runs every parsed op
with torch on the meta device, and records per step the shape, strides, contiguity, whether the step returned a
view or a copy, and the arithmetic behind the shape. When every tensor of the chain is small, the same chain runs
again on real CPU tensors and the view-or-copy column comes from their storages.
"""

import difflib
import math
import warnings
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (the name people type)

from demos.errors import InputError, quoted
from demos.parsing import format_shape
from demos.shown import entry
from demos.tensors import shape_explain as ex
from demos.tensors import shape_grammar as g
from demos.tensors.common import torch_error

REAL_MAX_NUMEL = 2**14  # a chain whose every tensor and layer is this small is also run on real tensors
MAX_STEPS = 40

_VARIADIC = (1, 8)
METHODS = {
    "view": _VARIADIC, "reshape": _VARIADIC, "flatten": (0, 2), "unflatten": (2, 2), "permute": _VARIADIC,
    "transpose": (2, 2), "swapaxes": (2, 2), "t": (0, 0), "squeeze": (0, 1), "unsqueeze": (1, 1),
    "expand": _VARIADIC, "expand_as": (1, 1), "repeat": _VARIADIC, "tile": _VARIADIC, "chunk": (1, 2),
    "split": (1, 2), "unbind": (0, 1), "narrow": (3, 3), "select": (2, 2), "contiguous": (0, 0), "clone": (0, 0),
    "to": (0, 1), "sum": (0, 1), "mean": (0, 1), "max": (0, 1), "min": (0, 1), "amax": (0, 1), "amin": (0, 1),
    "argmax": (0, 1), "argmin": (0, 1), "std": (0, 1), "var": (0, 1), "prod": (0, 1), "softmax": (1, 1),
    "log_softmax": (1, 1), "masked_fill": (2, 2), "gather": (2, 2), "scatter": (3, 3), "long": (0, 0),
    "half": (0, 0), "float": (0, 0), "double": (0, 0), "int": (0, 0), "bool": (0, 0), "bfloat16": (0, 0),
    "view_as": (1, 1), "reshape_as": (1, 1), "flip": _VARIADIC, "matmul": (1, 1), "mm": (1, 1), "bmm": (1, 1),
    "relu": (0, 0), "sigmoid": (0, 0), "tanh": (0, 0), "exp": (0, 0), "abs": (0, 0), "size": (0, 1),
    "dim": (0, 0), "numel": (0, 0), "movedim": (2, 2),
}
TORCH_FUNCS = {
    "cat": (1, 2), "concat": (1, 2), "stack": (1, 2), "matmul": (2, 2), "bmm": (2, 2), "mm": (2, 2),
    "einsum": (2, 9), "where": (3, 3), "outer": (2, 2), "broadcast_tensors": _VARIADIC, "randn": _VARIADIC,
    "rand": _VARIADIC, "zeros": _VARIADIC, "ones": _VARIADIC, "empty": _VARIADIC, "arange": (1, 3),
    "zeros_like": (1, 1), "ones_like": (1, 1), "randn_like": (1, 1), "flatten": (1, 3), "reshape": (2, 2),
    "transpose": (3, 3), "permute": (2, 2), "squeeze": (1, 2), "unsqueeze": (2, 2), "sum": (1, 2), "mean": (1, 2),
    "max": (1, 2), "argmax": (1, 2), "softmax": (2, 2), "log_softmax": (2, 2), "chunk": (2, 3), "split": (2, 3),
    "unbind": (1, 2), "gather": (3, 3), "masked_fill": (3, 3), "relu": (1, 1), "sigmoid": (1, 1), "tanh": (1, 1),
    "movedim": (3, 3), "tile": (2, 2), "t": (1, 1),
}
F_FUNCS = {"softmax": (1, 2), "log_softmax": (1, 2), "relu": (1, 1), "gelu": (1, 1), "dropout": (1, 2),
           "linear": (2, 3)}
CREATION = {"randn", "rand", "zeros", "ones", "empty", "arange"}
LAYERS = {
    "Linear": nn.Linear, "Bilinear": nn.Bilinear, "Conv1d": nn.Conv1d, "Conv2d": nn.Conv2d, "Conv3d": nn.Conv3d,
    "ConvTranspose1d": nn.ConvTranspose1d, "ConvTranspose2d": nn.ConvTranspose2d, "MaxPool1d": nn.MaxPool1d,
    "MaxPool2d": nn.MaxPool2d, "AvgPool1d": nn.AvgPool1d, "AvgPool2d": nn.AvgPool2d,
    "AdaptiveAvgPool1d": nn.AdaptiveAvgPool1d, "AdaptiveAvgPool2d": nn.AdaptiveAvgPool2d,
    "Embedding": nn.Embedding, "Flatten": nn.Flatten, "Unflatten": nn.Unflatten, "LayerNorm": nn.LayerNorm,
    "BatchNorm1d": nn.BatchNorm1d, "BatchNorm2d": nn.BatchNorm2d, "Dropout": nn.Dropout,
    "MultiheadAttention": nn.MultiheadAttention, "Sequential": nn.Sequential, "ReLU": nn.ReLU, "GELU": nn.GELU,
    "Identity": nn.Identity, "Softmax": nn.Softmax,
}
PARAM_LAYERS = {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                "Embedding", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "MultiheadAttention"}
DTYPE_NAMES = {name: d for name, d in g.DTYPES.items()}
FORMATS = {"channels_last": torch.channels_last, "contiguous_format": torch.contiguous_format,
           "channels_last_3d": torch.channels_last_3d}
TENSOR_ATTRS = {"T", "mT", "shape", "ndim", "dtype"}


@dataclass(frozen=True)
class Namespace:
    name: str  # "torch", "nn" or "F"


@dataclass(frozen=True)
class Bound:
    """A callable the grammar resolved: a tensor method, a torch/F function or a layer class."""

    kind: str  # "method", "torch", "F", "layer"
    name: str
    tensor: object = None


@dataclass(frozen=True)
class Step:
    """One op as torch ran it: the sub-expression, its tensor inputs and outputs, and what the lab says of it."""

    number: int
    text: str
    op: str
    short: str  # the text with an earlier step's text as its head shown as "…" (x.T.flatten(1) after x.T: ….flatten(1))
    inputs: tuple  # shapes of the tensor inputs
    outputs: tuple  # shapes of the tensor outputs (several for chunk, split, unbind, max(dim), attention)
    stride: tuple
    contiguous: bool | None
    dtype: str
    view: str  # "view", "copy", "new" (made from nothing) or "" when torch raised
    arithmetic: str
    error: str | None = None  # torch's own message when this step failed
    clash: str | None = None  # one sentence naming the dims that clash
    warnings: tuple = ()  # what torch warned about while it ran the step


@dataclass(frozen=True)
class ShapeResult:
    tensors: tuple  # the declarations
    expression: str  # canonical text of the parsed expression
    steps: tuple
    shape: tuple | None  # the final tensor's shape (the first output's when the expression ends in several)
    shapes: tuple  # every final output's shape
    dtype: str | None
    error: str | None
    clash: str | None
    failed: str | None  # the text of the failing step
    view_source: str  # "real": also run on real CPU tensors (views checked, errors from that run); else "meta"
    code: str


class StepFailed(Exception):
    def __init__(self, step: Step):
        super().__init__(step.error)
        self.step = step


class Run:
    """One evaluation of a tree on one device, recording steps."""

    def __init__(self, decls, device: str):
        self.device = device
        self.tensors = {d.name: declare(d.shape, d.dtype, device) for d in decls}
        self.steps: list[Step] = []
        self.nodes: list = []  # the expression node each step ran (a layer of nn.Sequential: the Sequential's call)
        self.masked: set[int] = set()  # ids of the index nodes that ran index_with_mask (meta tensors with a mask)
        self.failure: BaseException | None = None  # what torch raised at the step that failed
        self.parameters = 0  # of every layer constructed, so a large layer never runs for real

    # ---- values

    def value(self, node):
        if isinstance(node, g.Const):
            return node.value
        if isinstance(node, g.Name):
            return self.name(node.name)
        if isinstance(node, g.Seq):
            return tuple(self.value(i) for i in node.items)
        if isinstance(node, g.Attr):
            return self.attr(node)
        if isinstance(node, g.Call):
            return self.call(node)
        if isinstance(node, g.Index):
            return self.index(node)
        if isinstance(node, g.Slice):
            raise InputError(f"{g.EXPR_FIELD}: a slice such as 1:3 only goes inside [ ].")
        if isinstance(node, g.Neg):
            v = self.value(node.operand)
            if isinstance(v, torch.Tensor):
                return self.step(node, "neg", (v,), lambda: -v)
            return -_number(v, node)
        return self.binop(node)

    def name(self, name: str):
        if name in self.tensors:
            return self.tensors[name]
        if name in ("torch", "nn", "F"):
            return Namespace(name)
        known = ", ".join(self.tensors) or "none declared"
        raise InputError(f"{g.EXPR_FIELD}: {quoted(name)} is not a declared tensor (declared: {known}).")

    def attr(self, node: g.Attr):
        obj = self.value(node.obj)
        name = node.name
        if isinstance(obj, Namespace):
            return _namespace_attr(obj, name)
        if isinstance(obj, torch.Tensor):
            if name in ("T", "mT"):
                return self.step(node, name, (obj,), lambda: getattr(obj, name))
            if name == "shape":
                return tuple(obj.shape)
            if name == "ndim":
                return obj.dim()
            if name == "dtype":
                return obj.dtype
            if name in METHODS:
                return Bound("method", name, obj)
            raise _unknown("tensor op", "." + name, [f".{m}" for m in (*METHODS, *TENSOR_ATTRS)])
        if isinstance(obj, tuple) and name in ("values", "indices") and hasattr(obj, name):
            return getattr(obj, name)
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))}: {_kind(obj)} has no {quoted(name)} here.")

    def binop(self, node: g.BinOp):
        a, b = self.value(node.left), self.value(node.right)
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            return _arith(node.op, _number(a, node.left), _number(b, node.right), node)
        for v, side in ((a, node.left), (b, node.right)):
            if not isinstance(v, (torch.Tensor, int, float, bool)):
                raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(side))} is {_kind(v)}; "
                                 f"{node.op} needs tensors or numbers.")
        fn = _BINOPS[node.op]
        return self.step(node, node.op, tuple(v for v in (a, b) if isinstance(v, torch.Tensor)), lambda: fn(a, b))

    def index(self, node: g.Index):
        obj = self.value(node.obj)
        items = tuple(self.index_item(i) for i in node.items)
        if isinstance(obj, tuple):
            if len(items) != 1 or not isinstance(items[0], (int, slice)):
                raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))}: a tuple takes one int or slice.")
            try:
                return obj[items[0]]
            except IndexError:
                raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))}: index {items[0]} is out of range "
                                 f"for {len(obj)} items.") from None
        if not isinstance(obj, torch.Tensor):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))} indexes {_kind(obj)}.")
        key = items[0] if len(items) == 1 and not isinstance(items[0], (torch.Tensor, tuple)) else items
        tensors = (obj, *(i for i in items if isinstance(i, torch.Tensor)))
        return self.step(node, "index", tensors, lambda: self.getitem(node, obj, key), items=items)

    def getitem(self, node, t: torch.Tensor, key):
        """t[key]; on meta, where a boolean mask holds no values, index_with_mask (as if every value were True)."""
        items = key if isinstance(key, tuple) else (key,)
        if self.device != "meta" or not any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items):
            return t[key]
        self.masked.add(id(node))
        return index_with_mask(t, items)

    def index_item(self, item):
        if isinstance(item, g.Slice):
            parts = [None if p is None else self.value(p) for p in (item.start, item.stop, item.step)]
            for p in parts:
                if p is not None and (not isinstance(p, int) or isinstance(p, bool)):
                    raise InputError(f"{g.EXPR_FIELD}: slice bounds must be whole numbers; got {_kind(p)}.")
            if parts[2] is not None and parts[2] <= 0:
                raise InputError(f"{g.EXPR_FIELD}: a slice step must be positive (torch has no negative steps); "
                                 f"got {parts[2]}.")
            return slice(*parts)
        v = self.value(item)
        if v is None or v is Ellipsis or isinstance(v, (torch.Tensor, int)) and not isinstance(v, bool):
            return v
        if isinstance(v, tuple) and v and all(isinstance(i, int) for i in v):
            return torch.tensor(v, device=self.device) if self.device != "meta" else torch.empty(
                len(v), dtype=torch.int64, device="meta")
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(item))} cannot index a tensor; use ints, slices, "
                         "None, ..., a list of ints or a tensor.")

    def call(self, node: g.Call):
        fn = self.value(node.func)
        args = tuple(self.value(a) for a in node.args)
        kwargs = {k: self.value(v) for k, v in node.kwargs}
        text = g.to_source(node)
        _check_kwargs(kwargs, text)
        _check_args(fn, args, kwargs, text)
        if isinstance(fn, nn.Module):
            return self.module_call(node, fn, args, kwargs)
        if not isinstance(fn, Bound):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(text)} calls {_kind(fn)}, which is not callable.")
        if fn.kind == "layer":
            return self.construct(node, fn.name, args, kwargs, text)
        tensors = tuple(tensors_in((fn.tensor, *args, *kwargs.values())))
        if fn.kind == "method":
            method = getattr(fn.tensor, fn.name)
            out = lambda: method(*args, **kwargs)  # noqa: E731
        elif fn.kind == "F":
            out = lambda: getattr(F, fn.name)(*args, **kwargs)  # noqa: E731
        else:
            if fn.name in CREATION:
                kwargs = {**kwargs, "device": self.device}
            out = lambda: getattr(torch, fn.name)(*args, **kwargs)  # noqa: E731
        result = self.step(node, fn.name, tensors, out, args=args, kwargs=kwargs)
        return result

    def construct(self, node, name: str, args, kwargs, text: str) -> nn.Module:
        cls = LAYERS[name]
        if name == "Sequential":
            if not all(isinstance(a, nn.Module) for a in args):
                raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: nn.Sequential takes layers only.")
            return nn.Sequential(*args)
        if tensors_in((*args, *kwargs.values())):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: a layer is built from sizes and options; apply it to "
                             "a tensor afterwards, as in nn.Linear(4, 3)(x).")
        extra = {"device": self.device} if name in PARAM_LAYERS else {}
        try:
            layer = cls(*args, **kwargs, **extra)  # on meta: no memory, no RNG; for real: small, values unused
            self.parameters += sum(p.numel() for p in layer.parameters())
            return layer
        except Exception as err:  # torch refusing the layer's arguments is the step's answer
            step = self.record(node, text, name, (), None, err)
            raise StepFailed(step) from None

    def module_call(self, node, module: nn.Module, args, kwargs):
        text = g.to_source(node)
        if isinstance(module, nn.Sequential):
            if len(args) != 1 or kwargs:
                raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: nn.Sequential takes one tensor.")
            out = args[0]
            for i, layer in enumerate(module):
                out = self.layer_step(node, f"{text.split('(')[0]}[{i}] {_layer_text(layer)}", layer, (out,), {})
            return out
        return self.layer_step(node, text, module, args, kwargs)

    def layer_step(self, node, text, layer, args, kwargs):
        if not args or not all(isinstance(a, torch.Tensor) for a in args):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: a layer is applied to tensors.")
        return self.step(node, type(layer).__name__, args, lambda: layer(*args, **kwargs), module=layer, text=text)

    # ---- steps

    def step(self, node, op: str, tensors: tuple, fn, text: str | None = None, **info):
        if len(self.steps) >= MAX_STEPS:
            raise InputError(f"{g.EXPR_FIELD}: more than {MAX_STEPS} steps; shorten it.")
        text = text or g.to_source(node)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn()
            except Exception as err:  # whatever torch raised while running the op is the step's answer
                raise StepFailed(self.record(node, text, op, tensors, None, err, info, caught)) from None
        self.record(node, text, op, tensors, out, None, info, caught)
        return out

    def record(self, node, text, op, tensors, out, err, info=None, caught=()) -> Step:
        info = dict(info or {}, strides=tuple(t.stride() for t in tensors))
        notes = tuple(dict.fromkeys(str(w.message).split("(Triggered")[0].strip() for w in caught))
        inputs = tuple(tuple(t.shape) for t in tensors)
        row = describe(out) if err is None else {}
        outs = tuple(tensors_in(out)) if err is None else ()
        step = Step(
            number=len(self.steps) + 1, text=text, op=op, short=_short(text, self.steps), inputs=inputs,
            outputs=row.get("shapes", ()), stride=tuple(row.get("stride", ())), contiguous=row.get("contiguous"),
            dtype=row.get("dtype", ""), view=view_or_copy(tensors, outs) if err is None else "",
            arithmetic=ex.safely(ex.arithmetic, "", op, inputs, tuple(tuple(t.shape) for t in outs), info,
                                 err is not None),
            error=torch_error(err) if err is not None else None,
            clash=ex.safely(ex.clash, ex.fallback_clash(inputs), op, inputs, info, err) if err is not None else None,
            warnings=notes,
        )
        self.steps.append(step)
        self.nodes.append(node)
        if err is not None:
            self.failure = err
        return step


# ---- helpers --------------------------------------------------------------------------------------------------

_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "@": lambda a, b: a @ b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _short(text: str, earlier) -> str:
    heads = [s.text for s in earlier if s.error is None and text.startswith(s.text) and len(s.text) < len(text)]
    return "…" + text[len(max(heads, key=len)):] if heads else text


def declare(shape, dtype, device):
    """A declared tensor. On the meta device it has a shape, strides and a dtype but no data, so any size costs
    nothing. For real (a small chain): random floats (seed 0), a mask with every value True, integers zero (index
    0 is valid for any embedding, gather or index)."""
    dtype = getattr(torch, dtype)
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype)
    if not dtype.is_floating_point:
        return torch.zeros(shape, dtype=dtype)
    return torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def tensors_in(value):
    """The tensors in a value, in order: chunk, split, unbind, max(dim) and attention return several."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors_in(item)]
    return []


def describe(value):
    """A step's row of the table: the shape of each tensor it returned, and the stride, contiguity and dtype of
    the first (size(), dim() and numel() return numbers: no tensor)."""
    tensors = tensors_in(value)
    if not tensors:
        return dict(shapes=())
    first = tensors[0]
    return dict(shapes=tuple(tuple(t.shape) for t in tensors), stride=first.stride(), contiguous=first.is_contiguous(),
                dtype=str(first.dtype).removeprefix("torch."))


def index_with_mask(t, items):
    """t[items] on the meta device, where a boolean mask holds no values, so torch cannot count its True values:
    index as if every value were True (the most rows the result can have), with the index tensors such a mask
    stands for."""
    expanded, dim = [], 0
    for item in items:
        if isinstance(item, torch.Tensor) and item.dtype == torch.bool:
            indexed = tuple(t.shape[dim:dim + item.dim()])
            if tuple(item.shape) != indexed:
                raise IndexError(f"The shape of the mask {list(item.shape)} at index {dim} does not match the shape "
                                 f"of the indexed tensor {list(t.shape)} at index {dim}")
            rows = torch.empty(item.numel(), dtype=torch.int64, device="meta")
            expanded += [rows] * item.dim()
            dim += item.dim()
        else:
            expanded.append(item)
            dim += 0 if item is None or item is Ellipsis else 1
    return t[tuple(expanded)]


def view_or_copy(inputs, outs) -> str:
    """Whether a step's outputs share their input's memory: 'view' (all of them do), 'copy', 'new' (the step had
    no tensor input) or '' (it returned no tensor). On the meta device there is no memory to compare, so a view
    is an output whose base is an input's; on a real device, an output inside an input's storage."""
    if not outs:
        return ""
    if not inputs:
        return "new"
    bases = {id(t._base if t._base is not None else t) for t in inputs}
    if outs[0].device.type == "meta":
        shared = [o._base is not None and id(o._base) in bases for o in outs]
    else:
        ptrs = {t.untyped_storage().data_ptr() for t in inputs if t.numel()}
        shared = [o.numel() > 0 and o.untyped_storage().data_ptr() in ptrs for o in outs]
    return "view" if all(shared) else "copy"


def _namespace_attr(ns: Namespace, name: str):
    if ns.name == "torch":
        if name == "nn":
            return Namespace("nn")
        if name in DTYPE_NAMES:
            return DTYPE_NAMES[name]
        if name in FORMATS:
            return FORMATS[name]
        if name in TORCH_FUNCS:
            return Bound("torch", name)
        raise _unknown("function", "torch." + name, [f"torch.{f}" for f in TORCH_FUNCS])
    if ns.name == "nn":
        if name == "functional":
            return Namespace("F")
        if name in LAYERS:
            return Bound("layer", name)
        raise _unknown("layer", "nn." + name, [f"nn.{c}" for c in LAYERS])
    if name in F_FUNCS:
        return Bound("F", name)
    raise _unknown("function", "F." + name, [f"F.{f}" for f in F_FUNCS])


def _unknown(kind: str, name: str, known: list[str]) -> InputError:
    """'`.veiw` is not a tensor op the lab knows; did you mean `.view`?' (or a few it does know)."""
    tail = {k.rsplit(".", 1)[-1]: k for k in known}
    close = difflib.get_close_matches(name.rsplit(".", 1)[-1], list(tail), n=1, cutoff=0.75)
    more = f" and {len(known) - 8} more" if len(known) > 8 else ""
    hint = f"did you mean {quoted(tail[close[0]])}?" if close else f"it knows {', '.join(known[:8])}{more}."
    return InputError(f"{g.EXPR_FIELD}: {quoted(name)} is not a {kind} the lab knows; {hint}")


def _kind(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"a tensor of shape {format_shape(v.shape)}"
    if isinstance(v, nn.Module):
        return f"the layer {type(v).__name__}"
    if isinstance(v, Namespace):
        return f"the module {v.name}"
    if isinstance(v, Bound):
        return f"the function {v.name}"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    return "None" if v is None else f"a {type(v).__name__}"


def _number(v, node):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))} is {_kind(v)}, not a number.")
    return v


def _arith(op: str, a, b, node):
    if op not in ("+", "-", "*", "/"):
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))}: {op} between plain numbers is not a shape "
                         "question; apply it to a tensor.")
    if op == "/" and b == 0:
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))} divides by zero.")
    value = _BINOPS[op](a, b)
    if abs(value) > g.MAX_INT:
        raise InputError(f"{g.EXPR_FIELD}: {quoted(g.to_source(node))} is too large; at most 2**40.")
    return value


def _check_kwargs(kwargs: dict, text: str) -> None:
    """The reader admits only the keywords in g.KWARGS; device= among them, to be refused here with the reason."""
    if "device" in kwargs:
        raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: the lab picks the device (meta), so device= is not taken.")


def _allowed(v, depth: int = 0) -> bool:
    if isinstance(v, (torch.Tensor, int, float, bool, torch.dtype, torch.memory_format, nn.Module)) or v is None:
        return True
    if isinstance(v, tuple) and depth == 0:
        return all(_allowed(i, 1) for i in v)
    return False


def _check_args(fn, args, kwargs, text: str) -> None:
    if isinstance(fn, Bound):
        table = {"method": METHODS, "torch": TORCH_FUNCS, "F": F_FUNCS}.get(fn.kind)
        if table is not None:
            low, high = table[fn.name]
            if not (low <= len(args) + len(kwargs) and len(args) <= high):  # a keyword may fill a slot
                span = str(low) if low == high else f"{low} to {high}"
                raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: {fn.name} takes {span} positional "
                                 f"argument{'' if high == 1 else 's'} here; got {len(args)}.")
    for i, v in enumerate(args):
        if isinstance(v, str):
            if not (isinstance(fn, Bound) and fn.name == "einsum" and i == 0):
                raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: text is only taken as einsum's equation.")
            if len(v) > 40:
                raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: the equation is longer than 40 characters.")
        elif not _allowed(v):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: argument {i + 1} is {_kind(v)}, which this call "
                             "cannot take.")
    for key, v in kwargs.items():
        if not _allowed(v):
            raise InputError(f"{g.EXPR_FIELD}: {quoted(text)}: {key}= is {_kind(v)}, which this call cannot take.")


def _layer_text(layer: nn.Module) -> str:
    return f"{type(layer).__name__}({layer.extra_repr()})"


def _fits_real(decls, run: Run) -> bool:
    """Whether every declared tensor, every step's output and all layers are small enough to run for real."""
    if any(math.prod(d.shape) > REAL_MAX_NUMEL for d in decls) or run.parameters > REAL_MAX_NUMEL * 16:
        return False
    return all(math.prod(s) <= REAL_MAX_NUMEL for step in run.steps for s in step.outputs)


def _run(decls, tree, device: str) -> tuple[Run, object, StepFailed | None]:
    run = Run(decls, device)
    try:
        return run, run.value(tree), None
    except StepFailed as failed:
        return run, None, failed


@entry("x: 32, 3, 64, 64; w: 16384, 10", "nn.Conv2d(3, 16, 3, stride=2, padding=1)(x).flatten(1) @ w",
       entries=64)  # the CNN head preset
def evaluate(tensors: str, expression: str) -> ShapeResult:
    """Parse both texts and run the expression with torch, step by step, on meta tensors."""
    decls = g.parse_tensors(tensors)
    tree = g.parse_expression(expression)
    run, out, failed = _run(decls, tree, "meta")
    steps = run.steps
    if failed is None and not tensors_in((out,)):
        raise InputError(f"{g.EXPR_FIELD}: it ends in {_kind(out)}; end it in a tensor to see its shape.")
    source, shown = "meta", run  # shown: the run the snippet repeats
    if failed is None and _fits_real(decls, run):
        real, _, real_failed = _run(decls, tree, "cpu")
        if real_failed is not None:  # meta tensors check shapes, not everything (a Long input to a Float Linear)
            steps, out, failed, source, shown = real.steps, None, real_failed, "real", real
        elif len(real.steps) == len(steps):
            steps = [s if not s.view or s.view == "new" else _with_view(s, r.view)
                     for s, r in zip(steps, real.steps, strict=True)]
            source, shown = "real", real
    outs = describe(out)["shapes"] if failed is None else ()
    last = failed.step if failed else None
    return ShapeResult(
        tensors=decls, expression=g.to_source(tree), steps=tuple(steps), shape=outs[0] if outs else None,
        shapes=outs, dtype=_first_dtype(out) if failed is None else None,
        error=last.error if last else None, clash=last.clash if last else None,
        failed=last.text if last else None, view_source=source,
        code=ex.code(decls, tree, shown),
    )


def _with_view(step: Step, view: str) -> Step:
    return replace(step, view=view)


def _first_dtype(out) -> str | None:
    tensors = tensors_in((out,))
    return str(tensors[0].dtype).removeprefix("torch.") if tensors else None


# ---- presets and links ---------------------------------------------------------------------------------------

PRESETS = {
    "CNN head": ("x: 32, 3, 64, 64; w: 16384, 10", "nn.Conv2d(3, 16, 3, stride=2, padding=1)(x).flatten(1) @ w"),
    "(32,) − (32, 1) in a loss": ("pred: 32; target: 32, 1", "(pred - target).abs().mean(0)"),
    "view after transpose": ("x: 32, 3, 64", "x.transpose(1, 2).view(32, -1)"),
    "squeeze() on a batch of one": ("x: 1, 3, 1, 10", "x.squeeze().softmax(0)"),
    "Linear on the wrong axis": ("x: 32, 128, 10", "nn.Linear(128, 64)(x)"),
    "conv output off by one": ("x: 8, 3, 32, 32; w: 4096, 10", "nn.Conv2d(3, 16, 3, stride=2)(x).flatten(1) @ w"),
    "attention without batch_first": ("x: 8, 16, 32", "nn.MultiheadAttention(32, 4)(x, x, x)[1]"),
    "10-step chain": ("x: 32, 3, 64, 64", "x.permute(0, 2, 3, 1).reshape(32, -1, 3).transpose(1, 2).unsqueeze(1)"
                      ".squeeze(1).flatten(1).unflatten(1, (3, 4096)).sum(-1, keepdim=True).expand(32, 3, 8)"
                      ".contiguous()"),
}
DEFAULT_PRESET = "CNN head"
TAB = "Shape lab"
TENSORS_KEY, EXPR_KEY = "tensors_lab_tensors", "tensors_lab_expr"


def lab_query(tensors: str, expression: str) -> dict[str, str]:
    """The query parameters that open the lab on this question (the Tensors page's tab and both fields)."""
    return {"tensors_tab": TAB, TENSORS_KEY: tensors, EXPR_KEY: expression}


def lab_link(tensors: str, expression: str) -> str:
    """A relative link that reproduces the question: /tensors?tensors_tab=Shape+lab&…"""
    from urllib.parse import urlencode
    return "/tensors?" + urlencode(lab_query(tensors, expression))


def _bench_chain() -> None:
    from demos.tensors.shape_explain import chain_figure

    chain_figure(evaluate(*PRESETS["10-step chain"]))


# Timed by `python -m bench`: the uncached work behind the Shape lab for its longest preset.
BENCH_CASES = {"10-step chain on (32, 3, 64, 64): evaluate + figure": _bench_chain}
