"""What every input-error message must be: one sentence, naming the field, quoting visitor text literally."""

import re

_SPAN = re.compile(r"(`+)(.*?)\1", re.S)
_MARKDOWN = set("`*_[]<>#~|\\")


def outside_code_spans(message: str) -> str:
    """The message with every code span removed: the part markdown renders as markup."""
    return _SPAN.sub("", message)


def check_message(message: str, typed: str) -> None:
    """One sentence, no doubled word ("The The"), and the visitor's text never outside a code span."""
    assert message.endswith("."), message
    shown = outside_code_spans(message)
    doubled = re.search(r"\b([a-z]+) \1\b", shown, re.I)
    assert not doubled, message
    assert not re.search(r"\b1 \w+s (were|are)\b|\b(\d+) and \2 numbers\b", shown), message
    typed = typed.strip()
    if len(typed) >= 2 and _MARKDOWN & set(typed):
        assert typed not in shown, message
