"""Memory & speed: each snippet, linted and run alone, prints the numbers of the figure or table its entry point
drew; the recorder is shown as the file it is."""

from pathlib import Path

from demos.memory import cache_demo, compiling, stream_recorder, streams, training
from demos.memory.allocator import fmt_bytes
from demos.memory.training import CARDS, usable
from tests.snippets import checks, fields, linted


@checks(training.simulate)
def memory_timeline(t, run):
    """The timeline's numbers, and the headroom on the card the page names (the same snippet, its card set)."""
    first, other = next(iter(CARDS)), "A10 24 GB"
    out = run(linted(t.code))
    assert f"peak (tracked tensors) {fmt_bytes(t.peak)} at op {t.op_index[t.peak_event]}" in out
    for category, nbytes in t.peak_by_category.items():
        assert f"  {category:16s} {nbytes / 2**20:10.1f} MiB" in out
    assert f"peak allocated {fmt_bytes(t.predicted_peak_allocated)}, peak reserved {fmt_bytes(max(t.reserved))}" in out
    assert f"headroom on the {first}: {fmt_bytes(usable(CARDS[first]) - max(t.reserved))}" in out
    on_card = training.timeline_code(t, other)
    assert on_card.entry == t.code.entry and on_card.origins == t.code.origins
    assert f"headroom on the {other}: {fmt_bytes(usable(CARDS[other]) - max(t.reserved))}" in run(linted(on_card))


@checks(training.logging_trap)
def validation_trap(trap, run):
    out = run(linted(trap.code))
    for kept in (trap.kept_graph, trap.no_grad):
        assert f"kept after 2 batches {fmt_bytes(kept[-1])}, +{fmt_bytes(kept[-1] - kept[0])}" in out
    assert (f"not counted, read by both: parameters {fmt_bytes(trap.parameter_bytes)}, "
            f"batch {fmt_bytes(trap.batch_bytes)}") in out


@checks(cache_demo.run_script)
def allocator_script(r, run):
    out = run(linted(r.code))
    for label, allocated, reserved in zip(r.labels, r.allocated, r.reserved, strict=True):
        assert f"{label:24s} allocated {allocated:>12,}  reserved {reserved:>12,}" in out
    assert r.oom and r.oom in out


@checks(compiling.count_recompiles)
def recompiles(rc, run):
    shown = fields(run(linted(rc.code)))
    assert shown["compiles"] == str(rc.compiles) and shown["graphs"] == str(rc.graphs)


@checks(compiling.strict_compile)
def fullgraph_and_recompile_limit(s, run):
    shown = fields(run(linted(s.code)))
    for name in ("fullgraph", "default_limit", "limit", "compiled"):
        assert shown[name] == str(getattr(s, name)), name


@checks(compiling.time_compile)
def compile_timing(t, run):
    shown = fields(run(linted(t.code)))
    assert float(shown["max_abs_diff"]) < 1e-4 and t.max_abs_diff < 1e-4  # a timing differs run to run
    assert {"eager_ms", "compiled_ms", "compile_s"} <= set(shown)


@checks(streams.recorder_code)
def stream_recorder_shows_its_own_file(code, run):
    """The recording was made on a GPU by this file: the page shows the file itself, whole (it records only on a
    GPU, so it is not run here)."""
    assert code.origins == (stream_recorder,)
    assert code == Path(stream_recorder.__file__).read_text().strip("\n") + "\n"
