"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers import tiny_model
from demos.transformers.figures import tiny_model as tiny_figs
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


def tiny_model_ui() -> tuple[tuple, int]:
    """The run's settings (task and heads in the key row, the rest folded) and which checkpoint the maps show."""
    keys, rest = ui.key_controls("tf_tiny"), ui.settings("tf_tiny", label="Training settings")
    with rest:
        a, b, c, d = st.columns(4)
        steps = a.select_slider("Training steps", tiny_model.STEP_CHOICES, tiny_model.DEFAULTS["steps"],
                                key="tf_tiny_steps", bind="query-params")
        length = b.slider("Sequence length", tiny_model.MIN_LENGTH, tiny_model.MAX_LENGTH,
                          tiny_model.DEFAULTS["length"], key="tf_tiny_length", bind="query-params")
        lr = c.select_slider("Learning rate (Adam)", tiny_model.LR_CHOICES, tiny_model.DEFAULTS["lr"],
                             key="tf_tiny_lr", bind="query-params")
        seed = d.number_input("Seed", 0, tiny_model.MAX_SEED, tiny_model.DEFAULTS["seed"], key="tf_tiny_seed",
                              bind="query-params")
    with keys:
        a, b, c = st.columns([1, 1, 2])
        task = a.selectbox("Task", tiny_model.TASKS, key="tf_tiny_task", bind="query-params")
        heads = b.selectbox("Heads", tiny_model.HEAD_CHOICES,
                            tiny_model.HEAD_CHOICES.index(tiny_model.DEFAULTS["heads"]), key="tf_tiny_heads",
                            bind="query-params")
        every = steps // tiny_model.CHECKPOINTS
        at = c.select_slider("Show the maps at", range(tiny_model.CHECKPOINTS + 1), tiny_model.CHECKPOINTS,
                             format_func=lambda i: f"step {i * every}", key="tf_tiny_at", bind="query-params",
                             help="The run is recorded once; this picks which of its checkpoints the maps show.")
    return (task, heads, steps, length, lr, int(seed)), at


def tiny_model_section() -> None:
    ui.prose(
        "A model with **one attention layer** is trained here, on this server's CPU, the first time anyone asks "
        "for its settings. Its input is n random tokens (0–9) followed by n blanks; at each blank it must write one "
        "of the input tokens: the one at the same position (**copy**) or at the mirrored position (**reverse**). "
        "Only that input position tells the model which token to write, so the attention pattern that solves the "
        "task is known in advance: the diagonal or the anti-diagonal, outlined on each head's map. The model trains "
        "with Adam on fresh random sequences and is scored on held-out sequences it never trained on. The run is "
        "recorded at step 0 and at every tenth of the way: move **Show the maps at** to watch the pattern form (it "
        "picks a saved checkpoint; nothing is trained again)."
    )
    settings, at = tiny_model_ui()
    with ui.input_errors():
        run = ui.compute(tiny_model.tiny_model, *settings)
        ui.plot(ui.compute(tiny_figs.training_figure, run, at), key="tf_tiny_fig")
        st.caption(tiny_model.checkpoint_sentence(run, at))
        learned, said = tiny_model.verdict(run)
        (st.success if learned else st.warning)(said, icon=":material/check_circle:" if learned else
                                                ":material/warning:")
        st.markdown("\n".join(f"- {line}" for line in tiny_model.pattern_sentences(run)))
        st.caption(tiny_model.provenance_sentence(run))
        ui.show_code(run.code, key="tf_tiny_code", file_name="tiny_attention.py")


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
