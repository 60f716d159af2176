"""Systems pages (Saving, Memory, Distributed): each snippet a page shows is the source of
the code that drew its figure (every shown function ran) and, run alone as a visitor would run it, prints the
figure's numbers.

One case per demo, at small settings: the point is that the shown script is the code that ran, not the demo's
behaviour at every size (the demos' own tests cover that)."""

import re
import subprocess
import sys
from pathlib import Path

from demos.distributed.pipeline import pipeline_schedule
from demos.distributed.runs import run_demo
from demos.memory import stream_recorder
from demos.memory.allocator import fmt_bytes
from demos.memory.cache_demo import PRESETS, run_script
from demos.memory.compiling import count_recompiles, strict_compile, time_compile
from demos.memory.training import CARDS, RunSpec, logging_trap, simulate, snippet, usable
from demos.registry import ROOT
from demos.saving.checkpoint import checkpoint_code, checkpoint_contents, crash_during_save
from demos.saving.export import export_demo, trace_vs_script
from demos.saving.onnx_export import onnx_roundtrip
from demos.saving.quant import quantize_and_measure, scale_schemes
from demos.saving.state import state_dict_report
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone

# Every ui.show_code key on these pages, and the test below that checks its snippet (tests/test_shown.py holds
# the union of this map and tests/test_shown_core.py's to every show_code call in the app).
TESTED_BY = {
    "pages/saving.py": {
        "sv_state_code": "test_state_dict_anatomy", "sv_ckpt_code": "test_checkpoint_contents_and_the_crash",
        "sv_trace_code": "test_trace_vs_script", "sv_export_code": "test_export_with_cond",
        "sv_onnx_code": "test_onnx_roundtrip", "sv_quant_code": "test_quantization",
    },
    "pages/memory.py": {
        "mem_timeline_code": "test_memory_timeline", "mem_trap_code": "test_validation_trap",
        "mem_alloc_code": "test_allocator_script", "mem_recorder_code": "test_stream_recorder_shows_its_own_file",
        "mem_compile_code": "test_compile_timing", "mem_recompile_code": "test_recompiles",
        "mem_strict_code": "test_fullgraph_and_recompile_limit",
    },
    "pages/distributed.py": {
        "{key}_{run.demo}_code": "test_distributed_ranks_script", "dist_pp_code": "test_pipeline_schedule",
    },
}


def printed(code: str, tmp_path, snippet_server, lint: bool = True) -> str:
    """What the snippet prints when run alone; it must pass the project's linter and finish without an error."""
    if lint:
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--stdin-filename",
                               str(ROOT / "snippet.py"), "-"], input=code, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stdout
    done = run_alone(code, tmp_path, snippet_server)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def fields(out: str) -> dict[str, str]:
    """The `name: value` lines printed by a snippet whose run line is demos.shown.print_each."""
    return dict(line.split(": ", 1) for line in out.splitlines() if re.match(r"^\w+: ", line))


def test_state_dict_anatomy(tmp_path, snippet_server):
    r = assert_shows_what_ran(state_dict_report)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("model_rows", "hidden", "optimizer_state", "file_bytes_model", "file_bytes_checkpoint", "missing",
                 "unexpected", "prefixed_keys", "prefix_fixed", "safe_globals_config"):
        assert shown[name] == str(getattr(r, name)), name


def test_checkpoint_contents_and_the_crash(tmp_path, snippet_server):
    width, fraction = 16, 0.3

    def section():
        contents, crashes = checkpoint_contents(width), crash_during_save(fraction, width)
        section.results = contents, crashes
        return checkpoint_code(width, fraction)

    code = assert_shows_what_ran(section)
    contents, crashes = section.results
    out = printed(code, tmp_path, snippet_server)
    for row in contents.rows:
        assert f"{row['item']}: {row['bytes']} bytes" in out
    for crash in crashes:
        assert f"{crash.strategy}: {crash.bytes_on_disk} of {crash.new_file_bytes} bytes on disk" in out
    assert crashes[1].load_outcome in out and crashes[1].loaded_step == 1


def test_trace_vs_script(tmp_path, snippet_server):
    r = assert_shows_what_ran(trace_vs_script, -3.0)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["rows"] == str(r.rows)
    assert "traced correct': False" in shown["rows"]


def test_export_with_cond(tmp_path, snippet_server):
    r = assert_shows_what_ran(export_demo)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["checks"] == str(r.checks)
    assert shown["branch_error"] == r.branch_error.splitlines()[0]
    assert shown["dynamic_error"].startswith(r.dynamic_error.splitlines()[0])


def test_onnx_roundtrip(tmp_path, snippet_server):
    r = assert_shows_what_ran(onnx_roundtrip, 16, 1)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    # the file's bytes hold the source paths of the exported code, so only the graph and outputs are compared
    for name in ("nodes", "checks", "input_shape"):
        assert shown[name] == str(getattr(r, name)), name


