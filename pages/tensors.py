"""Tensors: broadcasting, memory layout, dtype promotion, einsum and devices, with what silently goes wrong."""

import math

import streamlit as st

from demos.errors import InputError, quoted
from demos.parsing import format_shape
from demos.registry import by_slug
from demos.shown import source
from demos.tensors import broadcasting as bc
from demos.tensors import devices as dev
from demos.tensors import dtypes as dt
from demos.tensors import einsum as es
from demos.tensors import layout as lay
from demos.tensors import shape_explain as sx
from demos.tensors import shapes as lab
from demos.tensors import traps as shape_traps
from demos.tensors.common import chips_html
from demos.tensors.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


# ---------------------------------------------------------------- shared rendering


def show_traps(pairs) -> None:
    """Each trap beside its correct form, both just executed by torch (demos.traps.TrapPair entry points)."""
    for fn in pairs:
        pair = ui.compute(fn)
        ui.trap_pair(pair, key=f"tensors_trap_{pair.key}")


# ---------------------------------------------------------------- 1. broadcasting


def broadcast_ui() -> tuple[str, str, str]:
    a_col, b_col, c_col = st.columns(3)
    a = a_col.text_input("Shape A", "2, 1, 4", key="tensors_bc_a", bind="query-params",
                         help="Like 8,1,6,1 or (8, 1, 6, 1); [] is a scalar. Up to 6 dims, each at most 4096.")
    b = b_col.text_input("Shape B", "3, 1", key="tensors_bc_b", bind="query-params")
    c = c_col.text_input("Shape C (optional)", "", key="tensors_bc_c", bind="query-params",
                         placeholder="blank: only A and B; [] : a scalar")
    return a, b, c


def broadcast_section() -> None:
    ui.prose("Broadcasting lets tensors of different shapes meet in one elementwise op without copying. "
             "Type two or three shapes: the table aligns them from the right, and torch decides the result.")
    broadcast_part()
    st.subheader("Traps")
    show_traps((*bc.TRAPS, shape_traps.squeeze_batch_of_one))


@st.fragment  # its own key row: a change of the shapes redraws this part alone, not the traps below it
def broadcast_part() -> None:
    with ui.key_controls("tensors_bc"):
        a, b, c = broadcast_ui()
    with ui.input_errors():
        r = ui.compute(bc.broadcast, (a, b, c))
        if r.result is not None:
            st.markdown(f"**`torch.broadcast_shapes` → `{format_shape(r.result)}`**")
        else:
            st.warning(r.conflict, icon=":material/call_split:")
            st.markdown("torch's own message:")
            st.code(r.torch_error, language="text", wrap_lines=True)
        ui.plot(ui.compute(bc.alignment_figure, r), key="tensors_bc_align")
        st.html(chips_html({k: bc.ROLE_COLORS[k] for k in bc.ROLE_COLORS}))
        ui.show_code(r.code, key="tensors_bc_code", file_name="broadcast_shapes.py")
        ui.steps([
            "Write the shapes right-aligned; a missing dim on the left counts as 1 (grey).",
            "In every column the sizes must be equal, or one of them must be 1.",
            "A 1 stretches to the column's size (green): a view with stride 0, nothing is copied.",
            "The result takes the largest size of each column (blue).",
        ], key="tensors_bc_steps")
        st.subheader("Which input element does each output element read?")
        if bc.grid_available(r):
            grid_view(a, b, c)
        else:
            st.info(f"The grid view draws compatible results up to {bc.GRID_MAX_NDIM}-D with every dim between 1 "
                    f"and {bc.GRID_MAX_SIDE}; try A = 2, 1, 4 and B = 3, 1.", icon=":material/grid_off:")


@st.fragment  # its own key row: a new element redraws the grid alone
def grid_view(a: str, b: str, c: str) -> None:
    with ui.key_controls("tensors_bc_grid"):
        index = st.text_input("Element of the result", "", key="tensors_bc_index", bind="query-params",
                              placeholder="e.g. 1, 2, 0 (blank: the last element)")
    with ui.input_errors():
        g = ui.compute(bc.grid, (a, b, c), index)
        reads = ", ".join(f"{n}[{', '.join(map(str, i))}]" if i else f"{n} (the scalar)"
                          for n, i in zip(bc.NAMES, g.reads, strict=False))
        st.markdown(f"`out[{', '.join(map(str, g.index))}]` reads {reads}. A dim of size 1 always reads index 0.")
        ui.plot(ui.compute(bc.grid_figure, g), key="tensors_bc_grid")
        ui.show_code(g.code, key="tensors_bc_grid_code", file_name="broadcast_reads.py")


