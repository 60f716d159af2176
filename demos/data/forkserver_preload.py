"""Imported once inside the fork server (never in the Streamlit server): workers skip re-running the app script.

multiprocessing re-imports the parent's __main__ in each child. In Streamlit that is app.py, which would run the
whole app in bare mode inside every worker. The datasets live in demos.data.workers, so nothing is needed from it.
"""

import multiprocessing.spawn


def _skip_main(main_path: str) -> None:
    """Replacement for multiprocessing.spawn._fixup_main_from_path in the fork server's children."""


multiprocessing.spawn._fixup_main_from_path = _skip_main
