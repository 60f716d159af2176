"""The Shape lab's grammar: tensor declarations and a Python-like expression over them, parsed, never eval'd.

Expression grammar (Python's precedence):
    compare := arith [('==' | '!=' | '<' | '<=' | '>' | '>=') arith]
    arith   := term (('+' | '-') term)*
    term    := unary (('*' | '/' | '@') unary)*
    unary   := '-' unary | postfix
    postfix := atom ('.' NAME | '(' args ')' | '[' items ']')*
    atom    := NUMBER | STRING | NAME | '...' | '(' expr [',' ...] ')' | '[' expr, ... ']'
    args    := [NAME '='] expr (',' [NAME '='] expr)*
    items   := item (',' item)*;  item := expr | [expr] ':' [expr] [':' [expr]]

Declarations: 'x: 32, 3, 64, 64; i: 2, 3 long' (name, sizes, an optional dtype).
"""

import math
import re
from dataclasses import dataclass

import torch

from demos.errors import InputError, quoted

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
KEYWORDS = {"None": None, "True": True, "False": False}
RESERVED = {"torch", "nn", "F", *KEYWORDS}

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)"
    r"|(?P<str>'[^'\n]*'|\"[^\"\n]*\")|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>\.\.\.|==|!=|<=|>=|[-+*/@()\[\],:.=<>]))")
_CLOSE = {"(": ")", "[": "]"}


@dataclass(frozen=True)
class Token:
    kind: str  # num, str, name, op, end
    text: str
    pos: int


def check_brackets(text: str, field: str) -> None:
    """Unbalanced brackets are named with their position before any parsing (the clearest sentence for them)."""
    opened = []
    for pos, ch in enumerate(text):
        if ch in _CLOSE:
            opened.append((ch, pos))
        elif ch in ")]":
            if not opened:
                raise InputError(f"{field}: the bracket {quoted(ch)} at position {pos + 1} was never opened.")
            start, at = opened.pop()
            if _CLOSE[start] != ch:
                raise InputError(f"{field}: the bracket {quoted(start)} at position {at + 1} is closed by "
                                 f"{quoted(ch)} at position {pos + 1}.")
    if opened:
        ch, pos = opened[-1]
        raise InputError(f"{field}: the bracket {quoted(ch)} at position {pos + 1} is never closed.")


