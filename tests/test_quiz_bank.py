"""Every predict-then-run question in demos/: its shown snippet, run alone, gives torch's answer."""

import importlib
import pkgutil

import pytest

import demos
from demos.quiz import Question, format_answer


def all_questions() -> list[Question]:
    found = {}
    for info in pkgutil.walk_packages(demos.__path__, "demos."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            items = value if isinstance(value, (list, tuple)) else [value]
            for item in items:
                if isinstance(item, Question):
                    found[(info.name, item.key)] = item
    return list(found.values())


QUESTIONS = all_questions()


def run_snippet(code: str):
    """Execute a snippet as a script, capturing the value it prints."""
    printed = []
    exec(compile(code, "<snippet>", "exec"), {"print": printed.append, "__name__": "__snippet__"})
    assert len(printed) == 1, "a snippet prints exactly its answer"
    return printed[0]


def test_questions_found():
    assert len(QUESTIONS) >= 2


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q.key)
def test_snippet_alone_reproduces_the_answer(q):
    assert format_answer(run_snippet(q.snippet)) == format_answer(q.run())


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q.kind == "choice"], ids=lambda q: q.key)
def test_true_answer_is_among_the_choices(q):
    assert format_answer(q.run()) in q.choices
