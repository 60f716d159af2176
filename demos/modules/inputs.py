"""Small grammars for this topic's text fields: channel lists, head names, learning rates, hook values."""

import math
import re

import torch.nn as nn

from demos.errors import InputError
from demos.parsing import parse_number, parse_numbers

MAX_CONV_BLOCKS = 3
MAX_CHANNELS = 16
MAX_HEADS = 6
MAX_NAME = 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_channels(text: str) -> tuple[int, ...]:
    """'4, 8' -> (4, 8): output channels of each conv block, 1 to 3 blocks of 1 to 16 channels."""
    values = parse_numbers(text, "Channels", min_count=1, max_count=MAX_CONV_BLOCKS)
    for i, v in enumerate(values):
        if v != int(v) or not 1 <= v <= MAX_CHANNELS:
            raise InputError(f"Channels entry {i} is {v:g}; each must be a whole number from 1 to {MAX_CHANNELS}.")
    return tuple(int(v) for v in values)


def parse_head_names(text: str) -> tuple[str, ...]:
    """'cls, box' -> ('cls', 'box'): 1 to 6 unique Python identifiers that nn.ModuleDict accepts as keys."""
    if not isinstance(text, str) or len(text) > 200:
        raise InputError("Head names must be text of at most 200 characters.")
    names = [n for n in re.split(r"[,\s]+", text.strip()) if n]
    if not 1 <= len(names) <= MAX_HEADS:
        raise InputError(f"Give between 1 and {MAX_HEADS} head names; got {len(names)}.")
    taken = nn.ModuleDict()
    for name in names:
        if len(name) > MAX_NAME or not _NAME.fullmatch(name):
            raise InputError(f"'{name[:MAX_NAME]}' is not a name: use letters, digits and _ (at most {MAX_NAME}).")
        if hasattr(taken, name):
            raise InputError(f"'{name}' is already an attribute of nn.Module, so ModuleDict refuses it as a key.")
    if len(set(names)) != len(names):
        raise InputError("Head names must be unique: a ModuleDict key names exactly one module.")
    return tuple(names)


def parse_lrs(text: str) -> tuple[float, float]:
    """'0.01, 0.1' -> (0.01, 0.1): the backbone's and the head's learning rate, each in (0, 10]."""
    values = parse_numbers(text, "Learning rates", min_count=2, max_count=2)
    for name, v in zip(("backbone", "head"), values, strict=True):
        if not 0 < v <= 10:
            raise InputError(f"The {name} learning rate is {v:g}; it must be above 0 and at most 10.")
    return values[0], values[1]


def parse_hook_value(text: str, mode: str) -> float:
    """The gradient hook's factor (scale, in [-100, 100]) or threshold (clip, in (0, 100])."""
    value = parse_number(text, "The hook value")
    if not math.isfinite(value):
        raise InputError("The hook value must be a finite number.")
    if mode == "scale" and not -100 <= value <= 100:
        raise InputError(f"The scale factor must be between -100 and 100; got {value:g}.")
    if mode == "clip" and not 0 < value <= 100:
        raise InputError(f"The clip threshold must be above 0 and at most 100; got {value:g}.")
    return value
