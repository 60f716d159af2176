"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers import norms, positions
from demos.transformers.figures import norms as norm_figs
from demos.transformers.figures import positions as position_figs
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
    ui.prose(
        "Attention compares every token with every other by dot products, and nothing in those products says where "
        "a token stands. Shuffle the tokens and the outputs shuffle the same way: self-attention without positions "
        "is **permutation-equivariant**. Below, the same head is run on a sequence and on its permutation, with "
        "positions told three ways: a **sinusoidal** table added to the input, a **learned** table "
        "(`nn.Embedding`) added to the input, or **RoPE**, which rotates q and k by their position instead."
    )
    permutation_part()
    tables_part()
    rope_part()


@st.fragment  # its own key row: a change reruns this part alone
def permutation_part() -> None:
    keys, rest = ui.key_controls("tf_pos_perm"), ui.settings("tf_pos_perm")
    with keys:
        a, b, c = st.columns([2, 2, 1], vertical_alignment="bottom")
        encoding = a.selectbox("Positions", positions.ENCODINGS, format_func=positions.ENCODING_LABELS.get,
                               key="tf_pos_encoding", bind="query-params")
        order = b.selectbox("Permutation P", positions.PERMUTATIONS, format_func=positions.PERMUTATION_LABELS.get,
                            key="tf_pos_order", bind="query-params")
        causal = c.toggle("Causal mask", key="tf_pos_causal", bind="query-params")
    with rest:
        a, b, c = st.columns(3)
        tokens = a.slider("Tokens", positions.MIN_TOKENS, positions.MAX_TOKENS, 6, key="tf_pos_tokens",
                          bind="query-params")
        dim = b.select_slider("Model width", [2, 4, 8, 16, 32, 64], 16, key="tf_pos_dim", bind="query-params")
        seed = c.number_input("Seed", 0, 9999, 0, key="tf_pos_seed", bind="query-params")
    with ui.input_errors():
        r = ui.compute(positions.permutation_test, tokens, dim, encoding, causal, order, int(seed))
        ui.plot(ui.compute(position_figs.equivariance_figure, r), key="tf_pos_perm_fig")
        st.markdown(positions.gap_sentence(r))
        ui.table({"positions": [positions.ENCODING_LABELS[k] for k in positions.ENCODINGS],
                  **{column: [f"{gap:.2g}" for kind in positions.ENCODINGS for k, m, gap in r.gaps
                              if k == kind and m == mask]
                     for column, mask in (("no mask", False), ("causal mask", True))}}, whole=True)
        st.caption("max |f(P·x) − P·f(x)| for every way of telling positions, on the same input, weights and "
                   f"permutation. {positions.gaps_summary(r)}")
        ui.show_code(r.code, key="tf_pos_perm_code", file_name="permutation_equivariance.py")


@st.fragment
def tables_part() -> None:
    st.subheader("The two tables that are added to the input")
    with ui.key_controls("tf_pos_tables"):
        a, b = st.columns(2)
        count = a.slider("Positions", positions.MIN_TOKENS, positions.MAX_TABLE_POSITIONS, 32,
                         key="tf_pos_table_positions", bind="query-params")
        dim = b.slider("Dimensions", positions.MIN_DIM, positions.MAX_TABLE_DIM, 32, 2, key="tf_pos_table_dim",
                       bind="query-params")
    with ui.settings("tf_pos_tables"):
        seed = st.number_input("Seed of the learned table", 0, 9999, 0, key="tf_pos_table_seed",
                               bind="query-params")
    with ui.input_errors():
        t = ui.compute(positions.encoding_tables, count, dim, int(seed))
        ui.plot(ui.compute(position_figs.tables_figure, t), key="tf_pos_tables_fig")
        ui.steps(positions.table_sentences(t), key="tf_pos_tables_steps")
        ui.plot(ui.compute(position_figs.dots_figure, t), key="tf_pos_dots_fig")
        st.markdown(positions.dots_sentence(t))
        ui.show_code(t.code, key="tf_pos_tables_code", file_name="positional_tables.py")


