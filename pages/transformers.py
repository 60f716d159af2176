"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers import attention, block, embeddings, multihead, norms, positions, scratch, sequences, tiny_model
from demos.transformers.figures import attention as attention_figs
from demos.transformers.figures import block as block_figs
from demos.transformers.figures import embeddings as emb_figs
from demos.transformers.figures import multihead as multihead_figs
from demos.transformers.figures import norms as norm_figs
from demos.transformers.figures import positions as position_figs
from demos.transformers.figures import scratch as scratch_figs
from demos.transformers.figures import sequences as seq_figs
from demos.transformers.figures import tiny_model as tiny_figs
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
        "Unscaled, the scores spread out as d_k grows, softmax piles its weight on one key, and its Jacobian "
        "∂p/∂s = diag(p) − ppᵀ tends to zero as p tends to one-hot: the other keys get almost no gradient. "
        "Dividing by √d_k keeps the scores' variance at 1 for every d_k. Each point below is 256 random queries "
        "against the same keys, with one fixed gradient from above; the gradient with respect to q is measured on "
        "q itself, the same tensor with and without the scaling."
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
        st.markdown(attention.gradient_sentence(curves))
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


def multihead_keys() -> tuple[int, int, int]:
    a, b, c = st.columns(3)
    embed = a.select_slider("Embedding size E", multihead.EMBED_CHOICES, 16, key="tf_mha_embed",
                            bind="query-params")
    heads = b.select_slider("Heads H", multihead.HEAD_CHOICES, 4, key="tf_mha_heads", bind="query-params")
    tokens = c.slider("Tokens T", 1, multihead.MAX_TOKENS, 6, key="tf_mha_tokens", bind="query-params")
    return embed, heads, tokens


def multihead_settings() -> tuple[int, bool, int]:
    a, b, c = st.columns(3, vertical_alignment="bottom")
    batch = a.slider("Batch B", 1, multihead.MAX_BATCH, 2, key="tf_mha_batch", bind="query-params")
    bias = b.toggle("bias=True", True, key="tf_mha_bias", bind="query-params")
    seed = c.number_input("Seed", 0, multihead.MAX_SEED, 0, key="tf_mha_seed", bind="query-params")
    return batch, bias, int(seed)


def multihead_section() -> None:
    ui.prose(
        "Multi-head attention splits the embedding E into H heads of d = E/H features, runs attention in each "
        "head on its own slice, and concatenates the results. The split is `view(B, T, H, d).transpose(1, 2)`: "
        "head h gets features h·d … h·d+d−1 of **every** token. `view(B, H, T, d)` has the same shape and raises "
        "nothing, but it reads memory in order: head h gets the next T·d numbers, T/H tokens' worth, which are "
        "whole tokens only when H divides T, so its row t is in general a piece of some other token. Each grid "
        "below colours every number of one input (T tokens × E features) by the head that reads it; hover a cell "
        "for the row it lands in."
    )
    with ui.key_controls("tf_mha"):
        embed, heads, tokens = multihead_keys()
    with ui.settings("tf_mha"):
        batch, bias, seed = multihead_settings()
    with ui.input_errors():
        split = ui.compute(multihead.head_split, embed, heads, tokens, batch, seed)
        ui.plot(ui.compute(multihead_figs.split_figure, split), key="tf_mha_split_fig")
        st.markdown(multihead.split_sentence(split))
        ui.show_code(split.code, key="tf_mha_split_code", file_name="head_split.py")

        st.subheader("nn.MultiheadAttention, rebuilt from its own weights")
        check = ui.compute(multihead.module_check, embed, heads, tokens, batch, bias, seed)
        st.markdown(multihead.module_sentence(check))
        st.markdown(multihead.parameters_sentence(check))
        st.markdown("**The attention weights of sequence 0**: each head's by hand, and what `need_weights=True` "
                    "returns beside them.")
        ui.plot(ui.compute(multihead_figs.weights_figure, check), key="tf_mha_weights_fig")
        st.markdown(multihead.weights_sentence(check))
        ui.show_code(check.code, key="tf_mha_module_code", file_name="multihead_attention_by_hand.py")

        st.subheader("Correct vs trap: batch_first=False (the default) fed (B, T, E)")
        trap = ui.compute(multihead.batch_first_trap, embed, heads, tokens, batch, seed)
        st.markdown(multihead.who_attends_caption(trap))
        ui.plot(ui.compute(multihead_figs.batch_first_figure, trap), key="tf_mha_batch_first_fig")
        st.markdown(multihead.batch_first_sentence(trap))
        ui.show_code(trap.code, key="tf_mha_batch_first_code", file_name="batch_first_trap.py")


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