# ---------------------------------------------------------------- 2. memory layout


def _add_step() -> None:
    """Menu callback: append the chosen op to the chain text, or keep a sentence saying why not."""
    st.session_state.pop("tensors_mem_menu_error", None)
    try:
        chain = lay.menu_step(st.session_state.get("tensors_mem_chain", ""), st.session_state["tensors_mem_op"],
                              st.session_state.get("tensors_mem_args", ""))
    except InputError as err:
        st.session_state["tensors_mem_menu_error"] = str(err)
        return
    st.session_state["tensors_mem_chain"] = chain


def _clear_menu_error() -> None:
    st.session_state.pop("tensors_mem_menu_error", None)


def _undo_step() -> None:
    st.session_state.pop("tensors_mem_menu_error", None)
    try:
        steps = lay.parse_chain(st.session_state.get("tensors_mem_chain", ""))
    except InputError as err:
        st.session_state["tensors_mem_menu_error"] = str(err)
        return
    st.session_state["tensors_mem_chain"] = "".join(s.code for s in steps[:-1])


def layout_ui() -> tuple[str, str]:
    """Shape and chain: the key controls (the caller opens the key row)."""
    base_col, chain_col = st.columns([1, 3])
    base = base_col.text_input("Shape of x", "3, 4", key="tensors_mem_base", bind="query-params",
                               help="x = torch.arange(n).reshape(shape): each value is its storage position. "
                                    "Up to 4 dims; drawn up to 64 elements, tabled up to 8,388,608 "
                                    "(e.g. 32, 3, 64, 64).")
    chain = chain_col.text_input("Op chain applied to x", ".T.reshape(12)", key="tensors_mem_chain",
                                 bind="query-params", on_change=_clear_menu_error,
                                 help="Steps like .view(4, 3), .T, [:, ::2], .expand(2, 3, 4), "
                                      ".to(memory_format=torch.channels_last); at most 10.")
    return base, chain


def layout_menu() -> None:
    """Ops picked from a menu and appended to the chain text (typing them works too)."""
    op_col, args_col, add_col, undo_col = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    label = op_col.selectbox("Op", list(lay.MENU), key="tensors_mem_op")
    hint = lay.MENU[label][1]
    args_col.text_input("Arguments", "", key="tensors_mem_args", placeholder=hint or "takes none",
                        disabled=hint is None)
    add_col.button("Add step", key="tensors_mem_add", on_click=_add_step, icon=":material/add:")
    undo_col.button("Undo", key="tensors_mem_undo", on_click=_undo_step, icon=":material/undo:")
    if "tensors_mem_menu_error" in st.session_state:
        st.error(st.session_state["tensors_mem_menu_error"], icon=":material/error:")


def layout_drawing(r, keys) -> None:
    """The drawing of one step of the chain; its picker goes in the key row `keys` (with the chain it steps)."""
    options = list(range(len(r.views)))
    which = keys.select_slider("Draw", options, value=options[-1], key=f"tensors_mem_draw_{len(options)}",
                               format_func=lambda i: r.views[i].code)
    ui.plot(ui.compute(lay.layout_figure, r, which, len(r.views[0].values)), key="tensors_mem_fig")
    st.caption("A cell's colour and number are its value, which is the storage position it had in x: the "
               "same colour is the same memory element. Grey strip cells are storage this view does not read.")


def layout_section() -> None:
    ui.prose("A tensor is a view: a storage (one flat strip of memory) plus shape, stride and offset. "
             "Stride says how many storage elements to skip per step along each dim. Chain ops from the menu "
             "(or type them) and torch reports, after each, whether it still reads x's memory.")
    layout_part()
    ui.steps([
        "Element x[i, j] lives at storage[offset + i·stride[0] + j·stride[1]].",
        "transpose / permute / .T swap strides; slicing with a step multiplies one; narrow moves the offset.",
        "expand gives a stretched dim stride 0: many indices, one element.",
        "`view` only re-labels strides, so it fails when no strides fit; `reshape` then copies.",
        "`contiguous()` copies only when the tensor is not already row-major contiguous.",
    ], key="tensors_mem_steps")
    st.subheader("Traps")
    show_traps((*lay.TRAPS, shape_traps.advanced_indexing))


