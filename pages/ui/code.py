"""'Show the code': the exact runnable snippet behind a figure, copyable and downloadable."""

import streamlit as st

from demos.shown import Script


def show_code(code: Script, key: str, file_name: str = "snippet.py", label: str = "Show the code") -> None:
    """An expander with the snippet (st.code has a copy button) and a download button for it.

    Only a snippet that a registered demo entry point made (demos.shown.entry) is shown: that registration is what
    the snippet test runs, so every snippet on a page is checked to print the figure's numbers.

    The expander tracks whether it is open, and its content is sent only then: a page with a dozen closed code
    panels reruns without shipping a dozen highlighted snippets to the browser.
    """
    if not getattr(code, "entry", ""):
        raise TypeError(f"{key}: the snippet was not made by a registered demo entry point (demos.shown.entry)")
    panel = st.expander(label, icon=":material/code:", key=f"{key}_panel", on_change="rerun")
    if not panel.open:
        return
    with panel:
        st.code(code, language="python")
        st.download_button(
            "Download .py", code, file_name=file_name, mime="text/x-python", key=f"{key}_download",
            icon=":material/download:", on_click="ignore",
        )
