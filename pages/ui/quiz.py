"""Predict, then run: the learner commits to an answer, then torch runs the snippet and decides."""

import re

import streamlit as st

from demos.errors import InputError
from demos.quiz import Question, check, validate_prediction
from pages.ui.layout import read_asset
from pages.ui.queue import queue_position


def predict_then_run(question: Question, key: str) -> None:
    """Prompt and snippet, a prediction widget, a Run button, then torch's verdict and the explanation."""
    with st.container(border=True):
        st.markdown(f"**{question.prompt}**")
        st.code(question.snippet, language="python", wrap_lines=True)
        prediction = _prediction_widget(question, key)
        verdict_key = f"{key}_verdict"
        if st.button("Run it", key=f"{key}_run", icon=":material/play_arrow:"):
            try:
                with queue_position():  # questions that start DataLoader workers wait for the process slot
                    st.session_state[verdict_key] = check(question, validate_prediction(question, prediction))
            except InputError as err:
                st.session_state.pop(verdict_key, None)
                st.error(str(err), icon=":material/error:")
        verdict = st.session_state.get(verdict_key)
        if verdict is not None:
            _show_verdict(verdict, question.explain)


def _prediction_widget(question: Question, key: str):
    if question.kind == "choice":
        return st.radio("Your prediction", question.choices, index=None, horizontal=True, key=f"{key}_pick")
    hint = "a shape such as (2, 3)" if question.kind == "shape" else "a number such as 0.5"
    return st.text_input("Your prediction", key=f"{key}_typed", placeholder=hint)


def _show_verdict(verdict, explain: str) -> None:
    if verdict.correct:
        st.success(f"Correct: torch returned `{verdict.expected}`.", icon=":material/check_circle:")
    else:
        st.warning(f"You predicted `{verdict.predicted}`; torch returned `{verdict.expected}`.",
                   icon=":material/cancel:")
    st.markdown(explain)


def model_answers(slug: str) -> list[tuple[str, str]]:
    """(question, answer) pairs from assets/interview/<slug>.md, one '## question' heading each."""
    text = read_asset("interview", f"{slug}.md")
    parts = re.split(r"^## +(.+)$", text, flags=re.MULTILINE)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def _mark(key: str) -> str:
    verdict = st.session_state.get(f"{key}_verdict")
    return "" if verdict is None else (" ✓" if verdict.correct else " ✗")


def interview_corner(slug: str, questions: list[Question]) -> None:
    """The page's predict-then-run questions, one at a time, then short model answers to common questions.

    One question is on screen at a time (picked by number, kept in the URL): a flashcard to study with, a single
    card to explain on a shared screen, and a page that reruns quickly however many questions it has.
    """
    st.header("Interview corner", divider="gray")
    st.caption("Predict first, then run: every answer below is what torch returns right now.")
    keys = [f"{slug}_q_{q.key}" for q in questions]
    picked = st.radio(
        f"Question (of {len(questions)})", range(len(questions)), horizontal=True, key=f"{slug}_q_pick",
        bind="query-params", format_func=lambda i: f"{i + 1}{_mark(keys[i])}",
    )
    predict_then_run(questions[picked], key=keys[picked])
    st.subheader("Model answers")
    for i, (asked, answer) in enumerate(model_answers(slug)):
        panel = st.expander(asked, key=f"{slug}_answer_{i}", on_change="rerun")
        if panel.open:  # sent only when opened, like the code panels
            panel.markdown(answer)
