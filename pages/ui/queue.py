"""A visitor whose run waits for the server's worker processes sees their place in the line."""

from contextlib import contextmanager

import streamlit as st

from demos.guests import queue_reporter


def place_in_line(ahead: int) -> str:
    return f"Waiting for the worker processes: {ahead} {'run' if ahead == 1 else 'runs'} ahead of yours."


@contextmanager
def queue_position():
    """While the block runs, a process-backed demo that has to wait shows how many runs are ahead of it."""
    notice = st.empty()

    def report(ahead: int) -> None:
        if ahead:
            notice.info(place_in_line(ahead), icon=":material/hourglass_top:")
        else:
            notice.empty()

    try:
        with queue_reporter(report):
            yield
    finally:
        notice.empty()
