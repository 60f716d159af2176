"""Pieces every Tensors section shares: executed snippets and correct-vs-trap pairs."""

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from demos.quiz import snippet_of


@dataclass(frozen=True)
class Run:
    """A snippet and what it printed when torch ran it just now."""

    code: str
    output: str


@dataclass(frozen=True)
class Trap:
    """The way that silently goes wrong beside the correct way, both executed."""

    key: str
    title: str
    trap: Run
    correct: Run
    lesson: str
    correct_label: str = "Correct"  # the heading over the fix, e.g. when the fix needs hardware this host lacks


def run(fn: Callable[[], Any], imports: str = "import torch") -> Run:
    """Run a zero-argument snippet function; its body is the code, its return value what it prints."""
    return Run(snippet_of(fn, imports), str(fn()))


def trap(key: str, title: str, wrong: Callable, right: Callable, lesson: str, imports: str = "import torch",
         correct_label: str = "Correct") -> Trap:
    """Execute both sides of a trap now."""
    return Trap(key, title, run(wrong, imports), run(right, imports), lesson, correct_label)


def torch_error(err: BaseException) -> str:
    """torch's own error text, first line, with its exception type."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}"


def catchable(err: BaseException) -> str:
    """The exception's class as a snippet can name it in an except clause: itself when it is a builtin (torch raises
    RuntimeError, IndexError, ...), else its nearest builtin base (torch's OutOfMemoryError is a RuntimeError)."""
    return next(c.__name__ for c in type(err).__mro__ if getattr(builtins, c.__name__, None) is c)


def chips_html(items: dict[str, str]) -> str:
    """A legend row: a colour chip and its meaning for each (label -> colour)."""
    return "<div style='font-size:0.9rem'>" + " ".join(
        f"<span style='display:inline-block;margin-right:14px'><span style='display:inline-block;width:12px;"
        f"height:12px;border-radius:2px;background:{color};margin-right:5px;vertical-align:middle'></span>"
        f"{label}</span>"
        for label, color in items.items()
    ) + "</div>"
