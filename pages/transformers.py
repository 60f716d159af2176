"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers import attention, scratch
from demos.transformers.figures import attention as attention_figs
from demos.transformers.figures import scratch as scratch_figs
from demos.transformers.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


# ---- Attention ---------------------------------------------------------------------------------------------------


def attention_section() -> None:
    ui.prose(
        "Attention lets every token read from every other: each token's input is projected to a **query**, a "
        "**key** and a **value**; a query's scores against all keys, divided by √d_k and masked, go through "
        "softmax, and the weights average the values: `softmax(QKᵀ/√d_k + mask)·V`. Below, one head on one short "
        "sequence, each step computed by torch now and checked against `F.scaled_dot_product_attention`."
    )
    steps_part()
    scaling_part()
    masked_rows_part()
    memory_part()


@st.fragment  # each part has its own key row: a change reruns that part alone
def steps_part() -> None:
    with ui.key_controls("tf_attn"):
        left, middle, right = st.columns(3)
        tokens = left.slider("Tokens T", attention.MIN_TOKENS, attention.MAX_TOKENS, 6, key="tf_attn_tokens",
                             bind="query-params")
        d_k = middle.slider("Head size d_k", attention.MIN_D_K, attention.MAX_D_K, 8, key="tf_attn_dk",
                            bind="query-params")
        mask = right.selectbox("Mask", attention.MASKS, index=1, key="tf_attn_mask", bind="query-params")
    with ui.settings("tf_attn_more"):
        left, middle, right = st.columns(3)
        width = left.slider("Input width E", attention.MIN_WIDTH, attention.MAX_WIDTH, 16, key="tf_attn_width",
                            bind="query-params")
        pad = 2
        if mask == "key padding":  # only valid counts: at least one real token stays
            pad = middle.number_input(f"Padding tokens (1 to {tokens - 1})", 1, tokens - 1, min(2, tokens - 1),
                                      key="tf_attn_pad", bind="query-params")
        seed = right.number_input("Seed", 0, attention.MAX_SEED, 0, key="tf_attn_seed", bind="query-params")
    with ui.input_errors():
        steps = ui.compute(attention.attention_steps, tokens, width, d_k, mask, int(pad), int(seed))
        ui.plot(ui.compute(attention_figs.steps_figure, steps), key="tf_attn_steps_fig")
        st.markdown(attention.check_sentence(steps))
        ui.steps(attention.steps_sentences(steps), key="tf_attn_steps_text")
        ui.show_code(steps.code, key="tf_attn_steps_code", file_name="attention_steps.py")


@st.fragment
def scaling_part() -> None:
    st.subheader("Why divide by √d_k: measured")
    ui.prose(
        "For queries and keys with unit-variance entries, a dot product over d_k dimensions has variance d_k. "
        "Unscaled, the scores spread out as d_k grows, softmax piles its weight on one key, and the gradient "
        "through it (∂p/∂s = diag(p) − ppᵀ) shrinks. Dividing by √d_k keeps the scores' variance at 1 for every "
        "d_k. Each point below is 256 random queries against the same keys, with one fixed gradient from above."
    )
    with ui.key_controls("tf_scale"):
        left, right = st.columns(2)
        keys = left.slider("Keys per query", attention.MIN_KEYS, attention.MAX_KEYS, 16, key="tf_scale_keys",
                           bind="query-params")
        largest = right.select_slider("Largest d_k", attention.LARGEST_D_K, 1024, key="tf_scale_dk",
                                      bind="query-params")
    with ui.settings("tf_scale_more"):
        seed = st.number_input("Seed", 0, attention.MAX_SEED, 0, key="tf_scale_seed", bind="query-params")
    with ui.input_errors():
        curves = ui.compute(attention.scaling_curves, keys, largest, int(seed))
        ui.plot(ui.compute(attention_figs.scaling_figure, curves), key="tf_scale_fig")
        st.markdown(attention.scaling_sentence(curves))
        ui.show_code(curves.code, key="tf_scale_code", file_name="why_sqrt_dk.py")


@st.fragment
def masked_rows_part() -> None:
    st.subheader("Masks, and the fully masked row")
    ui.prose(
        "A boolean `attn_mask` says where a query **may** attend (True); a float mask is added to the scores "
        "(−∞ blocks). A causal mask is `is_causal=True` or the lower triangle; a key padding mask blocks the "
        "padding tokens' columns. Combine a causal mask with **left** padding and the padding queries are left "
        "with no key at all: their softmax has nothing to normalise. Below, each way of attending over such a "
        "mask, run now: by hand, and SDPA under each backend this build has."
    )
    with ui.key_controls("tf_rows"):
        left, right = st.columns(2)
        tokens = left.slider("Tokens T", attention.MIN_ROW_TOKENS, attention.MAX_ROW_TOKENS, 5,
                             key="tf_rows_tokens", bind="query-params")
        pad = right.number_input(f"Left padding tokens (1 to {tokens - 1})", 1, tokens - 1, min(2, tokens - 1),
                                 key="tf_rows_pad", bind="query-params")
    with ui.settings("tf_rows_more"):
        seed = st.number_input("Seed", 0, attention.MAX_SEED, 0, key="tf_rows_seed", bind="query-params")
    with ui.input_errors():
        rows = ui.compute(attention.fully_masked_rows, tokens, int(pad), int(seed))
        ui.plot(ui.compute(attention_figs.masked_rows_figure, rows), key="tf_rows_fig")
        ui.legend(attention_figs.legend_colors())
        ui.steps(attention.masked_rows_sentences(rows), key="tf_rows_steps")
        ui.table(attention.masked_rows_table(rows), hide_index=True, width="stretch")
        ui.show_code(rows.code, key="tf_rows_code", file_name="fully_masked_rows.py")


