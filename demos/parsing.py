"""Small grammars for what people type: shapes, integers and numbers. Never eval.

Every message starts with the field's label as the page shows it ("Seed", "Shape A", "Logits") and quotes the
visitor's text with quoted(), so a message names what was typed and why it cannot be used.
"""

import math
import re

from demos.errors import InputError, quoted

MAX_TEXT = 200
_CLOSING = {"(": ")", "[": "]"}
_EMPTY_ENTRY = re.compile(r"(^|,)\s*,")  # ',3' or '3,,4' or '3, ,4': a comma with nothing before it
_FOREIGN = re.compile(r"[^\w\s,.+\-()\[\]]")  # a character no list of numbers has (a letter may start 'inf')


def plural(n: int, noun: str) -> str:
    """'1 shape', '2 shapes'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def count_range(low: int, high: int) -> str:
    """'exactly 2' or '2 to 12'."""
    return f"exactly {low}" if low == high else f"{low} to {high}"


def text_field(text: object, field: str, limit: int = MAX_TEXT) -> str:
    """The stripped text of a field, or InputError when it is not text or longer than `limit` characters."""
    if not isinstance(text, str):
        raise InputError(f"{field}: expected text, got a {type(text).__name__}.")
    if len(text) > limit:
        raise InputError(f"{field}: at most {limit} characters; this has {len(text)}.")
    return text.strip()


def strip_brackets(text: str, field: str) -> str:
    """'(3, 4)' or '[3 4]' -> '3, 4'; brackets must pair up and wrap the whole text."""
    opened, pairs = [], []
    for pos, ch in enumerate(text):
        if ch in _CLOSING:
            opened.append((ch, pos))
        elif ch in ")]":
            if not opened:
                raise InputError(f"{field} {quoted(text)}: the bracket {quoted(ch)} at position {pos + 1} was "
                                 "never opened.")
            start_ch, start = opened.pop()
            if _CLOSING[start_ch] != ch:
                raise InputError(f"{field} {quoted(text)}: the bracket {quoted(start_ch)} at position {start + 1} "
                                 f"is closed by {quoted(ch)}.")
            pairs.append((start, pos))
    if opened:
        ch, pos = opened[-1]
        raise InputError(f"{field} {quoted(text)}: the bracket {quoted(ch)} at position {pos + 1} is never closed.")
    if not pairs:
        return text
    if pairs != [(0, len(text) - 1)]:
        raise InputError(f"{field} {quoted(text)}: brackets may only wrap the whole list, as in (3, 4).")
    return text[1:-1].strip()


def refuse_foreign(text: str, field: str, example: str) -> None:
    """InputError naming the first character that cannot belong to a list of numbers, such as '<' or ';'."""
    match = _FOREIGN.search(text)
    if match:
        raise InputError(f"{field} {quoted(text)}: {quoted(match.group())} (character {match.start() + 1}) has no "
                         f"place in a list of numbers; type them separated by commas, as in {example}.")


def split_entries(body: str, field: str, text: str) -> list[str]:
    """'3, 4', '3 4' or '3,4,' -> ['3', '4']; an empty entry between commas is refused, not skipped."""
    if _EMPTY_ENTRY.search(body):
        raise InputError(f"{field} {quoted(text)}: an entry between commas is empty; write each value once, "
                         "as in 3, 4.")
    return [p for p in re.split(r"[,\s]+", body) if p]


def parse_shape(text: str, max_dims: int = 6, max_dim: int = 4096, field: str = "Shape") -> tuple[int, ...]:
    """Parse '8,1,6,1', '(8, 1, 6, 1)', '8 1 6 1', '(3,)' or '[]' (a scalar) into a tuple of ints."""
    raw = text_field(text, field)
    refuse_foreign(raw, field, "3, 4")
    body = strip_brackets(raw, field)
    if not body:
        return ()
    parts = split_entries(body, field, raw)
    if len(parts) > max_dims:
        raise InputError(f"{field} {quoted(raw)}: at most {plural(max_dims, 'dimension')}; this has {len(parts)}.")
    dims = []
    for i, part in enumerate(parts):
        if not re.fullmatch(r"\d+", part):
            raise InputError(f"{field} {quoted(raw)}: dim {i} ({quoted(part)}) is not a whole number ≥ 0.")
        if len(part) > 9 or int(part) > max_dim:
            raise InputError(f"{field} {quoted(raw)}: dim {i} is {quoted(part)}; the limit is {max_dim}.")
        dims.append(int(part))
    return tuple(dims)


def format_shape(shape) -> str:
    """(8, 1) -> '(8, 1)', () -> '()'; the same text for a torch.Size and a tuple."""
    dims = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def parse_int(text: object, field: str, low: int, high: int) -> int:
    """A whole number between low and high, or an InputError naming the field, the text and the range."""
    body = text_field(str(text), field)
    if not body:
        raise InputError(f"{field}: empty; type a whole number from {low} to {high}.")
    if not re.fullmatch(r"[+-]?\d+", body):
        raise InputError(f"{field}: {quoted(body)} is not a whole number; type one from {low} to {high}.")
    value = int(body)
    if not low <= value <= high:
        raise InputError(f"{field}: {quoted(body)} is out of range; it must be from {low} to {high}.")
    return value


NUMBER_EXAMPLE = "a number such as 3, -0.5 or 1e-3"


def parse_number(text: object, field: str, example: str = NUMBER_EXAMPLE) -> float:
    """A finite or infinite real number such as '3', '-0.5', '1e-3', 'inf' or 'nan'; `example` says what the field
    wants in its messages."""
    body = text_field(str(text), field).lower()
    if not body:
        raise InputError(f"{field}: empty; type {example}.")
    if not re.fullmatch(r"[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf|infinity|nan)", body):
        raise InputError(f"{field}: {quoted(body)} is not {example}.")
    value = float(body)
    if math.isfinite(value) or body.lstrip("+-") in ("inf", "infinity", "nan"):
        return value
    raise InputError(f"{field}: {quoted(body)} is too large for a float (the largest is about 1.8e308).")


def whole_in_range(value: float, field: str, low: int, high: int) -> int:
    """A parsed number that must be a whole number from low to high; the message says which rule it breaks."""
    if not float(value).is_integer():
        raise InputError(f"{field}: {value:g} is not a whole number.")
    if not low <= value <= high:
        raise InputError(f"{field}: {value:g} is out of range; it must be from {low} to {high}.")
    return int(value)


def parse_numbers(text: str, field: str, min_count: int = 1, max_count: int = 16, example: str = NUMBER_EXAMPLE,
                  list_example: str = "2, 1, 0.1") -> tuple[float, ...]:
    """A list such as '2, 1, 0.1' or '[2 1 0.1]' of finite numbers; `example` and `list_example` say what the
    field wants in its messages (a field of whole numbers should not suggest -0.5)."""
    raw = text_field(text, field)
    refuse_foreign(raw, field, list_example)
    parts = split_entries(strip_brackets(raw, field), field, raw)
    if not min_count <= len(parts) <= max_count:
        raise InputError(f"{field}: needs {count_range(min_count, max_count)} numbers; got {len(parts)}.")
    values = tuple(parse_number(p, f"{field}, entry {i + 1}", example) for i, p in enumerate(parts))
    for i, v in enumerate(values):
        if not math.isfinite(v):
            raise InputError(f"{field}, entry {i + 1}: {quoted(parts[i])} is not finite; use finite numbers.")
    return values
