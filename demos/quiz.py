"""Predict-then-run questions: the expected answer is whatever torch returns when the snippet runs."""

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from demos.errors import InputError, quoted
from demos.parsing import MAX_TEXT, format_shape, parse_number, parse_shape
from demos.shown import Script, script

KINDS = ("choice", "shape", "number", "dtype")
OUTCOMES = ("correct", "close", "wrong")
HINTS = {
    "shape": "a shape such as (2, 3), 2x3 or torch.Size([2, 3])",
    "number": "a number such as 0.5, 75%, 3/4, 1e-6 or tensor(2.)",
    "dtype": "a dtype such as torch.float32 or float32",
}


@dataclass(frozen=True)
class Question:
    """One question. `run` is the snippet: its source is shown, its return value is the answer.

    kind "choice": the learner picks one of `choices`; the formatted answer must be one of them.
    kind "shape": the learner types a shape (or any tuple of whole numbers, such as strides); judged exactly.
    kind "number": the learner types a number. A whole-number answer (a count, bytes) must be exact; any other is
      judged to 2 significant figures, unless `exact` says the digits are the point (a rounding trap).
    kind "dtype": the learner types a dtype, with or without the `torch.` prefix; judged exactly.
    A generated question (`from_code`) carries its snippet as text in `code`, and `run` executes that text.
    """

    key: str
    prompt: str
    run: Callable[[], Any]
    explain: str
    kind: str = "choice"
    choices: tuple[str, ...] = ()
    imports: str = "import torch"
    exact: bool = False
    code: str = ""
    placeholder: str = ""  # the prediction box's hint when the kind's default does not fit (strides, not a shape)
    model: str = ""  # when a model of this app answers instead of torch: what it is and where its rules come from

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown question kind {self.kind!r}")
        if (self.kind == "choice") != bool(self.choices):
            raise ValueError("choice questions need choices; typed questions take none")

    @classmethod
    def from_code(cls, key: str, prompt: str, code: str, explain: str, *, raises: tuple[type, ...] = (),
                  **options) -> "Question":
        """A question whose snippet is generated text: its answer is what that text prints when it runs.

        An exception of a type in `raises` is an answer too (the question asks "or does it raise?").
        """
        return cls(key, prompt, functools.partial(run_code, code, raises), explain, code=code, **options)

    @property
    def snippet(self) -> str:
        """`run` as a standalone script: imports, its source, and print(run())."""
        return self.code or snippet_of(self.run, self.imports)

    @property
    def answered_by(self) -> str:
        """Who decides the answer, as a verdict names it: torch, or the app's model of something torch runs."""
        return "the model" if self.model else "torch"

    @property
    def hint(self) -> str:
        return self.placeholder or HINTS.get(self.kind, "")


@dataclass(frozen=True)
class Verdict:
    """torch's answer against one prediction; `typed` is the prediction as given, so a verdict can be matched to it."""

    outcome: str  # one of OUTCOMES
    expected: str
    predicted: str
    typed: str = ""

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"


@functools.cache
def snippet_of(fn: Callable, imports: str = "import torch") -> Script:
    """The question's function as a runnable script (demos.shown.script): imports, its source, and a run line that
    prints what it returns, which is the answer."""
    return script(fn, imports=imports, run=f"print({fn.__name__}())")


def run_code(code: str, raises: tuple[type, ...] = ()) -> Any:
    """Run a snippet this app generated (never a visitor's text) and return the last value it printed.

    An exception of a type listed in `raises` is returned as that type: torch raising is the answer.
    """
    printed = []
    try:
        exec(compile(code, "<snippet>", "exec"), {"print": printed.append, "__name__": "__snippet__"})
    except raises as err:
        return type(err)
    if not printed:
        raise RuntimeError("a question's snippet must print its answer")
    return printed[-1]


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


# ---- reading what the learner typed: every way torch itself prints an answer is accepted ----------------------

_SIZE = re.compile(r"torch\.Size\(\s*(.*?)\s*\)", re.DOTALL)
_TENSOR = re.compile(r"tensor\(\s*\[?\s*([^\[\],()=]+?)\s*\]?\s*(,[^()]*)?\)")  # keyword arguments after the value
_GROUPED = re.compile(r"[+-]?\d{1,3}([,_]\d{3})+(\.\d*)?")
_DTYPE = re.compile(r"(?:torch\.)?([a-z][a-z0-9_]*)")
_PERCENT = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))\s*%")  # 75% is 0.75
_FRACTION = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")  # 3/4 is 0.75
_TIMES = re.compile(r"\s*\d+(?:\s*[x×]\s*\d+)+\s*")  # 3x4 or 3 × 4 is the shape (3, 4)
_DTYPES = {name: v for name, v in vars(torch).items() if isinstance(v, torch.dtype)}  # no lazy imports by name


