"""Debugging demos against torch itself: NaN tracing, seeds, determinism, worker seeds, leaks, model tests, profiler."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from demos.debugging import leaks, model_tests, nan_trace, profiling, repro, workers
from demos.errors import InputError

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("source", nan_trace.SOURCES)
def test_anomaly_mode_names_the_planted_op(source):
    r = nan_trace.trace_nan(source)
    assert r.node == nan_trace.EXPECTED_NODE[source]
    assert r.node in r.error
    planted, _fix = nan_trace.planted_sources(source)
    planted_last_line = planted.splitlines()[-1].split("#")[0].strip()
    assert planted_last_line in r.traceback, "the forward traceback points at the planted line"
    assert r.first_bad == "planted", "the forward-hook tracer names the planted module"
    assert r.fixed_grads_finite and r.fixed_loss == r.fixed_loss


@pytest.mark.parametrize("source", nan_trace.SOURCES)
def test_hook_rows_equal_a_direct_forward(source):
    r = nan_trace.trace_nan(source)
    model = nan_trace.build(source)
    x = nan_trace.make_batch()
    with torch.no_grad():
        h1 = model.encoder(x)
        h2 = model.act(h1)
        out = model.planted(h2)
    counts = [int((~torch.isfinite(t)).sum()) for t in (h1, h2, out)]
    assert [row.nonfinite for row in r.hook_rows] == counts
    assert [row.module for row in r.hook_rows] == ["encoder", "act", "planted"]
    assert len(model.planted._forward_hooks) == 0, "the tracer removes its hooks"


@pytest.mark.filterwarnings("ignore::UserWarning")  # anomaly mode warns by design
def test_anomaly_names_the_first_nan_node_and_the_op_tracer_names_the_origin():
    """fp16 overflow: the real exception names DivBackward0, the forward tracer names the exp that overflowed."""
    r = nan_trace.trace_nan("fp16_overflow")
    with pytest.raises(RuntimeError) as raised, torch.autograd.detect_anomaly():
        nan_trace.build("fp16_overflow")(nan_trace.make_batch()).mean().backward()
    assert f"Function '{r.node}' returned nan values" in str(raised.value) and r.node == "DivBackward0"
    assert r.origin.op == "aten.exp.default" and r.origin.line == "e = torch.exp(h.half() * 100)"
    model, x = nan_trace.build("fp16_overflow"), nan_trace.make_batch()
    with torch.no_grad():
        h = model.act(model.encoder(x))
        e = torch.exp(h.half() * 100)
    assert torch.isfinite(h.half() * 100).all(), "exp's input is finite: exp is the origin"
    assert (r.origin.nonfinite, r.origin.nan, r.origin.numel) == (int(e.isinf().sum()), 0, e.numel())
    why = nan_trace.anomaly_vs_origin(r)
    assert "`DivBackward0`: the first backward node that returned NaN, not where the bad values began" in why
    assert f"`aten.exp.default` (`e = torch.exp(h.half() * 100)`): {r.origin.nonfinite} infinite of its 96" in why


@pytest.mark.parametrize("source", nan_trace.SOURCES[:3])
def test_when_anomaly_mode_and_the_origin_agree_the_page_says_so(source):
    r = nan_trace.trace_nan(source)
    assert nan_trace.op_name(r.node) == nan_trace.op_name(r.origin.op)
    assert "Here both point at the same op" in nan_trace.anomaly_vs_origin(r)


def test_unknown_nan_source_is_an_input_error():
    with pytest.raises(InputError, match="NaN source"):
        nan_trace.trace_nan("overflow")


def test_seeded_runs_are_identical_and_unseeded_differ():
    r = repro.seeded_runs(10, 3)
    assert r.seeded_equal and r.runs[2].digest == r.runs[3].digest
    assert not r.unseeded_equal and r.runs[0].digest != r.runs[1].digest
    assert r.unseeded_max_diff > 0
    torch.manual_seed(3)
    direct, _ = repro.short_run(10, None)
    assert list(r.runs[2].losses) == direct


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_parse_seed_accepts_or_raises_input_error(text):
    try:
        seed = repro.parse_seed(text)
    except InputError:
        return
    assert 0 <= seed <= repro.MAX_SEED


@pytest.mark.parametrize("steps, seed", [(1, 0), (51, 0), (10, -1), (10, 2**31)])
def test_seed_run_limits(steps, seed):
    with pytest.raises(InputError):
        repro.seeded_runs(steps, seed)


def test_deterministic_mode_raises_on_max_unpool_fills_empty_and_is_restored():
    before = torch.are_deterministic_algorithms_enabled()
    d = repro.determinism_checks()
    assert torch.are_deterministic_algorithms_enabled() == before
    outcomes = {c.op: c.outcome for c in d.cpu_checks}
    assert outcomes["max_unpool2d"] == "raised"
    assert outcomes["index_put_(accumulate=True)"] == "ran"
    assert d.empty_deterministic == "[nan, nan, nan, nan]"
    assert d.cuda == torch.cuda.is_available()
    assert len(d.cuda_checks) == (len(repro.CHECKS) if d.cuda else 0)


def test_worker_seed_bug_reproduces_and_the_fix_removes_it():
    w = workers.worker_seeds()
    bug, fixed = w.bug.rows, w.fixed.rows
    assert {r[1] for r in bug} == {0, 1} and {r[1] for r in fixed} == {0, 1}
    by_worker = {wid: [r[3] for r in bug if r[1] == wid] for wid in (0, 1)}
    assert by_worker[0] == by_worker[1], "both workers draw the same 'random' values"
    assert w.bug.duplicates == len(bug) // 2
    assert w.fixed.duplicates == 0
    assert w.base_seeds[0] == w.base_seeds[1]
    assert {r[2] - r[1] for r in fixed} == {w.base_seeds[0]}, "worker seed = base seed + worker id"
    assert len({r[4] for r in bug}) == len(bug), "torch seeds the global np.random per worker"


def test_leaks_grow_linearly_and_fixes_stay_flat():
    r = leaks.leaks(12)
    for series in (r.nodes, r.saved_bytes, r.outputs, r.hooks):
        steps = [b - a for a, b in zip(series.leak, series.leak[1:], strict=False)]
        assert len(set(steps)) == 1 and steps[0] > 0, f"{series.name}: constant growth per step"
        assert len(set(series.fixed)) == 1, f"{series.name}: the fix is flat"
    assert r.nodes.fixed[0] == 0 and r.saved_bytes.fixed[0] == 0 and r.hooks.fixed[0] == 1
    assert list(r.hooks.leak) == list(range(1, 13))


def test_graph_stats_counts_nodes_like_a_direct_walk():
    w = torch.ones(3, requires_grad=True)
    e = w.exp()
    y = e.sin().sum()
    nodes, saved = leaks.graph_stats([y])
    assert nodes == 4  # SumBackward0, SinBackward0, ExpBackward0, AccumulateGrad
    assert saved == e.untyped_storage().nbytes(), "exp saved its result and sin its input: one storage, counted once"
    with pytest.raises(InputError):
        leaks.leaks(0)


EXPECTED_FAILURE = {
    "unused_layer": "every parameter gets a gradient",
    "detached_branch": "every parameter gets a gradient",
    "squeeze_output": "output shape",
    "softmax_before_ce": "overfit one batch",
    "dropout_always_on": "deterministic under a seed",
}


def test_correct_model_passes_every_test():
    rep = model_tests.run_model_tests("none")
    assert rep.passed == 4, rep.rows
    assert rep.overfit_losses[-1] < model_tests.OVERFIT_LOSS


@pytest.mark.parametrize("bug", list(EXPECTED_FAILURE))
def test_each_planted_bug_is_caught_by_its_test(bug):
    rep = model_tests.run_model_tests(bug)
    failed = {r.test for r in rep.rows if not r.passed}
    assert EXPECTED_FAILURE[bug] in failed


def test_softmax_before_ce_loss_floor_matches_theory():
    rep = model_tests.run_model_tests("softmax_before_ce")
    floor = torch.log(1 + (model_tests.CLASSES - 1) / torch.exp(torch.tensor(1.0))).item()
    assert rep.overfit_losses[-1] == pytest.approx(floor, abs=0.05)


def test_profiler_output_has_the_labelled_phases():
    r = profiling.profile_step(64, 16)
    assert set(r.phase_us) == set(profiling.PHASES)
    assert all(v > 0 for v in r.phase_us.values())
    names = {o.name for o in r.top_ops} | {s.name for s in r.spans}
    assert {"aten::addmm", "forward", "backward", "optimizer"} <= names
    trace = json.loads(r.trace_json)
    labelled = {e["name"] for e in trace["traceEvents"] if e.get("name") in profiling.PHASES}
    assert labelled == set(profiling.PHASES)
    assert all(s.phase in (*profiling.PHASES, "") for s in r.spans)
    forward = next(s for s in r.spans if s.name == "forward")
    assert all(forward.start_us <= s.start_us and s.end_us <= forward.end_us
               for s in r.spans if s.phase == "forward")


def test_profiler_limits():
    with pytest.raises(InputError, match="Width"):
        profiling.profile_step(4096, 16)
    with pytest.raises(InputError, match="Batch"):
        profiling.profile_step(64, 0)


def test_profiled_step_trains_like_an_unprofiled_one():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    before = model.weight.detach().clone()
    profiling.train_step(model, opt, x, y)
    assert not torch.equal(before, model.weight), "the labelled step really steps"


def deterministic_doc_line(op: str) -> str:
    """The bullet of torch.use_deterministic_algorithms' docstring that names `op` (the installed torch's own list)."""
    doc = " ".join(torch.use_deterministic_algorithms.__doc__.split())
    bullets = [b.strip() for b in doc.split("* ") if op in b]
    assert bullets, op
    return bullets[0]


DOC_NAMES = {"max_unpool2d": "MaxUnpool2d", "index_put_(accumulate=True)": "``accumulate=True`` when called on a CPU",
             "adaptive_avg_pool2d backward": "AdaptiveAvgPool2d", "interpolate(bilinear) backward": "interpolate",
             "scatter_add_": "scatter_add_", "histc": "histc"}


@pytest.mark.parametrize("op", [name for name, _, _ in repro.CHECKS])
def test_what_deterministic_mode_does_names_the_devices_torchs_docs_name(op):
    """index_put_(accumulate=True) is on the list for CPU tensors only; the table once left CUDA to be assumed."""
    said = dict((name, why) for name, _, why in repro.CHECKS)[op]
    listed = deterministic_doc_line(DOC_NAMES[op])
    if "CPU" in listed and "CUDA" not in listed:
        assert said.startswith("CPU:") and "CUDA's kernel sorts already and is not on torch's" in said
    elif "CUDA" in listed:
        assert "CUDA" in said and "CPU:" not in said
    else:
        assert "any device" in said, "no device named: it raises everywhere"


def test_the_interview_answer_puts_index_put_accumulate_on_the_cpu_list():
    from pages.ui.quiz import model_answers

    traps = dict(model_answers("tensors"))["Which integer and dtype traps raise no error?"]
    assert "`index_put_(accumulate=True)` is on torch's list for the CPU only" in traps
    assert "when called on a CPU tensor" in deterministic_doc_line("index_put` with ``accumulate=True``")
    assert "`index_put_(accumulate=True)`\non CUDA" not in traps and "embedding" not in traps
