"""Debugging & reproducibility: each snippet, linted and run alone, prints the numbers of the figure or table its
entry point drew."""

import ast
import re

from demos.debugging import leaks, model_tests, nan_trace, profiling, repro, workers
from tests.snippets import checks
from tests.snippets.data import fields, linted


@checks(nan_trace.trace_nan)
def nan_trace_finds_the_op(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("node", "error", "hook_rows", "first_bad", "origin", "fixed_loss", "fixed_grads_finite"):
        assert shown[name] == str(getattr(r, name)), name
    planted, fix = nan_trace.planted_sources(r.source)
    assert planted in r.code and fix in r.code, "the page's planted op and fix are the functions that ran"


@checks(repro.seeded_runs)
def seeded_runs(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["seeded_equal"] == "True" and shown["unseeded_equal"] == "False"
    assert str(r.runs[2:]).removeprefix("(").removesuffix(")") in shown["runs"], "the seeded runs, bit for bit"


@checks(repro.determinism_checks)
def deterministic_mode(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("cuda", "empty_deterministic", "cpu_checks", "cuda_checks"):
        assert shown[name] == str(getattr(r, name)), name


@checks(workers.worker_seeds)
def worker_seeds(w, run):
    out = run(linted(w.code))
    for row in w.fixed.rows:  # the fixed loader's seeds come from generator=: the same in every run
        assert f"fixed {row}" in out
    bug = [line for line in out.splitlines() if line.startswith("bug ")]
    assert [ast.literal_eval(line.removeprefix("bug "))[3] for line in bug] == [row[3] for row in w.bug.rows]
    assert f"manual_seed(0): {w.base_seeds}" in out


@checks(leaks.leaks)
def leak_loops(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("nodes", "saved_bytes", "outputs", "hooks"):
        series = getattr(r, name)
        assert shown[name] == str((list(series.leak), list(series.fixed))), name
    trap, fix = leaks.trap_and_fix_sources()
    for column in (trap, fix):  # the page's trap and fix columns are functions the loops called
        assert all(part in r.code for part in column.split("\n\n"))


@checks(model_tests.run_model_tests)
def model_tests_catch_the_bug(report, run):
    out = run(linted(report.code))
    for row in report.rows:
        assert f"{row.test}: {'pass' if row.passed else 'FAIL'} ({row.detail})" in out
    assert report.passed == 3


@checks(profiling.profile_step)
def profiler(r, run):
    out = run(linted(r.code))
    shown = re.findall(r"OpRow\(name='([^']+)'", out)
    assert len(shown) == len(r.top_ops)
    # which ops lead by self time depends on the host's load; the three phase spans do not
    phases = ast.literal_eval(re.search(r"phase_us: (\{.*\})", out).group(1))
    assert list(phases) == list(r.phase_us) == ["forward", "backward", "optimizer"]
    assert all(us > 0 for us in phases.values())
