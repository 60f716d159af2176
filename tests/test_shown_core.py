"""The code each core page shows is the code that drew its figure: per demo, call it (every function and class the
snippet shows must run, tests/provenance.py), then run the snippet alone (tests/snippet_runner.py) and check it
prints the figure's numbers."""

import math

from demos.training import amp, losses, mistakes, optimizers, resume, schedulers, step
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
