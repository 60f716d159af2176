"""One reader for the expressions visitors type: Python's own parser, then a walk that admits only what a page allows.

`read(text, grammar)` checks the text (type, length, characters, brackets), parses it with
`ast.parse(text, mode="eval")` and walks the tree with `Admit`, an `ast.NodeVisitor` that refuses every node kind,
operator, literal and name the page's `Grammar` does not list. Each refusal is one sentence that starts with the
field's label and points at the node: its text (quoted) and its position. The tree is only read: nothing is
compiled to code, evaluated or executed. Each page turns the admitted tree into its own and runs that with torch.
"""

import ast
import math
import re
import unicodedata
import warnings
from dataclasses import dataclass

from demos.errors import InputError, quoted

SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**", ast.FloorDiv: "//",
    ast.Mod: "%", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
    ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<",
    ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}
_OPERATOR_NAMES = {
    ast.Add: "addition", ast.Sub: "subtraction", ast.Mult: "multiplication", ast.Div: "division",
    ast.MatMult: "matrix multiplication", ast.Pow: "power", ast.FloorDiv: "floor division", ast.Mod: "remainder",
    ast.LShift: "shift", ast.RShift: "shift", ast.BitOr: "bitwise or", ast.BitXor: "bitwise xor",
    ast.BitAnd: "bitwise and", ast.USub: "negation", ast.UAdd: "unary plus", ast.Invert: "bitwise not",
    ast.Not: "logical not", ast.Eq: "comparison", ast.NotEq: "comparison", ast.Lt: "comparison",
    ast.LtE: "comparison", ast.Gt: "comparison", ast.GtE: "comparison", ast.Is: "identity test",
    ast.IsNot: "identity test", ast.In: "membership test", ast.NotIn: "membership test",
}
_KINDS = {
    ast.Lambda: "a lambda", ast.IfExp: "an if-else expression", ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension",
    ast.NamedExpr: "an assignment (:=)", ast.JoinedStr: "an f-string", ast.FormattedValue: "an f-string",
    ast.Starred: "unpacking with *", ast.Dict: "a dict", ast.Set: "a set", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield", ast.BoolOp: "and/or logic", ast.Compare: "a comparison", ast.List: "a list",
    ast.Tuple: "a tuple", ast.Call: "a call", ast.Attribute: "a name after a dot", ast.Subscript: "indexing",
    ast.Slice: "a slice", ast.BinOp: "arithmetic", ast.UnaryOp: "an operator in front of a value",
    ast.Name: "a name", ast.Constant: "a literal",
}
_LITERALS = {str: "text", bytes: "bytes", complex: "a complex number", bool: "a truth value",
             type(None): "the value None", type(Ellipsis): "an ellipsis", int: "a whole number", float: "a number"}
_OPEN = {"(": ")", "[": "]", "{": "}"}
_KEPT_CONTROLS = "\t\n\r"  # read as spaces, one character each, so positions stay the visitor's
_WORD = re.compile(r"[\w.]+|\*\*|//|==|!=|<=|>=|:=|->|\S")


@dataclass(frozen=True)
class Grammar:
    """What one page's expression field admits; everything else is refused with a sentence.

    A name set left as None admits any public name there (no leading underscore): the page resolves it against
    fixed tables of its own and names what it does not know.
    """

    example: str  # an expression suggested when the field is empty
    nodes: frozenset  # the ast expression kinds admitted (ast.BinOp, ast.Call, ...)
    operators: frozenset  # the ast operator kinds admitted (ast.Add, ast.USub, ast.Lt, ...)
    literals: frozenset  # the Python types a literal may have (int, float, str, ...)
    functions: tuple[str, ...] | None = None  # names that may be called bare: relu(x)
    methods: tuple[str, ...] | None = None  # names that may be called after a dot: x.detach()
    attributes: tuple[str, ...] | None = None  # names that may be read after a dot: x.T
    keywords: tuple[str, ...] | None = None  # keyword-argument names: sum(x, dim=1)
    field: str = "Expression"  # the field's label: every sentence starts with it
    max_chars: int = 200
    max_nodes: int = 80  # names and operations (literals, slices and index tuples are free)
    max_depth: int = 24  # brackets inside brackets
    max_int: int = 10**6
    max_float: float = 1e6


