"""A drill: which questions, in which order, what was answered, how long it took, and what comes back later.

Pure data and rules, no Streamlit: the page keeps a `Drill` in the session and calls `record` and `move`.

- The drill's own questions are a function of (topics, count, seed) only, so a shared link gives everyone the
  same snippets in the same order.
- Spaced repetition: a question missed in a drill comes back once at its end ("later in the session"), and stays
  on the review list (kept in the progress link) until it is answered right; the next drill starts with up to
  MAX_CARRIED of those after its own questions. A generated question comes back as a new instance of its family
  (another seed: the skill again, not the remembered snippet), and a right answer to any instance clears the
  family from the review list. A mock interview asks no question twice.
- A concept is mastered after MASTERY right first answers to its questions with none of them waiting for review.
"""

import random
from collections import Counter
from dataclasses import dataclass, field

from demos.errors import InputError, quoted
from demos.practice.catalog import MAX_SEED, TOPICS, bank_of, concept_of, families_of, item
from demos.style import COLORS
from demos.tracker import MAX_REVIEW

MIN_COUNT, MAX_COUNT = 5, 30
MODES = ("Drill", "Mock interview")
MAX_CARRIED = 5
MASTERY = 3
SECONDS_PER_QUESTION = 90  # a mock interview's time per question
WEAK = 0.7  # a topic below this share of right answers gets a link to study it
MISSED = ("wrong", "close", "skipped")


@dataclass(frozen=True)
class Settings:
    topics: tuple[str, ...]
    count: int
    seed: int
    mode: str = "Drill"


def settings(topics, count, seed_text: str, mode: str) -> Settings:
    """Validated drill settings (they come from widgets and from a shared URL)."""
    topics = tuple(t for t in TOPICS if t in set(topics or ()))
    if not topics:
        raise InputError("Pick at least one topic to practise.")
    if not isinstance(count, int) or not MIN_COUNT <= count <= MAX_COUNT:
        raise InputError(f"A drill has between {MIN_COUNT} and {MAX_COUNT} questions.")
    text = str(seed_text).strip()
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_SEED)) or int(text) > MAX_SEED:
        raise InputError(f"The seed must be a whole number from 0 to {MAX_SEED}, not {quoted(text)}.")
    if mode not in MODES:
        raise InputError(f"The mode must be one of {', '.join(MODES)}.")
    return Settings(topics, count, int(text), mode)


def compose(s: Settings) -> list[str]:
    """The drill's own question ids: topics taken in turn, each slot a generated question or a bank question."""
    rng = random.Random(f"drill|{s.seed}|{','.join(s.topics)}|{s.count}")
    order = list(s.topics)
    rng.shuffle(order)
    banks = {t: rng.sample(bank_of(t), len(bank_of(t))) for t in order}
    families = {t: rng.sample(families_of(t), len(families_of(t))) for t in order}
    drawn = {t: 0 for t in order}
    ids = []
    for i in range(s.count):
        topic = order[i % len(order)]
        fams = families[topic]
        if fams and (not banks[topic] or rng.random() < 0.6):
            family = fams[drawn[topic] % len(fams)]
            drawn[topic] += 1
            ids.append(f"{family.name}@{rng.randrange(MAX_SEED + 1)}")
        elif banks[topic]:
            ids.append(banks[topic].pop())
    return ids


def family_of(qid: str) -> str:
    """'broadcast@12' -> 'broadcast'; a bank question's id is its own family."""
    return qid.split("@")[0] if "@" in qid else qid


def again_id(qid: str) -> str:
    """The question that asks a missed one again: a bank question itself, a generated one as another instance of
    its family (a seed derived from the missed one, so a shared link repeats it)."""
    if "@" not in qid:
        return qid
    seed = random.Random(f"again|{qid}").randrange(MAX_SEED + 1)
    if f"{family_of(qid)}@{seed}" == qid:
        seed = (seed + 1) % (MAX_SEED + 1)
    return f"{family_of(qid)}@{seed}"


AGAIN_NOTES = {  # why a question is asked again, as the page says it
    "missed": "asked again: you missed it earlier",
    "skipped": "asked again: you skipped it earlier",
    "review": "asked again: it is on your review list from an earlier drill",
}


@dataclass
class Slot:
    qid: str
    again: str = ""  # why it is asked again (a key of AGAIN_NOTES), '' the first time
    outcome: str | None = None  # correct, close, wrong or skipped; None until answered
    seconds: float | None = None
    predicted: str = ""
    expected: str = ""


