"""Autograd: the graph torch records, backward step by step, no_grad vs detach, custom Functions, accumulation."""

from collections.abc import Callable

import streamlit as st

from demos.autograd import accumulate, backward, backward_graph, custom, custom_figure, graph, modes, traps
from demos.autograd.expr import FUNCS, MAX_DIM, MAX_LEAVES
from demos.autograd.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


def _load_preset() -> None:
    leaves, expr = graph.PRESETS[st.session_state["ag_preset"]]
    st.session_state["ag_leaves"] = leaves
    st.session_state["ag_expr"] = expr


def expression_ui() -> tuple[str, str]:
    """Preset gallery, leaf declarations and the expression: the Graph and Backward tabs both draw them."""
    default_leaves, default_expr = graph.PRESETS[graph.DEFAULT_PRESET]
    top = st.columns([3, 5], vertical_alignment="bottom")  # the preset names whole in the whiteboard key row
    top[0].selectbox("Preset", list(graph.PRESETS), key="ag_preset", on_change=_load_preset, bind="query-params",
                     help="Loads a worked example into the two fields; edit them freely afterwards.")
    leaves = top[1].text_input(
        "Leaf tensors", default_leaves, key="ag_leaves", bind="query-params",
        help=f"name: shape, separated by ';'. Add 'grad' for requires_grad=True. Up to {MAX_LEAVES} leaves, "
             f"3 dims, {MAX_DIM}x{MAX_DIM} elements. Values are seeded randn.",
    )
    expr = st.text_input(
        "Expression", default_expr, key="ag_expr", bind="query-params",
        help=f"+ - * / @ **, functions {', '.join(FUNCS)} (sum/mean/softmax take a dim, e.g. sum(x, 1)), "
             ".detach(), .T and indexing such as x[0, 1:3].",
    )
    return leaves, expr


def trap_box(text: str, icon: str = ":material/cancel:") -> None:
    """What torch did on the trap side: shown as a warning, since st.error is kept for bad input."""
    st.warning(text, icon=icon)


def legend_chips(items) -> None:
    """Colour chips for torchviz's own node colours."""
    chips = " ".join(
        f"<span style='display:inline-block;margin-right:14px'><span style='display:inline-block;width:12px;"
        f"height:12px;border-radius:2px;background:{color};border:1px solid #888;margin-right:5px;"
        f"vertical-align:middle'></span>{text}</span>" for color, text in items
    )
    st.html(f"<div style='font-size:0.85rem'>{chips}</div>")


def graph_section() -> None:
    with ui.key_controls("ag_graph"):
        leaves, expr = expression_ui()
    with ui.settings("ag_graph"):
        show_saved = st.toggle("Show saved tensors in the backward graph", key="ag_saved", bind="query-params",
                               help="make_dot(show_saved=True): draw what each node saved for backward.")
    with ui.input_errors():
        graph_results(leaves, expr, show_saved)


def graph_results(leaves: str, expr: str, show_saved: bool) -> None:
    st.header("1. The graph torch records", divider="gray")
    ui.prose(
        "Every operation on a tensor that requires grad appends a node to a **backward** graph: the output's "
        "`grad_fn`, linked to its inputs' nodes through `next_functions`. PyTorch never records a forward graph "
        "(unless you trace with `torch.export` or `torch.fx`): on the left is your expression as the parser read "
        "it, on the right is what autograd actually recorded, drawn by torchviz's `make_dot`."
    )
    g = ui.compute(graph.graph_view, leaves, expr, show_saved)
    left, right = ui.figure_pair("ag_graphs", (2, 3))
    with left:
        st.markdown(f"**Forward: your expression** → output shape `{g.out_shape}`")
        ui.graph(g.forward_dot)
        ui.legend(graph.FORWARD_LEGEND)
        st.caption("Blue: leaf with requires_grad=True; cyan: leaf without; green: an operation and its output shape.")
    with right:
        st.markdown(f"**Backward: the graph autograd recorded** ({g.n_nodes} nodes, limit {graph.MAX_GRAPH_NODES})")
        ui.graph(g.dot)
        legend_chips(graph.TORCHVIZ_LEGEND)
    for note in g.notes:
        st.info(note, icon=":material/info:")
    st.markdown("**Nodes** (a depth-first walk of `out.grad_fn.next_functions`)")
    ui.table(g.nodes, hide_index=True, width="stretch")
    st.caption("Intermediates do not keep .grad unless asked: section 2 calls retain_grad() on each of them.")
    ui.show_code(g.code, key="ag_graph_code", file_name="autograd_graph.py")


