"""Drills: reproducible from their settings, spaced repetition, mastery, the report, and the catalog's reach."""

import re

import pytest

from demos.errors import InputError
from demos.practice import catalog
from demos.practice import drill as dr
from demos.registry import TOPICS, by_slug
from demos.tracker import MAX_REVIEW, QUESTION_ID
from tests.conftest import open_page
from tests.test_quiz_bank import QUESTIONS as EVERY_QUESTION


def test_the_catalog_holds_every_question_in_demos():
    """The bank is read from the question modules; the quiz-bank test walks all of demos/: same snippets."""
    assert {q.snippet for q in EVERY_QUESTION} == {it.question.snippet for it in catalog.bank().values()}
    assert all(QUESTION_ID.fullmatch(qid) for qid in catalog.bank()), "ids fit the progress link's grammar"


def test_topics_and_concepts_are_the_registry_s():
    slugs = {t.slug: t for t in TOPICS}
    assert set(catalog.TOPICS) <= set(slugs)
    for family in catalog.FAMILIES.values():
        assert family.topic in catalog.TOPICS
        assert family.concept is None or family.concept in slugs[family.topic].concepts, family.name


@pytest.mark.parametrize("family", [f for f in catalog.FAMILIES.values() if f.section], ids=lambda f: f.name)
def test_each_deep_link_opens_its_section(family):
    """A report's link must open the tab that teaches the family: the tab exists and is the one drawn."""
    (key, value), = family.section
    at = open_page(by_slug(family.topic).file, query={key: value})
    assert not at.exception
    tabs = {t.label: len(t.children) for t in at.tabs}
    assert tabs.get(value, 0) > 0, (value, tabs)
    lazy = any(n == 0 for n in tabs.values())
    assert not lazy or [label for label, n in tabs.items() if n] == [value]


def test_settings_are_validated():
    ok = dr.settings(["tensors", "nope"], 10, " 42 ", "Drill")
    assert ok == dr.Settings(("tensors",), 10, 42, "Drill")
    for args, words in [
        (([], 10, "1", "Drill"), "at least one topic"),
        ((["tensors"], 31, "1", "Drill"), "between 5 and 30"),
        ((["tensors"], 10, "1e400", "Drill"), "whole number"),
        ((["tensors"], 10, "9" * 30, "Drill"), "whole number"),
        ((["tensors"], 10, "-3", "Drill"), "whole number"),
        ((["tensors"], 10, "![x](http://evil)", "Drill"), "whole number"),
        ((["tensors"], 10, "²", "Drill"), "whole number"),  # str.isdigit() says yes, int() says no
        ((["tensors"], 10, "١٢", "Drill"), "whole number"),  # Arabic-Indic digits: not a seed a link should hold
        ((["tensors"], 10, "1", "Quiz"), "mode"),
    ]:
        with pytest.raises(InputError, match=words):
            dr.settings(*args)


def test_a_drill_is_a_function_of_its_settings():
    s = dr.Settings(("tensors", "autograd", "distributed"), 30, 1234)
    ids = dr.compose(s)
    assert ids == dr.compose(s) and len(ids) == 30
    assert dr.compose(dr.Settings(s.topics, 30, 1235)) != ids
    assert {catalog.item(q).topic for q in ids} == set(s.topics), "drawn across the chosen topics"
    assert any("@" in q for q in ids) and any("/" in q for q in ids), "generated and bank questions both"
    assert len(set(ids)) == len(ids)


def test_a_miss_comes_back_at_the_end_once_and_joins_the_review_list():
    d = dr.start(dr.Settings(("tensors",), 5, 3), (), now=0.0)
    first = d.current.qid
    assert d.record("wrong", "(2, 3)", "(3, 2)", now=4.0)
    assert not d.record("correct", "(3, 2)", "(3, 2)", now=5.0), "only the first verdict counts"
    assert d.current.seconds == 4.0
    comeback = d.slots[-1].qid
    assert len(d.slots) == 6 and d.slots[-1].again and dr.family_of(comeback) == dr.family_of(first)
    assert (comeback != first) == ("@" in first), "a generated question comes back as a new instance"
    review = dr.updated_review((), first, "wrong")
    assert review == (first,)
    assert dr.updated_review(review, first, "correct") == ()
    assert len(dr.updated_review(tuple(f"broadcast@{i}" for i in range(MAX_REVIEW)), first, "close")) == MAX_REVIEW


def test_the_next_drill_asks_the_review_list_again_but_a_mock_interview_does_not():
    review = ("broadcast@11", "tensors/uint8")
    d = dr.start(dr.Settings(("autograd",), 5, 1), review, now=0.0)
    assert [s.qid for s in d.slots[-2:]] == [dr.again_id(q) for q in review] and all(s.again for s in d.slots[-2:])
    assert d.slots[-2].qid != "broadcast@11" and d.slots[-1].qid == "tensors/uint8"
    mock = dr.start(dr.Settings(("autograd",), 5, 1, "Mock interview"), review, now=0.0)
    assert len(mock.slots) == 5
    mock.record("wrong", "1", "2", now=1.0)
    assert len(mock.slots) == 5, "an interview asks no question twice"


