"""The one exception type for bad user input, and the one way a message quotes what the visitor typed."""

import re

QUOTE_LIMIT = 40  # characters of visitor text a message repeats; the rest is elided
# A lone surrogate (JSON's "\\ud800") cannot be encoded as UTF-8, so a message holding one cannot be sent to the
# browser at all; bidi controls (right-to-left override, isolates, marks) reorder the sentence around them.
_UNSHOWABLE = re.compile("[\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class InputError(ValueError):
    """Input a person typed or chose that a demo cannot use; the message is one plain sentence."""


def quoted(text: object, limit: int = QUOTE_LIMIT) -> str:
    """Visitor text as a markdown code span, so a page shows it literally, never as markup.

    Messages are rendered as markdown, and a shared link or an upload is visitor input: inside a code span
    `![t](http://…)` is not an image, `[x](http://…)` is not a link, and `__import__` keeps its underscores.
    Whitespace runs become one space, lone surrogates and bidi controls become U+FFFD (see `showable`), and
    long text is cut to `limit` characters.
    """
    text = re.sub(r"\s+", " ", showable(text)).strip()
    if not text:
        return "(nothing)"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return code_span(text)


def code_span(text: str) -> str:
    """Text as one markdown code span, literally: a fence longer than any backtick run inside it."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def showable(text: object) -> str:
    """Visitor text that a page can send and shows in its own order: each lone surrogate and bidi control
    becomes U+FFFD (the replacement character)."""
    return _UNSHOWABLE.sub("\ufffd", str(text))
