"""The code each core page shows is the code that drew its figure: per demo, call it (every function and class the
snippet shows must run, tests/provenance.py), then run the snippet alone (tests/snippet_runner.py) and check it
prints the figure's numbers."""

import math
import subprocess
import sys

from demos.quiz import format_answer
from demos.registry import ROOT
from demos.tensors import broadcasting, devices, dtypes, einsum, layout, shapes
from demos.training import amp, losses, mistakes, optimizers, resume, schedulers, step
from demos.training import questions as training_questions
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone

# Every ui.show_code key on these pages, and the test below that checks its snippet (tests/test_shown.py holds
# the union of this map and tests/test_shown_systems.py's to every show_code call in the app).
TESTED_BY = {
    "pages/training-loop.py": {
        "tl_walk_code": "test_one_step_walk", "tl_mis_code": "test_mistake_loop",
        "tl_opt_code": "test_optimizer_race", "tl_decay_code": "test_adam_vs_adamw",
        "tl_sch_code": "test_scheduler_curves", "tl_pl_code": "test_reduce_lr_on_plateau",
        "tl_ce_code": "test_cross_entropy", "tl_bce_code": "test_bce_three_ways", "tl_rob_code": "test_robust_fits",
        "tl_red_code": "test_reduction", "tl_amp_ops_code": "test_autocast_ops",
        "tl_amp_speed_code": "test_autocast_time_and_memory", "tl_gs_code": "test_grad_scaler",
        "tl_res_code": "test_exact_resume",
    },
    "pages/tensors.py": {
        "tensors_bc_code": "test_broadcast_shapes", "tensors_bc_grid_code": "test_broadcast_reads",
        "tensors_mem_code": "test_strides_and_views", "tensors_dt_code": "test_promotion_matrix",
        "tensors_es_code": "test_einsum", "tensors_dev_code": "test_devices", "tensors_lab_code": "test_shape_lab",
    },
}


def printed(code: str, tmp_path, snippet_server) -> str:
    """What the snippet prints, run as a reader would run it; it must exit cleanly."""
    done = run_alone(code, tmp_path, snippet_server)
    assert done.returncode == 0, done.stderr
    return done.stdout


# Training loop ----------------------------------------------------------------------------------------------------


def test_mistake_loop(tmp_path, snippet_server):
    run = assert_shows_what_ran(mistakes.run_loop, "no_train_after_eval", 20, 0.5, 3)
    assert printed(run.code, tmp_path, snippet_server) == f"validation loss {run.val_loss}\n"


def test_one_step_walk(tmp_path, snippet_server):
    r = assert_shows_what_ran(step.walk, 2 * len(step.SUBSTEPS) + 6, "SGD + momentum", 0.1, 0.5, 2)
    last = printed(r.code, tmp_path, snippet_server).splitlines()[-1].split(" ", 3)
    assert [int(last[0]), float(last[1]), float(last[2])] == [r.iteration, r.after.loss, r.after.grad_norm]
    assert last[3] == f"[{r.after.lr}]"


def test_exact_resume(tmp_path, snippet_server):
    r = assert_shows_what_ran(resume.resume_demo, 24, 12, 1)
    said = printed(r.code, tmp_path, snippet_server)
    assert said == f"max |difference| vs the straight run: {r.resumed['full'].max_diff}\n" == (
        "max |difference| vs the straight run: 0.0\n")


def test_scheduler_curves(tmp_path, snippet_server):
    r = assert_shows_what_ran(schedulers.schedules, 40, 0.2, 7, 0.3, 5)
    expected = "".join(f"{name} {r.curves[name][::4]}\n" for name in schedulers.SCHEDULERS)
    assert printed(r.code, tmp_path, snippet_server) == expected


def test_reduce_lr_on_plateau(tmp_path, snippet_server):
    r = assert_shows_what_ran(schedulers.plateau, 12, 0.5, 0.5, 0, 3)
    assert r.reductions, "the run shows a cut"
    expected = "".join(f"{e} {lr} {val}\n" for e, (lr, val) in enumerate(zip(r.lrs, r.val_losses, strict=True)))
    assert printed(r.code, tmp_path, snippet_server) == expected


def test_cross_entropy(tmp_path, snippet_server):
    r = assert_shows_what_ran(losses.cross_entropy, "2, -1, 0.5", 2, 0.1, 4)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{r.loss} {r.loss_by_hand}", f"trap, softmax fed in: {r.loss_on_probs}",
        f"{r.batch_loss} {r.batch_loss_by_hand} {r.ignored_row_grad}"]


def test_bce_three_ways(tmp_path, snippet_server):
    r = assert_shows_what_ran(losses.bce_compare, 90.0, 1)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{fn.__name__} {loss} {grad}"
        for fn, (loss, grad) in zip(losses.BCE_WAYS.values(), (r.manual, r.bce, r.with_logits), strict=True)]


def test_robust_fits(tmp_path, snippet_server):
    r = assert_shows_what_ran(losses.robust_fit, 3, 10.0, 2, 40)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{name} slope, intercept {a} {b}" for name, (a, b) in r.fits.items()]