def test_moving_on_skips_and_the_end_finishes():
    d = dr.start(dr.Settings(("tensors",), 5, 3, "Mock interview"), (), now=0.0)
    for t in range(5):
        d.move(+1, now=float(t + 1))
    assert d.finished and all(s.outcome == "skipped" for s in d.slots)
    assert d.total_seconds() == 5.0


def test_mastery_needs_three_right_answers_and_nothing_left_to_review():
    history = [(f"broadcast@{i}", "correct") for i in range(3)]
    assert dr.mastered(history[:2], ()) == set()
    assert dr.mastered(history, ()) == {("tensors", "Broadcasting rules")}
    assert dr.mastered(history, ("broadcast@99",)) == set()
    assert dr.mastered(history, ("gone@1",)) == {("tensors", "Broadcasting rules")}, "unknown ids are ignored"


def test_report_scores_topics_and_links_weak_ones_to_their_sections():
    d = dr.start(dr.Settings(("tensors", "modules"), 6, 5, "Mock interview"), (), now=0.0)
    for i, slot in enumerate(d.slots):
        topic = catalog.item(slot.qid).topic
        d.record("correct" if topic == "modules" else "wrong", "x", "y", now=float(i))
        d.move(+1, now=float(i) + 0.5)
    scores = {s.topic: s for s in dr.scores(d)}
    assert scores["modules"].share == 1.0 and scores["tensors"].share == 0.0
    weak = dr.weak_topics(d)
    assert list(weak) == ["tensors"]
    missed = {catalog.item(s.qid).link for s in d.slots if catalog.item(s.qid).topic == "tensors"}
    assert set(weak["tensors"]) == missed and all(slug == "tensors" for slug, _ in missed)
    for qid in (s.qid for s in d.slots if "@" in s.qid and catalog.item(s.qid).topic == "tensors"):
        assert catalog.item(qid).link[1] == catalog.FAMILIES[qid.split("@")[0]].section, "the family's tab"
    spec = dr.time_chart(d, 90)
    assert len(spec["data"]["values"]) == 6 and spec["layer"][1]["encoding"]["y"]["datum"] == 90


def test_a_missed_generated_question_comes_back_as_another_instance_of_its_family():
    """Another seed, so another snippet and answer; answering that instance right clears the family's review."""
    d = dr.start(dr.Settings(("tensors",), 5, 3), (), now=0.0)
    generated = next(i for i, s in enumerate(d.slots) if "@" in s.qid)
    d.position = generated
    missed = d.current.qid
    d.record("wrong", "x", "y", now=1.0)
    comeback = d.slots[-1].qid
    assert dr.family_of(comeback) == dr.family_of(missed) and comeback != missed
    assert catalog.item(comeback).question.snippet != catalog.item(missed).question.snippet
    review = dr.updated_review((), missed, "wrong")
    assert dr.updated_review(review, comeback, "wrong") == (comeback,), "one entry per family"
    assert dr.updated_review(review, comeback, "correct") == ()


def test_a_skip_is_not_an_answer_and_comes_back_as_a_skip_not_a_miss():
    d = dr.start(dr.Settings(("tensors",), 7, 3), ("tensors/uint8",), now=0.0)
    d.record("correct", "x", "x", now=1.0)
    d.move(+1, now=1.5)
    d.record("wrong", "x", "y", now=2.0)
    d.move(+1, now=2.5)
    for t in range(5):
        d.move(+1, now=3.0 + t)  # five skips
    assert (d.answered, d.skipped) == (2, 5), "7 dealt with: 2 answered, 5 skipped"
    comebacks = {s.qid: s.again for s in d.slots[8:]}
    assert list(comebacks.values()) == ["missed"] + ["skipped"] * 5
    assert d.slots[7].again == "review", "carried from the review list of an earlier drill"
    assert dr.AGAIN_NOTES["skipped"] == "asked again: you skipped it earlier"
    assert "missed" not in dr.AGAIN_NOTES["skipped"] and "missed" not in dr.AGAIN_NOTES["review"]
    scores = dr.scores(d)
    assert sum(t.answered for t in scores) == 2 and sum(t.skipped for t in scores) == 5


def test_the_accumulation_question_numbers_its_steps_from_1_in_the_prompt_and_the_snippet():
    """'zeroed after step 1' once meant the loop's step 0 (the first backward) and read as the second."""
    family = catalog.FAMILIES["accumulate"]
    seen_reset = 0
    for seed in range(60):
        q = family.question(seed)
        runs = int(re.search(r"backward\(\) runs (\d) times \(steps 1 to \1\)", q.prompt).group(1))
        zeroed = re.search(r"zeroed after step (\d)\.", q.prompt)
        c, w = (float(v) for v in re.search(r"loss = (\d)·w² at w = ([-\d.]+)", q.prompt).groups())
        counted = runs - int(zeroed.group(1)) if zeroed else runs  # read as a person reads it: step k = k-th call
        assert float(q.run()) == counted * 2 * c * w, (seed, q.prompt)
        seen_reset += bool(zeroed)
    assert seen_reset > 10
