"""The Modules page in AppTest: every tab, main widgets moved, hooks toggled, layers frozen, bad input explained."""

import json

import pytest

from demos.modules import hooks
from demos.modules.sharing import MAX_DIM, MAX_STEPS, MAX_VOCAB
from demos.registry import by_slug
from tests.conftest import assert_clean, open_page, shown_table

PAGE = "pages/modules.py"


def open_tab(tab: str, whiteboard: bool = False):
    query = {"modules_tab": tab}
    if whiteboard:
        query["whiteboard"] = "true"
    return open_page(PAGE, query=query)


def errors(at) -> list[str]:
    return [e.value for e in at.error]


@pytest.mark.parametrize("tab", by_slug("modules").tabs("modules_tab"))
def test_every_tab_runs_clean(tab):
    at = open_tab(tab)
    assert_clean(at)
    assert at.title[0].value == "Modules & hooks"


def test_parameters_tab_extremes():
    at = open_tab("Parameters & buffers")
    at.slider(key="modules_bn_steps").set_value(20).run()
    at.slider(key="modules_bn_momentum").set_value(1.0).run()
    assert_clean(at)
    assert any("persistent=False" in str(row) for row in at.dataframe[0].value.values)


def test_hooks_tab_widgets_and_toggles():
    at = open_tab("Hooks", whiteboard=True)
    at.text_input(key="modules_channels").set_value("2, 3, 5").run()
    at.slider(key="modules_size").set_value(24).run()
    at.selectbox(key="modules_pattern").set_value("checker").run()
    at.selectbox(key="modules_map_layer").set_value("features.conv3").run()
    at.selectbox(key="modules_pre_kind").set_value("grayscale").run()
    at.selectbox(key="modules_zero_layer").set_value("conv3").run()
    at.number_input(key="modules_zero_channel").set_value(4).run()
    at.toggle(key="modules_zero_on").set_value(False).run()
    at.radio(key="modules_surgery_mode").set_value("clip").run()
    at.text_input(key="modules_surgery_value").set_value("0.01").run()
    at.toggle(key="modules_surgery_on").set_value(False).run()
    at.slider(key="modules_calls").set_value(10).run()
    assert_clean(at)
    net = ("2, 3, 5", 24, "checker", 0)
    run = hooks.hook_outputs(*net)  # what torch gives for these settings, computed here
    layers = shown_table(at.table[0])
    assert list(layers["layer"]) == [v.name for v in run.layers]
    assert list(layers["output shape"]) == [str(v.out_shape) for v in run.layers], "channels 2, 3, 5 on 24x24 images"
    assert [float(m) for m in layers["mean"]] == pytest.approx([v.out_mean for v in run.layers], rel=1e-3, abs=1e-5)
    disc = hooks.hook_outputs("2, 3, 5", 24, "disc", 0)
    assert [v.out_mean for v in disc.layers] != pytest.approx([v.out_mean for v in run.layers], rel=1e-3), \
        "the means tell the checker images from the default ones"
    assert heatmap_titles(at) == [f"ch {c}" for c in range(5)], "the feature maps of features.conv3 (5 channels)"
    pre = hooks.pre_hook_effect(*net, "grayscale")
    logits = next(frame for frame in map(shown_table, at.table) if "logits with pre-hook" in frame.columns)
    assert list(logits["logits with pre-hook"]) == [str([round(v, 4) for v in r]) for r in pre.logits_hooked]
    successes = [m.value for m in at.success]
    assert any(m.startswith("Checked: model(x) with the pre-hook equals model(transformed x)") for m in successes)
    assert at.number_input(key="modules_zero_channel").value == 4, "conv3 has channel 4"
    assert any("With no hook registered every layer's output is unchanged" in m.value for m in at.markdown)
    assert "No hook registered: every .grad is bit-identical to the plain run." in successes
    assert [m.proto.delta for m in at.metric if "hooked tensor" in m.label] == ["+0 vs no hook"] * 2
    assert "Call 10 fired the hook 1 time; 0 hooks left registered." in successes
    assert any(m.value.startswith("Call 10 fired the hook 10 times; 10 hooks left registered") for m in at.warning)


