"""torch.compile demos: every planted graph break reported by explain(), recompiles counted, inductor timed."""

import math
import re
import resource

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.memory import compiling
from demos.memory.compiling import count_recompiles, explain_breaks, mlp_block, parse_shapes, time_compile


@pytest.fixture(scope="module")
def reports():
    return {r.name: r for r in explain_breaks()}


@pytest.mark.parametrize("name, reason, line", [
    ("print", "builtin", "print("),
    ("data-dependent branch", "jump", "if y.sum() > 0"),
    (".item()", "item()", ".item()"),
])
def test_explain_reports_each_planted_break(reports, name, reason, line):
    r = reports[name]
    assert (r.graph_count, r.break_count) == (2, 1)
    assert len(r.reasons) == 1 and reason in r.reasons[0] and line in r.reasons[0]
    assert len(r.graph_code) == 2 and all("def forward" in code for code in r.graph_code)


def test_clean_function_is_one_graph(reports):
    r = reports["no break (control)"]
    assert (r.graph_count, r.break_count, r.reasons) == (1, 0, ())
    assert "sin" in r.graph_code[0] and "cos" in r.graph_code[0]


def test_recompiles_on_new_shapes():
    rc = count_recompiles("8; 16; 32")
    assert rc.compiles == {"dynamic=None (default)": 2, "dynamic=False": 3, "dynamic=True": 1}
    assert "SymInt" in rc.graphs["dynamic=True"][0]
    assert count_recompiles("8; 8; 8").compiles["dynamic=False"] == 1


@pytest.mark.parametrize("shapes, dynamic_graph, second_default", [
    ("8; 16; 32", "SymInt {0}, Tensor({0})", "SymInt {0}, Tensor({0})"),
    ("4, 8; 4, 16; 2, 16", "SymInt {0}, SymInt {1}, Tensor({0}, {1})", "SymInt {1}, Tensor(4, {1})"),
])
def test_a_symbolic_graph_input_is_shown_with_its_symbolic_size(shapes, dynamic_graph, second_default):
    """A dynamic=True row once read 'SymInt s77, Tensor(8)': the size of the call that compiled the graph, not the
    graph's input, whose size is the symbol."""
    rc = count_recompiles(shapes)
    (graph,) = rc.graphs["dynamic=True"]
    symbols = re.findall(r"SymInt (\w+)", graph)
    assert graph == dynamic_graph.format(*symbols)
    first = parse_shapes(shapes)[0]
    assert f"Tensor({', '.join(map(str, first))})" not in graph, "no concrete size for a symbolic input"
    default = rc.graphs["dynamic=None (default)"]
    assert default[0] == f"Tensor({', '.join(map(str, first))})", "the first call compiles a static graph"
    assert default[1] == second_default.format(*symbols), "the second call: dynamo marks the changed size dynamic"
    assert all("SymInt" not in g for g in rc.graphs["dynamic=False"])


@pytest.mark.parametrize("shapes", ["8; 16; 32", "4, 4; 4, 5; 5, 5", "2, 3, 4; 2, 3, 4; 3, 3, 4"])
def test_meta_inputs_compile_exactly_as_real_tensors_of_those_shapes(shapes):
    real = [torch.ones(s) for s in parse_shapes(shapes)]
    rc = count_recompiles(shapes)
    for label, dynamic in (("dynamic=None (default)", None), ("dynamic=False", False), ("dynamic=True", True)):
        assert rc.graphs[label] == tuple(compiling._compiled_graphs(real, dynamic)), label


def test_the_largest_shapes_cost_no_memory():
    """Six 1024^3 inputs were 4 GiB each as real tensors; as meta tensors the click stays small."""

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rc = count_recompiles("; ".join(f"{1024 - i}, 1024, 1024" for i in range(6)))
    assert rc.compiles["dynamic=False"] == 6
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 256 * 2**20


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_shapes_text_parses_or_raises_input_error(text):
    try:
        shapes = parse_shapes(text)
    except InputError:
        return
    assert 1 <= len(shapes) <= 6 and all(all(d >= 1 for d in s) for s in shapes)


@pytest.mark.parametrize("text", ["", "8; x", "8; 8, 8", "0", "4096", "1;2;3;4;5;6;7"])
def test_bad_shapes_are_refused(text):
    with pytest.raises(InputError):
        parse_shapes(text)


def test_inductor_matches_eager_and_is_timed():
    t = time_compile(64, repeats=5)
    assert t.compile_s > 0 and t.eager_ms > 0 and t.compiled_ms > 0
    said = compiling.payoff_sentence(t)  # the caption under the timing figure
    assert said.startswith(f"Compiling took {t.compile_s:.1f} s, once; ")
    saved = t.eager_ms - t.compiled_ms
    if saved > 0:
        assert f"saves {saved:.3f} ms" in said and f"after {math.ceil(1000 * t.compile_s / saved):,} calls" in said
    else:
        assert "never pays that back" in said
    g = torch.Generator().manual_seed(0)
    x, w1, w2 = (torch.randn(64, 64, generator=g) / 8 for _ in range(3))
    assert t.max_abs_diff < 1e-4
    assert mlp_block(x, w1, w2).shape == (64, 64)


@pytest.mark.parametrize("eager_ms, compiled_ms, calls", [(2.0, 1.5, 6_200), (1.0, 1.2, None)])
def test_the_payoff_sentence_follows_the_measured_times(eager_ms, compiled_ms, calls):
    t = compiling.CompileTiming(256, eager_ms, compiled_ms, 3.1, 0.0, "")
    said = compiling.payoff_sentence(t)
    assert said.startswith("Compiling took 3.1 s, once; ") and "tens of seconds" not in said
    if calls:
        assert said.endswith(f"({eager_ms:.3f} → {compiled_ms:.3f} ms) at size 256, so it pays for itself after "
                             f"{calls:,} calls.")
    else:
        assert f"the compiled call ({compiled_ms:.3f} ms) is no faster than eager ({eager_ms:.3f} ms)" in said


def test_compile_size_is_bounded():
    with pytest.raises(InputError, match="Size must be between"):
        time_compile(4096)


def test_fullgraph_raises_on_the_planted_breaks_and_the_shapes_reach_the_recompile_limit():
    s = compiling.strict_compile("8; 16; 32")
    assert s.fullgraph["print"].startswith("raises Unsupported")
    assert s.fullgraph["data-dependent branch"].startswith("raises Unsupported")
    assert s.fullgraph["no break (control)"] == "one graph, no error"
    assert s.default_limit == torch._dynamo.config.recompile_limit == 8
    assert (s.limit, s.compiled) == (2, 2), "dynamic=False wants 3 graphs; the limit allows 2"
    assert compiling.strict_compile("8; 8").compiled == 1