@st.fragment
def rope_part() -> None:
    st.subheader("RoPE: scores that depend only on the offset")
    st.markdown("One token's q and k are placed at every position m and n, and every score q_m·k_n is computed: "
                "with RoPE (q and k rotated by their positions) and with the sinusoidal table added to the token "
                "before W_q and W_k.")
    with ui.key_controls("tf_pos_rope"):
        a, b, c = st.columns(3)
        count = a.slider("Positions", positions.MIN_TOKENS, 2 * positions.MAX_TOKENS, 12,
                         key="tf_pos_rope_positions", bind="query-params")
        head_dim = b.select_slider("Head dimension", [2, 4, 8, 16, 32, 64], 16, key="tf_pos_rope_dim",
                                   bind="query-params")
        base = c.select_slider("RoPE base", positions.BASES, 10000.0, format_func=lambda v: f"{v:g}",
                               key="tf_pos_rope_base", bind="query-params")
    with ui.settings("tf_pos_rope"):
        seed = st.number_input("Seed of the token and weights", 0, 9999, 0, key="tf_pos_rope_seed",
                               bind="query-params")
    with ui.input_errors():
        o = ui.compute(positions.rope_offsets, count, head_dim, base, int(seed))
        ui.plot(ui.compute(position_figs.offsets_figure, o), key="tf_pos_rope_fig")
        ui.steps(positions.offset_sentences(o), key="tf_pos_rope_steps")
        ui.show_code(o.code, key="tf_pos_rope_code", file_name="rope_offsets.py")


# ---- Norms & residuals -------------------------------------------------------------------------------------------


def norms_section() -> None:
    ui.prose(
        "A transformer's activations are a (B, T, C) tensor: batch, tokens, channels. **LayerNorm** normalizes "
        "each token over its C channels; **BatchNorm** normalizes each channel over the whole batch and every "
        "token; **RMSNorm** is LayerNorm without subtracting the mean. Below, one input is nudged and every "
        "output that moves is marked: those are the values it shares a mean and variance with."
    )
    axes_part()
    batch_part()
    rms_part()
    depth_part()


@st.fragment  # its own key row: a change reruns this part alone
def axes_part() -> None:
    keys, rest = ui.key_controls("tf_norm_axes"), ui.settings("tf_norm_axes")
    with rest:
        a, b, c = st.columns(3)
        batch = a.slider("Batch size B", 1, norms.MAX_BATCH, 3, key="tf_norm_batch", bind="query-params")
        tokens = b.slider("Tokens T", 1, norms.MAX_TOKENS, 4, key="tf_norm_tokens", bind="query-params")
        channels = c.slider("Channels C", 2, norms.MAX_CHANNELS, 6, key="tf_norm_channels", bind="query-params")
    with keys:  # only cells the tensor has can be picked
        a, b, c = st.columns(3)
        sample = a.number_input(f"Sample b (0 to {batch - 1})", 0, batch - 1, 0, key="tf_norm_b",
                                bind="query-params")
        token = b.number_input(f"Position t (0 to {tokens - 1})", 0, tokens - 1, min(1, tokens - 1),
                               key="tf_norm_t", bind="query-params")
        channel = c.number_input(f"Channel c (0 to {channels - 1})", 0, channels - 1, min(2, channels - 1),
                                 key="tf_norm_c", bind="query-params")
    with ui.input_errors():
        a = ui.compute(norms.reduction_axes, batch, tokens, channels, int(sample), int(token), int(channel))
        ui.plot(ui.compute(norm_figs.axes_figure, a), key="tf_norm_axes_fig")
        ui.steps(norms.axes_sentences(a), key="tf_norm_axes_steps")
        ui.show_code(a.code, key="tf_norm_axes_code", file_name="norm_axes.py")


