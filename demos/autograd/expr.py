"""A small expression language over named leaf tensors: what the Autograd page admits, its tree, its evaluator.

The text is read by demos.expressions (Python's own parser, never eval) under GRAMMAR: numbers, leaf names,
+ - * / @ ** and unary -, the functions in FUNCS (sum, mean and softmax take a dim: sum(x, 1) or sum(x, dim=1)),
.detach(), .T and indexing with whole numbers and slices, such as x[0, 1:3]. Python's precedence.

Leaves are declared as 'x: 4,3; W: 3,2 grad' (name, shape, and 'grad' for requires_grad=True).
"""

import ast
import functools
import math
import re
from dataclasses import dataclass

import torch

from demos import expressions
from demos.errors import InputError, quoted
from demos.expressions import Grammar, Read
from demos.parsing import format_shape, parse_shape

MAX_EXPR = 200
MAX_NODES = 80
MAX_DEPTH = 24
MAX_LEAVES = 6
MAX_DIM = 64
MAX_LEAF_NUMEL = 64 * 64
MAX_RESULT_NUMEL = 64**3
FUNCS = ("relu", "sigmoid", "tanh", "exp", "log", "sum", "mean", "softmax")
REDUCE_FUNCS = ("sum", "mean", "softmax")
RESERVED = set(FUNCS) | {"T", "detach", "dim", "grad", "torch"}


# ---- the syntax tree -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str
    left: object
    right: object


@dataclass(frozen=True)
class Neg:
    operand: object


@dataclass(frozen=True)
class Call:
    func: str
    arg: object
    dim: int | None = None


@dataclass(frozen=True)
class Detach:
    operand: object


@dataclass(frozen=True)
class Transpose:
    operand: object


@dataclass(frozen=True)
class Index:
    operand: object
    items: tuple  # ints and (start, stop, step) triples of int | None


# ---- reading the expression: what this page admits --------------------------------------------------------------

GRAMMAR = Grammar(
    example="mean((x @ W + b - y) ** 2)",
    nodes=frozenset({ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Call, ast.Attribute, ast.Subscript,
                     ast.Slice, ast.Tuple}),
    operators=frozenset({ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow, ast.USub}),
    literals=frozenset({int, float}),
    functions=FUNCS, methods=("detach",), attributes=("T",), keywords=("dim",),
    max_chars=MAX_EXPR, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, max_int=10**6, max_float=1e6,
)


def parse_expression(text: str):
    """Parse expression text into a syntax tree, or raise InputError naming the problem."""
    read = expressions.read(text, GRAMMAR)
    return _tree(read, read.tree)


def _tree(read: Read, node: ast.expr):
    """The admitted Python tree as this page's tree (GRAMMAR has already refused every other kind and name)."""
    if isinstance(node, ast.Constant):
        return Num(float(node.value))
    if isinstance(node, ast.Name):
        return _name(read, node)
    if isinstance(node, ast.UnaryOp):  # '-', the only one admitted
        return Neg(_tree(read, node.operand))
    if isinstance(node, ast.BinOp):
        return BinOp(expressions.symbol(node.op), _tree(read, node.left), _tree(read, node.right))
    if isinstance(node, ast.Attribute):  # .T, the only name read after a dot
        return Transpose(_tree(read, node.value))
    if isinstance(node, ast.Subscript):
        return Index(_tree(read, node.value), _index_items(read, node))
    if isinstance(node, ast.Call):
        return _function(read, node)
    raise read.refuse(node, "is a tuple; commas go inside [ ] and between a function's arguments only")


def _name(read: Read, node: ast.Name) -> Name:
    if node.id in FUNCS:
        raise read.refuse(node, f"is a function; call it on a tensor, as in {node.id}(x)")
    if node.id in RESERVED:
        raise read.refuse(node, f"is not a function or tensor here; the functions are {', '.join(FUNCS)}")
    return Name(node.id)


