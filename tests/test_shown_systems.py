"""Systems pages (Saving, Debugging, Memory, Data loading): each snippet a page shows is the source of
the code that drew its figure (every shown function ran) and, run alone as a visitor would run it, prints the
figure's numbers.

One case per demo, at small settings: the point is that the shown script is the code that ran, not the demo's
behaviour at every size (the demos' own tests cover that)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import torch

from demos.data.collate import bucketing, pad_batch
from demos.data.pinning import d2h_code, d2h_trap, pin_demo
from demos.data.samplers import distributed_partition, sampler_orders, weighted_sampling
from demos.data.streams import stream_demo
from demos.data.timeline import LoaderConfig, Workload, compare, epoch_boundaries
from demos.debugging.leaks import leaks
from demos.debugging.model_tests import run_model_tests
from demos.debugging.nan_trace import trace_nan
from demos.debugging.profiling import profile_step
from demos.debugging.repro import determinism_checks, seeded_runs
from demos.debugging.workers import worker_seeds
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
from tests.provenance import assert_shows_what_ran, origins_that_did_not_run, recording_calls
from tests.snippet_runner import run_alone

# Every ui.show_code key on these pages, and the test below that checks its snippet (tests/test_shown.py holds
# the union of this map and tests/test_shown_core.py's to every show_code call in the app).
TESTED_BY = {
    "pages/saving.py": {
        "sv_state_code": "test_state_dict_anatomy", "sv_ckpt_code": "test_checkpoint_contents_and_the_crash",
        "sv_trace_code": "test_trace_vs_script", "sv_export_code": "test_export_with_cond",
        "sv_onnx_code": "test_onnx_roundtrip", "sv_quant_code": "test_quantization",
    },
    "pages/debugging.py": {
        "dbg_nan_code": "test_nan_trace", "dbg_seed_code": "test_seeded_runs", "dbg_workers_code": "test_worker_seeds",
        "dbg_det_code": "test_deterministic_mode", "dbg_leak_code": "test_leaks", "dbg_tests_code": "test_model_tests",
        "dbg_prof_code": "test_profiler",
    },
    "pages/memory.py": {
        "mem_timeline_code": "test_memory_timeline", "mem_trap_code": "test_validation_trap",
        "mem_alloc_code": "test_allocator_script", "mem_recorder_code": "test_stream_recorder_shows_its_own_file",
        "mem_compile_code": "test_compile_timing", "mem_recompile_code": "test_recompiles",
        "mem_strict_code": "test_fullgraph_and_recompile_limit",
    },
    "pages/data-loading.py": {
        "dl_timeline_code": "test_dataloader_timeline", "dl_epochs_code": "test_persistent_workers",
        "dl_streams_code": "test_iterable_sharding", "dl_order_code": "test_sampler_orders",
        "dl_weighted_code": "test_weighted_sampler", "dl_dist_code": "test_distributed_sampler",
        "dl_pad_code": "test_pad_collate", "dl_bucket_code": "test_bucketing", "dl_pin_code": "test_pinned_copy",
        "dl_d2h_code": "test_device_to_host_trap",
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


def shows_what_ran_but_cuda(cuda_only: set[str], demo, *args):
    """assert_shows_what_ran, but without CUDA the shown functions that only a GPU runs may not have run."""
    if torch.cuda.is_available():
        return assert_shows_what_ran(demo, *args)
    with recording_calls() as called:
        result = demo(*args)
    code = result if isinstance(result, str) else result.code
    missing = set(origins_that_did_not_run(code, called))
    assert missing <= cuda_only, f"shown but never ran: {missing - cuda_only}"
    return result


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


def test_nan_trace(tmp_path, snippet_server):
    r = assert_shows_what_ran(trace_nan, "fp16_overflow")
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("node", "error", "hook_rows", "first_bad", "origin", "fixed_loss", "fixed_grads_finite"):
        assert shown[name] == str(getattr(r, name)), name


def test_seeded_runs(tmp_path, snippet_server):
    r = assert_shows_what_ran(seeded_runs, 4, 7)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["seeded_equal"] == "True" and shown["unseeded_equal"] == "False"
    assert str(r.runs[2:]).removeprefix("(").removesuffix(")") in shown["runs"], "the seeded runs, bit for bit"


def test_deterministic_mode(tmp_path, snippet_server):
    r = assert_shows_what_ran(determinism_checks)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("cuda", "empty_deterministic", "cpu_checks", "cuda_checks"):
        assert shown[name] == str(getattr(r, name)), name


def test_worker_seeds(tmp_path, snippet_server):
    w = assert_shows_what_ran(worker_seeds)
    out = printed(w.code, tmp_path, snippet_server)
    for row in w.fixed.rows:  # the fixed loader's seeds come from generator=: the same in every run
        assert f"fixed {row}" in out
    bug = [line for line in out.splitlines() if line.startswith("bug ")]
    assert [eval(line.removeprefix("bug "))[3] for line in bug] == [row[3] for row in w.bug.rows]  # noqa: S307
    assert f"manual_seed(0): {w.base_seeds}" in out


def test_leaks(tmp_path, snippet_server):
    r = assert_shows_what_ran(leaks, 4)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("nodes", "saved_bytes", "outputs", "hooks"):
        series = getattr(r, name)
        assert shown[name] == str((list(series.leak), list(series.fixed))), name


def test_model_tests(tmp_path, snippet_server):
    report = assert_shows_what_ran(run_model_tests, "squeeze_output")
    out = printed(report.code, tmp_path, snippet_server)
    for row in report.rows:
        assert f"{row.test}: {'pass' if row.passed else 'FAIL'} ({row.detail})" in out
    assert report.passed == 3


def test_profiler(tmp_path, snippet_server):
    r = assert_shows_what_ran(profile_step, 16, 8)
    out = printed(r.code, tmp_path, snippet_server)
    shown = re.findall(r"OpRow\(name='([^']+)'", out)
    assert len(shown) == len(r.top_ops)
    # which ops lead by self time depends on the host's load; the three phase spans do not
    phases = ast.literal_eval(re.search(r"phase_us: (\{.*\})", out).group(1))
    assert list(phases) == list(r.phase_us) == ["forward", "backward", "optimizer"]
    assert all(us > 0 for us in phases.values())


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


def test_sampler_orders(tmp_path, snippet_server):
    r = assert_shows_what_ran(sampler_orders, 10, 3)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["orders"] == str(r.orders) and shown["batches"] == str(r.batches)


def test_weighted_sampler(tmp_path, snippet_server):
    r = assert_shows_what_ran(weighted_sampling, "900, 90, 10", 32)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("drawn_plain", "drawn_weighted", "batches_with_rarest", "unique_fraction"):
        assert shown[name] == str(getattr(r, name)), name


def test_distributed_sampler(tmp_path, snippet_server):
    r = assert_shows_what_ran(distributed_partition, 10, 4, True)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["epochs"] == str(r.epochs) and shown["padding"] == str(r.padding)


def test_pad_collate(tmp_path, snippet_server):
    r = assert_shows_what_ran(pad_batch, "5, 3, 8, 2")
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("default_error", "padded", "mask", "shape", "padding_fraction"):
        assert shown[name] == str(getattr(r, name)), name


def test_bucketing(tmp_path, snippet_server):
    r = assert_shows_what_ran(bucketing, 64, 8, 2)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("random_padding", "bucketed_padding", "random_max_lengths", "bucketed_max_lengths"):
        assert shown[name] == str(getattr(r, name)), name


def test_pinned_copy(tmp_path, snippet_server):
    r = shows_what_ran_but_cuda({"_h2d_gbps"}, pin_demo, 1)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    for name in ("accelerator", "pin_error", "loader_warning", "loader_pinned"):  # the rest are timings
        assert shown[name] == str(getattr(r, name)), name


def test_device_to_host_trap(tmp_path, snippet_server):
    def section():
        section.result = d2h_trap()
        return d2h_code()

    code = shows_what_ran_but_cuda({"D2HResult"}, section)
    out = printed(code, tmp_path, snippet_server)
    if section.result is None:  # no CUDA: the trap says so rather than faking it
        assert out.startswith("No CUDA GPU here")
    else:
        assert f"expected={section.result.expected}" in out


def test_iterable_sharding(tmp_path, snippet_server):
    r = assert_shows_what_ran(stream_demo, 6, 2)
    shown = fields(printed(r.code, tmp_path, snippet_server))
    assert shown["naive"] == str(r.naive) and shown["sharded"] == str(r.sharded)
    assert r.naive_duplicates == 6 and r.sharded_duplicates == 0


def loader_lines(out: str, runs) -> None:
    """Each run's line names its configuration and the samples it loaded (the rest are timings)."""
    for r in runs:
        assert f"{r.config.label}: {len(r.loaded)} samples in " in out


def test_dataloader_timeline(tmp_path, snippet_server):
    workload = Workload(samples=8, io_ms=5, transform_ms=1, step_ms=5)
    r = assert_shows_what_ran(compare, workload, LoaderConfig(), LoaderConfig(num_workers=2))
    loader_lines(printed(r.code, tmp_path, snippet_server), (r.a, r.b))


def test_persistent_workers(tmp_path, snippet_server):
    workload = Workload(samples=8, io_ms=5, transform_ms=1, step_ms=5, setup_ms=50)
    r = assert_shows_what_ran(epoch_boundaries, workload, LoaderConfig(num_workers=2))
    loader_lines(printed(r.code, tmp_path, snippet_server), (r.off, r.on))
    assert "persistent_workers=True" in r.code and r.on.config.persistent_workers


def test_stream_recorder_shows_its_own_file():
    """The recording was made on a GPU by this file: the page shows the file itself, whole."""
    code = stream_recorder.recorder_script()
    assert code.origins == (stream_recorder,)
    assert code == Path(stream_recorder.__file__).read_text().strip("\n") + "\n"
