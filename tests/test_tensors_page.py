"""The Tensors page as a visitor uses it: good input shows torch's answer, bad input a sentence, never a traceback."""

import importlib
from collections import Counter
from contextlib import contextmanager

import pytest

from demos.registry import by_slug
from demos.tensors import devices as dev
from tests.conftest import assert_clean, open_page

PAGE = "pages/tensors.py"
COMPUTING = importlib.import_module("pages.ui.compute")  # the module (pages.ui.compute is also its function's name)


def open_tab(tab: str, whiteboard: bool = False, **query):
    """The page opened on one of its tabs (by the name the registry gives it), with query parameters."""
    at = open_page(PAGE, query={"tensors_tab": tab, **query})
    if whiteboard:
        at.session_state["whiteboard"] = True
        at.run()
    return at


def _text(at) -> str:
    """Everything markdown, captions and code blocks show, joined."""
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [c.value for c in at.code])


def _errors(at) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    return [e.value for e in at.error]


def test_broadcasting_defaults_then_bad_then_good_shapes():
    at = open_page(PAGE)
    assert_clean(at)
    assert "`torch.broadcast_shapes` → `(2, 3, 4)`" in _text(at)
    assert len(at.get("plotly_chart")) == 2  # alignment table and grid view
    at.text_input(key="tensors_bc_a").input("2, x").run()
    assert _errors(at) == ["Shape A `2, x`: dim 1 (`x`) is not a whole number ≥ 0."]
    assert at.subheader, "the page goes on below the error"
    at.text_input(key="tensors_bc_a").input("(8, 1, 6, 1)").run()
    at.text_input(key="tensors_bc_b").input("7, 1, 5").run()
    assert_clean(at)
    assert "→ `(8, 7, 6, 5)`" in _text(at)
    at.text_input(key="tensors_bc_b").input("5000").run()
    assert _errors(at) == ["Shape B `5000`: dim 0 is `5000`; the limit is 4096."]


def test_incompatible_shapes_name_the_dim_and_show_torchs_error():
    at = open_page(PAGE, query={"tensors_bc_a": "2, 3", "tensors_bc_b": "4", "tensors_bc_c": "[]"})
    assert_clean(at)
    assert "Dimension -1" in at.warning[0].value
    assert "Attempting to broadcast a dimension of length 4" in _text(at)


def test_grid_index_bad_then_good():
    at = open_page(PAGE)
    at.text_input(key="tensors_bc_index").input("0, 9, 0").run()
    assert _errors(at) == ["Element of the result `0, 9, 0`: `9` is out of range for dim 1, which has size 3 "
                           "(valid: -3 to 2)."]
    at.text_input(key="tensors_bc_index").input("1, 2, 0").run()
    assert_clean(at)
    assert "`out[1, 2, 0]` reads A[1, 0, 0], B[2, 0]" in _text(at)


def test_memory_layout_chain_menu_and_errors():
    at = open_tab("Memory layout")
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["shares x's storage"]) == [True, True, False]  # x, x.T, x.T.reshape(12) copies
    at.text_input(key="tensors_mem_chain").input(".T.view(12)").run()
    assert not at.exception and "view size is not compatible" in _text(at)
    at.selectbox(key="tensors_mem_op").select("reshape").run()
    at.text_input(key="tensors_mem_args").input("12").run()
    at.button(key="tensors_mem_add").click().run()
    assert at.text_input(key="tensors_mem_chain").value == ".T.view(12).reshape(12)"
    at.button(key="tensors_mem_undo").click().run()
    at.button(key="tensors_mem_undo").click().run()
    assert at.text_input(key="tensors_mem_chain").value == ".T"
    at.text_input(key="tensors_mem_args").input("two").run()
    at.button(key="tensors_mem_add").click().run()
    assert _errors(at) == ["Op chain, step 2 (`.reshape`): `two` is not a whole number."]
    at.text_input(key="tensors_mem_chain").input(".numpy()").run()
    assert any("`.numpy` is not one of the ops here" in e for e in _errors(at))
    at.text_input(key="tensors_mem_chain").input(".T; import os").run()
    assert _errors(at) == ["Op chain: `; import os` is not a step; each step is one of the ops here with whole-number "
                           "arguments, .T or an index, as in .view(4, 3).T[:, ::2]."]
    at.text_input(key="tensors_mem_base").input("5000, 5000").run()
    assert any("Shape of x `5000, 5000`: dim 0 is `5000`; the limit is 4096." in e for e in _errors(at))


def test_dtypes_matrix_and_empty_choice():
    at = open_tab("dtypes")
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    at.multiselect(key="tensors_dt_dtypes").set_value([]).run()
    assert _errors(at) == ["Pick at least one tensor dtype for the promotion matrix."]
    at.multiselect(key="tensors_dt_dtypes").set_value(["int32", "complex64"]).run()
    at.toggle(key="tensors_dt_zero").set_value(False).run()
    assert_clean(at)


def test_einsum_preset_bad_and_good_input():
    at = open_tab("einsum")
    assert_clean(at)
    assert "matmul with a transpose" in at.success[0].value
    at.button_group(key="tensors_es_preset").set_value("trace").run()
    assert at.text_input(key="tensors_es_eq").value == "ii->"
    assert "torch.trace(A)" in at.success[0].value
    at.text_input(key="tensors_es_shapes").input("(3, 4)").run()
    assert _errors(at) == ["Index `i` repeats in operand A with sizes 3 and 4; a repeated index needs equal sizes."]
    at.text_input(key="tensors_es_eq").input("ij,jk->ik").run()
    at.text_input(key="tensors_es_shapes").input("(2, 3); (3, 4)").run()
    assert_clean(at)
    assert "torch.einsum('ij,jk->ik', ...)` → **output shape `(2, 4)`**" in _text(at)
    at.text_input(key="tensors_es_eq").input("ij,jk->ik; rm -rf").run()
    assert _errors(at) and "not allowed" in _errors(at)[0]


