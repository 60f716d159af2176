"""Imported first inside the fork server (never in the Streamlit server): its children skip re-running __main__.

multiprocessing re-runs the parent's __main__ in each child it starts with 'spawn' or 'forkserver'. In Streamlit
that is the script being run (app.py, or a page file), which would run the whole app in bare mode inside every
DataLoader worker and rank. The children need only their entry function, which lives in an importable module, so
the fork server replaces the two standard-library steps that would load __main__ (private functions: the standard
library offers no public switch; tests/test_processes.py checks they still exist) with ones that do nothing.
"""

import multiprocessing.spawn


def _skip_main(main_path_or_name: str) -> None:
    """Replacement for multiprocessing.spawn._fixup_main_from_path and _from_name in the fork server's children."""


multiprocessing.spawn._fixup_main_from_path = _skip_main
multiprocessing.spawn._fixup_main_from_name = _skip_main
