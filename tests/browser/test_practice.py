"""The Practice page and the quiz in a real browser: a 30-question drill, the quiz round trip, the picker's URL."""

import re
import time

import pytest

from demos.practice import catalog
from demos.practice import drill as dr
from demos.quiz import format_answer
from harness.browser import (
    artifacts_dir,
    new_context,
    run_mark,
    run_started,
    wait_run,
)
from tests.browser.test_browser import full_screenshot, open_app, wait_loaded

pytestmark = pytest.mark.browser


def act(page, do, until, attempts: int = 3, name: str = "action") -> None:
    """Do something, wait for the run it starts, and check its effect (`until()`); retry only if there is none.

    A run can be too fast for the page to show 'running' at all, so success is judged by the effect: a button
    click is never repeated once it worked (a second "Next question" would skip a question).
    """
    for _ in range(attempts):
        mark = run_mark(page)
        do()
        if run_started(page, mark, timeout=3):
            wait_run(page, mark)
        if eventually(until):
            return
    page.screenshot(path=str(artifacts_dir("screenshots") / "practice-stuck.png"), full_page=True)
    raise AssertionError(f"{name} had no effect (screenshot: practice-stuck.png)")


def eventually(check, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def option(page, text: str):
    return page.locator("[data-testid=stRadio] label").filter(has_text=re.compile(f"^{re.escape(text)}$")).first


def predict(page, question, text: str, until) -> None:
    """Change the prediction alone (a choice clicked, or text typed and Enter) until its effect shows."""
    if question.kind == "choice":
        act(page, option(page, text).click, until, name=text)
        return
    box = page.get_by_label("Your prediction")

    def type_and_enter():  # typed afresh on a retry: text filled while the card is still mounting is not seen
        box.fill("")
        box.fill(text)
        box.press("Enter")

    act(page, type_and_enter, until, name=text)


def answer(page, question, text: str) -> str:
    """Predict and press Run it, as a learner does; returns the verdict shown."""
    def run_it():
        if question.kind == "choice":
            option(page, text).click()
        else:
            page.get_by_label("Your prediction").fill(text)
        button(page, "Run it").click()

    act(page, run_it, lambda: verdict_text(page) != "", name=f"Run it with {text}")
    return verdict_text(page)


def next_question(page, position: int, last: bool) -> None:
    """Press Next question (Finish on the last) and wait for the next question or the report."""
    label = "Finish" if last else "Next question"
    shown = (lambda: page.locator("[data-testid=stMetric]").count() > 0) if last else (
        lambda: f"Question {position + 2} of" in page.locator("[data-testid=stProgress]").inner_text())
    act(page, button(page, label).click, shown, name=label)


def verdict_text(page) -> str:
    """The message of the verdict on screen ('' when there is none)."""
    alerts = page.locator("[data-testid=stAlertContentSuccess] p, [data-testid=stAlertContentWarning] p, "
                          "[data-testid=stAlertContentInfo] p")
    return alerts.first.inner_text() if alerts.count() else ""


def drill_url(server: str, settings: dr.Settings) -> str:
    topics = "&".join(f"pr_topics={catalog_title(t)}" for t in settings.topics)
    return (f"{server}/practice?{topics}&pr_count={settings.count}&pr_seed={settings.seed}"
            f"&pr_mode={settings.mode.replace(' ', '+')}")


def catalog_title(slug: str) -> str:
    from demos.registry import by_slug

    return by_slug(slug).title.replace(" ", "+").replace("&", "%26")


def test_the_quiz_round_trip_answer_change_retry_next(server, browser):
    settings = dr.Settings(("tensors",), 5, 11)
    ids = dr.compose(settings)
    context, page = open_app(browser, drill_url(server, settings))
    try:
        wait_loaded(page)
        first = catalog.item(ids[0]).question
        truth = format_answer(first.run())
        assert "Correct" in answer(page, first, truth)
        wrong = next(c for c in first.choices if c != truth) if first.kind == "choice" else "(97, 89)"
        if first.kind == "number":
            wrong = "-123456789"
        predict(page, first, wrong, until=lambda: verdict_text(page) == "")  # the old verdict judged another

        act(page, button(page, "Run it").click, lambda: verdict_text(page) != "", name="Run it")
        assert "torch returned" in verdict_text(page) or "Close" in verdict_text(page)
        full_screenshot(page, "practice-verdict")
        act(page, button(page, "Try again").click, lambda: verdict_text(page) == "", name="Try again")
        if first.kind != "choice":
            assert page.get_by_label("Your prediction").input_value() == ""
        else:
            assert page.locator("[data-testid=stRadio] input:checked").count() == 0
        assert "Correct" in answer(page, first, truth), "answered again after Try again, no reload"
        next_question(page, 0, last=False)
        second = catalog.item(ids[1]).question
        page.get_by_text(second.prompt, exact=True).wait_for(timeout=20_000)
        assert "Question 2 of" in page.locator("[data-testid=stProgress]").inner_text()
    finally:
        context.close()


def test_a_30_question_drill_in_the_browser(server, browser):
    settings = dr.Settings(catalog.TOPICS, 30, 2024)
    ids = dr.compose(settings)
    context, page = open_app(browser, drill_url(server, settings))
    try:
        wait_loaded(page)
        for position, qid in enumerate(ids):
            q = catalog.item(qid).question
            page.get_by_text(f"Question {position + 1} of 30").wait_for(timeout=30_000)
            wait_loaded(page)
            verdict = answer(page, q, format_answer(q.run()))
            assert "Correct" in verdict, (position, qid, verdict)
            assert page.locator("[data-testid=stException]").count() == 0
            next_question(page, position, last=position == 29)
        page.get_by_text("30 of 30").wait_for(timeout=30_000)
        wait_loaded(page)
        full_screenshot(page, "practice-report")
    finally:
        context.close()


def test_a_mock_interview_shows_a_running_clock_and_whiteboard_mode_one_large_question(server, browser):
    settings = dr.Settings(("autograd",), 5, 3, "Mock interview")
    context, page = open_app(browser, drill_url(server, settings))
    try:
        clock = page.locator("#pr-q-0")
        clock.wait_for(timeout=20_000)
        before = clock.inner_text()
        page.wait_for_timeout(2500)
        assert clock.inner_text() != before, "the clock counts in the browser"
        wait_loaded(page)
        full_screenshot(page, "practice-mock")
        ids = dr.compose(settings)
        first = catalog.item(ids[0]).question
        answer(page, first, format_answer(first.run()))
        next_question(page, 0, last=False)
        for position in range(1, 5):  # the rest skipped: a report with weak topics and missed questions
            label = "Skip and finish" if position == 4 else "Skip"
            shown = (lambda: page.locator("[data-testid=stMetric]").count() > 0) if position == 4 else (
                lambda p=position: f"Question {p + 2} of" in page.locator("[data-testid=stProgress]").inner_text())
            act(page, button(page, label).click, shown, name=label)
        wait_loaded(page)
        full_screenshot(page, "practice-mock-report")
        assert page.get_by_text("1 of 5").count() == 1
        assert page.locator("[data-testid=stPageLink-NavLink]").count() >= 1, "links to study the weak topic"
    finally:
        context.close()
    context = new_context(browser, viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(drill_url(server, dr.Settings(("tensors",), 5, 11)) + "&whiteboard=true")
        wait_run(page, timeout=120)
        wait_loaded(page)
        prompt = catalog.item(dr.compose(dr.Settings(("tensors",), 5, 11))[0]).question.prompt
        heading = page.locator("h3").filter(has_text=prompt)
        assert heading.count() == 1 and heading.first.is_visible()
        page.screenshot(path=str(artifacts_dir("screenshots") / "practice-whiteboard.png"))
        act(page, button(page, "Next step").click, lambda: page.get_by_text("torch returned").count() > 0,
            name="Next step")
        page.screenshot(path=str(artifacts_dir("screenshots") / "practice-whiteboard-revealed.png"))
    finally:
        context.close()


def test_the_interview_corner_keeps_its_question_in_the_url_after_answering(server, browser):
    from demos.tensors.questions import QUESTIONS

    context, page = open_app(browser, f"{server}/tensors?tensors_q_pick=3")
    try:
        wait_loaded(page)
        q = QUESTIONS[2]
        page.get_by_text(q.prompt, exact=True).wait_for(timeout=20_000)
        assert "Correct" in answer(page, q, format_answer(q.run()))
        mark = run_mark(page)
        page.locator("[data-testid=stMain]").press("r")  # a rerun, as any widget causes
        if run_started(page, mark):
            wait_run(page, mark)
        assert "tensors_q_pick=3" in page.url
        assert page.get_by_text(q.prompt, exact=True).count() == 1, "still on question 3"
        corner = page.locator("[data-testid=stRadio]").first
        corner.screenshot(path=str(artifacts_dir("screenshots") / "tensors-corner-picker.png"))
    finally:
        context.close()
