"""Heavy runs wait in one line; a visitor whose run waits sees their place in it, outside any cached function."""

from collections.abc import Callable
from typing import Any

import streamlit as st

from demos.guests import TurnNeeded, deferring_turn, turn
from pages.ui.compute import compute


def place_in_line(ahead: int) -> str:
    return (f"Waiting for your turn: {ahead} heavy {'run' if ahead == 1 else 'runs'} ahead of yours (this server "
            "runs one at a time).")


def queued(fn, *args, notice=None, **kwargs):
    """compute(fn, *args, **kwargs) for a heavy demo: a cache hit or a free line returns at once; when other runs
    are ahead, wait here for the turn, showing the place in line, then compute.

    `notice`: where the place in line is shown (an st.empty made before an st.status, whose body is folded);
    by default a placeholder where the call is.

    The notice is written by this script run, never from inside the computation, which runs once per server and
    has no page of its own to write to.
    """
    try:
        with deferring_turn():
            return compute(fn, *args, **kwargs)
    except TurnNeeded:
        pass
    notice = st.empty() if notice is None else notice

    def report(ahead: int) -> None:
        if ahead:
            notice.info(place_in_line(ahead), icon=":material/hourglass_top:")
        else:
            notice.empty()

    try:
        with turn(report):
            return compute(fn, *args, **kwargs)
    finally:
        notice.empty()


_SHOWN_KEY = "wb_runs_shown"  # session state: (key, args) of the runs this session has shown under a status


def queued_status(label: str, done: Callable[[Any], str], fn, *args, key: str):
    """queued(fn, *args) under a folded st.status labelled `label` while it runs and `done(result)` after.

    Creating an st.status sleeps 50 ms (Streamlit lets the browser draw it), too much for a warm rerun: once this
    session has shown a run's result, later reruns take it from the cache and draw the finished status as a plain
    expander with the same label.
    """
    shown = st.session_state.setdefault(_SHOWN_KEY, set())
    token = (key, args)
    line = st.empty()  # the place in line, if the run waits, above the folded status
    if token in shown:
        value = queued(fn, *args, notice=line)
        st.expander(done(value), icon=":material/check:")
        return value
    with st.status(label, expanded=False) as status:
        value = queued(fn, *args, notice=line)
        status.update(label=done(value), state="complete")
    shown.add(token)
    return value


def queued_each(label: str, done: str, calls: tuple[tuple, ...], key: str,
                step: Callable[[int], str] | None = None) -> list:
    """queued(fn, *args) for each `(fn, *args)` of `calls`, in order, under one folded st.status labelled `label`
    while they run and `done` after; with `step`, a progress bar in it reads step(i) once call i is done.

    For a run made of several computations, each cached on its own (a sweep's points, results other views also
    show). As queued_status, a session that has shown these results draws the finished status as a plain expander.
    """
    shown = st.session_state.setdefault(_SHOWN_KEY, set())
    token = (key, calls)
    line = st.empty()
    if token in shown:
        values = [queued(fn, *args, notice=line) for fn, *args in calls]
        st.expander(done, icon=":material/check:")
        return values
    with st.status(label, expanded=False) as status:
        bar = st.progress(0.0) if step else None
        values = []
        for i, (fn, *args) in enumerate(calls):
            values.append(queued(fn, *args, notice=line))
            if bar is not None:
                bar.progress((i + 1) / len(calls), text=step(i))
        status.update(label=done, state="complete")
    shown.add(token)
    return values