@st.fragment
def batch_part() -> None:
    st.subheader("BatchNorm depends on the rest of the batch; LayerNorm does not")
    with ui.key_controls("tf_norm_bn"):
        batch = st.select_slider("Batch size", norms.BN_BATCHES, 4, key="tf_norm_bn_batch", bind="query-params")
    with ui.settings("tf_norm_bn"):
        a, b, c = st.columns(3)
        features = a.slider("Features", norms.MIN_FEATURES, norms.MAX_FEATURES, 8, key="tf_norm_bn_features",
                            bind="query-params")
        batches = b.slider("Batches", norms.MIN_BATCHES, norms.MAX_BATCHES, 5, key="tf_norm_bn_batches",
                           bind="query-params")
        seed = c.number_input("Seed", 0, 9999, 0, key="tf_norm_bn_seed", bind="query-params")
    with ui.input_errors():
        d = ui.compute(norms.batch_dependence, features, batch, batches, int(seed))
        ui.plot(ui.compute(norm_figs.batch_figure, d), key="tf_norm_bn_fig")
        ui.steps(norms.batch_sentences(d), key="tf_norm_bn_steps")
        ui.show_code(d.code, key="tf_norm_bn_code", file_name="batchnorm_batch_dependence.py")


@st.fragment
def rms_part() -> None:
    st.subheader("RMSNorm: LayerNorm without centering")
    with ui.key_controls("tf_norm_rms"):
        offset = st.slider("Mean added to the row", -norms.MAX_OFFSET, norms.MAX_OFFSET, 1.0, 0.5,
                           key="tf_norm_rms_offset", bind="query-params")
    with ui.settings("tf_norm_rms"):
        a, b = st.columns(2)
        features = a.slider("Features", norms.MIN_FEATURES, norms.MAX_FEATURES, 8, key="tf_norm_rms_features",
                            bind="query-params")
        seed = b.number_input("Seed", 0, 9999, 0, key="tf_norm_rms_seed", bind="query-params")
    with ui.input_errors():
        r = ui.compute(norms.rms_vs_layer, features, offset, int(seed))
        ui.plot(ui.compute(norm_figs.rms_figure, r), key="tf_norm_rms_fig")
        ui.steps(norms.rms_sentences(r), key="tf_norm_rms_steps")
        ui.show_code(r.code, key="tf_norm_rms_code", file_name="rmsnorm_vs_layernorm.py")


@st.fragment
def depth_part() -> None:
    st.subheader("Pre-norm vs post-norm at depth")
    st.markdown("Two stacks of `nn.TransformerEncoderLayer` with the same weights (dropout 0) differ only in "
                "`norm_first`; a pre-norm stack ends in a final LayerNorm. One forward and backward at init, on a "
                "(4, 8, width) input, with a mean-squared-error loss on a random linear read-out.")
    with ui.key_controls("tf_norm_depth"):
        a, b = st.columns(2)
        depth = a.slider("Depth", 1, norms.MAX_DEPTH, 12, key="tf_norm_depth", bind="query-params")
        width = b.select_slider("Width", norms.WIDTHS, 32, key="tf_norm_width", bind="query-params")
    with ui.settings("tf_norm_depth"):
        a, b = st.columns(2)
        heads = a.select_slider("Heads", norms.HEADS, 4, key="tf_norm_heads", bind="query-params")
        seed = b.number_input("Seed", 0, 9999, 0, key="tf_norm_depth_seed", bind="query-params")
    with ui.input_errors():
        p = ui.compute(norms.pre_vs_post, depth, width, heads, int(seed))
        ui.plot(ui.compute(norm_figs.prepost_figure, p), key="tf_norm_depth_fig")
        ui.steps(norms.depth_sentences(p), key="tf_norm_depth_steps")
        ui.show_code(p.code, key="tf_norm_depth_code", file_name="prenorm_vs_postnorm.py")


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
