"""The one expression reader (demos.expressions) under both pages' grammars: what it refuses, and how.

Both the Autograd page and the Shape lab read their Expression field with `expressions.read`; each page's GRAMMAR
says what it admits. Hostile text gets one sentence that starts with the field's label and points at the node.
"""

import ast
import dataclasses
import pathlib

import pytest

from demos import expressions
from demos.autograd import expr as autograd
from demos.errors import InputError
from demos.expressions import Grammar, read
from demos.tensors import shape_grammar as lab
from tests.messages import check_message

PAGES = {"autograd": autograd.parse_expression, "shape lab": lab.parse_expression}
GRAMMARS = {"autograd": autograd.GRAMMAR, "shape lab": lab.GRAMMAR}

# (text, words the sentence holds): refused by both pages, whatever they admit
HOSTILE = [
    ("9" * 150, "is too large"),
    ("x * 1e999", "the number `1e999` at position 5 is too large"),
    ("(" * 30 + "x" + ")" * 30, "nests more than"),
    ("relu(" * 30 + "x" + ")" * 30, "nests more than"),
    ("\u0445 + 1", "the character `\u0445` (`CYRILLIC SMALL LETTER HA`) at position 1"),
    ("x + \uff59", "(`FULLWIDTH LATIN SMALL LETTER Y`) at position 5"),
    ("x\u202e + 1", "U+202E (`RIGHT-TO-LEFT OVERRIDE`) at position 2"),
    ("x\x00", "U+0000 (a control character) at position 2"),
    ("x # a comment", "the character `#` (`NUMBER SIGN`) at position 3"),
    ("x \\", "the character `\\` (`REVERSE SOLIDUS`) at position 3"),
    ("import os", "unexpected `import` at position 1"),
    ("yield x", "unexpected `yield` at position 1"),
    ("lambda: x", "`lambda: x` at position 1 is a lambda"),
    ("[t for t in x]", "is a comprehension"),
    ("(x := 1)", "`x := 1` at position 2 is an assignment (:=)"),
    ("f'{x}'", "is an f-string"),
    ("x if x else x", "is an if-else expression"),
    ("{1: x}", "is a dict"),
    ("{x}", "is a set"),
    ("x and x", "is and/or logic"),
    ("not x", "the operator `not` (logical not) at position 1 is not supported"),
    ("~x", "the operator `~` (bitwise not) at position 1"),
    ("x // 2", "the operator `//` (floor division) at position 3"),
    ("x % 2", "the operator `%` (remainder) at position 3"),
    ("x ^ 2", "the operator `^` (bitwise xor) at position 3"),
    ("x.__class__", "`.__class__` at position 2 is private to Python"),
    ("x.T.__class__.__bases__", "`.__class__` at position 4 is private to Python"),
    ("__import__", "`__import__` at position 1 is one of Python's own names"),
    ("x + __builtins__", "at position 5 is one of Python's own names"),
    ("b'x'", "is bytes"),
    ("2j", "is a complex number"),
    ("1if x else 2", "`1if` at position 1 is not a number Python can read"),
    ("x y", "unexpected `y` at position 3"),
    ("x +", "ends too early"),
    ("(x + 1", "the bracket `(` at position 1 is never closed"),
    ("x[0))", "the bracket `[` at position 2 is closed by `)` at position 4"),
    ("x )", "the bracket `)` at position 3 was never opened"),
    ("'abc", "has no closing quote"),
    ("   ", "empty; type an expression such as"),
]
# the refusals that depend on neither page's lists nor limits: both pages give the very same sentence
SAME = [text for text, words in HOSTILE if not text.startswith(("9", "x * 1e999", "(" * 30, "relu(", "   "))
        and "operator" not in words]


def _message(parse, text: str) -> str:
    with pytest.raises(InputError) as err:
        parse(text)
    return str(err.value)


@pytest.mark.parametrize("page", sorted(PAGES))
@pytest.mark.parametrize(("text", "words"), HOSTILE, ids=[repr(t)[:30] for t, _ in HOSTILE])
def test_hostile_text_is_one_sentence_naming_the_field_and_the_node(page, text, words):
    message = _message(PAGES[page], text)
    assert message.startswith("Expression: ") and words in message, message
    check_message(message, text)
    assert "\n" not in message and message.count(". ") <= 1, message


def test_starred_arguments_and_dict_unpacking_are_refused():
    assert "`*x` at position 6 is unpacking with *" in _message(autograd.parse_expression, "relu(*x)")
    assert "`*s` at position 8 is unpacking with *" in _message(lab.parse_expression, "x.view(*s)")
    assert "`**k` at position 8 unpacks a dict with **" in _message(lab.parse_expression, "x.view(**k)")
    assert "keyword `dim` at position 14 is given twice" in _message(lab.parse_expression, "x.sum(dim=0, dim=1)")


def test_the_position_counts_the_visitors_own_blanks():
    assert "the operator `%` (remainder) at position 6" in _message(autograd.parse_expression, "   x % 2")
    assert "`.__dict__` at position 5" in _message(lab.parse_expression, "\t(x).__dict__")


