"""The saving page in AppTest: defaults, every button, widgets moved."""

from tests.conftest import assert_clean, open_page


def test_buttons_run_exports_and_fill_the_target_table():
    at = open_page("pages/saving.py", timeout=300)
    assert_clean(at)
    at.select_slider(key="sv_onnx_width").set_value(16).run()
    at.slider(key="sv_onnx_depth").set_value(1).run()
    for key in ("sv_export", "sv_onnx_run", "sv_quant_run"):
        at.button(key=key).click().run()
        assert_clean(at)
    assert any("torch.ops.higher_order.cond" in c.value for c in at.code)
    targets = at.table[-1].value
    assert not targets["measured here"].str.contains("press its button").any()


def test_moving_widgets_keeps_the_page_clean():
    at = open_page("pages/saving.py", timeout=300)
    at.number_input(key="sv_trace_x").set_value(40.0).run()
    at.slider(key="sv_crash_at").set_value(0.9).run()
    at.select_slider(key="sv_ckpt_width").set_value(512).run()
    assert_clean(at)
    assert any("atomic" in m.value for m in at.markdown)