def test_reduction(tmp_path, snippet_server):
    r = assert_shows_what_ran(losses.reduction_scaling, 16, 1)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{b} {m} {s}" for b, m, s in zip(r.batch_sizes, r.grad_mean, r.grad_sum, strict=True)]


def test_optimizer_race(tmp_path, snippet_server):
    r = assert_shows_what_ran(optimizers.race, "rosenbrock", 30, sgd_lr=0.01, extra="NAdam")
    assert any(run.diverged_at for run in r.runs), "a diverging run is part of the case"
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{run.name} {[run.xs[-1], run.ys[-1]]} {run.losses[-1]} {run.diverged_at}" for run in r.runs]


def test_adam_vs_adamw(tmp_path, snippet_server):
    r = assert_shows_what_ran(optimizers.decay_compare, "rosenbrock", 40, weight_decay=0.2)
    assert r.final_gap > 0, "the two kinds of decay end in different places"
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{run.name} {[run.xs[-1], run.ys[-1]]} {run.losses[-1]} {run.diverged_at}" for run in r.runs]


def test_autocast_ops(tmp_path, snippet_server):
    r = assert_shows_what_ran(amp.autocast_ops, 8, 2)
    lines = printed(r.code, tmp_path, snippet_server).splitlines()
    assert lines[:-1] == [f"{phase} {op} {inputs} -> {output}" for phase, op, inputs, output in r.ops]
    assert lines[-1] == f"torch.{r.dtype} torch.float32 torch.float32"


def test_autocast_time_and_memory(tmp_path, snippet_server):
    r = assert_shows_what_ran(amp.measure, 16, 4, 1)
    lines = printed(r.code, tmp_path, snippet_server).splitlines()
    saved = [f"saved for backward {b / 2**20:.2f} MiB" for b in r.saved_bytes.values()]
    assert [line.split(" ms ")[1] for line in lines] == saved
    assert [line.split(" ")[0] for line in lines] == [name.split(" ")[0] for name in r.ms]


def test_grad_scaler(tmp_path, snippet_server):
    r = assert_shows_what_ran(amp.scaler_run, 12, 20, 3, "5", 1)
    assert r.skipped[5] and not r.skipped[4]
    expected = [f"{i} scale 2^{math.log2(b):g} -> 2^{math.log2(a):g} {'skipped' if s else ''} {loss}"
                for i, (b, a, s, loss) in enumerate(zip(r.scale_before, r.scale_after, r.skipped, r.losses,
                                                        strict=True))]
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        *expected, f"bfloat16 without a scaler: every gradient finite: {r.bf16_finite}"]



# Tensors ----------------------------------------------------------------------------------------------------------


def test_broadcast_shapes(tmp_path, snippet_server):
    r = assert_shows_what_ran(broadcasting.broadcast, ("8, 1, 6, 1", "7, 1, 5", ""))
    assert printed(r.code, tmp_path, snippet_server) == f"{r.result} None\n"
    clash = assert_shows_what_ran(broadcasting.broadcast, ("2, 3", "4, 3", ""))
    message = clash.torch_error.split(": ", 1)[1]  # torch's first line, after the exception's type
    assert printed(clash.code, tmp_path, snippet_server).startswith(f"None {message}")


def test_broadcast_reads(tmp_path, snippet_server):
    g = assert_shows_what_ran(broadcasting.grid, ("2, 1, 4", "3, 1", "[]"), "1, 2, 3")
    assert printed(g.code, tmp_path, snippet_server) == f"{list(g.reads)}\n"