def heatmap_titles(at) -> list[str]:
    """The subplot titles of the page's figure made of heatmaps (the feature maps of the chosen layer)."""
    for chart in at.get("plotly_chart"):
        figure = json.loads(chart.proto.spec)
        if figure["data"] and all(trace["type"] == "heatmap" for trace in figure["data"]) and any(
                a.get("text", "").startswith("ch ") for a in figure["layout"].get("annotations", [])):
            return [a["text"] for a in figure["layout"]["annotations"]]
    return []


def test_constrained_choices_from_a_url_fall_back_to_valid_ones():
    at = open_page(PAGE, query={"modules_tab": "Hooks", "modules_zero_channel": "9"})  # conv1 has 4 channels
    assert_clean(at)
    assert at.number_input(key="modules_zero_channel").value == 0
    at = open_page(PAGE, query={"modules_tab": "Freezing", "modules_frozen": ["stem", "bn", "body", "head"]})
    assert_clean(at)
    assert len(at.multiselect(key="modules_frozen").value) == 3


def test_hooks_tab_bad_input_is_a_sentence():
    at = open_tab("Hooks")
    assert at.number_input(key="modules_zero_channel").proto.max == 3, "conv1 has 4 channels: 0 to 3"
    at.selectbox(key="modules_zero_layer").set_value("conv2").run()
    assert at.number_input(key="modules_zero_channel").proto.max == 7
    at.number_input(key="modules_zero_channel").set_value(7).run()
    assert_clean(at)
    at.text_input(key="modules_surgery_value").set_value("lots").run()
    assert any("Factor: `lots` is not a number" in e for e in errors(at))
    at.text_input(key="modules_channels").set_value("4, x").run()
    assert not at.exception
    assert any("Conv channels, entry 2: `x` is not a number" in e for e in errors(at))
    at.text_input(key="modules_channels").set_value("40").run()
    assert any("from 1 to 16" in e for e in errors(at))


def test_freezing_tab_layers_frozen():
    at = open_tab("Freezing")
    at.multiselect(key="modules_frozen").set_value(["stem", "bn", "body"]).run()
    at.selectbox(key="modules_optimizer").set_value("AdamW").run()
    at.selectbox(key="modules_late_optimizer").set_value("SGD").run()
    assert_clean(at)
    frame = at.dataframe[0].value
    assert list(frame[frame["requires_grad"]]["parameter"]) == ["head.weight", "head.bias"]
    assert frame[~frame["requires_grad"]]["bit-identical after step"].all()
    assert at.multiselect(key="modules_frozen").proto.max_selections == 3, "every layer frozen cannot be chosen"
    at.text_input(key="modules_lrs").set_value("0.1, 20").run()
    assert not at.exception
    assert any("Learning rates: the head rate is 20" in e for e in errors(at))


def test_weight_sharing_tab_largest_sizes():
    at = open_tab("Weight sharing")
    at.slider(key="modules_vocab").set_value(MAX_VOCAB).run()
    at.slider(key="modules_dim").set_value(MAX_DIM).run()
    at.slider(key="modules_tie_steps").set_value(MAX_STEPS).run()
    assert_clean(at)
    assert at.metric[1].value == f"{MAX_VOCAB * MAX_DIM:,}"


def test_containers_tab_widgets_and_bad_names():
    at = open_tab("Containers")
    at.slider(key="modules_layers").set_value(8).run()
    at.slider(key="modules_width").set_value(64).run()
    at.text_input(key="modules_heads").set_value("cls, box, seg, depth").run()
    assert_clean(at)
    at.text_input(key="modules_heads").set_value("forward").run()
    assert not at.exception
    assert any("already an attribute of nn.Module" in e for e in errors(at))
    at.text_input(key="modules_heads").set_value("a, a").run()
    assert any("`a` appears twice" in e for e in errors(at))