def _function(read: Read, node: ast.Call):
    if isinstance(node.func, ast.Attribute):  # .detach(), the only method
        if node.args or node.keywords:
            raise read.refuse(node, "passes arguments to .detach(), which takes none")
        return Detach(_tree(read, node.func.value))
    if not isinstance(node.func, ast.Name):
        raise read.refuse(node, f"calls something that is not a function; the functions are {', '.join(FUNCS)}")
    func = node.func.id
    dims = node.args[1:] + [k.value for k in node.keywords]  # 'dim' is the only keyword admitted
    if not node.args:
        raise read.refuse(node, f"needs a tensor to apply {func} to, as in {func}(x)")
    if dims and func not in REDUCE_FUNCS:
        raise read.refuse(node, f"passes a dim, but {func}() takes one argument; only sum, mean and softmax take a "
                                "dim")
    if len(dims) > 1:
        raise read.refuse(node, f"passes {len(dims)} dims; {func}() takes one")
    dim = _whole(read, dims[0]) if dims else (-1 if func == "softmax" else None)
    return Call(func, _tree(read, node.args[0]), dim)


def _index_items(read: Read, node: ast.Subscript) -> tuple:
    items = expressions.index_items(node)
    if not items:
        raise read.refuse(node.slice, "is an empty index; an index needs a whole number or a slice such as 1:3")
    if len(items) > 3:
        raise read.refuse(node.slice, "has more than 3 entries; an index may have at most one per dimension")
    return tuple(_slice(read, item) if isinstance(item, ast.Slice) else _whole(read, item) for item in items)


def _slice(read: Read, node: ast.Slice) -> tuple:
    start, stop, step = (None if p is None else _whole(read, p) for p in (node.lower, node.upper, node.step))
    if step is not None and step <= 0:
        raise read.refuse(node, f"has the step {step}; a slice step must be a positive whole number (torch has no "
                                "negative steps)")
    return (start, stop, step)


def _whole(read: Read, node: ast.expr) -> int:
    """A whole number as an index or a dim: 2 or -1."""
    negative = isinstance(node, ast.UnaryOp)
    inner = node.operand if negative else node
    if not (isinstance(inner, ast.Constant) and type(inner.value) is int):
        raise read.refuse(node, "is not a whole number; an index or a dim must be one")
    if inner.value >= 10**4:
        raise read.refuse(node, f"is too large for an index or a dim; tensors here have at most {MAX_DIM} rows")
    return -inner.value if negative else inner.value


# ---- leaves ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Leaf:
    name: str
    shape: tuple[int, ...]
    requires_grad: bool


def parse_leaves(text: str) -> tuple[Leaf, ...]:
    """'x: 4,3; W: 3,2 grad' -> leaves; names are identifiers, shapes at most 3 dims of at most 64."""
    if not isinstance(text, str):
        raise InputError("The leaf list must be text.")
    if len(text) > MAX_EXPR:
        raise InputError(f"The leaf list is too long: at most {MAX_EXPR} characters.")
    entries = [e.strip() for e in re.split(r"[;\n]", text) if e.strip()]
    if not entries:
        raise InputError("Declare at least one leaf tensor, for example 'x: 4,3 grad'.")
    if len(entries) > MAX_LEAVES:
        raise InputError(f"At most {MAX_LEAVES} leaf tensors; this list has {len(entries)}.")
    leaves = [_parse_leaf(e) for e in entries]
    names = [leaf.name for leaf in leaves]
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"The leaf {quoted(name)} is declared twice.")
    return tuple(leaves)


def _parse_leaf(entry: str) -> Leaf:
    m = re.fullmatch(r"([A-Za-z_]\w*)\s*:\s*(.*?)\s*((?:requires_)?grad)?", entry)
    if not m:
        raise InputError(f"{quoted(entry)} is not a leaf declaration; write name: shape, e.g. `W: 3,2 grad`.")
    name, shape_text, grad = m.groups()
    if name in RESERVED:
        raise InputError(f"{quoted(name)} is reserved; choose another name for the tensor.")
    if len(name) > 12:
        raise InputError(f"The name {quoted(name)} is too long; at most 12 characters.")
    shape = parse_shape(shape_text, max_dims=3, max_dim=MAX_DIM, field=f"The shape of {quoted(name)}")
    if 0 in shape:
        raise InputError(f"The shape of {quoted(name)} has a zero dimension; every size must be 1 to {MAX_DIM}.")
    if math.prod(shape) > MAX_LEAF_NUMEL:
        raise InputError(f"{quoted(name)} has {math.prod(shape)} elements; the limit is {MAX_LEAF_NUMEL} (64x64).")
    return Leaf(name, shape, grad is not None)


def leaves_text(leaves) -> str:
    """The canonical text of a leaf list."""
    return "; ".join(f"{leaf.name}: {','.join(map(str, leaf.shape))}" + (" grad" if leaf.requires_grad else "")
                     for leaf in leaves)