def linted(code: str) -> str:
    """The snippet, checked by the project's linter (a reader may paste it into their own project)."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--stdin-filename",
                           str(ROOT / "snippet.py"), "-"], input=code, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout
    return code


def test_strides_and_views(tmp_path, snippet_server):
    refused = assert_shows_what_ran(layout.layout, "3, 4", ".T.view(12)")  # view cannot walk the transpose
    strided = assert_shows_what_ran(layout.layout, "2, 3, 2", ".transpose(0, 2)[:, 1:, ::2].contiguous()")
    tabled = assert_shows_what_ran(layout.layout, "32, 3, 64, 64", ".to(memory_format=torch.channels_last)"
                                   ".permute(0, 2, 3, 1)")  # too large to draw: layout only
    assert refused.error and not strided.error and not tabled.error and not tabled.drawn
    assert not all(v.contiguous for v in strided.views) and not all(v.shares for v in strided.views)
    for r in (refused, strided, tabled):
        lines = printed(linted(r.code), tmp_path, snippet_server).splitlines()
        expected = []
        for i, v in enumerate(r.views):  # the table's columns and, drawn, the drawing's storage strip and grid
            facts = dict(shape=v.shape, stride=v.stride, offset=v.offset, contiguous=v.contiguous, shares_x=v.shares)
            if r.drawn:
                facts |= dict(storage=list(v.storage), reads=list(v.positions))
            expected.append(f"{f'y{i}' if i else 'x'} {facts}")
        if r.error:
            expected.append(f"y{len(r.views)} {r.error}")
        assert lines == expected



def test_promotion_matrix(tmp_path, snippet_server):
    r = assert_shows_what_ran(dtypes.promotion, ("uint8", "int64", "float16"), True, ("int", "float"))
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{label} {list(row)}" for label, row in zip(r.labels, r.results, strict=True)]


def test_einsum(tmp_path, snippet_server):
    known = assert_shows_what_ran(einsum.einsum, "bhqd,bhkd->bhqk", "(1, 2, 3, 4); (1, 2, 5, 4)")
    summed = assert_shows_what_ran(einsum.einsum, "ijk->ki", "(2, 3, 4)")  # one operand: sum, then permute
    misfit = assert_shows_what_ran(einsum.einsum, "bij,bjk->bik", "(2, 1, 3); (1, 3, 4)")  # bmm does not broadcast
    unnamed = assert_shows_what_ran(einsum.einsum, "ij,jk,kl->il", "(2, 3); (3, 4); (4, 2)")  # no standard op
    large = assert_shows_what_ran(einsum.einsum, "ij,jk->ik", "(40, 40); (40, 40)")  # too many iterations for loops
    assert known.equivalent_ok and summed.equivalent_ok and misfit.equivalent_ok is None and not unnamed.equivalent
    assert large.python_loop_diff is None and all(r.python_loop_diff < 1e-12 for r in (known, summed, misfit, unnamed))
    for r in (known, summed, misfit, unnamed, large):
        lines = printed(linted(r.code), tmp_path, snippet_server).splitlines()
        expected = [str(r.out_shape)]
        if r.equivalent_ok is not None:
            expected.append(str(r.equivalent_ok))
        elif r.equivalent:  # torch's error, as the page's note quotes it
            expected.append("RuntimeError: " + r.equivalent_note.split(" does not apply to these sizes: ", 1)[1])
        if r.python_loop_diff is not None:  # the loop nest the page shows is the one the snippet runs
            expected.append(str(r.python_loop_diff))
            assert r.loop_code.rstrip("\n") in str(r.code)
        assert lines == expected



def test_devices(tmp_path, snippet_server):
    r = assert_shows_what_ran(devices.report)
    chosen, facts = printed(r.code, tmp_path, snippet_server).splitlines()
    assert chosen == f"chosen device: {r.chosen}"
    facts = eval(facts, {"RuntimeError": str})  # the exception prints as RuntimeError('message')
    assert (facts["x"], facts["y"], facts["y_is_x"], facts["model_after"], facts["same_module"]) == (
        r.tensor_before, r.tensor_after, r.tensor_same_object, r.module_after, r.module_same_object)
    assert r.mixing_error.startswith(f"RuntimeError: {facts['mixing'].splitlines()[0]}")


def test_shape_lab(tmp_path, snippet_server):
    cases = {
        "meta": shapes.PRESETS["CNN head"],  # too large to run for real: meta tensors
        "refused": shapes.PRESETS["view after transpose"],  # torch's error at step 2
        "cpu": ("x: 4, 5; m: 4, 5 bool", "x[m].unsqueeze(0)"),  # small: run on real CPU tensors too
        "meta mask": ("x: 4096, 4096; m: 4096, 4096 bool", "x[m].sum()"),  # a mask on meta: every value True
        "layers": ("x: 2, 4; print: 3", "nn.Sequential(nn.Linear(4, 3), nn.ReLU())(x).max(1).values + print"),
        "tuple": ("x: 6, 4", "x.chunk(3, dim=0)[1].T"),
    }
    results = {k: assert_shows_what_ran(shapes.evaluate, *fields) for k, fields in cases.items()}
    assert [results[k].view_source for k in ("meta", "cpu", "meta mask")] == ["meta", "real", "meta"]
    assert results["refused"].error and results["layers"].error and "index_with_mask" in results["meta mask"].code
    for r in results.values():
        lines = printed(linted(r.code), tmp_path, snippet_server).splitlines()
        expected = [f"{s.number} {s.error}" if s.error else f"{s.number} {dict(shapes=s.outputs)}" if not s.outputs
                    else f"{s.number} {dict(shapes=s.outputs, stride=s.stride, contiguous=s.contiguous, dtype=s.dtype)}"
                         f" {s.view}"
                    for s in r.steps]  # each table row (shapes, stride, contiguity, dtype, view or copy) or its error
        if len(lines) == len(expected) + 1:  # the expression ends in something that is not a step (a tuple's item)
            assert lines[-1].startswith(f"out {{'shapes': {r.shapes!r}, ") and f"'dtype': '{r.dtype}'" in lines[-1]
            lines.pop()
        assert lines == expected


# Home, traps, quiz ------------------------------------------------------------------------------------------------


def test_quiz_question(tmp_path, snippet_server):
    q = next(q for q in training_questions.QUESTIONS if q.key == "onecycle")
    answer = []
    snippet = assert_shows_what_ran(lambda: answer.append(q.run()) or q.snippet)
    assert format_answer(eval(printed(snippet, tmp_path, snippet_server))) == format_answer(answer[0])
