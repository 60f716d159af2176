"""The Shape lab's grammar: tensor declarations and a Python expression over them, parsed, never eval'd.

The expression is read by demos.expressions (Python's own parser) under GRAMMAR: numbers, text (einsum's
equation), None, True, False, ..., names, names after a dot, calls with keyword arguments, indexing and slices,
tuples and lists, + - * / @, unary - and one comparison; Python's precedence. The tree it gives is the lab's own
(Const, Name, Attr, Call, Index, Slice, BinOp, Neg, Seq), which demos.tensors.shapes runs on meta tensors.

Declarations: 'x: 32, 3, 64, 64; i: 2, 3 long' (name, sizes, an optional dtype).
"""

import ast
import math
import re
from dataclasses import dataclass

import torch

from demos import expressions
from demos.errors import InputError, quoted
from demos.expressions import Grammar, check_brackets

TENSORS_FIELD = "Tensors"
EXPR_FIELD = "Expression"
MAX_TEXT = 300
MAX_TENSORS = 8
MAX_RANK = 8
MAX_SIZE = 2**40  # one dim: meta tensors cost no memory, so sizes reach the billions
MAX_NUMEL = 2**59  # float64 storage of 2**63 bytes overflows
MAX_INT = 2**40
MAX_FLOAT = 1e38
MAX_NODES = 120
MAX_DEPTH = 16
DTYPES = {"float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16,
          "bfloat16": torch.bfloat16, "float64": torch.float64, "double": torch.float64, "int64": torch.int64,
          "long": torch.int64, "int32": torch.int32, "int": torch.int32, "int16": torch.int16, "int8": torch.int8,
          "uint8": torch.uint8, "bool": torch.bool}
RESERVED = {"torch", "nn", "F", "None", "True", "False"}

# ---- the syntax tree ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Const:
    value: object  # int, float, str, None, bool, Ellipsis


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Attr:
    obj: object
    name: str


@dataclass(frozen=True)
class Call:
    func: object
    args: tuple
    kwargs: tuple  # (name, node) pairs


@dataclass(frozen=True)
class Index:
    obj: object
    items: tuple


@dataclass(frozen=True)
class Slice:
    start: object
    stop: object
    step: object


@dataclass(frozen=True)
class BinOp:
    op: str
    left: object
    right: object


@dataclass(frozen=True)
class Neg:
    operand: object


@dataclass(frozen=True)
class Seq:
    items: tuple
    brackets: str  # "()" or "[]"


# ---- reading the expression: what the lab admits -----------------------------------------------------------------

# Keyword arguments the lab's calls take (device= is admitted so that the engine can say why it refuses it)
KWARGS = (
    "dim", "keepdim", "dtype", "memory_format", "start_dim", "end_dim", "stride", "padding", "dilation", "groups",
    "bias", "output_padding", "batch_first", "kernel_size", "num_heads", "embed_dim", "p", "ceil_mode",
    "elementwise_affine", "eps", "momentum", "affine", "padding_idx", "correction", "unbiased", "index", "value",
    "src", "mask", "sizes", "unflattened_size", "in_features", "out_features", "in_channels", "out_channels",
    "num_embeddings", "embedding_dim", "normalized_shape", "num_features", "output_size", "count_include_pad",
    "need_weights", "kdim", "vdim", "dropout", "training", "start", "end", "step", "split_size_or_sections",
    "chunks", "dim0", "dim1", "source", "destination", "input", "other", "approximate", "weight", "device",
)
# Names after a dot and bare names are any public ones: the engine resolves each against the object it is read
# from (a tensor, torch, nn, F) in fixed tables, and names an unknown one with the closest it knows.
GRAMMAR = Grammar(
    example="x.flatten(1) @ w",
    nodes=frozenset({ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Slice, ast.BinOp,
                     ast.UnaryOp, ast.Compare, ast.Tuple, ast.List}),
    operators=frozenset({ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.USub, ast.Eq, ast.NotEq, ast.Lt,
                         ast.LtE, ast.Gt, ast.GtE}),
    literals=frozenset({int, float, str, bool, type(None), type(Ellipsis)}),
    keywords=KWARGS, field=EXPR_FIELD, max_chars=MAX_TEXT, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, max_int=MAX_INT,
    max_float=MAX_FLOAT,
)


def parse_expression(text: object):
    """The expression as this lab's tree, read by demos.expressions under GRAMMAR (never eval)."""
    read = expressions.read(text, GRAMMAR)
    return _tree(read.tree)