def backward_section() -> None:
    with ui.key_controls("ag_backward"):
        leaves, expr = expression_ui()
    st.header("2. Backward, step by step", divider="gray")
    with ui.input_errors():
        ui.compute(graph.graph_view, leaves, expr, False)  # backward runs only on what the Graph tab accepts
        ui.graph(ui.compute(backward_graph.flow_view, leaves, expr), key="ag_backward_flow")
        st.caption("The backward graph as the engine ran it: grey nodes are grad_fn nodes (numbered as in the Graph "
                   "tab) with their step in the engine's order, blue ones AccumulateGrad writing a leaf's .grad; each "
                   "edge carries the gradient that flowed along it (shape, first values), recorded by a hook on every "
                   "node.")
        backward_steps()
        backward_results(ui.compute(backward.backward_view, leaves, expr))


@st.fragment  # a step click shows one more sentence without redrawing the graph and tables around it
def backward_steps() -> None:
    ui.steps([
        "`out.backward(torch.ones_like(out))` seeds the output's gradient with ones (for a scalar, just 1).",
        "The engine calls each node once all gradients flowing into it are summed (recorded below with a "
        "pre-hook on every `grad_fn`).",
        "Each node multiplies the incoming gradient by its local derivative and passes the result to "
        "`next_functions`: the chain rule.",
        "`AccumulateGrad` nodes add into the leaves' `.grad`; intermediates keep theirs only after `retain_grad()`.",
    ], key="ag_backward_steps")


def backward_results(r) -> None:
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown("**Leaves: `.grad` after backward**")
        ui.table(r.leaf_grads, hide_index=True, width="stretch")
        st.caption(f"Max difference from `torch.autograd.grad` on a fresh run: {r.max_diff_vs_autograd_grad:.3g}")
    with right:
        st.markdown("**Order in which the engine ran the nodes**")
        ui.table(r.order, hide_index=True, width="stretch", height=min(38 + 35 * len(r.order), 320))
    st.markdown("**Every intermediate: the gradient flowing into it** (`retain_grad()` on each)")
    ui.table(r.intermediate_grads, hide_index=True, width="stretch")
    chain_part(r)
    gradcheck_box(r)
    ui.show_code(r.code, key="ag_backward_code", file_name="autograd_backward.py")


@st.fragment  # its own key row: picking an operation redraws this part, not the graph and tables above
def chain_part(r) -> None:
    st.subheader("The chain rule at one node, with its numbers")
    labels = [f"{c.step}   ({c.grad_fn})" for c in r.chains]
    with ui.key_controls("ag_chain"):  # after the view's figure: stays here, above the numbers it picks
        pick = st.selectbox("Operation", range(len(labels)), format_func=lambda i: labels[i], key="ag_chain",
                            bind="query-params")
    chain = r.chains[min(pick or 0, len(r.chains) - 1)]
    st.markdown(backward.operands_sentence(chain))
    for t in chain.terms:
        with st.container(border=True):
            st.markdown(f"**To `{t.operand}`**: {t.formula}")
            if t.numbers:
                st.markdown(f"at `{t.element}`: {t.numbers}")
            if t.engine is not None:
                hand = "—" if t.hand is None else f"{t.hand:.6g}"
                diff = "" if t.max_abs_diff is None else f"; max |hand − engine| over the tensor: {t.max_abs_diff:.2g}"
                st.caption(f"By hand: {hand}; what autograd passed: {t.engine:.6g}{diff}")
    if chain.note:
        st.info(chain.note, icon=":material/content_cut:")
    elif not chain.terms:
        st.caption("No operand of this operation needs a gradient.")


def gradcheck_box(r) -> None:
    verdict = "passes" if r.gradcheck_ok else "fails"
    text = f"`torch.autograd.gradcheck` in float64 ({r.gradcheck_mode}) {verdict}: {r.gradcheck_message}."
    (st.success if r.gradcheck_ok else st.warning)(text, icon=":material/function:")


