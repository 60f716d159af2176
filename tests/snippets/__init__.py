"""The checks of the snippets pages show, one module per topic: each check is bound to a registered demo entry point
(demos.shown.entry) and reads what that entry's snippet printed, run alone, against the entry's own result.
tests/test_shown.py calls every registered entry with its example arguments and hands the result to its check."""

import importlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable

from demos.registry import ROOT

CHECKS: dict[str, Callable] = {}  # entry's qualified name -> check(result, run)


def checks(*entries: Callable) -> Callable[[Callable], Callable]:
    """Bind a check to the entry points whose snippets it reads: `check(result, run)`, where `run(code)` returns
    what the snippet printed, run alone in an empty folder (it must exit cleanly)."""
    def register(check: Callable) -> Callable:
        for fn in entries:
            name = f"{fn.__module__}.{fn.__qualname__}"
            assert name not in CHECKS, f"two checks for {name}"
            CHECKS[name] = check
        return check
    return register


def all_checks() -> dict[str, Callable]:
    """Every check, after importing every module of this package."""
    for info in pkgutil.iter_modules(__path__, f"{__name__}."):
        importlib.import_module(info.name)
    return CHECKS


def linted(code: str) -> str:
    """The snippet, checked by the project's linter (a reader may paste it into their own project)."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--stdin-filename",
                           str(ROOT / "snippet.py"), "-"], input=code, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout
    return code


def fields(out: str) -> dict[str, str]:
    """The `name: value` lines printed by a snippet whose run line is demos.shown.print_each."""
    return dict(line.split(": ", 1) for line in out.splitlines() if re.match(r"^\w+: ", line))
