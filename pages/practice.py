"""Practice: drills and mock interviews of predict-then-run questions, every answer decided by torch on the spot."""

import random
import time

import pandas as pd
import streamlit as st

from demos.practice import catalog
from demos.practice import drill as dr
from demos.registry import by_slug
from demos.tensors import shapes as lab
from pages import ui
from pages.shell.entry import require_shell
from pages.ui import progress

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

DRILL_KEY = "pr_drill"
HISTORY_KEY = "pr_history"  # (question id, outcome) of every first answer this session: mastery is counted on it
CARD_PREFIX = "pr_card_"
MAX_HISTORY = 500


def _title(slug: str) -> str:
    return by_slug(slug).title


def _new_seed() -> None:
    st.session_state["pr_seed"] = str(random.randrange(catalog.MAX_SEED + 1))


def settings_ui() -> dr.Settings | None:
    """Mode, topics, size and seed, all in the URL: the same link gives everyone the same questions."""
    left, right = st.columns([3, 2], gap="large")
    mode = left.segmented_control("Mode", dr.MODES, default=dr.MODES[0], required=True, key="pr_mode",
                                  bind="query-params")
    topics = left.multiselect("Topics", catalog.TOPICS, default=list(catalog.TOPICS), format_func=_title,
                              key="pr_topics", bind="query-params")
    count = right.slider("Questions", dr.MIN_COUNT, dr.MAX_COUNT, 10, key="pr_count", bind="query-params")
    seed_box, new = right.columns([3, 2], vertical_alignment="bottom")
    seed = seed_box.text_input("Seed", "1", key="pr_seed", bind="query-params",
                               help="The same seed and settings give the same questions: share the link.")
    new.button("New questions", key="pr_new", on_click=_new_seed, icon=":material/casino:")
    st.caption("Changing a setting starts a new drill.")
    with ui.input_errors():
        return dr.settings(topics, count, seed, mode)
    return None


def current_drill(s: dr.Settings) -> dr.Drill:
    """The session's drill for these settings; other settings start a new one (and clear the old cards)."""
    drill = st.session_state.get(DRILL_KEY)
    if drill is None or drill.settings != s:
        for key in [k for k in st.session_state if str(k).startswith(CARD_PREFIX)]:
            del st.session_state[key]
        review = tuple(filter(catalog.known, progress.progress().review))
        drill = st.session_state[DRILL_KEY] = dr.start(s, review, time.time())
    return drill


def _record(drill: dr.Drill, verdict) -> None:
    """Keep the slot's first verdict; update the review list and tick concepts mastered in the tracker."""
    qid = drill.current.qid
    if not drill.record(verdict.outcome, verdict.predicted, verdict.expected, time.time()):
        return
    before = progress.progress().review
    review = dr.updated_review(before, qid, verdict.outcome)
    progress.set_review(review)
    history = st.session_state.setdefault(HISTORY_KEY, [])
    was = dr.mastered(history, before)
    history.append((qid, verdict.outcome))
    del history[:-MAX_HISTORY]
    for slug, concept in sorted(dr.mastered(history, review) - was):  # only what this answer mastered: a
        progress.set_ticked(slug, concept, True)                      # concept unticked by hand stays so
        st.toast(f"Mastered “{concept}”: ticked in the study tracker.", icon=":material/school:")


def _move(drill: dr.Drill, step: int) -> None:
    skipped = step > 0 and drill.current.outcome is None
    qid = drill.current.qid
    drill.move(step, time.time())
    if skipped:
        progress.set_review(dr.updated_review(progress.progress().review, qid, "skipped"))


def _finish(drill: dr.Drill) -> None:
    drill.finished = True


CLOCK_JS = """(() => {
  const q = document.getElementById('pr-q-POS'), t = document.getElementById('pr-t-POS');
  const q0 = Date.now() - ON_QUESTION, t0 = Date.now() - TOTAL;
  const fmt = ms => {
    const s = Math.floor(ms / 1000);
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  };
  const tick = () => {
    if (!document.body.contains(q)) { clearInterval(id); return; }
    q.textContent = fmt(Date.now() - q0); t.textContent = fmt(Date.now() - t0);
  };
  const id = setInterval(tick, 1000); tick();
})();"""


