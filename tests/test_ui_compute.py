"""What pages/ui keeps across reruns: ui.compute runs a demo once per distinct arguments (typed values, identities
for results), keeps as many entries as the demo asks, lets two visitors wait for one run, and keeps no failure; a
figure built again finds its whiteboard copy."""

import gc
import re
import threading
import weakref
from pathlib import Path

import pytest

from pages.ui import compute
from pages.ui.compute import clear
from tests import compute_subjects as subjects


@pytest.fixture(autouse=True)
def fresh():
    clear()
    subjects.CALLS.clear()
    yield
    clear()


def test_each_distinct_argument_is_computed_once_and_typed_values_are_told_apart():
    values = (1, 1, 1.0, True, "1", (1, 2), (1, 2))
    assert [compute(subjects.double, v) for v in values] == [2, 2, 2.0, 2, "11", (1, 2, 1, 2), (1, 2, 1, 2)]
    assert subjects.CALLS == [1, 1.0, True, "1", (1, 2)], "1, 1.0 and True are three entries; repeats are lookups"
    assert compute(subjects.double, 1) == 2 and len(subjects.CALLS) == 5


def test_an_unhashable_argument_is_keyed_by_identity_and_kept_alive_with_its_entry():
    run, equal_run = subjects.Run([3, 4]), subjects.Run([3, 4])
    assert compute(subjects.total, run) == compute(subjects.total, run) == compute(subjects.total, equal_run) == 7
    assert subjects.CALLS == [run, equal_run], "the same object is a lookup; another object is another entry"
    alive = weakref.ref(run)
    del run
    gc.collect()
    assert alive() is not None, "the entry holds its argument, so no other object can take its id while it lives"


def test_a_demo_keeps_the_number_of_entries_it_asks_for_oldest_out_first():
    for v in range(3):
        compute(subjects.kept_two, v)
    compute(subjects.kept_two, 2)
    compute(subjects.kept_two, 0)
    assert subjects.CALLS == [0, 1, 2, 0], "entries=2 kept 1 and 2; 0 was the oldest and ran again"


def test_a_failure_is_not_kept_the_next_call_tries_again():
    with pytest.raises(ValueError):
        compute(subjects.fails_once, "x")
    assert compute(subjects.fails_once, "x") == "x"


def test_two_visitors_asking_at_once_wait_for_one_computation():
    results = []
    threads = [threading.Thread(target=lambda: results.append(compute(subjects.slow, 5))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == [5] * 4 and subjects.CALLS == [5]


def test_a_function_a_page_defines_is_refused():
    def local(x):
        return x

    with pytest.raises(TypeError, match="module-level function of demos/"):
        compute(local, 1)


def test_pages_compute_through_ui_compute_only():
    """A page-defined st.cache_* function would be decorated again on every rerun and hide a second way to cache."""
    pages = Path(__file__).resolve().parents[1] / "pages"
    direct = [f"{f.relative_to(pages)}:{n}" for f in sorted(pages.rglob("*.py"))
              for n, line in enumerate(f.read_text().splitlines(), 1) if re.search(r"st\.cache_(data|resource)", line)]
    assert direct == [], "compute through ui.compute"
    assert len(list(pages.glob("*.py"))) > 10


def test_a_figure_built_again_finds_its_whiteboard_copy_by_content():
    """A page that builds a figure anew on every run gets the large-type copy made the first time; other content
    gets its own, and the copy has the presenter height."""
    import plotly.graph_objects as go

    from demos.style import PRESENTER_HEIGHT
    from pages.ui.figures import _view

    def build(y):
        return go.Figure(go.Bar(x=["a", "b"], y=y), layout={"title": {"text": "bytes per tensor"}})

    first, first_print = _view(build([1, 2]), whiteboard=True)
    again, again_print = _view(build([1, 2]), whiteboard=True)
    other, other_print = _view(build([2, 1]), whiteboard=True)
    assert again is first and again_print == first_print
    assert other is not first and other_print != first_print
    assert first.layout.height == PRESENTER_HEIGHT and list(other.data[0].y) == [2, 1]

