"""The code a page shows is the code that ran.

A demo's torch core is plain functions and classes (or a whole module) that the demo calls; the snippet a page
shows is their own source, with the settings the visitor chose assigned above them and one line that calls them.
Nothing is written twice, so the snippet cannot drift from what ran, and the linter reads all of it.

`Script` is the snippet's text (a str, so the page shows and downloads it as is) together with `origins`, the
objects whose source it holds: the tests check that each of them ran when the demo drew its figure
(tests/provenance.py), and run the text to check it prints the figure's numbers.

A demo function that a page computes with (`pages.ui.compute`) and whose result holds a snippet is registered once
with `@entry(*example)`: the page's "show the code" accepts only a snippet made by a registered entry, and the
snippet test (tests/test_shown.py) runs every registered entry with its example arguments, runs the snippet alone
and hands both to that entry's check. Nothing else maps pages to tests.
"""

import dataclasses
import functools
import importlib
import inspect
import pkgutil
import pprint
import textwrap
import types
from collections.abc import Callable
from typing import Any


class Script(str):
    """Runnable snippet text built from the source of `origins` (functions, classes or modules that ran); `entry`
    names the registered demo entry point that made it."""

    origins: tuple[Any, ...] = ()
    entry: str = ""
    cuda_only: tuple[Any, ...] = ()  # origins that run only where CUDA is present (the snippet runs them there)


ENTRIES: dict[str, Callable] = {}  # qualified name -> registered entry point


def entry(*example: Any, entries: int = 32) -> Callable[[Callable], Callable]:
    """Register a demo entry point: `example` are the arguments the snippet test calls it with; `entries` is how
    many results a page keeps cached (fewer for large results)."""
    def register(fn: Callable) -> Callable:
        name = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def run(*args, **kwargs):
            result = fn(*args, **kwargs)
            for code in scripts_in(result):
                code.entry = name
            return result

        run.example, run.cache_entries = example, entries
        ENTRIES[name] = run
        return run
    return register


def scripts_in(result: Any) -> list[Script]:
    """The snippets a demo result holds: the result itself, its fields, or the items of a tuple, list or dict."""
    if isinstance(result, Script):
        return [result]
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        values = [getattr(result, f.name) for f in dataclasses.fields(result)]
    elif isinstance(result, dict):
        values = list(result.values())
    elif isinstance(result, tuple | list):
        values = list(result)
    else:
        return []
    return [v for v in values if isinstance(v, Script)] + [s for v in values if not isinstance(v, Script)
                                                          for s in _nested(v)]


def _nested(value: Any) -> list[Script]:
    """Snippets one level further down (a dataclass inside a tuple, a tuple of results)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)
                if isinstance(getattr(value, f.name), Script)]
    if isinstance(value, tuple | list):
        return [v for v in value if isinstance(v, Script)]
    return []


def all_entries() -> dict[str, Callable]:
    """Every registered entry point, after importing every module of demos/ (so none can be missed)."""
    import demos

    for info in pkgutil.walk_packages(demos.__path__, "demos."):
        importlib.import_module(info.name)
    return dict(sorted(ENTRIES.items()))


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
           settings: dict[str, Any] | None = None, run: str = "", cuda_only: tuple = ()) -> Script:
    """A script: imports, the visitor's settings, the source of each object in order, then the line(s) in `run`.

    For a module shown whole, pass imports="" (its own imports come with it) and call its entry point in `run`.
    `cuda_only`: the objects among them that only a host with CUDA runs (a GPU copy timed with CUDA events)."""
    head = "\n\n".join(p for p in (imports.strip(), settings_block(settings or {})) if p)  # isort: one blank line
    parts = [head, *map(source, objects), textwrap.dedent(run).strip()]
    text = Script("\n\n\n".join(p for p in parts if p) + "\n")
    text.origins, text.cuda_only = objects, tuple(cuda_only)
    return text



def print_each(call: str) -> str:
    """The `run` of a script whose function returns the figure's values by name (a dict): print each of them."""
    return f'for name, value in {call}.items():\n    print(f"{{name}}: {{value}}")'
