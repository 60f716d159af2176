"""Systems pages (Debugging, Data loading, Distributed): each snippet a page shows is the source of
the code that drew its figure (every shown function ran) and, run alone as a visitor would run it, prints the
figure's numbers.

One case per demo, at small settings: the point is that the shown script is the code that ran, not the demo's
behaviour at every size (the demos' own tests cover that)."""

import ast
import re
import subprocess
import sys

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
from demos.distributed.core import pipeline_schedule, run_demo
from demos.registry import ROOT
from tests.provenance import assert_shows_what_ran, origins_that_did_not_run, recording_calls
from tests.snippet_runner import run_alone

# Every ui.show_code key on these pages, and the test below that checks its snippet (tests/test_shown.py holds
# the union of this map and tests/test_shown_core.py's to every show_code call in the app).
TESTED_BY = {
    "pages/debugging.py": {
        "dbg_nan_code": "test_nan_trace", "dbg_seed_code": "test_seeded_runs", "dbg_workers_code": "test_worker_seeds",
        "dbg_det_code": "test_deterministic_mode", "dbg_leak_code": "test_leaks", "dbg_tests_code": "test_model_tests",
        "dbg_prof_code": "test_profiler",
    },
    "pages/data-loading.py": {
        "dl_timeline_code": "test_dataloader_timeline", "dl_epochs_code": "test_persistent_workers",
        "dl_streams_code": "test_iterable_sharding", "dl_order_code": "test_sampler_orders",
        "dl_weighted_code": "test_weighted_sampler", "dl_dist_code": "test_distributed_sampler",
        "dl_pad_code": "test_pad_collate", "dl_bucket_code": "test_bucketing", "dl_pin_code": "test_pinned_copy",
        "dl_d2h_code": "test_device_to_host_trap",
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