@dataclass
class Drill:
    settings: Settings
    slots: list[Slot]
    started: float
    position: int = 0
    shown_at: float = 0.0
    finished: bool = False
    asked_again: set = field(default_factory=set)

    @property
    def mock(self) -> bool:
        return self.settings.mode == "Mock interview"

    @property
    def current(self) -> Slot:
        return self.slots[self.position]

    @property
    def answered(self) -> int:
        """Questions answered (right, close or wrong); a skip is not an answer."""
        return sum(s.outcome not in (None, "skipped") for s in self.slots)

    @property
    def skipped(self) -> int:
        return sum(s.outcome == "skipped" for s in self.slots)

    def record(self, outcome: str, predicted: str, expected: str, now: float) -> bool:
        """Keep the first verdict of the slot on screen; a miss in a drill comes back at the end. True if kept."""
        slot = self.current
        if slot.outcome is not None:
            return False
        slot.outcome, slot.predicted, slot.expected = outcome, predicted, expected
        slot.seconds = now - self.shown_at
        if outcome in MISSED and not self.mock and slot.qid not in self.asked_again:
            comeback = again_id(slot.qid)
            self.asked_again.update((slot.qid, comeback))
            self.slots.append(Slot(comeback, again="skipped" if outcome == "skipped" else "missed"))
        return True

    def move(self, step: int, now: float) -> None:
        """Go to the next (+1) or previous (-1) slot; moving on from an unanswered slot skips it."""
        if step > 0 and self.current.outcome is None:
            self.record("skipped", "", "", now)
        target = self.position + step
        if target >= len(self.slots):
            self.finished = True
        elif target >= 0:
            self.position = target
            self.shown_at = now

    def total_seconds(self) -> float:
        return sum(s.seconds or 0.0 for s in self.slots)


def start(s: Settings, review: tuple[str, ...], now: float) -> Drill:
    """A new drill: its own questions, then (in Drill mode) up to MAX_CARRIED questions waiting for review."""
    own = compose(s)
    carried = [] if s.mode != "Drill" else [again_id(q) for q in review if q not in own][:MAX_CARRIED]
    slots = [Slot(q) for q in own] + [Slot(q, again="review") for q in carried]
    return Drill(s, slots, started=now, shown_at=now, asked_again=set(carried))


def updated_review(review: tuple[str, ...], qid: str, outcome: str) -> tuple[str, ...]:
    """The review list after an answer: a miss joins its end (in place of its family's older instance), a right
    answer clears its family; oldest dropped past the cap."""
    rest = tuple(q for q in review if family_of(q) != family_of(qid))
    if outcome in MISSED:
        rest = (rest + (qid,))[-MAX_REVIEW:]
    return rest


def mastered(history: list[tuple[str, str]], review: tuple[str, ...]) -> set[tuple[str, str]]:
    """(topic, concept) pairs with MASTERY right answers in `history` (qid, outcome) and nothing left to review."""
    pending = {concept_of(qid) for qid in review} - {None}
    right = Counter(concept_of(qid) for qid, outcome in history if outcome == "correct")
    return {key for key, n in right.items() if key and n >= MASTERY and key not in pending}


@dataclass(frozen=True)
class TopicScore:
    topic: str
    asked: int  # answered or skipped
    correct: int
    close: int
    seconds: float
    skipped: int = 0

    @property
    def answered(self) -> int:
        return self.asked - self.skipped

    @property
    def share(self) -> float:
        return self.correct / self.asked if self.asked else 0.0


def scores(drill: Drill) -> list[TopicScore]:
    """Per topic, in the drill's topic order: questions answered or skipped, right, close, and time spent."""
    result = []
    for topic in drill.settings.topics:
        slots = [s for s in drill.slots if s.outcome and item(s.qid).topic == topic]
        if slots:
            result.append(TopicScore(topic, len(slots), sum(s.outcome == "correct" for s in slots),
                                     sum(s.outcome == "close" for s in slots), sum(s.seconds or 0 for s in slots),
                                     sum(s.outcome == "skipped" for s in slots)))
    return result


def weak_topics(drill: Drill) -> dict[str, list[tuple[str, tuple[tuple[str, str], ...]]]]:
    """Topics under the WEAK share, each with the teaching sections (page, query) of the questions missed there."""
    weak = {}
    for score in scores(drill):
        if score.share < WEAK:
            links = [item(s.qid).link for s in drill.slots if s.outcome in MISSED and item(s.qid).topic == score.topic]
            weak[score.topic] = list(dict.fromkeys(links))
    return weak


OUTCOME_COLORS = {"correct": COLORS["activation"], "close": COLORS["temporary"], "wrong": COLORS["error"],
                  "skipped": COLORS["idle"]}


def time_chart(drill: Drill, limit: float | None = None) -> dict:
    """A Vega-Lite spec: seconds spent on each question answered or skipped, coloured by outcome (a rule marks
    `limit`)."""
    values = [{"question": i + 1, "seconds": round(s.seconds or 0.0, 1), "outcome": s.outcome,
               "topic": item(s.qid).topic} for i, s in enumerate(drill.slots) if s.outcome]
    outcomes = [o for o in OUTCOME_COLORS if any(v["outcome"] == o for v in values)]
    bars = {
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "x": {"field": "question", "type": "ordinal", "title": "question", "axis": {"labelAngle": 0}},
            "y": {"field": "seconds", "type": "quantitative", "title": "seconds"},
            "color": {"field": "outcome", "type": "nominal", "title": None,
                      "scale": {"domain": outcomes, "range": [OUTCOME_COLORS[o] for o in outcomes]},
                      "legend": {"orient": "top"}},
        },
    }
    layers = [bars]
    if limit:
        layers.append({"mark": {"type": "rule", "strokeDash": [4, 4], "color": COLORS["idle"]},
                       "encoding": {"y": {"datum": limit}}})
    return {"data": {"values": values}, "height": 220, "layer": layers}
