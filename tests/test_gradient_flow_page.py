"""The gradient-flow page: defaults, moved widgets, and bad input answered with a sentence."""

import pytest

from tests.conftest import assert_clean, open_page

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "pages/gradient-flow.py"


@pytest.fixture(scope="module")
def at():
    return open_page(PAGE)


def test_defaults_show_vanishing_and_every_chart(at):
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 7
    ratio = float(at.metric[0].value)
    assert ratio < 1e-3
    assert any("inf/NaN" in w.value for w in at.warning), "the run without clipping diverges at defaults"


def test_moving_the_network_widgets(at):
    at.slider(key="gf_depth").set_value(12)
    at.selectbox(key="gf_act").set_value("relu")
    at.selectbox(key="gf_init").set_value("kaiming")
    at.selectbox(key="gf_norm").set_value("batch")
    at.toggle(key="gf_residual").set_value(True)
    at.select_slider(key="gf_dead_lr").set_value(0.01)
    at.selectbox(key="gf_dead_init").set_value("negative_bias")
    at.run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 7


def test_bad_learning_rate_is_a_sentence(at):
    at.text_input(key="gf_lr").input("fast").run()
    assert not at.exception
    assert any("Learning rate: `fast` is not a number" in e.value for e in at.error)
    at.text_input(key="gf_lr").input("5").run()
    assert any("Learning rate: `5` is out of range; it must be from 0.0001 to 1." in e.value for e in at.error)
    at.text_input(key="gf_lr").input("0.1").run()
    assert_clean(at)