def tokenize(text: str) -> list[Token]:
    tokens, pos = [], 0
    while text[pos:].strip():
        m = _TOKEN.match(text, pos)
        if not m:
            start = len(text) - len(text[pos:].lstrip())
            raise InputError(f"{EXPR_FIELD}: the character {quoted(text[start])} at position {start + 1} is not "
                             "part of the language here (names, numbers, + - * / @, comparisons, brackets).")
        kind = m.lastgroup
        tokens.append(Token(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


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


class Parser:
    """Recursive descent with limits on the number of nodes and the nesting depth."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.nodes = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self, text: str | None = None) -> Token:
        tok = self.peek()
        if text is not None and tok.text != text:
            found = quoted(tok.text) if tok.kind != "end" else "the end"
            raise InputError(f"{EXPR_FIELD}: expected {quoted(text)} at position {tok.pos + 1}, found {found}.")
        self.i += 1
        return tok

    def node(self, value):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InputError(f"{EXPR_FIELD}: more than {MAX_NODES} names, numbers and operations; shorten it.")
        return value

    def nest(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InputError(f"{EXPR_FIELD}: brackets and calls nest more than {MAX_DEPTH} levels deep.")

    def parse(self):
        tree = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            raise InputError(f"{EXPR_FIELD}: unexpected {quoted(tok.text)} at position {tok.pos + 1}.")
        return tree

    def expr(self):
        self.nest()
        left = self.arith()
        if self.peek().text in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take().text
            left = self.node(BinOp(op, left, self.arith()))
        self.depth -= 1
        return left

    def arith(self):
        left = self.term()
        while self.peek().text in ("+", "-"):
            op = self.take().text
            left = self.node(BinOp(op, left, self.term()))
        return left

    def term(self):
        left = self.unary()
        while self.peek().text in ("*", "/", "@"):
            op = self.take().text
            left = self.node(BinOp(op, left, self.unary()))
        return left

    def unary(self):
        if self.peek().text == "-":
            self.take()
            self.nest()
            operand = self.unary()
            self.depth -= 1
            return self.node(Neg(operand))
        return self.postfix()

    def postfix(self):
        value = self.atom()
        while self.peek().text in (".", "(", "["):
            tok = self.take()
            if tok.text == ".":
                name = self.take()
                if name.kind != "name":
                    raise InputError(f"{EXPR_FIELD}: a name must follow the '.' at position {tok.pos + 1}.")
                value = self.node(Attr(value, name.text))
            elif tok.text == "(":
                self.nest()
                args, kwargs = self.arguments()
                self.depth -= 1
                value = self.node(Call(value, args, kwargs))
            else:
                self.nest()
                value = self.node(Index(value, self.items()))
                self.depth -= 1
        return value

    def arguments(self) -> tuple[tuple, tuple]:
        args, kwargs = [], []
        while self.peek().text != ")":
            if self.peek().kind == "name" and self.peek(1).text == "=":
                key = self.take().text
                self.take("=")
                if key in dict(kwargs):
                    raise InputError(f"{EXPR_FIELD}: the keyword {quoted(key)} is given twice.")
                kwargs.append((key, self.expr()))
            elif kwargs:
                raise InputError(f"{EXPR_FIELD}: a positional argument follows a keyword one at position "
                                 f"{self.peek().pos + 1}.")
            else:
                args.append(self.expr())
            if self.peek().text != ")":
                self.take(",")
        self.take(")")
        return tuple(args), tuple(kwargs)

    def items(self) -> tuple:
        items = [self.item()]
        while self.peek().text == ",":
            self.take()
            if self.peek().text == "]":
                break
            items.append(self.item())
        self.take("]")
        return tuple(items)

    def item(self):
        parts, current = [], None
        if self.peek().text not in (":",):
            current = self.expr()
        if self.peek().text != ":":
            return current
        while self.peek().text == ":":
            self.take()
            parts.append(current)
            current = None if self.peek().text in (":", ",", "]") else self.expr()
        parts.append(current)
        if len(parts) > 3:
            raise InputError(f"{EXPR_FIELD}: a slice has at most two colons (start:stop:step).")
        return self.node(Slice(*(parts + [None] * (3 - len(parts)))))

    def atom(self):
        tok = self.take()
        if tok.kind == "num":
            return self.node(Const(number(tok.text)))
        if tok.kind == "str":
            return self.node(Const(tok.text[1:-1]))
        if tok.text == "...":
            return self.node(Const(Ellipsis))
        if tok.kind == "name":
            return self.node(Const(KEYWORDS[tok.text]) if tok.text in KEYWORDS else Name(tok.text))
        if tok.text in ("(", "["):
            return self.sequence(tok.text)
        if tok.kind == "end":
            raise InputError(f"{EXPR_FIELD}: it ends too early; an operand is missing.")
        raise InputError(f"{EXPR_FIELD}: unexpected {quoted(tok.text)} at position {tok.pos + 1}.")

    def sequence(self, opening: str):
        closing = _CLOSE[opening]
        self.nest()
        items, trailing = [], False
        while self.peek().text != closing:
            items.append(self.expr())
            trailing = False
            if self.peek().text != closing:
                self.take(",")
                trailing = True
        self.take(closing)
        self.depth -= 1
        if opening == "(" and len(items) == 1 and not trailing:
            return items[0]
        return self.node(Seq(tuple(items), opening + closing))


def number(text: str) -> int | float:
    """An integer or float literal within the lab's bounds; 1e309 and 10**20-sized ints are refused by name."""
    if re.fullmatch(r"\d+", text):
        if len(text) > 13 or int(text) > MAX_INT:
            raise InputError(f"{EXPR_FIELD}: the number {quoted(text)} is too large; whole numbers here are at most "
                             f"2**40 ({MAX_INT:,}).")
        return int(text)
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_FLOAT:
        raise InputError(f"{EXPR_FIELD}: the number {quoted(text)} is too large; numbers here are at most 1e38.")
    return value


def parse_expression(text: object):
    if not isinstance(text, str):
        raise InputError(f"{EXPR_FIELD}: expected text, got a {type(text).__name__}.")
    if len(text) > MAX_TEXT:
        raise InputError(f"{EXPR_FIELD}: at most {MAX_TEXT} characters; this has {len(text)}.")
    if not text.strip():
        raise InputError(f"{EXPR_FIELD}: empty; type an expression such as x.flatten(1) @ w.")
    check_brackets(text, EXPR_FIELD)
    return Parser(text).parse()


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