@dataclass(frozen=True)
class Read:
    """An admitted tree and the text it was parsed from, so a page can point at a node in a sentence."""

    tree: ast.expr
    text: str  # what ast parsed: the visitor's text, tabs and newlines as spaces, leading blanks removed
    lead: int  # how many leading blanks were removed
    field: str

    def position(self, node: ast.AST) -> int:
        """The node's position in the visitor's text, counted from 1."""
        return self.lead + node.col_offset + 1

    def source(self, node: ast.AST) -> str:
        return self.text[node.col_offset:node.end_col_offset]

    def refuse(self, node: ast.AST, predicate: str) -> InputError:
        """'Expression: `x.sum()` at position 1 <predicate>.'"""
        return InputError(f"{self.field}: {quoted(self.source(node))} at position {self.position(node)} {predicate}.")


def read(text: object, grammar: Grammar) -> Read:
    """Parse the text as one Python expression and admit it against the grammar, or raise InputError."""
    field = grammar.field
    if not isinstance(text, str):
        raise InputError(f"{field}: expected text, got a {type(text).__name__}.")
    if len(text) > grammar.max_chars:
        raise InputError(f"{field}: too long, at most {grammar.max_chars} characters; this has {len(text)}.")
    if not text.strip():
        raise InputError(f"{field}: empty; type an expression such as {grammar.example}.")
    check_characters(text, field)
    depth = check_brackets(text, field)
    if depth > grammar.max_depth:
        raise InputError(f"{field}: it nests more than {grammar.max_depth} levels deep in brackets and calls.")
    body = re.sub(f"[{_KEPT_CONTROLS}]", " ", text)
    lead = len(body) - len(body.lstrip())
    body = body.strip()
    tree = _parse(body, lead, field)
    source = Read(tree, body, lead, field)
    if count_nodes(tree) > grammar.max_nodes:
        raise InputError(f"{field}: more than {grammar.max_nodes} names and operations; shorten it.")
    try:
        Admit(grammar, source).visit(tree)
    except RecursionError:  # only a grammar with a very large max_nodes lets a tree this deep through
        raise InputError(f"{field}: too complex for the reader; shorten it.") from None
    return source


def check_characters(text: str, field: str) -> None:
    """Only plain ASCII: a look-alike letter (Cyrillic а, fullwidth ｘ) is named, never folded into another name;
    '#' would start a comment that hides the rest and '\\' an escape or a line continuation."""
    for pos, ch in enumerate(text):
        if ch.isascii() and (ch.isprintable() or ch in _KEPT_CONTROLS) and ch not in "#\\":
            continue
        # the Unicode name as a code span: it is data, and some repeat a word (TAI THAM THAM DIGIT ZERO)
        name = f"`{unicodedata.name(ch)}`" if unicodedata.name(ch, "") else (
            "a control character" if unicodedata.category(ch) == "Cc" else "an unnamed character")
        shown = quoted(ch) if ch.isprintable() else f"U+{ord(ch):04X}"  # an invisible one by its code point
        raise InputError(f"{field}: the character {shown} ({name}) at position {pos + 1} is not part of the "
                         "language here.")


def check_brackets(text: str, field: str) -> int:
    """Unbalanced brackets named with their position (the clearest sentence for them); returns the deepest nesting."""
    opened, deepest = [], 0
    for pos, ch in enumerate(text):
        if ch in _OPEN:
            opened.append((ch, pos))
            deepest = max(deepest, len(opened))
        elif ch in ")]}":
            if not opened:
                raise InputError(f"{field}: the bracket {quoted(ch)} at position {pos + 1} was never opened.")
            start, at = opened.pop()
            if _OPEN[start] != ch:
                raise InputError(f"{field}: the bracket {quoted(start)} at position {at + 1} is closed by "
                                 f"{quoted(ch)} at position {pos + 1}.")
    if opened:
        ch, pos = opened[-1]
        raise InputError(f"{field}: the bracket {quoted(ch)} at position {pos + 1} is never closed.")
    return deepest