def _tree(node: ast.expr):
    """The admitted Python tree as the lab's tree (GRAMMAR has already refused every other kind)."""
    if isinstance(node, ast.Constant):
        return Const(node.value)
    if isinstance(node, ast.Name):
        return Name(node.id)
    if isinstance(node, ast.Attribute):
        return Attr(_tree(node.value), node.attr)
    if isinstance(node, ast.Call):
        return Call(_tree(node.func), tuple(_tree(a) for a in node.args),
                    tuple((k.arg, _tree(k.value)) for k in node.keywords))
    if isinstance(node, ast.Subscript):
        return Index(_tree(node.value), tuple(_tree(i) for i in expressions.index_items(node)))
    if isinstance(node, ast.Slice):
        return Slice(*(None if p is None else _tree(p) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.BinOp):
        return BinOp(expressions.symbol(node.op), _tree(node.left), _tree(node.right))
    if isinstance(node, ast.Compare):  # one comparison: GRAMMAR refuses chains
        return BinOp(expressions.symbol(node.ops[0]), _tree(node.left), _tree(node.comparators[0]))
    if isinstance(node, ast.UnaryOp):  # '-', the only one admitted
        return Neg(_tree(node.operand))
    return Seq(tuple(_tree(i) for i in node.elts), "()" if isinstance(node, ast.Tuple) else "[]")


# ---- declarations ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decl:
    name: str
    shape: tuple[int, ...]
    dtype: str  # a key of DTYPES, canonical ("float32", "int64", ...)


def parse_tensors(text: object) -> tuple[Decl, ...]:
    """'x: 32, 3, 64, 64; i: 2, 3 long' -> declarations (rank up to 8, sizes up to 2**40, dtype optional)."""
    if not isinstance(text, str):
        raise InputError(f"{TENSORS_FIELD}: expected text, got a {type(text).__name__}.")
    if len(text) > MAX_TEXT:
        raise InputError(f"{TENSORS_FIELD}: at most {MAX_TEXT} characters; this has {len(text)}.")
    entries = [e.strip() for e in re.split(r"[;\n]", text) if e.strip()]
    if len(entries) > MAX_TENSORS:
        raise InputError(f"{TENSORS_FIELD}: at most {MAX_TENSORS} tensors; this declares {len(entries)}.")
    decls = [_decl(e) for e in entries]
    names = [d.name for d in decls]
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"{TENSORS_FIELD}: {quoted(name)} is declared twice.")
    return tuple(decls)


def _decl(entry: str) -> Decl:
    m = re.fullmatch(r"([A-Za-z_]\w*)\s*:\s*(.*?)(?:\s+([a-z]\w*))?", entry)
    if not m:
        raise InputError(f"{TENSORS_FIELD}: {quoted(entry)} is not a declaration; write name: sizes [dtype], as in "
                         "x: 32, 3, 64, 64.")
    name, sizes, dtype = m.groups()
    where = f"{TENSORS_FIELD}, {quoted(name)}"
    if name in RESERVED:
        raise InputError(f"{where}: the name is reserved; choose another.")
    if len(name) > 16:
        raise InputError(f"{where}: names have at most 16 characters.")
    if dtype is not None and dtype not in DTYPES:
        raise InputError(f"{where}: {quoted(dtype)} is not a dtype here; use one of {', '.join(DTYPES)}.")
    check_brackets(sizes, where)
    body = sizes.strip()
    if body[:1] in "([" and body[-1:] in ")]":
        body = body[1:-1]
    parts = [p for p in re.split(r"[,\s]+", body) if p]
    if len(parts) > MAX_RANK:
        raise InputError(f"{where}: at most {MAX_RANK} dimensions; this has {len(parts)}.")
    shape = tuple(_size(p, i, where) for i, p in enumerate(parts))
    if math.prod(shape) > MAX_NUMEL:
        raise InputError(f"{where}: {math.prod(shape):.3g} elements is too large to describe; at most 2**59.")
    return Decl(name, shape, str(DTYPES[dtype or "float32"]).removeprefix("torch."))


def _size(part: str, i: int, where: str) -> int:
    if not re.fullmatch(r"\d+", part):
        raise InputError(f"{where}: dim {i} ({quoted(part)}) is not a whole number ≥ 0.")
    if len(part) > 13 or int(part) > MAX_SIZE:
        raise InputError(f"{where}: dim {i} ({quoted(part)}) is too large to describe; sizes are at most 2**40.")
    return int(part)


# ---- back to text ------------------------------------------------------------------------------------------------

_PREC = {"==": 0, "!=": 0, "<": 0, "<=": 0, ">": 0, ">=": 0, "+": 1, "-": 1, "*": 2, "/": 2, "@": 2}


def _prec(node) -> int:
    if isinstance(node, BinOp):
        return _PREC[node.op]
    return 3 if isinstance(node, Neg) else 9


def to_source(node) -> str:
    """The tree as Python text (canonical spacing); the same text runs as torch code."""
    def wrap(child, lowest, right=False):
        s = to_source(child)
        p = _prec(child)
        return f"({s})" if p < lowest or (right and p == lowest) else s

    if isinstance(node, Const):
        return "..." if node.value is Ellipsis else repr(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Attr):
        return f"{wrap(node.obj, 9)}.{node.name}"
    if isinstance(node, Call):
        parts = [to_source(a) for a in node.args] + [f"{k}={to_source(v)}" for k, v in node.kwargs]
        return f"{wrap(node.func, 9)}({', '.join(parts)})"
    if isinstance(node, Index):
        return f"{wrap(node.obj, 9)}[{', '.join(to_source(i) for i in node.items)}]"
    if isinstance(node, Slice):
        text = ":".join("" if v is None else to_source(v) for v in (node.start, node.stop))
        return text + (f":{to_source(node.step)}" if node.step is not None else "")
    if isinstance(node, BinOp):
        p = _PREC[node.op]
        return f"{wrap(node.left, p)} {node.op} {wrap(node.right, p, right=True)}"
    if isinstance(node, Neg):
        return "-" + wrap(node.operand, 3)
    if isinstance(node, Seq):
        inner = ", ".join(to_source(i) for i in node.items)
        if node.brackets == "()" and len(node.items) == 1:
            inner += ","
        return node.brackets[0] + inner + node.brackets[1]
    raise TypeError(node)
