"""'Show the code': the exact runnable snippet behind a figure, copyable and downloadable."""

import streamlit as st


def show_code(code: str, key: str, file_name: str = "snippet.py", label: str = "Show the code") -> None:
    """An expander with the snippet (st.code has a copy button) and a download button for it.

    The expander tracks whether it is open, and its content is sent only then: a page with a dozen closed code
    panels reruns without shipping a dozen highlighted snippets to the browser.
    """
    panel = st.expander(label, icon=":material/code:", key=f"{key}_panel", on_change="rerun")
    if not panel.open:
        return
    with panel:
        st.code(code, language="python")
        st.download_button(
            "Download .py", code, file_name=file_name, mime="text/x-python", key=f"{key}_download",
            icon=":material/download:", on_click="ignore",
        )