def test_the_two_pages_readers_differ_only_in_what_they_admit(monkeypatch):
    seen = []
    real = expressions.read
    monkeypatch.setattr(expressions, "read", lambda text, grammar: seen.append(grammar) or real(text, grammar))
    autograd.parse_expression("x + 1")
    lab.parse_expression("x + 1")
    assert seen == [autograd.GRAMMAR, lab.GRAMMAR]  # one reader, two grammars
    admits = {"nodes", "operators", "literals", "functions", "methods", "attributes", "keywords", "example",
              "max_chars", "max_nodes", "max_depth", "max_int", "max_float"}
    differ = {f.name for f in dataclasses.fields(Grammar)
              if getattr(autograd.GRAMMAR, f.name) != getattr(lab.GRAMMAR, f.name)}
    assert differ <= admits and autograd.GRAMMAR.field == lab.GRAMMAR.field == "Expression"
    # what neither admits gets the same sentence from both
    assert len(SAME) >= 25
    for text in SAME:
        assert _message(autograd.parse_expression, text) == _message(lab.parse_expression, text), text
    # and what one admits, the other refuses by its own list
    assert autograd.parse_expression("x ** 2")
    assert "the operator `**` (power) at position 3 is not supported; use + - * / @ == != < <= > >=" in _message(
        lab.parse_expression, "x ** 2")
    assert lab.parse_expression("x < y") and lab.parse_expression("x.view(2, -1)")
    assert "`x < y` at position 1 is a comparison" in _message(autograd.parse_expression, "x < y")
    assert "`.view()` at position 2 is not supported here; only .detach() and .T are" in _message(
        autograd.parse_expression, "x.view(2, -1)")


def test_each_page_declares_its_limits():
    assert "at most 200 characters; this has 201" in _message(autograd.parse_expression, "x" * 201)
    assert "at most 300 characters; this has 301" in _message(lab.parse_expression, "x" * 301)
    assert "more than 80 names and operations" in _message(autograd.parse_expression, "x" + "+x" * 81)
    assert "more than 120 names and operations" in _message(lab.parse_expression, "x" + "+x" * 121)
    assert "whole numbers here are at most 1,000,000" in _message(autograd.parse_expression, "x * 1000001")
    assert "whole numbers here are at most 2**40 (1,099,511,627,776)" in _message(lab.parse_expression,
                                                                                   "x * 1099511627777")
    assert "expected text, got a int" in _message(lab.parse_expression, 3)


def test_index_entries_literals_and_slices_do_not_count_as_operations():
    text = "sum(" + "+".join(["x[0,0,0]"] * 19) + ")"  # 19 x (index + name) + 18 additions + sum and its call
    assert len(text) <= autograd.MAX_EXPR
    assert expressions.count_nodes(ast.parse(text, mode="eval")) == 2 + 19 * 2 + 18
    assert autograd.parse_expression(text)


DEEP = Grammar(example="x", nodes=frozenset({ast.Name, ast.UnaryOp, ast.Attribute}), operators=frozenset({ast.USub}),
               literals=frozenset(), max_chars=300_000, max_nodes=10**6, max_depth=10**6)


@pytest.mark.parametrize("text", ["-" * 100_000 + "x", "x" + ".y" * 100_000])
def test_what_pythons_parser_cannot_hold_is_a_sentence_too(text):
    """ast.parse itself raises MemoryError or RecursionError on these; the reader turns either into InputError."""
    with pytest.raises(InputError, match="too complex for the reader"):
        read(text, DEEP)


def test_nesting_is_refused_before_pythons_parser_runs(monkeypatch):
    monkeypatch.setattr(ast, "parse", lambda *a, **k: pytest.fail("parsed text nested too deep"))
    with pytest.raises(InputError, match="nests more than 24 levels deep"):
        read("(" * 10_000 + "x" + ")" * 10_000, dataclasses.replace(autograd.GRAMMAR, max_chars=30_000))


def test_comparisons_the_lab_takes_one_at_a_time():
    assert "`x < x < x` at position 1 chains comparisons" in _message(lab.parse_expression, "x < x < x")
    assert "the operator `is` (identity test) at position 3" in _message(lab.parse_expression, "x is x")
    assert "the operator `not in` (membership test) at position 3" in _message(lab.parse_expression, "x not in x")
    assert "`x < x` at position 1 is a comparison" in _message(autograd.parse_expression, "x < x")


def test_a_syntax_warning_is_refused_not_printed(recwarn):
    with pytest.raises(InputError, match="not a number Python can read"):
        lab.parse_expression("x[0if 1 else 2]")
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


ROOT = pathlib.Path(__file__).resolve().parents[1]
READERS = ["demos/expressions.py", "demos/autograd/expr.py", "demos/tensors/shape_grammar.py",
           "demos/tensors/shapes.py"]


@pytest.mark.parametrize("path", READERS)
def test_no_reader_runs_visitor_text(path):
    """The text is only parsed to a tree: nothing calls eval, exec or compile, or imports by name."""
    tree = ast.parse((ROOT / path).read_text())
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__"}, path


def test_no_hand_written_tokenizer_is_left():
    import re

    found = [str(p) for p in (ROOT / "demos").rglob("*.py")
             if re.search(r"def tokeni[sz]e|class Token\b", p.read_text())]
    assert not found