@st.fragment  # its own key row and menu: a change of the chain redraws this part alone, not the traps below it
def layout_part() -> None:
    keys = ui.key_controls("tensors_mem")
    with keys:
        base, chain = layout_ui()
    with ui.settings("tensors_mem", label="Add a step from the menu"):
        layout_menu()
    with ui.input_errors():
        r = ui.compute(lay.layout, base, chain)
        ui.table(ui.compute(lay.layout_table, r), hide_index=True, width="stretch")
        if r.error:
            st.warning(f"torch refused {r.failed}:", icon=":material/block:")
            st.code(r.error, language="text", wrap_lines=True)
        for note in r.warnings:
            st.caption(f"torch warned at {note}")
        if r.drawn:
            layout_drawing(r, keys)
        else:
            st.info(f"x has {math.prod(r.base_shape):,} elements: the table above gives every step's layout; the "
                    f"drawing shows tensors of up to {lay.MAX_BASE_NUMEL} elements (try 2, 2, 2, 2 with "
                    ".to(memory_format=torch.channels_last)).", icon=":material/grid_off:")
        ui.show_code(r.code, key="tensors_mem_code", file_name="strides.py")


# ---------------------------------------------------------------- 3. dtypes


def dtypes_ui() -> tuple[tuple[str, ...], bool, tuple[str, ...]]:
    dtypes = st.multiselect("Tensor dtypes", list(dt.DTYPES), default=list(dt.DEFAULT_DTYPES),
                              key="tensors_dt_dtypes", bind="query-params", max_selections=8)
    left, right = st.columns([2, 1], vertical_alignment="bottom")
    zero_dim = right.toggle("0-dim tensors too", value=True, key="tensors_dt_zero", bind="query-params")
    scalars = left.multiselect("Python scalars", list(dt.SCALARS), default=list(dt.DEFAULT_SCALARS),
                                key="tensors_dt_scalars", bind="query-params")
    return tuple(dtypes), zero_dim, tuple(scalars)


def dtypes_section() -> None:
    ui.prose("When operands differ in dtype, torch picks one result dtype by category (bool < integer < float "
             "< complex). Dimensioned tensors decide first; 0-dim tensors and Python scalars only lift the "
             "result to a higher *category*, never to a wider type of the same category.")
    promotion_part()
    st.markdown("**Range and precision** (from `torch.finfo`)")
    ui.table(ui.compute(dt.finfo_frame), hide_index=True, width="stretch")
    st.subheader("Silent traps")
    show_traps(dt.TRAPS)


@st.fragment  # its own key row: a change of the operands redraws the matrix alone, not the tables below it
def promotion_part() -> None:
    with ui.key_controls("tensors_dt"):
        dtypes, zero_dim, scalars = dtypes_ui()
    with ui.input_errors():
        r = ui.compute(dt.promotion, dtypes, zero_dim, scalars)
        ui.plot(ui.compute(dt.promotion_figure, r), key="tensors_dt_matrix")
        st.html(chips_html({k: dt.CATEGORY_COLORS[k] for k in dt.CATEGORY_COLORS}))
        ui.show_code(r.code, key="tensors_dt_code", file_name="result_type.py")


# ---------------------------------------------------------------- 4. einsum


def _apply_preset() -> None:
    name = st.session_state.get("tensors_es_preset")
    if name in es.PRESETS:
        st.session_state["tensors_es_eq"], st.session_state["tensors_es_shapes"] = es.PRESETS[name]


def einsum_ui() -> tuple[str, str]:
    """Preset pills folded away in whiteboard mode; equation and shapes in the key row above the figure."""
    with ui.settings("tensors_es", label="Presets"):
        st.pills("Presets", list(es.PRESETS), key="tensors_es_preset", on_change=_apply_preset)
    with ui.key_controls("tensors_es"):
        return einsum_inputs()