def read_shape(text: str) -> tuple[int, ...]:
    """(3, 4), [3, 4], 3, 4 or torch.Size([3, 4]) as a tuple of whole numbers."""
    body = _within_limit(text)
    size = _SIZE.fullmatch(body)
    if _TIMES.fullmatch(body):
        body = re.sub(r"\s*[x×]\s*", ", ", body.strip())
    return parse_shape(size.group(1) if size else body, max_dims=8, max_dim=10**12)


def read_number(text: str) -> float:
    """3, -0.5, 1e-6, 1,572,864, 75%, 3/4, tensor(2.), tensor([2.]) or tensor(2., grad_fn=<MulBackward0>) as a
    float."""
    body = _within_limit(text)
    percent, fraction = _PERCENT.fullmatch(body), _FRACTION.fullmatch(body)
    if percent:
        return parse_number(percent.group(1), "Your prediction") / 100
    if fraction:
        if int(fraction.group(2)) == 0:
            raise InputError(f"Your prediction {quoted(body)} divides by zero.")
        return int(fraction.group(1)) / int(fraction.group(2))
    wrapped = _TENSOR.fullmatch(body)
    if wrapped:
        body = wrapped.group(1)
    if _GROUPED.fullmatch(body):
        body = re.sub(r"[,_]", "", body)
    return parse_number(body, "Your prediction")


def read_dtype(text: str) -> torch.dtype:
    """torch.float32, float32 or an alias torch prints for the same dtype (torch.float, half) as a torch.dtype."""
    body = _within_limit(text)
    name = _DTYPE.fullmatch(body)
    dtype = _DTYPES.get(name.group(1)) if name else None
    if dtype is None:
        raise InputError(f"Your prediction must name a dtype such as torch.float32 or int64, not {quoted(body)}.")
    return dtype


def _within_limit(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise InputError(f"Your prediction is too long: at most {MAX_TEXT} characters.")
    return text.strip()


def validate_prediction(question: Question, prediction: str | None) -> str:
    """The prediction as text, or an InputError saying what is missing or unreadable."""
    if prediction is None or not str(prediction).strip():
        raise InputError("Make a prediction first, then run it.")
    text = str(prediction).strip()
    if question.kind == "shape":
        read_shape(text)
    elif question.kind == "number":
        read_number(text)
    elif question.kind == "dtype":
        read_dtype(text)
    elif text not in question.choices:
        raise InputError(f"Pick one of the choices; {quoted(text)} is not one of them.")
    return text


# ---- judging ------------------------------------------------------------------------------------------------


def check(question: Question, prediction: str) -> Verdict:
    """Run the question's snippet now and compare the learner's prediction with torch's answer."""
    answer = question.run()
    expected = format_answer(answer)
    if question.kind == "choice":
        return Verdict("correct" if prediction == expected else "wrong", expected, prediction, prediction)
    if question.kind == "shape":
        guess = read_shape(prediction)
        return Verdict(_exact(guess == tuple(answer)), expected, format_shape(guess), prediction)
    if question.kind == "dtype":
        guess = read_dtype(prediction)
        return Verdict(_exact(guess == answer), expected, str(guess), prediction)
    guess = read_number(prediction)
    exact = question.exact or _is_whole(answer)
    return Verdict(judge_number(guess, float(answer), exact), expected, format_answer(guess), prediction)


def _exact(same: bool) -> str:
    return "correct" if same else "wrong"


def _is_whole(answer: Any) -> bool:
    """A count or a byte size: a Python int, or a tensor of an integer dtype."""
    if isinstance(answer, torch.Tensor):
        return not (answer.dtype.is_floating_point or answer.dtype.is_complex)
    return isinstance(answer, int)


def judge_number(guess: float, truth: float, exact: bool = False) -> str:
    """'correct', 'close' or 'wrong', the way an interviewer would judge a number.

    Not exact: right to 2 significant figures (within half a unit of torch's second figure) is correct; the
    same order of magnitude (within a factor of sqrt(10), same sign) is close. Exact (counts, bytes, rounding
    traps): equal is correct, right to 2 significant figures is close. inf and nan must match exactly.
    """
    if not (math.isfinite(guess) and math.isfinite(truth)):
        same = (math.isnan(guess) and math.isnan(truth)) or guess == truth
        return _exact(same)
    if guess == truth:
        return "correct"
    if within_2_figures(guess, truth):
        return "close" if exact else "correct"
    if not exact and same_order(guess, truth):
        return "close"
    return "wrong"


def within_2_figures(guess: float, truth: float) -> bool:
    """|guess - truth| at most half a unit in truth's second significant figure: 0.235 for 0.235004, 9.5e-7 for
    9.54e-7. A tolerance, not rounding both: rounding would split 0.2350 and 0.235004 across a boundary."""
    if truth == 0:
        return guess == 0
    unit = 10.0 ** (math.floor(math.log10(abs(truth))) - 1)
    return abs(guess - truth) <= 0.5 * unit * (1 + 1e-9)


def same_order(a: float, b: float) -> bool:
    if a == 0 or b == 0 or (a > 0) != (b > 0):
        return False
    return abs(math.log10(a / b)) < 0.5
