"""Gradient flow: vanishing and exploding gradients across depth, clipping, dead ReLUs — all from real runs."""

import streamlit as st

from demos.gradient_flow import clipping, dead_relu, figures, flow
from demos.gradient_flow.network import (
    ACTIVATIONS,
    INIT_LABELS,
    INITS,
    MAX_DEPTH,
    MAX_WIDTH,
    MIN_WIDTH,
    NORM_LABELS,
    NORMS,
)
from demos.gradient_flow.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


def network_ui() -> tuple:
    """The network's shape and recipe; defaults show vanishing plainly. What decides vanishing or exploding (depth,
    width, activation, init) is the key row; the fixes and the heatmap's steps are settings."""
    keys, rest = ui.key_controls("gf_network"), ui.settings("gf_network", label="Fixes and heatmap steps")
    with keys:
        a, b, c, d = st.columns([1, 1, 1, 1.4])
        depth = a.slider("Depth (layers)", 1, MAX_DEPTH, 30, key="gf_depth", bind="query-params")
        width = b.select_slider("Width", [MIN_WIDTH, 8, 16, 32, 64, 128, 256, MAX_WIDTH], 32, key="gf_width",
                                bind="query-params")
        activation = c.selectbox("Activation", list(ACTIVATIONS), key="gf_act", bind="query-params")
        init = d.selectbox("Initialization", INITS, index=INITS.index("normal"), format_func=INIT_LABELS.get,
                           key="gf_init", bind="query-params")
    with rest:
        a, b, c = st.columns([1.4, 1, 0.8], vertical_alignment="bottom")
        steps = a.slider("Training steps for the heatmap", 1, flow.MAX_STEPS, 8, key="gf_steps",
                         bind="query-params")
        norm = b.selectbox("Normalization", NORMS, format_func=NORM_LABELS.get, key="gf_norm", bind="query-params")
        residual = c.toggle("Residual", key="gf_residual", bind="query-params")
    return depth, width, activation, init, norm, residual, steps


def ratio_metric(column, label: str, p: flow.Pass) -> None:
    """The layer 1 / last ratio with its verdict, which also weighs the loss: a ratio near 1 can hide a blow-up."""
    column.metric(label, f"{p.ratio:.2e}", p.verdict, delta_color="green" if p.verdict == "healthy" else "red",
                  delta_arrow="off", help="Ratio of the first and last hidden layers' weight-gradient norms: between "
                  "0.1 and 10 the first layers learn about as fast as the last, provided the loss at init is near "
                  "chance. A weight's gradient is the backpropagated gradient times its layer's input, so it can "
                  "shrink while the gradient itself grows: the sentences below give both.")


def depth_section() -> None:
    st.header("Vanishing and exploding across depth", divider="gray")
    ui.prose(
        "Backpropagation multiplies one Jacobian per layer. If each layer scales the signal by less than 1 the "
        "gradient reaching the first layers **vanishes** geometrically; if by more than 1 it **explodes**. "
        "The factor comes from the weights' scale (init), the activation's slope (sigmoid ≤ 0.25, tanh and "
        "sigmoid ≈ 0 when saturated, ReLU 0 or 1), and what normalization and skip connections do to it. "
        "Below: one real forward/backward on a batch of 64 for your network and three fixes, then a few real SGD "
        "steps. Try width 256 with N(0, 1) to see the same recipe explode instead."
    )
    depth_part()


@st.fragment  # its own key row: a change of the network redraws this part's four figures, not the page's seven
def depth_part() -> None:
    params = network_ui()
    with ui.input_errors():
        r = ui.compute(flow.gradient_flow, *params)
        a, b, c = st.columns(3)
        ratio_metric(a, "Your setting: layer 1 / last layer", r.yours)
        ratio_metric(b, "Full fix: layer 1 / last layer", r.fixed)
        c.metric("Loss at init", f"{r.yours.loss:.4g}", help="Cross-entropy on 10 random classes: ln 10 ≈ 2.30.")
        warning = flow.health_warning(r)
        if warning:
            st.warning(warning, icon=":material/warning:")
        left, right = st.columns(2)
        with left:
            ui.plot(ui.compute(figures.grad_norm_figure, r), key="gf_norms")
        with right:
            ui.plot(ui.compute(figures.act_std_figure, r), key="gf_stds")
        left, right = st.columns(2)
        with left:
            ui.plot(ui.compute(figures.heatmap_figure, r), key="gf_heatmap")
        with right:
            ui.plot(ui.compute(figures.histogram_figure, r), key="gf_hist")
        ui.show_code(r.code, key="gf_flow_code", file_name="gradient_flow.py")
    depth_steps()
    with ui.input_errors():
        st.markdown("**What each line measured**\n\n" + "\n".join(
            f"- {line}" for line in flow.fix_sentences(ui.compute(flow.gradient_flow, *params),
                                                       figures.VARIANT_NAMES)))


@st.fragment  # a step click (whiteboard mode) shows one more sentence without redrawing the figures above
def depth_steps() -> None:
    ui.steps(
        [
            "Read the red line: the gradient norm of each layer's weight, layer 1 next to the input.",
            "A slope down towards layer 1 is vanishing: early layers barely learn. Up is exploding.",
            "The heatmap repeats the measurement at every training step: the pattern persists, it is not a fluke "
            "of one batch.",
            "The usual fixes: residuals give the gradient an identity path around every block; LayerNorm and "
            "BatchNorm rescale each layer's pre-activations; the matching init keeps a *linear layer's* factor near "
            "1 (Xavier when the activation's slope is about 1, as tanh's is near 0; Kaiming for ReLU, which passes "
            "half its inputs). A sigmoid's slope is at most 0.25, so no init alone keeps a sigmoid layer's factor "
            "at 1. Whether a fix helps is measured below, not assumed.",
        ],
        key="gf_depth_steps",
    )