def test_quantization(tmp_path, snippet_server):
    width, depth = 16, 1

    def section():
        section.results = quantize_and_measure(width, depth), scale_schemes(width, depth)
        return section.results[0].code

    code = assert_shows_what_ran(section)
    q, s = section.results
    out = printed(code, tmp_path, snippet_server)
    for row in q.rows:
        measured = {k: v for k, v in row.items() if k != "latency ms (batch 256)"}  # a timing differs run to run
        assert str(measured).removesuffix("}") in out
    assert f"per-tensor: scale {s.tensor_scale:.2e}, zero point 0, mean |error| {s.tensor_mae:.3e}" in out
    assert f"{len(s.channel_scales)} scales from {min(s.channel_scales):.2e}" in out


def test_memory_timeline(tmp_path, snippet_server):
    spec, card = RunSpec(model="MLP (4 x 2048)", batch=16, steps=1), "A10 24 GB"

    def section():
        section.timeline = simulate(spec, "meta")
        return snippet(spec, card)

    code = assert_shows_what_ran(section)
    t = section.timeline
    out = printed(code, tmp_path, snippet_server)
    assert f"peak (tracked tensors) {fmt_bytes(t.peak)} at op {t.op_index[t.peak_event]}" in out
    for category, nbytes in t.peak_by_category.items():
        assert f"  {category:16s} {nbytes / 2**20:10.1f} MiB" in out
    assert f"peak allocated {fmt_bytes(t.predicted_peak_allocated)}, peak reserved {fmt_bytes(max(t.reserved))}" in out
    assert f"headroom on the {card}: {fmt_bytes(usable(CARDS[card]) - max(t.reserved))}" in out


def test_validation_trap(tmp_path, snippet_server):
    trap = assert_shows_what_ran(logging_trap, "MLP (4 x 2048)", 32, 2)
    out = printed(trap.code, tmp_path, snippet_server)
    for live in (trap.kept_graph, trap.no_grad):
        assert f"live after 2 batches {fmt_bytes(live[-1])}, +{fmt_bytes(live[-1] - live[0])}" in out


def test_allocator_script(tmp_path, snippet_server):
    run = assert_shows_what_ran(run_script, PRESETS["Fragmentation"], 128, False)
    out = printed(run.code, tmp_path, snippet_server)
    for label, allocated, reserved in zip(run.labels, run.allocated, run.reserved, strict=True):
        assert f"{label:24s} allocated {allocated:>12,}  reserved {reserved:>12,}" in out
    assert run.oom and run.oom in out


def test_recompiles(tmp_path, snippet_server):
    rc = assert_shows_what_ran(count_recompiles, "8; 16")
    shown = fields(printed(rc.code, tmp_path, snippet_server))
    assert shown["compiles"] == str(rc.compiles) and shown["graphs"] == str(rc.graphs)


def test_fullgraph_and_recompile_limit(tmp_path, snippet_server):
    s = assert_shows_what_ran(strict_compile, "8; 16")
    shown = fields(printed(s.code, tmp_path, snippet_server))
    for name in ("fullgraph", "default_limit", "limit", "compiled"):
        assert shown[name] == str(getattr(s, name)), name


def test_compile_timing(tmp_path, snippet_server):
    t = assert_shows_what_ran(time_compile, 16, 3)
    shown = fields(printed(t.code, tmp_path, snippet_server))
    assert float(shown["max_abs_diff"]) < 1e-4 and t.max_abs_diff < 1e-4  # a timing differs run to run
    assert {"eager_ms", "compiled_ms", "compile_s"} <= set(shown)


def test_pipeline_schedule(tmp_path, snippet_server):
    r = assert_shows_what_ran(pipeline_schedule, 4, 6, "1F1B")
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("tasks", "makespan", "bubble", "formula", "peak_in_flight"):
        assert shown[name] == str(getattr(r, name)), name


def test_distributed_ranks_script(tmp_path, snippet_server):
    """The ranks run in their own processes, so no provenance here: the script is the workers' own source (read from
    demos/distributed/workers.py), and under torchrun it prints every rank's indices the live run returned."""
    run = run_demo("sampler", 2, dataset=10, shuffle=True, drop_last=False, seed=3)
    # not linted: its header is every import of the workers' module, of which one demo uses some
    out = printed(run.code, tmp_path, snippet_server, lint=False)
    for rank, result in enumerate(run.ranks):
        for indices in (*result["epochs"], result["epoch1_without_set_epoch"]):
            assert f"  rank {rank}: {indices}" in out


def test_stream_recorder_shows_its_own_file():
    """The recording was made on a GPU by this file: the page shows the file itself, whole."""
    code = stream_recorder.recorder_script()
    assert code.origins == (stream_recorder,)
    assert code == Path(stream_recorder.__file__).read_text().strip("\n") + "\n"
