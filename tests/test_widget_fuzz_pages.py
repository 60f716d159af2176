"""Random values in every slider, select box, number input and toggle of every page section: never a traceback.

Any value a widget offers is a value a visitor can send. A demo may refuse a combination with an InputError
(a sentence), but nothing else may escape (tests/conftest.py also fails a run that shows the "bug" sentence).
Buttons are not pressed: the process-backed demos behind them have their own tests.
"""

import random
import zlib

import pytest
from streamlit.runtime.state.common import TESTING_KEY

from tests.conftest import every_section, open_page, view_id

DRAWS = 2


def random_value(widget, rng: random.Random):
    """A value the widget itself offers, or None when it has no choice to make."""
    kind = type(widget).__name__
    proto = widget.proto
    if kind == "Slider":
        if isinstance(widget.value, tuple) or proto.data_type > 1:  # ranges, dates and times: none on these pages
            return None
        low, high, step = proto.min, proto.max, proto.step or 1
        value = low + step * rng.randint(0, int(round((high - low) / step)))
        return int(value) if proto.data_type == 0 else round(min(value, high), 10)
    if kind == "NumberInput":
        low = proto.min if proto.has_min else -1000
        high = proto.max if proto.has_max else 1000
        return rng.randint(int(low), int(high)) if proto.data_type == 0 else rng.uniform(low, high)
    if kind in ("Selectbox", "SelectSlider", "Radio"):
        return rng.choice(list(widget.options)) if widget.options else None  # a label, as the browser sends it
    if kind in ("Toggle", "Checkbox"):
        return rng.random() < 0.5
    if kind == "Multiselect":
        limit = proto.max_selections or len(widget.options)
        return rng.sample(list(widget.options), rng.randint(0, limit))
    return None


def fuzzable(at) -> list:
    widgets = [*at.slider, *at.number_input, *at.selectbox, *at.select_slider, *at.radio, *at.toggle, *at.checkbox,
               *at.multiselect]
    return [w for w in widgets if w.key and not w.key.endswith("_tab") and not w.proto.disabled]


@pytest.mark.parametrize("page, query", every_section(), ids=view_id)
def test_random_widget_values_never_show_a_traceback(page, query):
    rng = random.Random(zlib.crc32(f"{page}{query}".encode()))
    at = open_page(page, query=query)
    for _ in range(DRAWS):
        chosen = {}
        for widget in fuzzable(at):
            value = random_value(widget, rng)
            if value is not None:
                if hasattr(widget, "format_func"):  # the options are labels already: send one as the browser does,
                    widget.root.session_state[TESTING_KEY][widget.id] = str  # not formatted a second time
                widget.set_value(value)
                chosen[widget.key] = value
        at.run()
        assert not at.exception, (chosen, [e.value for e in at.exception])
