"""The Practice page in AppTest: a 30-question drill renders and grades, settings come from the URL, links are
visitor input, missed questions come back, mastery ticks the tracker, and a mock interview ends in a report."""

from demos.practice import catalog
from demos.practice import drill as dr
from demos.quiz import format_answer
from demos.tracker import Progress
from tests.conftest import assert_clean, open_page

PAGE = "pages/practice.py"


def answer(at, position: int, right: bool) -> None:
    """Give torch's answer (or a wrong one) to the question on screen and press Run it."""
    d = at.session_state["pr_drill"]
    q = catalog.item(d.slots[position].qid).question
    truth = format_answer(q.run())
    key = f"pr_card_{position}"
    if q.kind == "choice":
        pick = truth if right else next(c for c in q.choices if c != truth)
        at.radio(key=f"{key}_pick").set_value(pick).run()
    else:
        wrong = {"shape": "(97, 89)", "number": "-123456789", "dtype": "complex128"}[q.kind]
        at.text_input(key=f"{key}_typed").set_value(truth if right else wrong).run()
    at.button(key=f"{key}_run").click().run()


def test_a_30_question_drill_renders_grades_and_brings_misses_back():
    at = open_page(PAGE, query={"pr_count": "30", "pr_seed": "2024"})
    assert_clean(at)
    d = at.session_state["pr_drill"]
    assert [s.qid for s in d.slots[:30]] == dr.compose(dr.Settings(catalog.TOPICS, 30, 2024))
    missed = []
    position = 0
    while not at.session_state["pr_drill"].finished:
        right = position >= 30 or position % 7 != 3  # miss a few of the drill's own questions
        answer(at, position, right)
        assert_clean(at)
        shown = at.success if right else at.warning
        assert shown, f"a verdict for question {position + 1}"
        if not right:
            missed.append(at.session_state["pr_drill"].slots[position].qid)
            assert "comes back at the end" in " ".join(c.value for c in at.caption)
        at.button(key="pr_next").click().run()
        position += 1
    d = at.session_state["pr_drill"]
    assert len(d.slots) == 30 + len(missed) and [s.qid for s in d.slots[30:]] == [dr.again_id(q) for q in missed]
    assert_clean(at)
    assert at.metric[0].value == f"{30} of {30 + len(missed)}"
    progress = at.session_state["wb_progress"]
    assert progress.review == (), "answered right the second time: off the review list"
    mastered = dr.mastered(at.session_state["pr_history"], ())
    assert {(t, c) for t, cs in progress.done.items() for c in cs} == mastered
    assert [e.label for e in at.expander if e.label[0].isdigit()], "missed questions listed with why"


def test_settings_come_from_the_url_and_hostile_values_are_sentences():
    at = open_page(PAGE, query={"pr_topics": ["Tensors", "Autograd"], "pr_count": "12", "pr_seed": "77",
                                "pr_mode": "Mock interview"})
    assert_clean(at)
    d = at.session_state["pr_drill"]
    assert d.settings == dr.Settings(("tensors", "autograd"), 12, 77, "Mock interview")
    assert not [b for b in at.button if b.key == "pr_prev"], "an interview moves forward only"
    for query in ({"pr_seed": "1e400"}, {"pr_seed": "9" * 30}, {"pr_seed": "[x](http://evil)"}):
        at = open_page(PAGE, query={**query, "pr_count": "inf", "pr_topics": "zzz", "pr_mode": "x"})
        assert not at.exception
        assert len(at.error) == 1 and at.error[0].value.startswith("The seed must be a whole number from 0 to")
        assert "http" not in at.error[0].value or "`[x](http://evil)`" in at.error[0].value, "quoted literally"


def test_the_review_list_from_a_progress_link_starts_the_next_drill():
    at = open_page("pages/home.py")
    at.session_state["wb_progress"] = Progress({}, ("broadcast@5", "nope@1"))
    at.switch_page(PAGE).run()
    assert_clean(at)
    d = at.session_state["pr_drill"]
    assert d.slots[-1].qid == dr.again_id("broadcast@5") and d.slots[-1].again, "unknown ids are dropped, known ones "
    "asked again (a generated one as a new instance of its family)"


