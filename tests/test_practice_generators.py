"""Every question family, for 300 seeds: the snippet run alone prints torch's answer; prompt, snippet, explanation
and answer agree; a choice question holds its answer exactly once and every distractor is wrong."""

import dataclasses
import json
import math
import re
import subprocess
import sys

import pytest

from demos.practice.catalog import FAMILIES
from demos.quiz import check, format_answer, read_shape
from demos.tracker import QUESTION_ID

SEEDS = range(300)

# Runs each snippet in a fresh namespace of a fresh interpreter, as a person pasting it would: only its own
# imports, the real print. An exception is reported by name (some questions ask "or does it raise?").
CHILD = r"""
import contextlib, io, json, sys, warnings
warnings.simplefilter("ignore")
results = []
for code in json.load(sys.stdin):
    out, error = io.StringIO(), None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<snippet>", "exec"), {"__name__": "__main__"})
    except Exception as err:
        error = type(err).__name__
    results.append({"printed": out.getvalue(), "error": error})
json.dump(results, sys.stdout)
"""


def run_alone(snippets: list[str]) -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(snippets), capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(proc.stdout)


def mentions(text: str, answer) -> bool:
    """Whether an explanation states torch's answer: as it prints, or (a number) to 3 significant figures.

    The explanation's number comes from the rule it explains, computed in Python: this is the check that the
    rule as explained gives what torch gives.
    """
    if format_answer(answer) in text:
        return True
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False
    stated = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)]
    return any(math.isclose(n, value, rel_tol=1e-3, abs_tol=1e-9) for n in stated)


def prints_the_answer(q, answer, printed: str, error: str | None) -> bool:
    """The text the snippet printed (or the exception it raised) is torch's answer, read as a learner's would be."""
    expected = format_answer(answer)
    if error is not None:
        return error == expected
    lines = printed.strip().splitlines()
    if len(lines) != 1:
        return False
    if q.kind == "choice":
        shape = re.fullmatch(r"torch\.Size\(.*\)", lines[0])
        return (format_answer(read_shape(lines[0])) if shape else lines[0]) == expected
    return check(dataclasses.replace(q, run=lambda: answer), lines[0]).correct


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_family_for_300_seeds(family):
    questions = [family.question(seed) for seed in SEEDS]
    answers = [q.run() for q in questions]
    alone = run_alone([q.snippet for q in questions])
    for seed, q, answer, ran in zip(SEEDS, questions, answers, alone, strict=True):
        where = f"{family.name}@{seed}:\n{q.snippet}"
        assert QUESTION_ID.fullmatch(q.key), where
        assert prints_the_answer(q, answer, ran["printed"], ran["error"]), (where, ran, format_answer(answer))
        for number in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w-])", q.prompt):
            assert number in q.snippet, (where, q.prompt, number)
        assert mentions(q.explain, answer), (where, q.explain, format_answer(answer))
        if q.kind == "choice":
            assert list(q.choices).count(format_answer(answer)) == 1, (where, q.choices)
            assert len(set(q.choices)) == len(q.choices) >= 2, (where, q.choices)


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_a_seed_gives_the_same_question_every_time(family):
    first, again = family.question(7), family.question(7)
    assert (first.prompt, first.snippet, first.choices) == (again.prompt, again.snippet, again.choices)
    assert family.question(8).snippet != first.snippet or family.question(9).snippet != first.snippet


def test_at_least_16_families_over_8_themes():
    assert len(FAMILIES) >= 16
    assert len({f.theme for f in FAMILIES.values()}) >= 8


def test_some_families_answer_with_torch_raising_and_choices_vary():
    """The broadcast family must sometimes raise (its distractors include a shape), not always work."""
    answers = {format_answer(FAMILIES["broadcast"].question(seed).run()) for seed in range(60)}
    assert "RuntimeError" in answers and len(answers) > 10