def modes_section() -> None:
    st.header("3. no_grad, detach, inference_mode, requires_grad_(False)", divider="gray")
    ui.prose(
        "The same forward, `relu(x @ W).mean()` with `W.requires_grad=True`, under five ways of (not) recording. "
        "*Saved for backward* is measured with `saved_tensors_hooks`: the bytes autograd keeps alive until "
        "backward. The last column then uses each result in a new autograd computation with W."
    )
    modes_part()
    sharing, version = ui.compute(modes.detach_shares_storage), ui.compute(modes.version_counter_trap)
    st.subheader("detach shares storage")
    copy_col, trap_col = st.columns(2, gap="large")
    with copy_col:
        st.markdown("**Correct: `W.detach().clone()` is a copy**")
        st.metric("W[1, 1] after writing -100 into the clone", f"{sharing.clone_original_after:.4g}")
    with trap_col:
        st.markdown("**Trap: `d = W.detach()` then `d[0, 0] = 100`**")
        st.metric("W[0, 0] afterwards", f"{sharing.original_after:.4g}", f"was {sharing.before:.4g}",
                  delta_color="off")
        st.caption(f"Same storage: {sharing.same_storage}; W._version {sharing.version_before} → "
                   f"{sharing.version_after} (the version counter is shared too).")
    ui.show_code(sharing.code, key="ag_sharing_code", file_name="detach_shares.py")
    st.subheader("Version counters and in-place changes")
    ok_col, trap_col = st.columns(2, gap="large")
    with ok_col:
        st.markdown("**Correct: `b = torch.sigmoid(x) * 2` (out of place)**")
        st.success(f"x.grad = {[round(v, 4) for v in version.correct_grad]}", icon=":material/check_circle:")
    with trap_col:
        st.markdown("**Trap: `a = torch.sigmoid(x); a.mul_(2)`**")
        trap_box(f"a._version {version.version_before} → {version.version_after}; backward: {version.trap_error}",
                 icon=":material/cancel:")
    ui.show_code(version.code, key="ag_version_code", file_name="inplace_version.py")
    ui.trap_pair(ui.compute(traps.data_versus_detach), key="ag_trap_data")
    ui.trap_pair(ui.compute(traps.leaf_update), key="ag_trap_leaf")


@st.fragment  # its own key row: a change of n redraws the table and chart it drives, not the fixed demos below
def modes_part() -> None:
    with ui.key_controls("ag_modes"):
        n = st.slider("Size n of x and W (n × n)", modes.MIN_N, modes.MAX_N, 128, 16, key="ag_n",
                      bind="query-params")
    r = ui.compute(modes.compare_modes, n)
    ui.table(r.table, whole=True)  # whole: the later-use column holds torch's sentences
    ui.plot(ui.compute(modes.modes_figure, r), key="ag_modes_fig")
    ui.show_code(r.code, key="ag_modes_code", file_name="autograd_modes.py")


def custom_section() -> None:
    st.header("4. Custom autograd Functions", divider="gray")
    ui.prose("A `torch.autograd.Function` defines both passes. Each example is checked two ways: "
             "`gradcheck` (finite differences in float64) and the gradient autograd derives for a plain version.")
    ui.sections("autograd", "ag_custom", {
        "Straight-through estimator for rounding": custom_example_view(custom.straight_through),
        "Numerically stable log-sum-exp": custom_example_view(custom.stable_logsumexp),
        "Swish with ctx.save_for_backward": custom_example_view(custom.swish),
    })
    trap = ui.compute(custom.wrong_backward_trap)
    st.subheader("The trap: a backward that forgets grad_out")
    naive_col, check_col = st.columns(2, gap="large")
    with naive_col:
        st.markdown("**Naive test: `SquareForgetsGrad.apply(x).sum().backward()`**")
        st.markdown(f"custom `{trap.naive_custom}`  \ntrue 2x `{trap.naive_true}`")
        st.success(f"Equal: {trap.naive_passes}. `sum()` sends all-ones, so the bug is invisible.",
                   icon=":material/visibility_off:")
    with check_col:
        st.markdown("**gradcheck, and any weighted loss**")
        st.markdown(f"custom `{trap.weighted_custom}`  \ntrue `{trap.weighted_true}`")
        trap_box(f"gradcheck {'passes' if trap.gradcheck_ok else 'fails'}: {trap.gradcheck_message}.",
                 icon=":material/cancel:")
    ui.show_code(trap.code, key="ag_trap_code", file_name="wrong_backward.py")


def custom_example_view(example) -> Callable[[], None]:
    """The tab of one worked example: it runs when its tab opens."""
    return lambda: custom_example(ui.compute(example))