def test_a_mock_interview_ends_in_a_timed_report_with_study_links():
    at = open_page(PAGE, query={"pr_mode": "Mock interview", "pr_count": "5", "pr_topics": ["Tensors"],
                                "pr_seed": "8"})
    for position in range(5):
        answer(at, position, right=position == 0)
        at.button(key="pr_next").click().run()
    assert_clean(at)
    assert at.subheader[0].value == "Mock interview report"
    assert at.metric[0].value == "1 of 5"
    links = [p for p in at.get("page_link")]
    assert links and all("tensors" in p.proto.page for p in links), "weak topic: links to its sections"
    assert len(at.get("vega_lite_chart")) == 1, "time per question"


def test_whiteboard_mode_shows_one_question_large():
    at = open_page(PAGE, query={"whiteboard": "true"})
    assert_clean(at)
    first = catalog.item(at.session_state["pr_drill"].slots[0].qid).question
    assert at.subheader and at.subheader[0].value == first.prompt
    assert not at.expander[0].proto.expanded, "settings folded away"


def test_a_third_right_answer_masters_a_concept_and_ticks_the_tracker():
    seed = next(s for s in range(100) if "@" in dr.compose(dr.Settings(("tensors",), 5, s))[0])
    first = dr.compose(dr.Settings(("tensors",), 5, seed))[0]
    family = catalog.FAMILIES[first.split("@")[0]]
    at = open_page(PAGE, query={"pr_topics": ["Tensors"], "pr_count": "5", "pr_seed": str(seed)})
    at.session_state["pr_history"] = [(f"{family.name}@{900_000 + i}", "correct") for i in range(2)]
    answer(at, 0, right=True)
    assert_clean(at)
    assert at.session_state["wb_progress"].done == {family.topic: (family.concept,)}
    assert family.concept in at.toast[0].value


def test_topics_without_generators_say_how_many_questions_there_are():
    at = open_page(PAGE, query={"pr_topics": ["Debugging & reproducibility"], "pr_count": "30"})
    assert_clean(at)
    have = len(catalog.bank_of("debugging"))
    assert have < 30 and len(at.session_state["pr_drill"].slots) == have
    assert at.info[0].value == f"Only {have} questions exist for these topics, so this drill has {have}, not 30."


def test_going_back_shows_the_answer_that_was_scored():
    at = open_page(PAGE, query={"pr_topics": ["Tensors"], "pr_count": "5", "pr_seed": "4"})
    answer(at, 0, right=True)
    at.button(key="pr_next").click().run()
    at.button(key="pr_prev").click().run()
    assert_clean(at)
    shown = [c.value for c in at.caption if c.value.startswith("Answered earlier (correct)")]
    assert shown or "Correct" in at.success[0].value, "the scored answer is on screen"
    assert at.session_state["pr_drill"].slots[0].outcome == "correct"


def test_the_progress_line_counts_the_answer_just_given():
    at = open_page(PAGE, query={"pr_count": "5", "pr_seed": "7"})
    assert at.get("progress")[0].proto.text.endswith("· 0 answered")
    answer(at, 0, right=True)
    assert_clean(at)
    line = at.get("progress")[0].proto.text
    assert line == "Question 1 of 5 · 1 answered", line
    assert at.get("progress")[0].proto.value == 20


def test_skips_are_counted_apart_from_answers_and_come_back_as_skips():
    """'7 answered' after 2 answers and 5 skips; a skipped question came back as 'you missed it earlier'."""
    at = open_page(PAGE, query={"pr_count": "8", "pr_seed": "31", "pr_topics": ["Tensors"]})
    for position in range(2):
        answer(at, position, right=position == 0)
        at.button(key="pr_next").click().run()
    for _ in range(5):
        at.button(key="pr_next").click().run()  # Skip
    assert_clean(at)
    progress = at.get("progress")[0].proto.text
    assert progress.startswith("Question 8 of 14 · 2 answered · 5 skipped"), progress
    d = at.session_state["pr_drill"]
    assert (d.answered, d.skipped) == (2, 5)
    at.button(key="pr_next").click().run()  # skip the 8th: on to the comebacks
    first_back = at.session_state["pr_drill"].current
    assert first_back.again == "missed"
    assert "asked again: you missed it earlier" in " ".join(c.value for c in at.caption)
    at.button(key="pr_next").click().run()
    assert at.session_state["pr_drill"].current.again == "skipped"
    about = " ".join(c.value for c in at.caption)
    assert "asked again: you skipped it earlier" in about and "you missed it earlier" not in about
    at.button(key="pr_end").click().run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Right"] == "1 of 2" and metrics["Skipped"] == "7"  # 5, the 8th, and the comeback moved past
    assert any(m.value == "**Missed and skipped questions**" for m in at.markdown)