def clock(drill: dr.Drill) -> None:
    """A mock interview's clock: time on this question and in total, counted in the browser (no reruns)."""
    on_question = time.time() - drill.shown_at
    total = drill.total_seconds() + on_question
    script = (CLOCK_JS.replace("POS", str(drill.position)).replace("ON_QUESTION", f"{on_question * 1000:.0f}")
              .replace("TOTAL", f"{total * 1000:.0f}"))
    st.html(
        f"<div>Time on this question <b id='pr-q-{drill.position}'>{_clock_text(on_question)}</b> (aim for "
        f"{dr.SECONDS_PER_QUESTION} s) · in total <span id='pr-t-{drill.position}'>{_clock_text(total)}</span>"
        f"</div><script>{script}</script>",
        unsafe_allow_javascript=True,
    )


def progress_line(drill: dr.Drill, slot: dr.Slot, it) -> None:
    """Where the drill stands, counting every answer recorded so far (the one just given included) and, apart from
    them, the questions skipped."""
    where = f"Question {drill.position + 1} of {len(drill.slots)} · {drill.answered} answered"
    where += f" · {drill.skipped} skipped" if drill.skipped else ""
    topic = _title(it.topic)
    about = topic + ("" if it.theme == topic else f" · {it.theme}")
    about += f" · {dr.AGAIN_NOTES[slot.again]}" if slot.again else ""
    if ui.whiteboard_on():  # one line, so the question fits a projected screen
        st.caption(f"{where} · {about}")
    else:
        st.progress((drill.answered + drill.skipped) / len(drill.slots), text=where)
        st.caption(about)


def question_screen(drill: dr.Drill) -> None:
    slot, it = drill.current, catalog.item(drill.current.qid)
    head = st.container()  # filled after the card records its verdict, so the count includes this answer
    if drill.mock:
        clock(drill)
    verdict = ui.predict_then_run(it.question, key=f"{CARD_PREFIX}{drill.position}")
    if verdict is not None:
        _record(drill, verdict)
    with head:
        progress_line(drill, slot, it)
    if verdict is None and slot.outcome == "skipped":
        st.caption("You skipped this question earlier; an answer now does not change the score.")
    elif verdict is None and slot.outcome:
        st.caption(f"Answered earlier ({slot.outcome}): you predicted {slot.predicted}, "
                   f"{it.question.answered_by} returned {slot.expected}. The first answer is the one scored.")
    if slot.outcome and slot.outcome != "correct" and not drill.mock and not slot.again:
        st.caption("This one comes back at the end of the drill.")
    last = drill.position == len(drill.slots) - 1
    row_key = ui.marks.CARD_NAV + "pr" if ui.whiteboard_on() else None  # the card's own row
    nav = st.container(horizontal=True, key=row_key)
    if not drill.mock and drill.position > 0:
        nav.button("Previous", key="pr_prev", on_click=_move, args=(drill, -1), icon=":material/arrow_back:")
    label = ("Finish" if last else "Next question") if slot.outcome else ("Skip and finish" if last else "Skip")
    nav.button(label, key="pr_next", on_click=_move, args=(drill, 1), icon=":material/arrow_forward:",
               type="primary" if slot.outcome else "secondary")
    if not last:
        nav.button("End now", key="pr_end", on_click=_finish, args=(drill,), type="tertiary")


