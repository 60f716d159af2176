"""A trap beside its correct form: two plain functions run now, their returned numbers, and a sentence built from them.

Each side is a zero-argument function that does the torch work and returns a dict of plain numbers (and torch's
own error text where torch refuses). The code a page shows is those two functions' source plus the two calls that
print what the page shows, so the snippet and the numbers cannot drift apart.
"""

from collections.abc import Callable
from dataclasses import dataclass

from demos.shown import Script, script


@dataclass(frozen=True)
class TrapPair:
    """What the trap and the correct form returned when they ran, the sentence read from those numbers, the code."""

    key: str
    title: str
    trap_label: str  # the line that goes wrong, as a heading
    correct_label: str
    trap: dict
    correct: dict
    sentence: str
    code: Script


def pair_code(trap_fn: Callable, correct_fn: Callable, imports: str, helpers: tuple = ()) -> Script:
    """A runnable script: imports, any helper classes, both functions' own source, then the two calls."""
    calls = f'print("trap:", {trap_fn.__name__}())\nprint("correct:", {correct_fn.__name__}())'
    return script(*helpers, trap_fn, correct_fn, imports=imports, run=calls)


def measure(key: str, title: str, labels: tuple[str, str], sides: tuple[Callable, Callable],
            sentence: Callable[[dict, dict], str], imports: str = "import torch", helpers: tuple = ()) -> TrapPair:
    """Run the trap side and the correct side now; `sentence(trap, correct)` reads what they returned."""
    trap_fn, correct_fn = sides
    trap, correct = trap_fn(), correct_fn()
    return TrapPair(key, title, labels[0], labels[1], trap, correct, sentence(trap, correct),
                    pair_code(trap_fn, correct_fn, imports, helpers))


def fmt_list(values) -> str:
    """[0.1966, 0.105] as the page prints a short list of numbers: 4 significant digits."""
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
