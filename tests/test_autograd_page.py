"""The autograd page in AppTest: a preset, moved widgets, and bad input answered with a sentence."""

import pytest

from demos.autograd.graph import PRESETS
from demos.autograd.modes import compare_modes
from demos.registry import by_slug
from tests.conftest import assert_clean, open_page, shown_table, switch_tab

PAGE = "pages/autograd.py"


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_preset_and_widgets_run_clean():
    at = open_page(PAGE)
    assert_clean(at)
    at.selectbox(key="ag_preset").set_value("Attention scores").run()
    assert_clean(at)
    assert at.text_input(key="ag_expr").value == PRESETS["Attention scores"][1]
    assert any("SoftmaxBackward0" in str(df.value) for df in at.dataframe)
    at.toggle(key="ag_saved").set_value(True).run()
    assert_clean(at)
    at = switch_tab(at, "ag_tab", "Backward")
    assert at.text_input(key="ag_expr").value == PRESETS["Attention scores"][1], "both tabs share the expression"
    at.selectbox(key="ag_chain").set_value(3).run()
    assert_clean(at)
    switch_tab(at, "ag_tab", "no_grad & detach").slider(key="ag_n").set_value(64).run()
    assert_clean(at)
    at = switch_tab(at, "ag_tab", "Accumulation")
    at.slider(key="ag_batch").set_value(48).run()
    assert at.select_slider(key="ag_k").options == ["1", "2", "3", "4", "6", "8", "12", "16"]
    at.select_slider(key="ag_k").set_value(6).run()
    assert_clean(at)


def test_each_tab_is_its_own_view():
    """Only the open tab runs: each tab's own widgets are on the page, the others' are not."""
    own = {"Graph": "ag_saved", "Backward": "ag_chain", "no_grad & detach": "ag_n", "Accumulation": "ag_k"}
    for tab in by_slug("autograd").tabs("ag_tab"):
        at = open_page(PAGE, query={"ag_tab": tab})
        assert_clean(at)
        keys = {w.key for w in [*at.toggle, *at.selectbox, *at.slider, *at.select_slider]}
        assert {k for k in own.values() if k in keys} == ({own[tab]} if tab in own else set()), tab
    at = open_page(PAGE, query={"ag_tab": "Custom Functions", "ag_custom": "Numerically stable log-sum-exp"})
    assert_clean(at)
    assert [c.value.split("class ")[1].split("(")[0] for c in at.code if "class " in c.value] == ["StableLogSumExp"]


def test_bad_input_is_a_sentence():
    at = open_page(PAGE)
    at.text_input(key="ag_expr").input("x @ b").run()
    assert not at.exception
    assert any("Shape mismatch in `x @ b`: (8, 3) @ (2,)" in e for e in errors(at)), errors(at)
    at.text_input(key="ag_expr").input("relu(zz) % 2").run()
    assert any("`%` (remainder) at position 10 is not supported" in e for e in errors(at)), errors(at)
    at.text_input(key="ag_expr").input("sum(W * q)").run()
    assert any("Unknown name `q`" in e for e in errors(at)), errors(at)
    at.text_input(key="ag_leaves").input("x: 100,3").run()
    assert any("limit is 64" in e for e in errors(at)), errors(at)
    at = open_page(PAGE, query={"ag_tab": "Accumulation"})
    at.slider(key="ag_batch").set_value(30).run()
    assert at.select_slider(key="ag_k").options == ["1", "2", "3", "5", "6", "10", "15"]
    assert at.select_slider(key="ag_k").value == 3  # 4 does not divide 30: the largest divisor below it


def test_micro_batch_k_from_the_url_is_one_of_the_divisors():
    at = open_page(PAGE, query={"ag_tab": "Accumulation", "ag_batch": "30", "ag_k": "4"})
    assert_clean(at)
    assert at.select_slider(key="ag_k").value == 3


@pytest.mark.parametrize("leaves, expr", [
    ("W: 3,2 grad", "W / 0"),
    ("W: 3,2 grad", "sum(W) / 0"),
    ("w: 3 grad", "sum(w * (w * 2).detach())"),
    ("x: 3,3 grad", "sum(x.T.detach() @ x)"),
])
def test_reported_crashes_render_every_section_from_a_shared_link(leaves, expr):
    at = open_page(PAGE, query={"ag_tab": "Backward", "ag_leaves": leaves, "ag_expr": expr})
    assert_clean(at)
    assert any(s.value.startswith("2. Backward") for s in at.header)
    for i in range(len(at.selectbox(key="ag_chain").options)):
        at.selectbox(key="ag_chain").set_value(i).run()
        assert_clean(at)
    if "detach" in expr:
        at.selectbox(key="ag_chain").set_value(0).run()
        assert any("No gradient reaches this operation" in note.value for note in at.info)
    else:
        assert any("inf" in str(df.value) for df in at.dataframe)


def test_modes_table_shows_each_later_use_whole():
    """The later-use column is HTML (no clipped 'Runti…'), each cell torch's full answer (the snippet prints the
    same facts: tests/test_shown_core.py)."""
    at = open_page(PAGE, query={"ag_tab": "no_grad & detach"})
    assert_clean(at)
    (shown,) = [f for f in map(shown_table, at.table) if "later: (out * W).sum().backward()" in f.columns]
    r = compare_modes(128)
    assert list(shown["later: (out * W).sum().backward()"]) == list(r.table["later: (out * W).sum().backward()"])
    assert any(v.startswith("RuntimeError: Inference tensors cannot be saved") for v in shown.iloc[:, -1])


def test_the_chain_rule_letters_name_no_leaf_on_the_page():
    """The default expression's bias is the leaf b: the sentence once said 'Here a = x, b = W'."""
    at = switch_tab(open_page(PAGE), "ag_tab", "Backward")
    assert_clean(at)
    said = next(m.value for m in at.markdown if m.value.startswith("Here "))
    assert said.startswith("Here A = `x`, B = `W`; g = ∂L/∂out is the gradient flowing into `x @ W`")
    at.selectbox(key="ag_chain").set_value(1).run()  # x @ W + b: its second operand is the leaf b itself
    said = next(m.value for m in at.markdown if m.value.startswith("Here "))
    assert said.startswith("Here a = `x @ W`, v = `b`;") and "b = `" not in said
    assert any(m.value.startswith("**To `b`**: ∂L/∂v = g") for m in at.markdown)