def clipping_section() -> None:
    st.header("Gradient clipping", divider="gray")
    ui.prose(
        "`clip_grad_norm_` rescales *all* gradients together so their total norm is at most `max_norm`: the "
        "direction is kept. `clip_grad_value_` clamps every entry to ±`clip_value` on its own: the direction "
        "changes. Both act in place on `.grad`, between `backward()` and `optimizer.step()`."
    )
    clipping_part()


@st.fragment  # its own key row: a change redraws the two clipping figures only
def clipping_part() -> None:
    with ui.key_controls("gf_clip"):  # stays just above the two figures it drives
        a, b, c = st.columns(3)
        max_norm = a.select_slider("max_norm", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0], 1.0, key="gf_max_norm",
                                   bind="query-params")
        clip_value = b.select_slider("clip_value", [0.01, 0.05, 0.1, 0.5, 1.0, 5.0], 0.1, key="gf_clip_value",
                                     bind="query-params")
        lr_text = c.text_input("Learning rate (SGD, momentum 0.9)", "0.1", key="gf_lr", bind="query-params",
                               help=f"Between {clipping.MIN_LR:g} and {clipping.MAX_LR:g}.")
    left, right = st.columns(2)
    with left, ui.input_errors():
        cmp = ui.compute(clipping.compare_clipping, max_norm, clip_value)
        ui.table(
            {
                "": ["total norm", "cosine with original"],
                "before": [f"{cmp.norm_before:.4g}", "1"],
                f"clip_grad_norm_({max_norm:g})": [f"{cmp.norm_after_norm_clip:.4g}", f"{cmp.cosine_norm_clip:.6f}"],
                f"clip_grad_value_({clip_value:g})": [f"{cmp.norm_after_value_clip:.4g}",
                                                      f"{cmp.cosine_value_clip:.6f}"],
            },
            hide_index=True,
        )
        st.caption(f"`clip_grad_norm_` returned {cmp.returned_norm:.4g}: the norm *before* clipping — log it.")
        ui.plot(ui.compute(figures.clip_scatter_figure, cmp), key="gf_clip_scatter")
        ui.show_code(cmp.code, key="gf_clip_code", file_name="clip_compare.py")
    with right, ui.input_errors():
        run = ui.compute(clipping.clipping_run, lr_text, max_norm)
        if run.plain_diverged:
            st.warning(f"Without clipping the loss became inf/NaN at step {len(run.loss_plain)}; with "
                     f"clip_grad_norm_({max_norm:g}) it ends at {run.loss_clipped[-1]:.3g}.", icon=":material/warning:")
        else:
            st.info(f"At lr {run.lr:g} neither run diverged (final losses {run.loss_plain[-1]:.3g} and "
                    f"{run.loss_clipped[-1]:.3g}); try 0.1 or more.", icon=":material/info:")
        ui.plot(ui.compute(figures.clip_run_figure, run), key="gf_clip_run")
        ui.show_code(run.code, key="gf_run_code", file_name="clip_run.py")


def dead_section() -> None:
    st.header("Dead ReLUs", divider="gray")
    ui.prose(
        "A ReLU unit whose pre-activation is negative for every input outputs 0, and no gradient reaches its own "
        "weights or bias: it is dead, and SGD cannot revive it directly; it comes back only if the layers below "
        "change its inputs enough to make its pre-activation positive somewhere. A too-large learning-rate step or "
        "a negative-bias init pushes units there. Each bar is the share of units that stay silent on all 1024 "
        "inputs of a 6-layer, 64-wide net, before and after"
        f" {dead_relu.STEPS} SGD steps."
    )
    dead_part()


@st.fragment  # its own key row: a change redraws the dead-unit bars only
def dead_part() -> None:
    with ui.key_controls("gf_dead"):
        a, b = st.columns(2)
        lr = a.select_slider("Learning rate", dead_relu.LRS, 0.3, key="gf_dead_lr", bind="query-params")
        init = b.selectbox("Initialization", dead_relu.INITS, index=1, format_func=dead_relu.INIT_LABELS.get,
                           key="gf_dead_init", bind="query-params")
    with ui.input_errors():
        d = ui.compute(dead_relu.dead_relus, lr, init)
        if not d.yours.finite:
            st.warning("These weights diverged to inf/NaN during training, so every unit reads as silent: lower "
                     "the learning rate.", icon=":material/warning:")
        ui.plot(ui.compute(figures.dead_figure, d), key="gf_dead")
        st.caption(f"Final loss: yours {d.yours.final_loss:.3g}, good setting {d.good.final_loss:.3g}.")
        if dead_relu.before_sentence(d.yours):
            st.markdown(dead_relu.before_sentence(d.yours))
        ui.show_code(d.code, key="gf_dead_code", file_name="dead_relus.py")


ui.page_header("gradient-flow")
depth_section()
clipping_section()
dead_section()
ui.interview_corner("gradient-flow", QUESTIONS)
