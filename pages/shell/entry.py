"""The app shell every page runs inside: page config, navigation from the registry, the shared sidebar.

`app.py` calls `main()`. A page script calls `require_shell()` first: when Streamlit ran the page file
directly (v1 multipage mode, a fresh server's first deep link), it runs the shell and stops, so the visitor
gets the page inside the full shell either way (see pages/__init__.py).
"""

import threading

import streamlit as st
import torch

from demos.registry import HOME, ROOT, SECTIONS, registered
from pages.shell import url_guard
from pages.shell.heap import freeze_loaded_code
from pages.ui import sidebar_controls
from pages.ui.errors import input_errors
from pages.ui.layout import whiteboard_requested

# An SVG file goes to the browser inline (a data: URL): no visitor's browser fetches the icon from a font CDN,
# as it does for a :material/...: or emoji page_icon.
FAVICON = ROOT / "assets" / "icons" / "favicon.svg"

url_guard.install()  # a hostile shared link resets the widget it names instead of breaking the page
_inside = threading.local()  # each script run has its own thread: a mark set while the shell runs a page


def navigation_pages() -> dict[str, list]:
    """Sections of st.Page built from the registry, in the registry's order; empty sections left out.

    Home is the default page, served at `/`. Its slug `/home` (the URL its file name gives it) is a hidden
    second entry for the same file, so that link shows Home too instead of "page not found".
    """
    sections = {name: [] for name in SECTIONS}
    for topic in registered():
        is_home = topic is HOME
        sections[topic.section].append(
            st.Page(topic.file, title=topic.title, icon=topic.icon, url_path="" if is_home else topic.slug,
                    default=is_home)
        )
    sections[HOME.section].append(
        st.Page(HOME.file, title=HOME.title, icon=HOME.icon, url_path=HOME.slug, visibility="hidden")
    )
    return {name: pages for name, pages in sections.items() if pages}


def main() -> None:
    """Run the app: page config, navigation, sidebar, then the selected page inside the shell.

    A URL value the page could not use as written is named in one notice above the page (pages/shell/url_guard.py).
    """
    # The demos run many tiny ops, and visitors' sessions share the process: one intra-op thread avoids
    # OpenMP spinning and oversubscription, which made small ops 10-40x slower on a busy 2-core host.
    torch.set_num_threads(1)
    # Whiteboard (presenter) mode folds the sidebar away (it opens from the top-left arrow).
    sidebar = "collapsed" if whiteboard_requested() else "auto"
    st.set_page_config(page_title="PyTorch Whiteboard", page_icon=str(FAVICON), layout="wide",
                       initial_sidebar_state=sidebar)
    page = st.navigation(navigation_pages(), expanded=True)
    link = url_guard.first_visit(page.url_path or "home")  # the link as given, before any widget reads it
    sidebar_controls(page.url_path or "home")
    link_notice = st.empty()  # top of the page: filled once the page's widgets have read the URL
    _inside.active = True
    try:
        with input_errors():  # anything a page's own blocks did not catch: a sentence, never a traceback
            page.run()
    finally:
        _inside.active = False
        url_guard.show_notice(link_notice, link)
    freeze_loaded_code()


def inside_shell() -> bool:
    """Whether this script run is a page run by main()."""
    return getattr(_inside, "active", False)


def require_shell() -> None:
    """First line of every page script: outside the shell, run the shell (which runs this page) and stop."""
    if not inside_shell():
        main()
        st.stop()
