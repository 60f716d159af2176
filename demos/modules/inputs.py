"""Small grammars for this topic's text fields: channel lists, head names, learning rates, hook values."""

import math
import re

import torch.nn as nn

from demos.errors import InputError, quoted
from demos.parsing import count_range, parse_number, parse_numbers, text_field, whole_in_range

MAX_CONV_BLOCKS = 3
MAX_CHANNELS = 16
MAX_HEADS = 6
MAX_NAME = 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_channels(text: str) -> tuple[int, ...]:
    """'4, 8' -> (4, 8): output channels of each conv block, 1 to 3 blocks of 1 to 16 channels."""
    values = parse_numbers(text, "Conv channels", min_count=1, max_count=MAX_CONV_BLOCKS)
    return tuple(whole_in_range(v, f"Conv channels, entry {i + 1}", 1, MAX_CHANNELS) for i, v in enumerate(values))


def parse_head_names(text: str) -> tuple[str, ...]:
    """'cls, box' -> ('cls', 'box'): 1 to 6 unique Python identifiers that nn.ModuleDict accepts as keys."""
    names = [n for n in re.split(r"[,\s]+", text_field(text, "Head names")) if n]
    if not 1 <= len(names) <= MAX_HEADS:
        raise InputError(f"Head names: give {count_range(1, MAX_HEADS)} names; got {len(names)}.")
    taken = nn.ModuleDict()
    for name in names:
        if len(name) > MAX_NAME or not _NAME.fullmatch(name):
            raise InputError(f"Head names: {quoted(name)} is not a Python identifier (letters, digits and _, not "
                             f"starting with a digit, at most {MAX_NAME} characters).")
        if hasattr(taken, name):
            raise InputError(f"Head names: {quoted(name)} is already an attribute of nn.Module, so ModuleDict "
                             "refuses it as a key.")
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated:
        raise InputError(f"Head names: {quoted(repeated)} appears twice; a ModuleDict key names exactly one module.")
    return tuple(names)


def parse_lrs(text: str) -> tuple[float, float]:
    """'0.01, 0.1' -> (0.01, 0.1): the backbone's and the head's learning rate, each in (0, 10]."""
    values = parse_numbers(text, "Learning rates", min_count=2, max_count=2)
    for name, v in zip(("backbone", "head"), values, strict=True):
        if not 0 < v <= 10:
            raise InputError(f"Learning rates: the {name} rate is {v:g}; it must be above 0 and at most 10.")
    return values[0], values[1]


def parse_hook_value(text: str, mode: str) -> float:
    """The gradient hook's factor (scale, in [-100, 100]) or threshold (clip, in (0, 100])."""
    field = "Threshold" if mode == "clip" else "Factor"
    value = parse_number(text, field)
    if not math.isfinite(value):
        raise InputError(f"{field}: {quoted(text)} is not finite; type a finite number.")
    if mode == "scale" and not -100 <= value <= 100:
        raise InputError(f"Factor: {value:g} is out of range; it must be from -100 to 100.")
    if mode == "clip" and not 0 < value <= 100:
        raise InputError(f"Threshold: {value:g} is out of range; it must be above 0 and at most 100.")
    return value
