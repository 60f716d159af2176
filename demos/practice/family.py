"""A question family: from a seed, a fresh question and its snippet; torch decides the answer when the snippet runs.

A family's `make(rng)` writes a snippet from random but small literals (only numbers and names it chose, never
a visitor's text), runs it once when it needs the answer to build choices, and explains the result by the rule
an interviewer expects. Distractors come from wrong rules (left-aligned broadcasting, "the tensor's dtype
wins", block instead of strided sharding) and any that happens to equal torch's answer is dropped.
"""

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass

from demos.quiz import Question, format_answer, run_code


@dataclass(frozen=True)
class Family:
    name: str  # the id in question ids: "<name>@<seed>"
    title: str  # what the family asks, in a few words
    topic: str  # the page slug that teaches it
    theme: str  # a short label shown with the question and grouped in reports
    make: Callable[[random.Random], Question]
    concept: str | None = None  # the tracker concept that mastering this family ticks
    section: tuple[tuple[str, str], ...] = ()  # query parameters that open the teaching section of the page
    section_for: Callable[[int], tuple[tuple[str, str], ...]] | None = None  # a seed's own link, when it has one

    def question(self, seed: int) -> Question:
        """The family's question for this seed: the same seed gives the same snippet on every machine."""
        return dataclasses.replace(self.make(random.Random(f"{self.name}@{seed}")), key=f"{self.name}@{seed}")


def call(name: str, *args) -> str:
    """Source text of a call with literal arguments: call('torch.ones', 3, 1) -> 'torch.ones(3, 1)'."""
    return f"{name}({', '.join(map(str, args))})"


def shape_text(shape) -> str:
    return format_answer(tuple(shape))


def num(x: float) -> str:
    """A number as an explanation prints it: 4 significant figures (a test finds torch's answer in it)."""
    return f"{x:.4g}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def answer_text(code: str, raises: tuple[type, ...] = ()) -> str:
    """What torch answers for a snippet, as the choices spell it."""
    return format_answer(run_code(code, raises))


def choices(answer: str, wrong: list[str], rng: random.Random, count: int = 4, least: int = 2) -> tuple[str, ...]:
    """The answer and up to count-1 distinct distractors, shuffled; a distractor equal to the answer is dropped.

    A family passes distractors from wrong rules first and fallbacks after them; `least` of them must survive.
    """
    distractors = [w for w in dict.fromkeys(wrong) if w != answer][: count - 1]
    if len(distractors) < least:
        raise ValueError(f"too few distractors for {answer!r}: {wrong!r}")
    picked = [answer, *distractors]
    rng.shuffle(picked)
    return tuple(picked)