def block_keys() -> tuple[int, int, int, str]:
    a, b, c, d = st.columns([1.2, 1, 1.2, 0.8])
    embed = a.select_slider("Model width E", block.EMBED_CHOICES, 32, key="tf_block_embed", bind="query-params")
    heads = b.select_slider("Heads H", block.HEAD_CHOICES, 4, key="tf_block_heads", bind="query-params")
    tokens = c.slider("Tokens T", 1, block.MAX_TOKENS, 8, key="tf_block_tokens", bind="query-params")
    activation = d.selectbox("Activation", block.ACTIVATIONS, key="tf_block_act", bind="query-params")
    return embed, heads, tokens, activation


def block_settings() -> tuple[int, float, int]:
    a, b, c = st.columns(3, vertical_alignment="bottom")
    batch = a.slider("Batch B", 1, block.MAX_BATCH, 2, key="tf_block_batch", bind="query-params")
    eps = b.selectbox("layer_norm_eps", block.EPS_CHOICES, key="tf_block_eps", bind="query-params")
    seed = c.number_input("Seed", 0, block.MAX_SEED, 0, key="tf_block_seed", bind="query-params")
    return batch, eps, int(seed)


def block_section() -> None:
    ui.prose(
        "A transformer block is two sublayers, self-attention and a 4E-wide MLP, each inside a residual and a "
        "LayerNorm: post-norm `norm(x + f(x))` (the original paper, and `nn.TransformerEncoderLayer`'s default) "
        "or pre-norm `x + f(norm(x))` (`norm_first=True`, as in GPT-2 and after). Below, the block is written "
        "by hand with the layer's own weights (`batch_first=True`, the layer's `layer_norm_eps` and activation, "
        "no dropout) and compared with the layer in three runs; then one block's cost, each formula beside "
        "what torch measures: parameters from `parameters()`, matmul FLOPs from `FlopCounterMode`, the bytes "
        "autograd keeps from `saved_tensors_hooks`."
    )
    with ui.key_controls("tf_block"):
        embed, heads, tokens, activation = block_keys()
    with ui.settings("tf_block"):
        batch, eps, seed = block_settings()
    with ui.input_errors():
        same = ui.compute(block.block_equivalence, embed, heads, tokens, batch, activation, eps, seed)
        costs = ui.compute(block.block_costs, embed, heads, tokens, batch, activation, seed)
        ui.plot(ui.compute(block_figs.block_figure, same, costs), key="tf_block_fig")
        st.caption("First panel: max |difference| in each run of the layer (p: its dropout); hover a bar for the "
                   "value and the path the layer took. Other panels: bars are the formula, part by part; ◆ is "
                   "what torch measured.")
        ui.steps([block.equivalence_sentence(same, False), block.equivalence_sentence(same, True),
                  block.path_sentence(same), block.dropout_sentence(same)], key="tf_block_steps")
        ui.show_code(same.code, key="tf_block_same_code", file_name="block_by_hand.py")
        st.subheader("What one block costs")
        st.markdown(block.parameters_sentence(costs))
        st.markdown(block.flops_sentence(costs))
        st.markdown(block.memory_sentence(costs))
        ui.show_code(costs.code, key="tf_block_costs_code", file_name="block_costs.py")


# ---- Embeddings & dropout ----------------------------------------------------------------------------------------


def embeddings_section() -> None:
    ui.prose(
        "`nn.Embedding(V, E)` is a table of V learned rows of size E; `emb(ids)` returns row `ids[t]` for every "
        "position t. That is exactly `one_hot(ids) @ emb.weight`, done without the multiplication. Below: the "
        "lookup for your ids, the float-index error, `padding_idx`, tying the output head to the table, and "
        "dropout — its mask, its 1/(1 − p) scaling and the `F.dropout` call that `model.eval()` cannot switch off."
    )
    lookup_part()
    dropout_part()