def einsum_inputs() -> tuple[str, str]:
    eq_col, shapes_col = st.columns(2)
    equation = eq_col.text_input("Equation", es.PRESETS["attention scores"][0], key="tensors_es_eq",
                                 bind="query-params", help="Letters, commas and ->; up to 3 operands, 8 indices.")
    shapes = shapes_col.text_input("Operand shapes (A; B; C)", es.PRESETS["attention scores"][1],
                                   key="tensors_es_shapes", bind="query-params",
                                   help=f"Separated by ';', each dim at most {es.MAX_DIM}; the loop nest at most "
                                        f"{es.MAX_ITERATIONS:,} iterations.")
    return equation, shapes


def einsum_section() -> None:
    ui.prose("`einsum` names every dim with a letter. A letter in the output is kept; a letter shared by "
             "operands is multiplied along; a letter missing from the output is summed away.")
    equation, shapes = einsum_ui()
    with ui.input_errors():
        r = ui.compute(es.einsum, equation, shapes)
        st.markdown(f"`torch.einsum('{r.equation}', ...)` → **output shape `{format_shape(r.out_shape)}`**")
        left, right = st.columns(2, gap="large")
        with left:
            ui.table(ui.compute(es.index_table, r), hide_index=True, width="stretch")
            st.markdown(f"Loop nest: **{r.iterations:,} iterations** ({r.arithmetic}).")
            if r.equivalent_ok:
                st.success(f"Equals **{r.equivalent}**: `{r.equivalent_code}` (torch.allclose: True).",
                           icon=":material/check_circle:")
            elif r.equivalent:
                st.info(r.equivalent_note, icon=":material/info:")
            else:
                st.caption(r.equivalent_note)
        with right:
            ui.graph(ui.compute(es.network_dot, r))
            st.html(chips_html({**{k: es.ROLE_COLORS[k] for k in es.ROLE_COLORS}, "operand": es.COLORS["data"],
                                "output": es.COLORS["parameter"]}))
        st.markdown("**The loop nest it stands for**")
        st.code(r.loop_code, language="python")
        if r.python_loop_diff is not None:
            st.caption(f"This loop nest, run in plain Python on the same inputs (it is also the end of the code "
                       f"below), differs from torch.einsum by at most {r.python_loop_diff:.2e}.")
        else:
            st.caption(f"This loop nest is not run in Python here: {r.iterations:,} iterations is past the "
                       f"{es.MAX_PY_LOOP:,} that plain Python loops finish in a moment."
                       if r.iterations > es.MAX_PY_LOOP else "The output is empty: the loop nest has nothing to fill.")
        ui.show_code(r.code, key="tensors_es_code", file_name="einsum.py")


# ---------------------------------------------------------------- 5. devices


def devices_section() -> None:
    r = ui.compute(dev.report)
    where = "a CUDA device" if r.target == "cuda" else "the meta device (no CUDA here: shapes and dtypes, no data)"
    ui.prose(f"Every tensor lives on one device, and an op needs its operands together. This host's accelerator: "
             f"**{r.accelerator or 'none'}**; the examples below move things to {where}.")
    ui.graph(ui.compute(dev.placement_dot, r))
    st.markdown("**Choosing the device**: the current accelerator when there is one, else the CPU")
    st.code(ui.compute(source, dev.chosen_device), language="python")  # the function report() ran
    st.markdown(f"Here it picks **`{r.chosen}`**. What torch reports for the placements drawn above:")
    st.table(ui.compute(dev.placement_table, r), hide_index=True, border="horizontal")
    ui.show_code(r.code, key="tensors_dev_code", file_name="devices.py")
    memory = by_slug("memory")
    if memory.exists:
        st.page_link(memory.file, label="Pinned memory, streams and overlap: the Memory & speed page",
                     icon=memory.icon)
    st.subheader("Traps")
    show_traps(dev.TRAPS)


# ---------------------------------------------------------------- 6. shape lab


def _apply_lab_preset() -> None:
    name = st.session_state.get("tensors_lab_preset")
    if name in lab.PRESETS:
        st.session_state[lab.TENSORS_KEY], st.session_state[lab.EXPR_KEY] = lab.PRESETS[name]