def test_devices_tab_runs_clean():
    at = open_tab("Devices")
    assert_clean(at)
    assert "RuntimeError" in _text(at)


def test_edge_cases_render():
    at = open_page(PAGE, query={"tensors_bc_a": "[]", "tensors_bc_b": "()", "tensors_bc_c": "3"})
    assert_clean(at)
    assert "→ `(3,)`" in _text(at)
    at = open_tab("Memory layout", tensors_mem_base="[]", tensors_mem_chain="")
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1


@pytest.mark.parametrize("tab", by_slug("tensors").tabs("tensors_tab"))
def test_whiteboard_mode_on_every_tab(tab):
    at = open_tab(tab, whiteboard=True)
    assert_clean(at)
    assert at.expander, f"{tab}: prose folds into expanders on a whiteboard"
    assert at.get("plotly_chart") or at.get("graphviz_chart"), f"{tab}: the tab opens on a figure"


def test_page_sentences_agree_with_torch():
    """Each sentence the issue named, as the page shows it, checked against torch's own numbers."""
    import torch

    at = open_page(PAGE, query={"tensors_bc_a": "2, 3", "tensors_bc_b": "4, 5"})
    assert_clean(at)
    assert at.warning[0].value.startswith("Dimensions -2 and -1 (counting from the right) conflict")
    assert " at -1!" in _text(at)  # torch's message names the rightmost, which the sentence names too
    at = open_tab("einsum", tensors_es_eq="ij->ji", tensors_es_shapes="2, 3")
    assert_clean(at)
    assert "**6 iterations** (no multiplies and no adds: each of the 6 output elements is a copy" in _text(at)
    at = open_tab("dtypes")
    step = torch.finfo(torch.bfloat16).eps / 2
    assert f"1/{round(1 / step)} or less to 1.0 rounds back to 1.0" in _text(at)
    at = open_tab("Devices")
    assert_clean(at)
    if torch.accelerator.is_available():  # the fix runs: pinned, and the copy queued to the accelerator
        assert f":green[**{dev.pinned_label()}**]" in _text(at) and "copy queued to" in _text(at)
        assert "none on this host" not in dev.pinned_label()
    else:
        assert ":green[**Correct: `x.pin_memory()`, then `.to(device, non_blocking=True)` (needs an accelerator: " \
               "none on this host)**]" in _text(at)
        assert "needs an accelerator: this host has none" in _text(at)


def test_shape_lab_passing_failing_and_bad_input():
    at = open_tab("Shape lab")
    assert_clean(at)
    assert "→ `(32, 10)`** (float32, 3 steps)" in _text(at)
    table = at.dataframe[0].value
    assert list(table["shape"]) == ["(32, 16, 32, 32)", "(32, 16384)", "(32, 10)"]
    assert list(table["view or copy"]) == ["copy", "view", "copy"]
    assert "tensors_lab_expr=nn.Conv2d" in _text(at)  # the link that reproduces the question
    at.text_input(key="tensors_lab_expr").input("x.view(5, -1)").run()
    assert not at.exception and not at.error
    assert at.warning[0].value.startswith("Step 1, `x.view(5, -1)`: 393,216 elements cannot be arranged as (5, -1)")
    assert "RuntimeError: shape '[5, -1]' is invalid for input of size 393216" in _text(at)
    at.text_input(key="tensors_lab_expr").input("x.frobnicate()").run()
    assert _errors(at)[0].startswith("Expression: `.frobnicate` is not a tensor op the lab knows")
    at.pills(key="tensors_lab_preset").set_value("squeeze() on a batch of one").run()
    assert_clean(at)
    assert at.text_input(key="tensors_lab_tensors").value == "x: 1, 3, 1, 10"
    assert "Step 1, `x.squeeze()`: every size-1 dim removed (positions [0, 2])" in _text(at)
    assert list(at.dataframe[0].value["step"]) == ["1. x.squeeze()", "2. ….softmax(0)"]


@contextmanager
def computations():
    """What ui.compute computes (not answers from its cache) while the block runs: a Counter of qualified names."""
    calls, caches = Counter(), COMPUTING._caches
    before = dict(caches)
    originals = {cache: cache.fn for cache in before.values()}

    def counted(fn):
        def run(*args, **kwargs):
            calls[fn.__qualname__] += 1
            return fn(*args, **kwargs)
        return run

    for cache, fn in originals.items():
        cache.fn = counted(fn)
    try:
        yield calls
    finally:
        for cache, fn in originals.items():
            cache.fn = fn
        calls.update(fn.__qualname__ for fn in set(caches) - set(before))  # computed for the first time


@pytest.mark.parametrize("tab", by_slug("tensors").tabs("tensors_tab"))
def test_a_rerun_of_each_tab_computes_nothing_again(tab):
    """Every computation is keyed on plain values (tuples, strings) or on results computed earlier, so a rerun with
    the same inputs is answered from the cache: nothing is computed again, no figure or table is rebuilt."""
    at = open_tab(tab)
    with computations() as computed:
        at.run()
    assert_clean(at)
    assert not computed, f"{tab}: computed again on a rerun: {dict(computed)}"


def test_a_new_lab_expression_computes_only_what_depends_on_it():
    at = open_tab("Shape lab")
    with computations() as computed:
        at.text_input(key="tensors_lab_expr").input("x.flatten(1)").run()
    assert_clean(at)
    assert computed == {"evaluate": 1, "chain_figure": 1, "steps_table": 1}
