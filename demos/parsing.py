"""Small grammars for what people type: shapes, integers and numbers. Never eval."""

import math
import re

from demos.errors import InputError

MAX_TEXT = 200
_BRACKETS = {"(": ")", "[": "]"}


def _check_length(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"The {what} must be text.")
    if len(text) > MAX_TEXT:
        raise InputError(f"The {what} is too long: at most {MAX_TEXT} characters.")
    return text.strip()


def _strip_brackets(text: str) -> str:
    if not text:
        return text
    if text[0] in _BRACKETS:
        if text[-1:] != _BRACKETS[text[0]]:
            raise InputError(f"The bracket '{text[0]}' is never closed.")
        return text[1:-1].strip()
    if text[-1] in ")]":
        raise InputError(f"The bracket '{text[-1]}' was never opened.")
    return text


def parse_shape(text: str, max_dims: int = 6, max_dim: int = 4096) -> tuple[int, ...]:
    """Parse '8,1,6,1', '(8, 1, 6, 1)', '8 1 6 1', '(3,)' or '[]' (a scalar) into a tuple of ints."""
    body = _strip_brackets(_check_length(text, "shape"))
    if not body:
        return ()
    parts = [p.strip() for p in re.split(r"[,\s]+", body.rstrip(", ").strip())]
    if len(parts) > max_dims:
        raise InputError(f"A shape may have at most {max_dims} dimensions; this one has {len(parts)}.")
    dims = []
    for i, part in enumerate(parts):
        if not re.fullmatch(r"\d+", part):
            raise InputError(f"Dimension {i} ('{part}') is not a whole number ≥ 0.")
        dim = int(part)
        if dim > max_dim:
            raise InputError(f"Dimension {i} is {dim}; the limit is {max_dim}.")
        dims.append(dim)
    return tuple(dims)


def format_shape(shape) -> str:
    """(8, 1) -> '(8, 1)', () -> '()'; the same text for a torch.Size and a tuple."""
    dims = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def parse_int(text: str, name: str, low: int, high: int) -> int:
    """A whole number between low and high, or an InputError naming the field and the range."""
    body = _check_length(str(text), name)
    if not re.fullmatch(r"[+-]?\d+", body):
        raise InputError(f"{name} must be a whole number, not '{body}'.")
    value = int(body)
    if not low <= value <= high:
        raise InputError(f"{name} must be between {low} and {high}; got {value}.")
    return value


def parse_number(text: str, name: str) -> float:
    """A finite or infinite real number such as '3', '-0.5', '1e-3', 'inf' or 'nan'."""
    body = _check_length(str(text), name).lower()
    if not re.fullmatch(r"[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf|infinity|nan)", body):
        raise InputError(f"{name} must be a number such as 3, -0.5 or 1e-3, not '{body}'.")
    value = float(body)
    if math.isfinite(value) or body.lstrip("+-") in ("inf", "infinity", "nan"):
        return value
    raise InputError(f"{name} is too large to be a float: '{body}'.")


def parse_numbers(text: str, name: str, min_count: int = 1, max_count: int = 16) -> tuple[float, ...]:
    """A list such as '2, 1, 0.1' or '[2 1 0.1]' of finite numbers."""
    body = _strip_brackets(_check_length(text, name))
    parts = [p for p in re.split(r"[,\s]+", body) if p]
    if not min_count <= len(parts) <= max_count:
        raise InputError(f"{name} needs between {min_count} and {max_count} numbers; got {len(parts)}.")
    values = tuple(parse_number(p, f"Entry {i} of {name.lower()}") for i, p in enumerate(parts))
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"{name} must be finite numbers (no inf or nan).")
    return values
