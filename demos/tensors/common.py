"""Pieces every Tensors section shares: torch's error text, how a trap side ended, legend chips."""

import builtins
import re


def outcome(value) -> str:
    """How a trap side's step ended, as a sentence says it: torch's error text ("RuntimeError: ...") raised it, None
    raised nothing, anything else was returned."""
    if value is None:
        return "raised nothing"
    name = str(value).split(":", 1)[0]
    if re.fullmatch(r"[A-Z]\w*(Error|Exception)", name):
        return f"raised a {name}"
    return f"returned {value}"


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
