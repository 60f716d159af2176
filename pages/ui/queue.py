"""Heavy runs wait in one line; a visitor whose run waits sees their place in it, outside any cached function."""

import streamlit as st

from demos.guests import TurnNeeded, deferring_turn, turn


def place_in_line(ahead: int) -> str:
    return (f"Waiting for your turn: {ahead} heavy {'run' if ahead == 1 else 'runs'} ahead of yours (this server "
            "runs one at a time).")


def queued(compute, *args, notice=None, **kwargs):
    """compute(*args, **kwargs), usually a cached demo call: a cache hit or a free line returns at once; when
    other runs are ahead, wait here for the turn, showing the place in line, then compute.

    `notice`: where the place in line is shown (an st.empty made before an st.status, whose body is folded);
    by default a placeholder where the call is.

    The notice is written by this script run, never from inside a cached function: st.cache_data replays what a
    cached function wrote, and a write into a placeholder made outside it cannot be replayed.
    """
    try:
        with deferring_turn():
            return compute(*args, **kwargs)
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
            return compute(*args, **kwargs)
    finally:
        notice.empty()