@st.fragment  # its own key row: a change of the ids or sizes redraws the lookup and padding figures, not dropout's
def lookup_part() -> None:
    with ui.key_controls("tf_emb"):
        a, b, c = st.columns([2, 1, 1])
        ids_text = a.text_input(f"Token ids (1 to {embeddings.MAX_IDS}, each a row of the table)",
                                embeddings.DEFAULT_IDS, key="tf_emb_ids", bind="query-params")
        vocab = b.slider("Vocabulary size V", embeddings.MIN_VOCAB, embeddings.MAX_VOCAB, 8, key="tf_emb_vocab",
                         bind="query-params")
        dim = c.slider("Embedding size E", embeddings.MIN_DIM, embeddings.MAX_DIM, 6, key="tf_emb_dim",
                       bind="query-params")
    with ui.settings("tf_emb"):
        seed = int(st.columns(4)[0].number_input("Seed", 0, embeddings.MAX_SEED, 0, key="tf_emb_seed",
                                                 bind="query-params"))
    with ui.input_errors():
        r = ui.compute(embeddings.embedding_lookup, vocab, dim, ids_text, seed)
        ui.plot(ui.compute(emb_figs.lookup_figure, r), key="tf_emb_lookup_fig")
        st.markdown(embeddings.lookup_sentence(r))
        st.markdown(embeddings.float_index_sentence(r))
        if r.float_index_error:
            st.code(r.float_index_error, language=None, wrap_lines=True)
        st.markdown(embeddings.tying_sentence(r))
        ui.show_code(r.code, key="tf_emb_lookup_code", file_name="embedding_lookup.py")
        padding_part(vocab, dim, ids_text, seed)


@st.fragment  # its own key row: a change of padding_idx redraws the gradient bars alone
def padding_part(vocab: int, dim: int, ids_text: str, seed: int) -> None:
    st.subheader("padding_idx: the padding row gets no gradient")
    with ui.key_controls("tf_emb_pad"):
        padding_idx = st.columns([1, 3])[0].selectbox("padding_idx (a row of the table)", range(vocab),
                                                      key="tf_emb_pad", bind="query-params")
    with ui.input_errors():
        r = ui.compute(embeddings.padding_gradient, vocab, dim, ids_text, padding_idx, seed)
        ui.plot(ui.compute(emb_figs.padding_figure, r), key="tf_emb_pad_fig")
        st.markdown(embeddings.padding_sentence(r))
        ui.show_code(r.code, key="tf_emb_pad_code", file_name="padding_idx.py")


@st.fragment  # its own key row: a change of p redraws the dropout figures alone
def dropout_part() -> None:
    st.subheader("Dropout: a random mask in train(), nothing in eval()")
    with ui.key_controls("tf_drop"):
        p = st.select_slider("Dropout p", embeddings.DROPOUT_PS, 0.5, key="tf_drop_p", bind="query-params")
    with ui.settings("tf_drop"):
        a, b = st.columns(2)
        draws = a.select_slider("Draws averaged", embeddings.DRAW_CHOICES, 10_000, key="tf_drop_draws",
                                format_func=lambda n: f"{n:,}", bind="query-params")
        seed = int(b.number_input("Seed", 0, embeddings.MAX_SEED, 0, key="tf_drop_seed", bind="query-params"))
    with ui.input_errors():
        r = ui.compute(embeddings.dropout_expectation, p, draws, seed)
        left, right = st.columns(2)  # side by side on the page; whiteboard mode stacks them
        with left:
            ui.plot(ui.compute(emb_figs.masks_figure, r), key="tf_drop_masks_fig")
        with right:
            ui.plot(ui.compute(emb_figs.expectation_figure, r), key="tf_drop_mean_fig")
        st.markdown(embeddings.mask_sentence(r))
        st.markdown(embeddings.expectation_sentence(r))
        ui.show_code(r.code, key="tf_drop_code", file_name="dropout_expectation.py")
        st.subheader("Correct vs trap: F.dropout inside forward")
        trap = ui.compute(embeddings.functional_dropout_trap, p, seed)
        ui.plot(ui.compute(emb_figs.trap_figure, trap), key="tf_drop_trap_fig")
        st.markdown(embeddings.trap_sentence(trap))
        ui.show_code(trap.code, key="tf_drop_trap_code", file_name="functional_dropout_trap.py")


# ---- Sequences ---------------------------------------------------------------------------------------------------


def sequences_section() -> None:
    ui.prose(
        "`nn.RNN`, `nn.LSTM` and `nn.GRU` read a sequence one step at a time and return `output` (the last "
        "layer's hidden state at every step) and `h_n` (every layer's and direction's state after the last step; "
        "an LSTM adds its cell state `c_n`). Every shape below is read from a real module built with your settings."
    )
    shapes_part()
    packing_part()
    timing_part()