@st.fragment
def memory_part() -> None:
    st.subheader("The T×T matrix's memory, and fused kernels")
    ui.prose(
        "The scores have one entry per (query, key) pair: B·H·T² numbers. The bytes below are read from **meta** "
        "tensors (shapes and dtypes, no storage), so T = 32768 costs nothing to ask. A fused kernel (flash "
        "attention) walks the keys in blocks with a running softmax and never stores the T×T matrix: it returns "
        "the output and one logsumexp per query, from which backward recomputes the weights block by block."
    )
    with ui.key_controls("tf_mem"):
        left, middle, right = st.columns(3)
        batch = left.number_input("Batch B", 1, attention.MAX_BATCH, 1, key="tf_mem_batch", bind="query-params")
        heads = middle.number_input("Heads H", 1, attention.MAX_HEADS, 32, key="tf_mem_heads", bind="query-params")
        head_dim = right.number_input("Head size d", attention.MIN_HEAD_DIM, attention.MAX_HEAD_DIM, 128,
                                      key="tf_mem_dim", bind="query-params")
    with ui.input_errors():
        memory = ui.compute(attention.score_memory, int(batch), int(heads), int(head_dim))
        ui.plot(ui.compute(attention_figs.memory_figure, memory), key="tf_mem_fig")
        st.markdown(attention.memory_sentence(memory))
        st.markdown(attention.saved_sentence(memory))
        ui.show_code(memory.code, key="tf_mem_code", file_name="attention_memory.py")


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
    ui.prose(
        "\"Implement it\" is the usual follow-up. Each piece below is written in plain tensor ops (no `F.*`, no "
        "`torch.softmax`) and run beside torch's own op on the same tensors: the outputs are compared element by "
        "element, and so are the gradients each sends back for the same upstream gradient."
    )
    with ui.key_controls("tf_scratch"):
        left, right = st.columns([2, 1])
        piece = left.selectbox("Piece", scratch.PIECES, key="tf_scratch_piece", bind="query-params")
        dtype = right.selectbox("Precision", scratch.DTYPES, key="tf_scratch_dtype", bind="query-params")
    with ui.settings("tf_scratch_more"):
        rows, width, heads, p, causal, seed = scratch_settings(piece)
    with ui.input_errors():
        result = ui.compute(scratch.from_scratch, piece, dtype, rows, width, heads, p, causal, seed)
        ui.plot(ui.compute(scratch_figs.scratch_figure, result), key="tf_scratch_fig")
        st.markdown(scratch.piece_sentence(result))
        ui.show_code(result.code, key="tf_scratch_code", file_name=f"{piece.replace(' ', '_').lower()}.py")
        table = ui.compute(scratch.scratch_table, seed)
        st.markdown(scratch.table_caption(table))
        ui.table(scratch.table_frame(table), hide_index=True, width="stretch")
        ui.show_code(table.code, key="tf_scratch_table_code", file_name="from_scratch_checks.py")


def scratch_settings(piece: str) -> tuple[int, int, int, float, bool, int]:
    """The sizes and the options the picked piece takes; heads offered only where they divide the width."""
    left, middle, right = st.columns(3)
    rows = left.slider("Rows T", scratch.MIN_ROWS, scratch.MAX_ROWS, 6, key="tf_scratch_rows", bind="query-params")
    width = middle.slider("Width", scratch.MIN_WIDTH, scratch.MAX_WIDTH, 8, key="tf_scratch_width",
                          bind="query-params")
    seed = right.number_input("Seed", 0, scratch.MAX_SEED, 0, key="tf_scratch_seed", bind="query-params")
    heads, p, causal = 2 if width % 2 == 0 else 1, 0.5, True
    if piece == "multi-head attention":
        divisors = [h for h in range(1, scratch.MAX_HEADS + 1) if width % h == 0]
        heads = left.selectbox("Heads (divisors of the width)", divisors, index=divisors.index(heads),
                               key="tf_scratch_heads", bind="query-params")
    if piece == "dropout":
        p = middle.slider("Dropout p", 0.0, scratch.MAX_P, 0.5, 0.05, key="tf_scratch_p", bind="query-params")
    if piece == "attention":
        causal = right.checkbox("Causal", True, key="tf_scratch_causal", bind="query-params")
    return rows, width, heads, p, causal, int(seed)


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
