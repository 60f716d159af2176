"""Attention & transformers: every heatmap, curve and table below is computed by torch when its tab opens."""

import streamlit as st

from demos.transformers import block, multihead
from demos.transformers.figures import block as block_figs
from demos.transformers.figures import multihead as multihead_figs
from demos.transformers.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


# ---- Attention ---------------------------------------------------------------------------------------------------


def attention_section() -> None:
    st.info("Attention: placeholder")


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
        "nothing, but it reads memory in order: head h gets the next T·d numbers, a run of whole tokens' features, "
        "so its row t is in general a piece of some other token. Each grid below colours every number of one "
        "input (T tokens × E features) by the head that reads it; hover a cell for the row it lands in."
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
    st.info("Positions: placeholder")


# ---- Norms & residuals -------------------------------------------------------------------------------------------


def norms_section() -> None:
    st.info("Norms: placeholder")


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
