"""Benchmark cases (python -m bench): each family's generation plus grading of one prediction, budget 200 ms.

Every call uses a fresh seed, so nothing is cached: it is what showing a new question and a learner's click
on Run it cost. Each case returns its own time in ms (the table's result column, for the last call).
"""

import itertools
import time

from demos.practice.catalog import FAMILIES
from demos.quiz import check

BUDGET_S = 0.2
_seeds = itertools.count(500_000)


def _sample_prediction(question) -> str:
    return question.choices[0] if question.kind == "choice" else {"shape": "(1,)", "dtype": "float32"}.get(
        question.kind, "1")


def _generate_and_grade(family):
    def case() -> float:
        start = time.perf_counter()
        question = family.question(next(_seeds))
        check(question, _sample_prediction(question))
        return (time.perf_counter() - start) * 1000

    return case


BENCH_CASES = {f"generate + grade: {name} (result: ms, must be < {BUDGET_S * 1000:.0f})": _generate_and_grade(f)
               for name, f in FAMILIES.items()}
