"""Helpers shared by this topic's demos: reading tensors by dotted name, source of models for snippets."""

import copy
import functools

import torch
import torch.nn as nn

from demos.shown import Script, script

MODULE_IMPORTS = "import copy\nimport functools\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F"

# No accelerator on a small host: .to("meta") runs the same Module._apply path that .to("cuda") runs.
TARGET_DEVICE = "meta"


def target_device() -> str:
    """The device `.to()` demos move to: the accelerator when one exists, else the meta device."""
    if torch.accelerator.is_available():
        return str(torch.accelerator.current_accelerator())
    return TARGET_DEVICE


def get_path(module: nn.Module, dotted: str):
    """module.a.b.c for 'a.b.c' (plain attributes too, which named_* never list)."""
    return functools.reduce(getattr, dotted.split("."), module)


def moved_copy(model: nn.Module, device: str) -> nn.Module:
    """A deep copy of the model after `.to(device)`; the original stays where it is."""
    return copy.deepcopy(model).to(device)


@functools.cache
def source_of(*objects) -> Script:
    """Source code of classes or functions (a Script naming them as its origins), for the runnable snippets."""
    return script(*objects, imports="")


def norm(t: torch.Tensor | None) -> float | None:
    """Frobenius norm as a float, None for a missing tensor."""
    return None if t is None else float(t.detach().float().norm())


def fmt(value) -> str:
    """Short text for a number in a table: 4 significant digits, or '—' for None."""
    return "—" if value is None else f"{value:.4g}"
