"""The code a page shows is the code that ran.

A demo's torch core is plain functions and classes (or a whole module) that the demo calls; the snippet a page
shows is their own source, with the settings the visitor chose assigned above them and one line that calls them.
Nothing is written twice, so the snippet cannot drift from what ran, and the linter reads all of it.

`Script` is the snippet's text (a str, so the page shows and downloads it as is) together with `origins`, the
objects whose source it holds: the tests check that each of them ran when the demo drew its figure
(tests/provenance.py), and run the text to check it prints the figure's numbers.
"""

import inspect
import pprint
import textwrap
import types
from collections.abc import Callable
from typing import Any


class Script(str):
    """Runnable snippet text built from the source of `origins` (functions, classes or modules that ran)."""

    origins: tuple[Any, ...] = ()


def source(obj: Callable | type | types.ModuleType) -> str:
    """The source of a function, class or module, dedented, without leading or trailing blank lines."""
    return textwrap.dedent(inspect.getsource(obj)).strip("\n")


def settings_block(settings: dict[str, Any], width: int = 120) -> str:
    """One assignment per setting, as Python literals: `width = 128`; a long value wraps inside its brackets, so
    every line fits the project's line length."""
    lines = []
    for name, value in settings.items():
        prefix = f"{name} = "
        text = pprint.pformat(value, width=width - len(prefix), sort_dicts=False)
        lines.append(prefix + text.replace("\n", "\n" + " " * len(prefix)))
    return "\n".join(lines)


def script(*objects: Callable | type | types.ModuleType, imports: str = "import torch",
           settings: dict[str, Any] | None = None, run: str = "") -> Script:
    """A script: imports, the visitor's settings, the source of each object in order, then the line(s) in `run`.

    For a module shown whole, pass imports="" (its own imports come with it) and call its entry point in `run`."""
    head = "\n\n".join(p for p in (imports.strip(), settings_block(settings or {})) if p)  # isort: one blank line
    parts = [head, *map(source, objects), textwrap.dedent(run).strip()]
    text = Script("\n\n\n".join(p for p in parts if p) + "\n")
    text.origins = objects
    return text



def print_each(call: str) -> str:
    """The `run` of a script whose function returns the figure's values by name (a dict): print each of them."""
    return f'for name, value in {call}.items():\n    print(f"{{name}}: {{value}}")'
