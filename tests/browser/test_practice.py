"""The Practice page and the quiz in a real browser: a 30-question drill, the quiz round trip, the picker's URL."""

import re

import pytest
from playwright.sync_api import expect

from demos.practice import catalog
from demos.practice import drill as dr
from demos.quiz import format_answer
from harness.browser import act, artifacts_dir, open_page, rerun, settle
from pages.ui import marks
from tests.browser.test_browser import full_screenshot, open_app, wait_loaded

pytestmark = pytest.mark.browser


def do(page, action, then) -> None:
    """Do `action()` once (it starts a run) and wait for its effect (`then()`: an `expect`) and the run's end."""
    act(page, action, then)


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def option(page, text: str):
    return page.locator("[data-testid=stRadio] label").filter(has_text=re.compile(f"^{re.escape(text)}$")).first


def predict(page, question, text: str, then) -> None:
    """Change the prediction alone (a choice clicked, or text typed and Enter), then wait for `then()`."""
    if question.kind == "choice":
        do(page, option(page, text).click, then)
        return
    box = page.get_by_label("Your prediction")
    settle(page)
    box.fill(text)
    do(page, lambda: box.press("Enter"), then)


def answer(page, question, text: str) -> str:
    """Predict and press Run it, as a learner does; returns the verdict shown."""
    settle(page)
    if question.kind == "choice":
        do(page, option(page, text).click, lambda: expect(option_input(page, text)).to_be_checked())
    else:
        page.get_by_label("Your prediction").fill(text)
    do(page, button(page, "Run it").click, lambda: expect(verdict(page)).to_have_count(1))
    return verdict(page).inner_text()


def next_question(page, position: int, last: bool) -> None:
    """Press Next question (Finish on the last) and wait for the next question or the report."""
    do(page, button(page, "Finish" if last else "Next question").click, lambda: shown_next(page, position, last))


def shown_next(page, position: int, last: bool) -> None:
    """The report after the last question, else the question after `position`."""
    if last:
        expect(page.locator("[data-testid=stMetric]").first).to_be_visible()
    else:
        expect(page.locator("[data-testid=stProgress]")).to_contain_text(f"Question {position + 2} of")


def verdict(page):
    """The message of the verdict in the question card (none before Run it; a notice above the page is not one)."""
    return page.locator(f"{marks.selector(marks.CARD)}, {marks.selector(marks.CORNER)}").locator(
        "[data-testid=stAlertContentSuccess] p, [data-testid=stAlertContentWarning] p, "
        "[data-testid=stAlertContentInfo] p")


def option_input(page, text: str):
    return page.locator("[data-testid=stRadio] label").filter(has_text=re.compile(f"^{re.escape(text)}$")).first \
        .locator("input")


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
        no_verdict = lambda: expect(verdict(page)).to_have_count(0)  # noqa: E731
        predict(page, first, wrong, then=no_verdict)  # the old verdict judged another prediction

        do(page, button(page, "Run it").click, lambda: expect(verdict(page)).to_have_count(1))
        assert "torch returned" in verdict(page).inner_text() or "Close" in verdict(page).inner_text()
        full_screenshot(page, "practice-verdict")
        do(page, button(page, "Try again").click, no_verdict)
        if first.kind != "choice":
            assert page.get_by_label("Your prediction").input_value() == ""
        else:
            assert page.locator("[data-testid=stRadio] input:checked").count() == 0
        assert "Correct" in answer(page, first, truth), "answered again after Try again, no reload"
        next_question(page, 0, last=False)
        second = catalog.item(ids[1]).question
        expect(page.get_by_text(second.prompt, exact=True)).to_be_visible()
        expect(page.locator("[data-testid=stProgress]")).to_contain_text("Question 2 of")
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
            expect(page.get_by_text(f"Question {position + 1} of 30")).to_be_visible()
            wait_loaded(page)
            verdict = answer(page, q, format_answer(q.run()))
            assert "Correct" in verdict, (position, qid, verdict)
            assert page.locator("[data-testid=stException]").count() == 0
            next_question(page, position, last=position == 29)
        expect(page.get_by_text("30 of 30")).to_be_visible()
        wait_loaded(page)
        full_screenshot(page, "practice-report")
    finally:
        context.close()


def test_a_mock_interview_shows_a_running_clock_and_whiteboard_mode_one_large_question(server, browser):
    settings = dr.Settings(("autograd",), 5, 3, "Mock interview")
    context, page = open_app(browser, drill_url(server, settings))
    try:
        clock = page.locator("#pr-q-0")
        expect(clock).to_be_visible()
        before = clock.inner_text()
        expect(clock, "the clock counts in the browser").not_to_have_text(before, timeout=5_000)
        wait_loaded(page)
        full_screenshot(page, "practice-mock")
        ids = dr.compose(settings)
        first = catalog.item(ids[0]).question
        answer(page, first, format_answer(first.run()))
        next_question(page, 0, last=False)
        for position in range(1, 5):  # the rest skipped: a report with weak topics and missed questions
            label = "Skip and finish" if position == 4 else "Skip"
            do(page, button(page, label).click, lambda p=position: shown_next(page, p, last=p == 4))
        wait_loaded(page)
        full_screenshot(page, "practice-mock-report")
        metrics = page.get_by_test_id("stMetric")
        expect(metrics.filter(has_text="Right")).to_contain_text("1 of 1")  # a skip is not an answer
        expect(metrics.filter(has_text="Skipped")).to_contain_text("4")
        assert page.locator("[data-testid=stPageLink-NavLink]").count() >= 1, "links to study the weak topic"
    finally:
        context.close()
    context, page = open_page(browser, drill_url(server, dr.Settings(("tensors",), 5, 11)) + "&whiteboard=true",
                              viewport={"width": 1280, "height": 720})
    try:
        wait_loaded(page)
        prompt = catalog.item(dr.compose(dr.Settings(("tensors",), 5, 11))[0]).question.prompt
        heading = page.locator("h3").filter(has_text=prompt)
        assert heading.count() == 1 and heading.first.is_visible()
        page.screenshot(path=str(artifacts_dir("screenshots") / "practice-whiteboard.png"))
        do(page, button(page, "Next step").click,
           lambda: expect(page.get_by_text("torch returned").first).to_be_visible())
        page.screenshot(path=str(artifacts_dir("screenshots") / "practice-whiteboard-revealed.png"))
    finally:
        context.close()


def test_the_interview_corner_keeps_its_question_in_the_url_after_answering(server, browser):
    from demos.tensors.questions import QUESTIONS

    context, page = open_app(browser, f"{server}/tensors?tensors_q_pick=3")
    try:
        wait_loaded(page)
        q = QUESTIONS[2]
        expect(page.get_by_text(q.prompt, exact=True)).to_be_visible()
        assert "Correct" in answer(page, q, format_answer(q.run()))
        rerun(page)  # a rerun, as any widget causes
        assert "tensors_q_pick=3" in page.url
        assert page.get_by_text(q.prompt, exact=True).count() == 1, "still on question 3"
        corner = page.locator("[data-testid=stRadio]").first
        corner.screenshot(path=str(artifacts_dir("screenshots") / "tensors-corner-picker.png"))
    finally:
        context.close()
