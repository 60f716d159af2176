"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


# ---- Attention ---------------------------------------------------------------------------------------------------


def attention_section() -> None:
    st.info("Attention: placeholder")


# ---- Multi-head --------------------------------------------------------------------------------------------------


def multihead_section() -> None:
    st.info("Multi-head: placeholder")


# ---- Positions ---------------------------------------------------------------------------------------------------


def positions_section() -> None:
    st.info("Positions: placeholder")


# ---- Norms & residuals -------------------------------------------------------------------------------------------


def norms_section() -> None:
    st.info("Norms: placeholder")


# ---- The block ---------------------------------------------------------------------------------------------------


def block_section() -> None:
    st.info("The block: placeholder")


# ---- Embeddings & dropout ----------------------------------------------------------------------------------------


def embeddings_section() -> None:
    st.info("Embeddings & dropout: placeholder")


# ---- Sequences ---------------------------------------------------------------------------------------------------


def sequences_section() -> None:
    st.info("Sequences: placeholder")


# ---- Tiny model --------------------------------------------------------------------------------------------------


def tiny_model_section() -> None:
    st.info("Tiny model: placeholder")


# ---- From scratch ------------------------------------------------------------------------------------------------


def scratch_section() -> None:
    st.info("From scratch: placeholder")


# ---- the page ----------------------------------------------------------------------------------------------------


ui.page_header("transformers")
ui.prose("Every heatmap, curve and table below comes from torch running when you open the tab, on small tensors you "
         "can change. Only the open tab is computed.")
ui.sections("transformers", "tf_tab", {
    "Attention": attention_section, "Multi-head": multihead_section, "Positions": positions_section,
    "Norms & residuals": norms_section, "The block": block_section, "Embeddings & dropout": embeddings_section,
    "Sequences": sequences_section, "Tiny model": tiny_model_section, "From scratch": scratch_section,
})
ui.interview_corner("transformers", QUESTIONS)
