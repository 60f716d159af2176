"""What pages/ui keeps across reruns: cached functions a page script defines again are wrapped once and still cache
what they return; a figure built again finds its whiteboard copy."""

import re
from pathlib import Path

from pages.ui import cache_data, cache_resource

PAGE = '''
from pages import ui

calls = []

@ui.cache_data(max_entries=4)
def square(x):
    calls.append(x)
    return x * x

def make_adder(n):
    @ui.cache_resource()
    def add(x):
        return x + n
    return add
'''


def test_a_page_run_again_gets_the_same_wrapper_and_cache():
    code = compile(PAGE, "page_script.py", "exec")  # the server compiles a page once and runs that code each time
    first, second = {}, {}
    exec(code, first)
    exec(code, second)
    assert first["square"] is second["square"], "the second run's definition reuses the first run's wrapper"
    assert first["square"](3) == second["square"](3) == 9
    assert first["calls"] == [3] and second["calls"] == [], "one call reached the function; the other was cached"
    assert first["make_adder"](1) is not first["make_adder"](1), "a closure is wrapped afresh"


def test_a_recompiled_page_and_other_options_get_their_own_wrapper():
    run = {}
    exec(compile(PAGE, "page_script.py", "exec"), run)
    again = {}
    exec(compile(PAGE, "page_script.py", "exec"), again)
    assert run["square"] is not again["square"], "new code (an edited page): a new wrapper"
    def one():
        return 1

    assert cache_resource(max_entries=1)(one) is not cache_resource(max_entries=2)(one), "other options"
    assert cache_resource(max_entries=1)(one) is cache_resource(max_entries=1)(one)
    assert cache_data()(one)() == 1


def test_pages_define_their_cached_functions_through_ui():
    """A page script that used @st.cache_data directly would pay the decoration again on every rerun."""
    pages = Path(__file__).resolve().parents[1] / "pages"
    direct = [f"{f.name}:{n}" for f in sorted(pages.glob("*.py"))
              for n, line in enumerate(f.read_text().splitlines(), 1)
              if re.match(r"\s*@st\.cache_(data|resource)", line)]
    assert direct == [], "use @ui.cache_data / @ui.cache_resource in page scripts"
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