def make_leaves(leaves, dtype=torch.float32, seed: int = 0) -> dict[str, torch.Tensor]:
    """Seeded randn leaves in declaration order: seeded_leaves, the function the snippets show, from Leaf specs."""
    return seeded_leaves({leaf.name: leaf.shape for leaf in leaves},
                         [leaf.name for leaf in leaves if leaf.requires_grad], dtype=dtype, seed=seed)


def seeded_leaves(shapes, requires_grad, dtype=torch.float32, seed=0):
    """One seeded randn tensor per name, in order; those named in requires_grad are leaves that record a graph."""
    gen = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=gen).to(dtype).requires_grad_(name in requires_grad)
            for name, shape in shapes.items()}


# ---- rendering the tree back to text ----------------------------------------------------------------------------

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "@": 2, "neg": 3, "**": 4}


def _prec(node) -> int:
    if isinstance(node, BinOp):
        return _PREC[node.op]
    if isinstance(node, Neg):
        return _PREC["neg"]
    return 9


def _num_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def index_text(items) -> str:
    def one(item):
        if isinstance(item, int):
            return str(item)
        start, stop, step = ("" if v is None else str(v) for v in item)
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return "[" + ", ".join(one(i) for i in items) + "]"


def to_source(node, torch_style: bool = False) -> str:
    """The expression as text: as typed (relu(x)) or as torch code (torch.relu(x))."""
    def wrap(child, min_prec, right=False):
        s = to_source(child, torch_style)
        p = _prec(child)
        return f"({s})" if p < min_prec or (right and p == min_prec) else s

    if isinstance(node, Num):
        return _num_text(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Neg):
        return "-" + wrap(node.operand, _PREC["neg"])
    if isinstance(node, BinOp):
        p = _PREC[node.op]
        if node.op == "**":  # right-associative; a negative base needs brackets
            return f"{wrap(node.left, p + 1)} ** {wrap(node.right, _PREC['neg'])}"
        return f"{wrap(node.left, p)} {node.op} {wrap(node.right, p, right=True)}"
    if isinstance(node, Call):
        inner = to_source(node.arg, torch_style)
        prefix = "torch." if torch_style else ""
        if node.dim is None:
            return f"{prefix}{node.func}({inner})"
        return f"{prefix}{node.func}({inner}, dim={node.dim})"
    if isinstance(node, Detach):
        return wrap(node.operand, 9) + ".detach()"
    if isinstance(node, Transpose):
        return wrap(node.operand, 9) + ".T"
    if isinstance(node, Index):
        return wrap(node.operand, 9) + index_text(node.items)
    raise TypeError(node)


@functools.lru_cache(maxsize=4096)
def _source(node) -> str:
    """to_source, remembered per (hashable, frozen) node: gradcheck evaluates the same tree hundreds of times."""
    return to_source(node)


def children(node) -> tuple:
    if isinstance(node, BinOp):
        return (node.left, node.right)
    if isinstance(node, (Neg, Detach, Transpose)):
        return (node.operand,)
    if isinstance(node, Call):
        return (node.arg,)
    if isinstance(node, Index):
        return (node.operand,)
    return ()


# ---- evaluation ------------------------------------------------------------------------------------------------

@dataclass
class Step:
    """One operation as it ran: the sub-expression, its operands and its output tensor."""

    node: object
    text: str
    inputs: tuple  # tensors or floats, in operand order
    out: torch.Tensor


def _shape(v) -> str:
    return format_shape(v.shape) if isinstance(v, torch.Tensor) else "a number"


def _check_result(out, text: str):
    if isinstance(out, torch.Tensor) and out.numel() > MAX_RESULT_NUMEL:
        raise InputError(f"{quoted(text)} has {out.numel()} elements; intermediate results are limited to "
                         f"{MAX_RESULT_NUMEL}.")
    return out


def _binary(op: str, a, b, text: str):
    if op == "@":
        return _matmul(a, b, text)
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        return _numbers(op, a, b, text)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        try:
            torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            raise InputError(f"Shape mismatch in {quoted(text)}: {_shape(a)} and {_shape(b)} do not broadcast "
                             "(aligned from the right, sizes must be equal or 1).") from None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    return a ** b


