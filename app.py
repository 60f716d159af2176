"""PyTorch Whiteboard: the entry point. Run with `streamlit run app.py`."""

import streamlit as st
import torch

from views.heap import freeze_loaded_code
from views.registry import SECTIONS, registered
from views.ui import sidebar_controls


def navigation_pages() -> dict[str, list]:
    """Sections of st.Page built from the registry, in the registry's order; empty sections left out."""
    sections = {name: [] for name in SECTIONS}
    for topic in registered():
        sections[topic.section].append(
            st.Page(topic.file, title=topic.title, icon=topic.icon, url_path=topic.slug, default=topic.slug == "home")
        )
    return {name: pages for name, pages in sections.items() if pages}


def main() -> None:
    # The demos run many tiny ops, and visitors' sessions share the process: one intra-op thread avoids
    # OpenMP spinning and oversubscription, which made small ops 10-40x slower on a busy 2-core host.
    torch.set_num_threads(1)
    st.set_page_config(page_title="PyTorch Whiteboard", page_icon=":material/draw:", layout="wide")
    page = st.navigation(navigation_pages(), expanded=True)
    sidebar_controls()
    page.run()
    freeze_loaded_code()


main()