def custom_example(e) -> None:
    st.caption(e.what)
    c = ui.compute(custom_figure.custom_curves, e.name)
    ui.plot(ui.compute(custom_figure.custom_figure, c), key=f"ag_custom_fig_{e.name}")
    st.caption(f"{len(c.x)} values of {c.x_label} from {c.x[0]:g} to {c.x[-1]:g}, in float64: the gradient from the "
               f"custom backward (solid) and the one autograd derives for the plain version (dashed) differ by at "
               f"most {c.max_abs_diff:.3g}.")
    a, b = st.columns(2, gap="large")
    a.markdown(f"forward: `{e.forward}`  \ncustom backward: `{e.custom_grad}`")
    b.markdown(f"{e.plain_name}: `{e.plain_grad}`  \nmax |custom − plain|: `{e.max_abs_diff:.3g}`")
    for label, value in e.extra:
        st.markdown(f"- {label}: `{value}`")
    (st.success if e.gradcheck_ok else st.warning)(
        f"gradcheck {'passes' if e.gradcheck_ok else 'fails'}: {e.gradcheck_message}.", icon=":material/function:")
    st.code(e.code, language="python")


@st.fragment  # its own key row: a change of the batch or k redraws the micro-batch figure only
def micro_part() -> None:
    st.subheader("k micro-batches equal one large batch, if each loss is divided by k")
    with ui.key_controls("ag_micro"):  # the section's second figure: its row stays just above it
        batch, k = micro_ui()
    with ui.input_errors():
        m = ui.compute(accumulate.micro_batches, batch, k)
        ok_col, trap_col = st.columns(2)
        ok_col.metric(f"max |one batch − {m.k} micro-batches with / k|", f"{m.max_diff:.2e}")
        trap_col.metric("max |one batch − forgot / k|", f"{m.forgot_diff:.3g}",
                        f"{m.forgot_ratio:.4g}× the true gradient", delta_color="off")
        ui.plot(ui.compute(accumulate.micro_figure, m), key="ag_micro_fig")
        ui.show_code(m.code, key="ag_micro_code", file_name="micro_batches.py")


def micro_ui() -> tuple[int, int]:
    a, b = st.columns(2)
    batch = a.slider("Batch size", 2, accumulate.MAX_BATCH, 32, key="ag_batch", bind="query-params")
    k = b.select_slider("Micro-batches k (the divisors of the batch)", accumulate.micro_batch_choices(batch),
                        value=accumulate.default_micro_batches(batch), key="ag_k", bind="query-params")
    return batch, k


def accumulation_section() -> None:
    st.header("5. Accumulation and reuse", divider="gray")
    repeat = ui.compute(accumulate.repeated_backward)
    st.subheader(".grad adds up")
    ui.plot(ui.compute(accumulate.repeat_figure, repeat), key="ag_repeat_fig")
    ui.show_code(repeat.code, key="ag_repeat_code", file_name="grad_accumulates.py")
    micro_part()
    ui.trap_pair(ui.compute(traps.uneven_micro_batches), key="ag_trap_uneven")
    freed, penalty = ui.compute(accumulate.freed_graph), ui.compute(accumulate.gradient_penalty)
    st.subheader("A second backward through a freed graph")
    trap_col, ok_col = st.columns(2, gap="large")
    with trap_col:
        st.markdown("**Trap: `y.backward()` twice**")
        trap_box(freed.second_error, icon=":material/cancel:")
    with ok_col:
        st.markdown("**`y.backward(retain_graph=True)` first**")
        st.success(f"x.grad after one: {list(freed.retained_grads[0])}, after two: {list(freed.retained_grads[1])}",
                   icon=":material/check_circle:")
    ui.show_code(freed.code, key="ag_freed_code", file_name="retain_graph.py")
    st.subheader("create_graph=True: a gradient penalty")
    st.markdown(
        f"y = Σx³ at x = `{list(penalty.x)}`: g = dy/dx = 3x² = `{[round(v, 4) for v in penalty.first]}`; "
        f"penalty = Σg² = `{penalty.penalty:.6g}`; its gradient by autograd `{list(penalty.second)}` vs 36x³ "
        f"`{list(penalty.analytic)}` (max diff `{penalty.max_diff:.2g}`); `gradgradcheck`: "
        f"**{penalty.gradgradcheck_ok}**."
    )
    st.caption("Without create_graph=True, g is a constant and penalty.backward() fails: "
               f"{penalty.no_create_graph_error}")
    ui.show_code(penalty.code, key="ag_penalty_code", file_name="gradient_penalty.py")


ui.page_header("autograd")
ui.prose(
    "Autograd records a graph while your forward runs and walks it backwards on `.backward()`. "
    "Type your own expression below, or load a preset; every graph, gradient and error on this page "
    "comes from torch running it now."
)
ui.sections("autograd", "ag_tab", {
    "Graph": graph_section, "Backward": backward_section, "no_grad & detach": modes_section,
    "Custom Functions": custom_section, "Accumulation": accumulation_section,
})
ui.interview_corner("autograd", QUESTIONS)
