"""Every predict-then-run question in demos/: its shown snippet, run alone, gives torch's answer."""

import importlib
import pkgutil

import pytest

import demos
from demos.quiz import Question, format_answer
from demos.training import questions as training_questions
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone


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


@pytest.mark.parametrize("q", [q for q in QUESTIONS if not q.code], ids=lambda q: q.key)
def test_snippet_is_the_question_function_and_a_line_that_prints_it(q):
    """One builder for every snippet (demos.shown.script): the function's own source, then print(function())."""
    assert q.snippet.origins == (q.run,)
    assert q.snippet.endswith(f"\n\n\nprint({q.run.__name__}())\n")


def test_a_question_snippet_run_alone_prints_the_answer(tmp_path, snippet_server):
    """The snippet shows only what ran when the question was answered, and prints that answer as a script alone."""
    q = next(q for q in training_questions.QUESTIONS if q.key == "onecycle")
    answer = []
    snippet = assert_shows_what_ran(lambda: answer.append(q.run()) or q.snippet)
    done = run_alone(snippet, tmp_path, snippet_server)
    assert done.returncode == 0, done.stderr
    assert format_answer(eval(done.stdout)) == format_answer(answer[0])