def _numbers(op: str, a: float, b: float, text: str) -> float:
    """Arithmetic on two plain numbers, refusing results that are not finite reals."""
    try:
        value = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                 "**": lambda: a ** b}[op]()
    except (OverflowError, ZeroDivisionError):
        raise InputError(f"{quoted(text)} is too large or undefined as a number.") from None
    if isinstance(value, complex) or not math.isfinite(value):
        raise InputError(f"{quoted(text)} is not a finite real number.")
    return value


def _matmul(a, b, text: str):
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        raise InputError(f"{quoted(text)} uses @ with a number; matrix multiplication needs two tensors.")
    if a.dim() == 0 or b.dim() == 0:
        raise InputError(f"{quoted(text)}: @ needs tensors with at least 1 dimension; got {_shape(a)} @ {_shape(b)}.")
    inner_b = b.shape[0] if b.dim() == 1 else b.shape[-2]
    if a.shape[-1] != inner_b:
        raise InputError(f"Shape mismatch in {quoted(text)}: {_shape(a)} @ {_shape(b)}; the inner sizes "
                         f"{a.shape[-1]} and {inner_b} must be equal.")
    try:
        torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise InputError(f"Shape mismatch in {quoted(text)}: the batch dimensions of {_shape(a)} and {_shape(b)} "
                         "do not broadcast.") from None
    return a @ b


def _check_dim(t: torch.Tensor, dim: int, text: str) -> None:
    n = max(t.dim(), 1)
    if not -n <= dim < n:
        raise InputError(f"dim={dim} is out of range in {quoted(text)}: the input has shape {_shape(t)} "
                         f"(dims {-n} to {n - 1}).")


def _call(func: str, a, dim, text: str):
    if not isinstance(a, torch.Tensor):
        raise InputError(f"{quoted(text)} applies {func} to a number; apply it to a tensor.")
    if dim is not None:
        _check_dim(a, dim, text)
    if func in ("sum", "mean"):
        return getattr(torch, func)(a) if dim is None else getattr(torch, func)(a, dim=dim)
    if func == "softmax":
        return torch.softmax(a, dim=dim)
    return getattr(torch, func)(a)


def _index(a, items, text: str):
    if not isinstance(a, torch.Tensor):
        raise InputError(f"{quoted(text)} indexes a number; only tensors can be indexed.")
    if len(items) > a.dim():
        raise InputError(f"{quoted(text)} has {len(items)} indices but the tensor has shape {_shape(a)} "
                         f"({a.dim()} dimensions).")
    for d, item in enumerate(items):
        if isinstance(item, int) and not -a.shape[d] <= item < a.shape[d]:
            raise InputError(f"Index {item} is out of range in {quoted(text)}: dimension {d} has size {a.shape[d]}.")
    key = tuple(item if isinstance(item, int) else slice(*item) for item in items)
    # x[:] passes a slice, x[0, :] a tuple, and torch records them differently (SliceBackward0 vs AliasBackward0):
    # index exactly as the printed code does
    return a[key[0]] if len(key) == 1 else a[key]


def evaluate(tree, tensors: dict[str, torch.Tensor], steps: list | None = None):
    """Run the tree with torch, appending a Step per tensor-valued operation; shape problems become InputError."""
    if isinstance(tree, Num):
        return tree.value
    if isinstance(tree, Name):
        if tree.name not in tensors:
            known = ", ".join(tensors) or "none"
            raise InputError(f"Unknown name {quoted(tree.name)}; the leaf tensors are: {known}.")
        return tensors[tree.name]
    args = tuple(evaluate(c, tensors, steps) for c in children(tree))
    text = _source(tree)
    if isinstance(tree, BinOp):
        out = _binary(tree.op, args[0], args[1], text)
    elif isinstance(tree, Neg):
        out = -args[0]
    elif isinstance(tree, Call):
        out = _call(tree.func, args[0], tree.dim, text)
    elif isinstance(tree, Detach):
        out = _tensor_only(args[0], text).detach()
    elif isinstance(tree, Transpose):
        t = _tensor_only(args[0], text)
        if t.dim() != 2:
            raise InputError(f"{quoted(text)}: .T needs a 2-D tensor; this one has shape {_shape(t)}.")
        out = t.T
    else:
        out = _index(args[0], tree.items, text)
    _check_result(out, text)
    if steps is not None and isinstance(out, torch.Tensor):
        steps.append(Step(tree, text, args, out))
    return out


def _tensor_only(a, text: str) -> torch.Tensor:
    if not isinstance(a, torch.Tensor):
        raise InputError(f"{quoted(text)} needs a tensor, not a number.")
    return a
