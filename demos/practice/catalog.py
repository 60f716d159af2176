"""Every practice question by id: the interview corners' banks (discovered) and the generator families (seeded).

Ids: `<source>/<key>` for a bank question (`tensors/broadcast`), `<family>@<seed>` for a generated one
(`broadcast@1234`). Both are short, plain text, so the review list fits in a progress link.
"""

import functools
import importlib
import importlib.util
import re
from dataclasses import dataclass

from demos import registry
from demos.errors import InputError, quoted
from demos.practice import (
    gen_autograd,
    gen_modules,
    gen_scale,
    gen_shapes,
    gen_tensors,
    gen_training,
    gen_transformers,
)
from demos.practice.family import Family
from demos.quiz import Question

FAMILIES: dict[str, Family] = {
    f.name: f for m in (gen_tensors, gen_shapes, gen_autograd, gen_modules, gen_training, gen_scale, gen_transformers)
    for f in m.FAMILIES
}
MAX_SEED = 999_999

# The modules that hold predict-then-run questions -> (the id prefix of their questions, the topic page they belong
# to): each topic's engine's `questions` module (demos/registry.py), and Home's worked questions, which are tensor
# questions. A test checks this finds every Question in demos/.
BANKS = {
    **{f"{t.engine}.questions": (t.slug, t.slug) for t in registry.TOPICS
       if t.engine and importlib.util.find_spec(f"{t.engine}.questions")},
    registry.HOME.engine: (registry.HOME.slug, "tensors"),
}
TOPICS = tuple(dict.fromkeys(topic for _, topic in BANKS.values()))
_GENERATED = re.compile(r"([a-z_]+)@(\d{1,6})")


@dataclass(frozen=True)
class Item:
    """One practice question with what a drill needs around it."""

    qid: str
    topic: str  # the page slug that teaches it
    theme: str  # a short label: the family's theme, or "Interview corner"
    question: Question
    concept: str | None = None  # the tracker concept it counts towards
    link: tuple[str, tuple[tuple[str, str], ...]] = ("", ())  # (page slug, query) of the section that teaches it


@functools.cache
def bank() -> dict[str, Item]:
    """The interview corners' questions, in each page's order (the link opens that question on its page)."""
    items = {}
    seen_snippets = set()
    for module_name, (source, topic) in BANKS.items():
        module = importlib.import_module(module_name)
        questions = module.HOME_QUESTIONS if source == "home" else module.QUESTIONS
        for index, q in enumerate(questions):
            if q.snippet in seen_snippets:  # the same snippet on two pages is one question
                continue
            seen_snippets.add(q.snippet)
            # a corner question's link opens it in its page's corner; Home's worked questions link to their topic
            link = (topic, ()) if source == "home" else (source, ((f"{source}_q_pick", str(index + 1)),))
            items[f"{source}/{q.key}"] = Item(f"{source}/{q.key}", topic, "Interview corner", q, link=link)
    return items


@functools.lru_cache(maxsize=256)
def generated(name: str, seed: int) -> Item:
    family = FAMILIES[name]
    section = family.section_for(seed) if family.section_for else family.section
    return Item(f"{name}@{seed}", family.topic, family.theme, family.question(seed), family.concept,
                (family.topic, section))


def item(qid: str) -> Item:
    """The question an id names, or an InputError (an id can come from a link)."""
    match = _GENERATED.fullmatch(qid)
    if match and match.group(1) in FAMILIES:
        return generated(match.group(1), int(match.group(2)))
    if qid in bank():
        return bank()[qid]
    raise InputError(f"There is no practice question {quoted(qid)}.")


def concept_of(qid: str) -> tuple[str, str] | None:
    """(topic, tracker concept) a question counts towards, read from its id without building the question."""
    match = _GENERATED.fullmatch(qid)
    family = FAMILIES.get(match.group(1)) if match else None
    return (family.topic, family.concept) if family and family.concept else None


def known(qid: str) -> bool:
    try:
        item(qid)
    except InputError:
        return False
    return True


def families_of(topic: str) -> list[Family]:
    return [f for f in FAMILIES.values() if f.topic == topic]


def bank_of(topic: str) -> list[str]:
    return [qid for qid, it in bank().items() if it.topic == topic]