def report_screen(drill: dr.Drill) -> None:
    """Score per topic, time per question, the missed questions with why, links to study the weak topics."""
    st.subheader("Report" if not drill.mock else "Mock interview report", anchor=False)
    done = [s for s in drill.slots if s.outcome]
    if not done:
        st.info("No question was answered in this drill. Start a new one below.")
        report_buttons()
        return
    right = sum(s.outcome == "correct" for s in done)
    score, close, skipped, spent = st.columns(4)
    score.metric("Right", f"{right} of {drill.answered}", help="Of the questions answered; a skip is not an answer.")
    close.metric("Close", sum(s.outcome == "close" for s in done), help="Right order of magnitude, not the value.")
    skipped.metric("Skipped", drill.skipped, help="Not answered; the score per topic counts them as not right.")
    spent.metric("Time", _clock_text(drill.total_seconds()),
                 help="From each question appearing to its first Run it (or Skip).")
    table = pd.DataFrame([{"topic": _title(t.topic), "answered": t.answered, "skipped": t.skipped,
                           "right": t.correct, "close": t.close, "score": f"{t.share:.0%}",
                           "time": _clock_text(t.seconds)} for t in dr.scores(drill)])
    ui.table(table, hide_index=True, width="content")
    st.markdown("**Time per question**")
    ui.vega(dr.time_chart(drill, dr.SECONDS_PER_QUESTION if drill.mock else None), key="pr_time_chart")
    weak_links(drill)
    missed_list(drill)
    report_buttons()


def _clock_text(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


def weak_links(drill: dr.Drill) -> None:
    weak = dr.weak_topics(drill)
    if not weak:
        st.success(f"Every topic scored at least {dr.WEAK:.0%}.", icon=":material/verified:")
        return
    st.markdown(f"**Study next** (topics under {dr.WEAK:.0%} right)")
    for links in weak.values():
        for slug, query in links:
            section = dict(query)
            label = _title(slug)
            if section:
                key, value = next(iter(section.items()))
                label += f": interview corner, question {value}" if key.endswith("_q_pick") else f": {value}"
                if lab.EXPR_KEY in section:  # a generated chain opens the Shape lab on itself
                    label += f", {section[lab.EXPR_KEY]}"
            st.page_link(by_slug(slug).file, label=label, icon=":material/school:", query_params=section or None)


def missed_list(drill: dr.Drill) -> None:
    missed = [(i, s) for i, s in enumerate(drill.slots) if s.outcome in dr.MISSED]
    if not missed:
        return
    skipped = any(slot.outcome == "skipped" for _, slot in missed)
    st.markdown("**Missed and skipped questions**" if skipped else "**Missed questions**")
    for i, slot in missed:
        it = catalog.item(slot.qid)
        got = "skipped" if slot.outcome == "skipped" else f"you: {slot.predicted} · torch: {slot.expected}"
        panel = st.expander(f"{i + 1}. {it.question.prompt} ({got})", key=f"pr_missed_{i}", on_change="rerun")
        if panel.open:  # sent only when opened
            panel.code(it.question.snippet, language="python", wrap_lines=True)
            panel.markdown(it.question.explain)


def report_buttons() -> None:
    again, new = st.columns(2)
    again.button("Same questions again", key="pr_again", on_click=_restart, icon=":material/replay:")
    new.button("New questions", key="pr_new_after", on_click=_new_seed, icon=":material/casino:")


def _restart() -> None:
    st.session_state.pop(DRILL_KEY, None)


INTRO = (
    "Questions come from every page's interview corner and from generators that write a fresh snippet from a "
    "seed. Nothing is stored as an answer: *Run it* runs the snippet with torch and compares. Numbers count as "
    "right to 2 significant figures (counts and bytes must be exact). A question you miss comes back at the end "
    "of the drill and stays on your review list, and the next drill asks it again; mastering a concept ticks "
    "it in the study tracker."
)

ui.page_header("practice")
if ui.whiteboard_on():  # both folded, side by side: the question owns the screen
    intro, setup = st.columns(2)
    with intro:
        ui.prose(INTRO)
    with setup.expander("Drill settings", icon=":material/tune:"):
        chosen = settings_ui()
else:
    ui.prose(INTRO)
    with st.expander("Drill settings", icon=":material/tune:", expanded=True):
        chosen = settings_ui()
if chosen is not None:
    current = current_drill(chosen)
    available = len(dr.compose(chosen))
    if available < chosen.count:  # topics without generators run out of questions
        st.info(f"Only {available} questions exist for these topics, so this drill has {available}, not "
                f"{chosen.count}.", icon=":material/info:")
    if current.finished:
        report_screen(current)
    else:
        question_screen(current)
with st.expander("Save your progress", icon=":material/link:"):
    progress.progress_link_panel()