def lab_ui() -> tuple[str, str]:
    """Preset pills folded away in whiteboard mode; tensors and expression in the key row above the figure."""
    with ui.settings("tensors_lab", label="Presets: the classic traps"):
        st.pills("Presets: the classic traps", list(lab.PRESETS), key="tensors_lab_preset",
                 on_change=_apply_lab_preset)
    with ui.key_controls("tensors_lab"):
        return lab_inputs()


def lab_inputs() -> tuple[str, str]:
    tensors_default, expr_default = lab.PRESETS[lab.DEFAULT_PRESET]
    tensors = st.text_input("Tensors", tensors_default, key=lab.TENSORS_KEY, bind="query-params",
                            help="name: sizes [dtype], separated by ';'. Up to 8 tensors of rank up to 8, sizes up to "
                                 "2**40 (meta tensors: a shape costs no memory); dtype such as long, bool, float16.")
    expression = st.text_input("Expression", expr_default, key=lab.EXPR_KEY, bind="query-params",
                               help="Tensor methods, indexing, + - * / @ and comparisons, torch.cat/stack/einsum/…, "
                                    "layers such as nn.Conv2d(3, 16, 3)(x). Parsed, never run as Python.")
    return tensors, expression


def lab_arithmetic(r) -> None:
    lines = [f"Step {s.number}, {quoted(s.short, 60)}: {s.arithmetic}" for s in r.steps if s.arithmetic]
    if lines:
        st.markdown("**The arithmetic behind each shape**\n\n" + "\n".join(f"- {line}" for line in lines))


def lab_view_note(r) -> str:
    if r.view_source == "real":
        return ("checked on real CPU tensors of these shapes (float values random, integer tensors zero, masks all "
                "True): a view shares its input's storage.")
    why = "the chain stopped at a refused step" if r.error else "too large to run for real"
    return f"from torch's view tracking on the meta tensors ({why}): a view has its input as its base."


def lab_verdict(r) -> None:
    if r.error:
        st.warning(f"Step {r.steps[-1].number}, {quoted(r.failed, 120)}: {r.clash}", icon=":material/block:")
        st.markdown(f"torch's own message (from the {'CPU' if r.view_source == 'real' else 'meta'} run):")
        st.code(r.error, language="text", wrap_lines=True)
        return
    outputs = " and ".join(f"`{format_shape(s)}`" for s in r.shapes)
    st.markdown(f"**{quoted(r.expression, 200)} → {outputs}** ({r.dtype}, {len(r.steps)} step"
                f"{'' if len(r.steps) == 1 else 's'})")


def shape_lab_section() -> None:
    ui.prose("Type tensors and an expression, as an interviewer would write them. torch runs every op of it on "
             "meta tensors (shapes, strides and dtypes, no data), so sizes in the billions cost nothing, and the "
             "table gives each step's shape, strides, whether it is a view or a copy, and the arithmetic behind it.")
    tensors, expression = lab_ui()
    with ui.input_errors():
        r = ui.compute(lab.evaluate, tensors, expression)
        lab_verdict(r)
        ui.plot(ui.compute(sx.chain_figure, r), key="tensors_lab_fig")
        st.html(chips_html(sx.LEGEND))
        st.caption(sx.SCALE_NOTE)
        ui.table(ui.compute(sx.steps_table, r), hide_index=True, width="stretch")
        st.caption("View or copy: " + lab_view_note(r))
        for s in r.steps:
            for note in s.warnings:
                st.caption(f"torch warned at step {s.number} ({quoted(s.text)}): {note}")
        lab_arithmetic(r)
        st.markdown("Link to this question:")
        st.code(lab.lab_link(tensors, expression), language="text", wrap_lines=True)
        ui.show_code(r.code, key="tensors_lab_code", file_name="shape_lab.py")


# ---------------------------------------------------------------- page

ui.page_header("tensors")
ui.prose("Shapes, strides, dtypes and devices are where PyTorch code goes wrong without an error. Each tab below "
         "runs torch on what you type and shows, beside the correct way, the way that silently misbehaves.")
ui.sections("tensors", "tensors_tab", {
    "Broadcasting": broadcast_section, "Memory layout": layout_section, "dtypes": dtypes_section,
    "einsum": einsum_section, "Devices": devices_section, "Shape lab": shape_lab_section,
})
ui.interview_corner("tensors", QUESTIONS)
