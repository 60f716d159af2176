"""Predict-then-run questions: the expected answer is whatever torch returns when the snippet runs."""

import ast
import functools
import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from demos.errors import InputError
from demos.parsing import format_shape, parse_number, parse_shape

KINDS = ("choice", "shape", "number")


@dataclass(frozen=True)
class Question:
    """One question. `run` is the snippet: its body is shown, its return value is the answer.

    kind "choice": the learner picks one of `choices`; the formatted answer must be one of them.
    kind "shape": the learner types a shape such as (2, 3).
    kind "number": the learner types a number; compared with a relative tolerance of 1e-3.
    """

    key: str
    prompt: str
    run: Callable[[], Any]
    explain: str
    kind: str = "choice"
    choices: tuple[str, ...] = ()
    imports: str = "import torch"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown question kind {self.kind!r}")
        if (self.kind == "choice") != bool(self.choices):
            raise ValueError("choice questions need choices; typed questions take none")

    @property
    def snippet(self) -> str:
        """The body of `run` as a standalone script: imports, the body, and print(answer)."""
        return snippet_of(self.run, self.imports)


@dataclass(frozen=True)
class Verdict:
    correct: bool
    expected: str
    predicted: str


@functools.cache
def snippet_of(fn: Callable, imports: str = "import torch") -> str:
    """Source of a zero-argument function as a runnable script; its final `return x` becomes print(x)."""
    source = textwrap.dedent(inspect.getsource(fn))
    lines = source.splitlines()
    stmts = ast.parse(source).body[0].body
    has_doc = isinstance(stmts[0], ast.Expr) and isinstance(getattr(stmts[0], "value", None), ast.Constant)
    first = stmts[0].end_lineno if has_doc else stmts[0].lineno - 1
    last = stmts[-1]
    if isinstance(last, ast.Return) and last.value is not None:
        answer = ast.get_source_segment(source, last.value)
        body = lines[first : last.lineno - 1] + [" " * last.col_offset + f"print({answer})"]
    else:
        body = lines[first : last.end_lineno]
    code = textwrap.dedent("\n".join(body)).strip("\n")
    return (imports.strip() + "\n\n" if imports.strip() else "") + code + "\n"


def format_answer(value: Any) -> str:
    """One canonical text for an answer: shapes as (2, 3), dtypes as torch.float32, numbers short."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (torch.Size, tuple)) and all(isinstance(d, int) for d in value):
        return format_shape(value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, type) and issubclass(value, BaseException):
        return value.__name__
    return str(value)


def check(question: Question, prediction: str) -> Verdict:
    """Run the question's snippet now and compare the learner's prediction with torch's answer."""
    answer = question.run()
    expected = format_answer(answer)
    if question.kind == "choice":
        return Verdict(prediction == expected, expected, prediction)
    if question.kind == "shape":
        predicted = parse_shape(prediction)
        return Verdict(predicted == tuple(answer), expected, format_shape(predicted))
    guess = parse_number(prediction, "Your prediction")
    truth = float(answer)
    same = (math.isnan(guess) and math.isnan(truth)) or math.isclose(guess, truth, rel_tol=1e-3, abs_tol=1e-9)
    return Verdict(same, expected, format_answer(guess))


def validate_prediction(question: Question, prediction: str | None) -> str:
    """The prediction as text, or an InputError saying what is missing."""
    if prediction is None or not str(prediction).strip():
        raise InputError("Make a prediction first, then run it.")
    if question.kind == "shape":
        parse_shape(prediction)
    elif question.kind == "number":
        parse_number(prediction, "Your prediction")
    return str(prediction).strip()