def _parse(body: str, lead: int, field: str) -> ast.expr:
    """ast.parse in eval mode (a tree only, nothing compiled to run); its SyntaxError becomes one sentence."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # '1if x' warns (an invalid literal): refused like any syntax error
            return ast.parse(body, mode="eval").body
    except SyntaxError as err:
        raise _syntax(err, body, lead, field) from None
    except (ValueError, RecursionError, MemoryError, OverflowError):
        raise InputError(f"{field}: too complex for the reader; shorten it.") from None


def _syntax(err: SyntaxError, body: str, lead: int, field: str) -> InputError:
    start, end = (err.offset or 0) - 1, (err.end_offset or 0) - 1
    if err.lineno != 1 or not 0 <= start < len(body):
        return InputError(f"{field}: it ends too early; an operand is missing.")
    where = f"at position {lead + start + 1}"
    span = body[start:end] if end > start and (err.end_lineno or 1) == 1 else _WORD.search(body, start).group()
    message = err.msg or ""
    if message == "invalid syntax":
        return InputError(f"{field}: unexpected {quoted(span)} {where}.")
    if "forgot a comma" in message:
        return InputError(f"{field}: a comma or an operator is missing in {quoted(span)} {where}.")
    if "follows keyword argument" in message:
        return InputError(f"{field}: the argument {quoted(span)} {where} follows a keyword argument; put positional "
                          "arguments first.")
    if "unterminated string" in message:
        return InputError(f"{field}: the text {quoted(body[start:])} {where} has no closing quote.")
    if "literal" in message or "leading zeros" in message:
        word = re.search(r"[\w.]*$", body[:start]).group() + _WORD.search(body, start).group()
        return InputError(f"{field}: {quoted(word)} {where} is not a number Python can read.")
    return InputError(f"{field}: {quoted(span)} {where} is not an expression this field reads.")


def count_nodes(tree: ast.AST) -> int:
    """Names and operations; literals, slices and the tuple inside [ ] are free (they cost no torch op)."""
    nodes = list(ast.walk(tree))  # iterative: no recursion before the count is known to be small
    index = {id(n.slice) for n in nodes if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple)}
    return sum(1 for n in nodes if isinstance(n, ast.expr) and not isinstance(n, (ast.Constant, ast.Slice))
               and id(n) not in index)


def symbol(op: ast.AST) -> str:
    """An operator node as typed: ast.Add -> '+'."""
    return SYMBOLS[type(op)]


class Admit(ast.NodeVisitor):
    """Walks a parsed tree and raises InputError at the first node, operator, literal or name not admitted."""

    def __init__(self, grammar: Grammar, source: Read):
        self.grammar, self.source = grammar, source

    def visit(self, node: ast.AST):
        if isinstance(node, ast.expr) and type(node) not in self.grammar.nodes:
            kind = _LITERALS.get(type(node.value)) if isinstance(node, ast.Constant) else None
            raise self.source.refuse(node, f"is {kind or _KINDS.get(type(node), type(node).__name__)}, which "
                                           "this field does not take")
        return super().visit(node)

    # ---- literals and names

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if type(value) not in self.grammar.literals:
            raise self.source.refuse(node, f"is {_LITERALS.get(type(value), 'a literal')}, which this field does "
                                           "not take")
        if type(value) is int and abs(value) > self.grammar.max_int:
            raise self._too_large(node, f"whole numbers here are at most {_int_text(self.grammar.max_int)}")
        if type(value) is float and not (math.isfinite(value) and abs(value) <= self.grammar.max_float):
            raise self._too_large(node, f"numbers here are at most {_float_text(self.grammar.max_float)}")

    def _too_large(self, node: ast.Constant, limit: str) -> InputError:
        return InputError(f"{self.grammar.field}: the number {quoted(self.source.source(node))} at position "
                          f"{self.source.position(node)} is too large; {limit}.")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            raise self.source.refuse(node, "is one of Python's own names (it starts with __), which this field "
                                           "does not take")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)
        self._after_dot(node, self.grammar.attributes, called=False)

    def _after_dot(self, node: ast.Attribute, admitted: tuple | None, called: bool) -> None:
        name = node.attr
        shown = "." + name + ("()" if called else "")
        if name.startswith("_"):
            raise self._dot_error(node, shown, "is private to Python (it starts with _), which this field does "
                                               "not take")
        if admitted is not None and name not in admitted:
            offered = [f".{m}()" for m in sorted(self.grammar.methods or ())]
            offered += [f".{a}" for a in sorted(self.grammar.attributes or ())]
            only = f"only {_listed(offered)} are" if offered else "no name after a dot is"
            raise self._dot_error(node, shown, f"is not supported here; {only}")

    def _dot_error(self, node: ast.Attribute, shown: str, predicate: str) -> InputError:
        position = self.source.position(node) + self.source.source(node).rfind(".")
        return InputError(f"{self.grammar.field}: {quoted(shown)} at position {position} {predicate}.")

    # ---- calls

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and ast.Attribute in self.grammar.nodes:
            self.visit(func.value)
            self._after_dot(func, self.grammar.methods, called=True)
        else:
            functions = self.grammar.functions
            if isinstance(func, ast.Name) and functions is not None and func.id not in functions:
                raise InputError(f"{self.grammar.field}: unknown function {quoted(func.id)} at position "
                                 f"{self.source.position(func)}; the functions are {', '.join(functions)}.")
            self.visit(func)
        for arg in node.args:
            self.visit(arg)
        seen = set()
        for keyword in node.keywords:
            self._keyword(keyword, seen)
            self.visit(keyword.value)

    def _keyword(self, keyword: ast.keyword, seen: set) -> None:
        source, admitted = self.source, self.grammar.keywords
        if keyword.arg is None:
            raise source.refuse(keyword, "unpacks a dict with **, which this field does not take")
        where = f"the keyword {quoted(keyword.arg)} at position {source.position(keyword)}"
        if keyword.arg in seen:
            raise InputError(f"{self.grammar.field}: {where} is given twice.")
        seen.add(keyword.arg)
        if keyword.arg.startswith("_") or admitted is not None and keyword.arg not in admitted:
            names = ", ".join(f"{k}=" for k in sorted(admitted or ()))
            offer = f"; the keywords here are {names}" if admitted and len(admitted) <= 8 else ""
            raise InputError(f"{self.grammar.field}: {where} is not one this field takes{offer}.")

    # ---- operators

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.visit(node.left)
        self._operator(node.op, self.source.text.find(symbol(node.op), node.left.end_col_offset))
        self.visit(node.right)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        self._operator(node.op, node.col_offset)
        self.visit(node.operand)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) > 1:
            raise self.source.refuse(node, "chains comparisons, which this field does not take; compare two "
                                           "values at a time")
        self.visit(node.left)
        self._operator(node.ops[0], self.source.text.find(symbol(node.ops[0]).split()[0], node.left.end_col_offset))
        self.visit(node.comparators[0])

    def _operator(self, op: ast.AST, offset: int) -> None:
        if type(op) in self.grammar.operators:
            return
        ops = self.grammar.operators
        binary = " ".join(SYMBOLS[o] for o in SYMBOLS if o in ops and not issubclass(o, ast.unaryop))
        unary = " and - in front of a value" if ast.USub in ops else ""
        raise InputError(f"{self.grammar.field}: the operator {quoted(symbol(op))} ({_OPERATOR_NAMES[type(op)]}) "
                         f"at position {self.source.lead + offset + 1} is not supported; use {binary}{unary}.")

    # ---- indexing

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.visit(node.value)
        for item in index_items(node):  # a tuple inside [ ] is the index's own syntax, not a tuple value
            self.visit(item)


def index_items(node: ast.Subscript) -> list[ast.expr]:
    """The entries of x[...]: x[0, 1:3] has two, x[0] one."""
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def _listed(items: list[str]) -> str:
    """['a', 'b', 'c'] -> 'a, b and c'."""
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def _int_text(n: int) -> str:
    """2**40 -> '2**40 (1,099,511,627,776)'; 10**6 -> '1,000,000'."""
    power = n.bit_length() - 1
    return f"2**{power} ({n:,})" if n > 2**20 and n == 2**power else f"{n:,}"


def _float_text(x: float) -> str:
    """1e38 -> '1e38'."""
    return re.sub(r"e\+0*", "e", f"{x:.0e}")