@st.fragment  # its own key row: a change of the module's settings redraws the shapes figure alone
def shapes_part() -> None:
    with ui.key_controls("tf_seq"):
        a, b, c, d = st.columns([1, 1.4, 1, 1], vertical_alignment="bottom")
        cell = a.selectbox("Recurrent module", sequences.CELLS, index=1, key="tf_seq_cell", bind="query-params")
        layers = b.slider("num_layers", 1, sequences.MAX_LAYERS, 2, key="tf_seq_layers", bind="query-params")
        bidirectional = c.toggle("bidirectional", True, key="tf_seq_bidir", bind="query-params")
        batch_first = d.toggle("batch_first", True, key="tf_seq_batch_first", bind="query-params")
    with ui.settings("tf_seq"):
        a, b, c, d, e = st.columns(5)
        batch = a.slider("Batch size", 1, sequences.MAX_BATCH, 3, key="tf_seq_batch", bind="query-params")
        length = b.slider("Sequence length", 1, sequences.MAX_LEN, 6, key="tf_seq_len", bind="query-params")
        input_size = c.slider("Input size", 1, sequences.MAX_FEATURES, 5, key="tf_seq_input", bind="query-params")
        hidden = d.slider("Hidden size", 1, sequences.MAX_FEATURES, 4, key="tf_seq_hidden", bind="query-params")
        seed = int(e.number_input("Seed", 0, sequences.MAX_SEED, 0, key="tf_seq_seed", bind="query-params"))
    with ui.input_errors():
        r = ui.compute(sequences.rnn_shapes, cell, layers, bidirectional, batch_first, batch, length, input_size,
                       hidden, seed)
        ui.plot(ui.compute(seq_figs.shapes_figure, r), key="tf_seq_shapes_fig")
        st.markdown(sequences.shapes_sentence(r))
        st.markdown(sequences.match_sentence(r))
        st.markdown(sequences.gate_sentence(r))
        ui.show_code(r.code, key="tf_seq_shapes_code", file_name="rnn_shapes.py")


@st.fragment  # its own key row: a change of lengths or layer redraws the packing bars alone
def packing_part() -> None:
    st.subheader("Padding vs packing: the last hidden state of short sequences")
    with ui.key_controls("tf_pack"):
        a, b = st.columns([2, 1])
        lengths = a.text_input(f"Sequence lengths ({sequences.MIN_SEQUENCES} to {sequences.MAX_SEQUENCES}, each 1 "
                               f"to {sequences.MAX_LEN})", sequences.DEFAULT_LENGTHS, key="tf_pack_lengths",
                               bind="query-params")
        cell = b.selectbox("Module run on the batch", sequences.CELLS, index=2, key="tf_pack_cell", bind="query-params")
    with ui.settings("tf_pack"):
        seed = int(st.columns(4)[0].number_input("Seed", 0, sequences.MAX_SEED, 0, key="tf_pack_seed",
                                                 bind="query-params"))
    with ui.input_errors():
        r = ui.compute(sequences.padding_vs_packing, cell, lengths, seed)
        ui.plot(ui.compute(seq_figs.packing_figure, r), key="tf_pack_fig")
        st.markdown(sequences.packing_sentence(r))
        st.markdown(sequences.batch_sizes_sentence(r))
        st.markdown(sequences.enforce_sorted_sentence(r))
        if r.enforce_sorted_error:
            st.code(f"RuntimeError: {r.enforce_sorted_error}", language=None, wrap_lines=True)
        ui.show_code(r.code, key="tf_pack_code", file_name="padding_vs_packing.py")


@st.fragment  # its own key row: a change of width redraws the timing figure alone
def timing_part() -> None:
    st.subheader("Why attention replaced recurrence")
    ui.prose(
        "Step t of a recurrent layer needs the hidden state of step t − 1, so T positions take T steps one after "
        "another, however many cores wait. Attention compares every position with every other in one matrix "
        "product, which a GPU spreads over thousands of cores at once; its work grows as T², which is what long "
        "contexts pay for. Below: the sequential steps counted with a hook, and one forward timed on this CPU.",
        label="Recurrence vs attention")
    with ui.key_controls("tf_time"):
        width = st.select_slider("Width (input = hidden = embedding size)", sequences.WIDTHS, 32, key="tf_time_width",
                                 bind="query-params")
    with ui.input_errors():
        r = ui.compute(sequences.recurrence_vs_attention, width)
        ui.plot(ui.compute(seq_figs.timing_figure, r), key="tf_time_fig")
        for sentence in sequences.timing_sentences(r):
            st.markdown(sentence)
        ui.show_code(r.code, key="tf_time_code", file_name="recurrence_vs_attention.py")


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
