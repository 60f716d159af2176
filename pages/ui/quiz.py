"""Predict, then run: the learner commits to an answer, then torch runs the snippet and decides."""

import re

import streamlit as st

from demos.errors import InputError
from demos.quiz import Question, Verdict, check, format_answer, validate_prediction
from pages.ui import marks
from pages.ui.layout import key_controls, read_asset, steps, whiteboard_on
from pages.ui.queue import queued


def predict_then_run(question: Question, key: str, mark: str = marks.CARD) -> Verdict | None:
    """Prompt and snippet, a prediction widget, Run it / Try again, then torch's verdict and the explanation.

    A verdict belongs to the prediction it judged: change the prediction and the verdict goes away until the
    next Run. Returns the verdict on screen (None when there is none). In whiteboard mode the prompt is large
    and torch's answer can be revealed as a step, with no prediction typed (a class answers out loud).
    """
    with st.container(border=True, key=mark + key):
        if whiteboard_on():
            st.subheader(question.prompt, anchor=False)
        else:
            st.markdown(f"**{question.prompt}**")
        st.code(question.snippet, language="python", wrap_lines=True)
        if question.model:
            st.caption(f"Answered by {question.model}, not by torch on a GPU.")
        # in whiteboard mode the prediction and its buttons share one row, so the card fits a 720 px screen whole
        row = st.container(horizontal=True, vertical_alignment="bottom") if whiteboard_on() else st.container()
        with row:
            prediction = _prediction_widget(question, key)
        verdict_key = f"{key}_verdict"
        buttons = row if whiteboard_on() else st.container(horizontal=True)
        if buttons.button("Run it", key=f"{key}_run", icon=":material/play_arrow:", type="primary"):
            try:
                # questions that start DataLoader workers wait for the process slot
                st.session_state[verdict_key] = queued(check, question, validate_prediction(question, prediction))
            except InputError as err:
                st.session_state.pop(verdict_key, None)
                st.error(str(err), icon=":material/error:")
        verdict = _verdict_for(st.session_state.get(verdict_key), prediction)
        if verdict is not None:
            buttons.button("Try again", key=f"{key}_retry", icon=":material/refresh:", on_click=_try_again,
                           args=(question, key))
            _show_verdict(verdict, question.explain, question.answered_by)
        elif whiteboard_on():
            _reveal_steps(question, key)
    return verdict


def _verdict_for(verdict: Verdict | None, prediction) -> Verdict | None:
    """The stored verdict if it judged the prediction now on screen, else None."""
    if verdict is None or prediction is None or verdict.typed != str(prediction).strip():
        return None
    return verdict


def _try_again(question: Question, key: str) -> None:
    """Before the rerun: clear the prediction and its verdict, so the card is fresh without a reload."""
    st.session_state.pop(f"{key}_verdict", None)
    if question.kind == "choice":
        st.session_state[f"{key}_pick"] = None
    else:
        st.session_state[f"{key}_typed"] = ""


def _prediction_widget(question: Question, key: str):
    if question.kind == "choice":
        return st.radio("Your prediction", question.choices, index=None, horizontal=True, key=f"{key}_pick")
    return st.text_input("Your prediction", key=f"{key}_typed", placeholder=question.hint)


def _show_verdict(verdict: Verdict, explain: str, source: str = "torch") -> None:
    if verdict.outcome == "correct":
        st.success(f"Correct: {source} returned `{verdict.expected}`.", icon=":material/check_circle:")
    elif verdict.outcome == "close":
        st.info(f"Close: {source} says `{verdict.expected}`; you predicted `{verdict.predicted}`.",
                icon=":material/adjust:")
    else:
        st.warning(f"You predicted `{verdict.predicted}`; {source} returned `{verdict.expected}`.",
                   icon=":material/cancel:")
    st.markdown(explain)


def _reveal_steps(question: Question, key: str) -> None:
    """Whiteboard mode with no prediction judged: reveal torch's answer, then why, one click each."""
    shown = st.session_state.get(f"{key}_reveal_shown", 1)  # the step ui.steps is at
    answer = format_answer(question.run()) if shown > 1 else ""  # run only once the answer is revealed
    who = question.answered_by
    steps([f"Predict out loud, then reveal what {who} returns.", f"{who} returned `{answer}`.", question.explain],
          key=f"{key}_reveal")


def model_answers(slug: str) -> list[tuple[str, str]]:
    """(question, answer) pairs from assets/interview/<slug>.md, one '## question' heading each."""
    text = read_asset("interview", f"{slug}.md")
    parts = re.split(r"^## +(.+)$", text, flags=re.MULTILINE)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def _mark(key: str) -> str:
    verdict = st.session_state.get(f"{key}_verdict")
    return "" if verdict is None else {"correct": "✓", "close": "≈"}.get(verdict.outcome, "✗")


def interview_corner(slug: str, questions: list[Question]) -> None:
    """The page's predict-then-run questions, one at a time, then short model answers to common questions.

    One question is on screen at a time (picked by number, kept in the URL): a flashcard to study with, a single
    card to explain on a shared screen, and a page that reruns quickly however many questions it has. The URL
    holds the question's number, which never changes; the ✓/✗ marks are captions, so answering a question does
    not change the value a shared link stores.
    """
    st.header("Interview corner", divider="gray")
    st.caption("Predict first, then run: every answer below is what torch returns right now.")
    keys = [f"{slug}_q_{q.key}" for q in questions]
    with st.container(key=f"corner-{slug}"):  # the picker is the card's key row (whiteboard.css orders in here)
        with key_controls(f"{slug}_q"):
            picked = st.radio(
                f"Question (of {len(questions)})", range(len(questions)), horizontal=True, key=f"{slug}_q_pick",
                bind="query-params", format_func=lambda i: str(i + 1), captions=[_mark(k) for k in keys],
            )
        predict_then_run(questions[picked], key=keys[picked], mark=marks.CORNER)
    st.subheader("Model answers")
    for i, (asked, answer) in enumerate(model_answers(slug)):
        panel = st.expander(asked, key=f"{slug}_answer_{i}", on_change="rerun")
        if panel.open:  # sent only when opened, like the code panels
            panel.markdown(answer)
