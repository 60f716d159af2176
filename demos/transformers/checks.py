"""Validation shared by the page's demos: one InputError sentence naming the field, its limits and the value."""

from demos.errors import InputError


def check_range(label, value, low, high) -> None:
    if not low <= value <= high:
        raise InputError(f"{label} must be between {low} and {high}; got {value}.")


def check_choice(label, value, options) -> None:
    if value not in options:
        shown = repr(value) if isinstance(value, str) else value
        raise InputError(f"{label} must be one of {', '.join(map(str, options))}; got {shown}.")
