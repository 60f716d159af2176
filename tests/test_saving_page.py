"""The saving page in AppTest: defaults, every button, widgets moved, results kept until their inputs change."""

import torch

from demos.saving.checkpoint import crash_during_save, crash_sentence
from demos.saving.models import MLP
from demos.saving.state import saved_bytes
from tests.conftest import assert_clean, open_page, shown_table, switch_tab

PAGE = "pages/saving.py"


def open_tab(tab: str):
    return open_page(PAGE, timeout=300, query={"sv_tab": tab})


def test_buttons_run_exports_and_fill_the_target_table():
    at = open_tab("ONNX")
    assert_clean(at)
    at.select_slider(key="sv_onnx_width").set_value(16).run()
    at.slider(key="sv_onnx_depth").set_value(1).run()
    for tab, key in (("TorchScript vs export", "sv_export"), ("ONNX", "sv_onnx_run"),
                     ("Quantization", "sv_quant_run")):
        switch_tab(at, "sv_tab", tab).button(key=f"{key}_button").click().run()
        assert_clean(at)
        if tab == "TorchScript vs export":
            assert any("torch.ops.higher_order.cond" in c.value for c in at.code)
        if tab == "Quantization":  # the sentence under the figure gives the symmetric scheme's zero point
            (said,) = [m.value for m in at.markdown if m.value.startswith("Per-tensor: one scale")]
            assert ", zero point 0. Per-channel" in said
    targets = switch_tab(at, "sv_tab", "Which path?").table[-1].value
    assert not targets["measured here"].str.contains("press its button").any()


def test_an_export_result_stays_through_unrelated_reruns_until_its_own_inputs_change():
    at = open_tab("ONNX")
    at.select_slider(key="sv_onnx_width").set_value(16).run()
    at.slider(key="sv_onnx_depth").set_value(1).run()
    at.button(key="sv_onnx_run_button").click().run()
    shown = [m.label for m in at.metric]
    assert "onnxruntime, batch 32" in shown
    at.toggle(key="whiteboard").set_value(True).run()  # an unrelated rerun
    assert [m.label for m in at.metric] == shown, "the result is still on screen"
    at.slider(key="sv_onnx_depth").set_value(2).run()  # its own input
    assert not at.metric, "a result for other settings is not shown as this one"
    assert "settings changed" in at.button(key="sv_onnx_run_button").help, "whiteboard mode: the key row's button says"
    at.toggle(key="whiteboard").set_value(False).run()
    assert any("settings changed" in i.value for i in at.info), "in place: a notice under the button"
    at.slider(key="sv_onnx_depth").set_value(1).run()
    assert [m.label for m in at.metric] == shown, "back to the settings that ran: the cached result again"


def test_moving_widgets_keeps_the_page_clean():
    at = open_tab("TorchScript vs export")
    at.number_input(key="sv_trace_x").set_value(40.0).run()
    assert_clean(at)
    at = switch_tab(at, "sv_tab", "Which path?")
    assert any("test input of -3" in c.value for c in at.caption), "a link to this tab cannot carry the other's input"
    at = switch_tab(at, "sv_tab", "Checkpoints")
    at.slider(key="sv_crash_at").set_value(0.9).run()
    at.select_slider(key="sv_ckpt_width").set_value(512).run()
    assert_clean(at)
    assert any("atomic" in m.value for m in at.markdown)


def test_crash_demo_saves_the_model_of_the_width_slider():
    """The crash sentence's file size is the checkpoint of the chosen width, not a fixed model's."""
    at = open_tab("Checkpoints")
    at.select_slider(key="sv_ckpt_width").set_value(32).run()
    assert_clean(at)
    torch.manual_seed(2)  # the crashing save writes step 2's checkpoint
    expected = saved_bytes({"model": MLP(width=32).state_dict(), "step": 2})
    said = [m.value for m in at.markdown if m.value.startswith("On disk after the crash")]
    naive, atomic = crash_during_save(0.5, 32)  # the slider's default crash point
    assert said == [crash_sentence(naive, 32), crash_sentence(atomic, 32)]
    assert all("(width 32 weights and the step)" in s and f"of the new checkpoint's {expected:,} bytes" in s
               for s in said)
    weights = shown_table(at.table[0]).set_index("item").loc["model.state_dict()", "bytes"]
    assert int(str(weights).replace(",", "")) <= expected
