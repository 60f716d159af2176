"""Training loop: each snippet prints the numbers of the figure or table its entry point drew."""

import math

from demos.training import amp, losses, mistakes, optimizers, resume, schedulers, step
from tests.snippets import checks


@checks(mistakes.run_loop)
def mistake_loop(r, run):
    assert run(r.code) == f"validation loss {r.val_loss}\n"


@checks(step.walk)
def one_step_walk(r, run):
    last = run(r.code).splitlines()[-1].split(" ", 3)
    assert [int(last[0]), float(last[1]), float(last[2])] == [r.iteration, r.after.loss, r.after.grad_norm]
    assert last[3] == f"[{r.after.lr}]"


@checks(resume.resume_demo)
def exact_resume(r, run):
    said = run(r.code)
    assert said == f"max |difference| vs the straight run: {r.resumed['full'].max_diff}\n" == (
        "max |difference| vs the straight run: 0.0\n")


@checks(schedulers.schedules)
def scheduler_curves(r, run):
    expected = "".join(f"{name} {r.curves[name][::4]}\n" for name in schedulers.SCHEDULERS)
    assert run(r.code) == expected


@checks(schedulers.plateau)
def reduce_lr_on_plateau(r, run):
    assert r.reductions, "the run shows a cut"
    expected = "".join(f"{e} {lr} {val}\n" for e, (lr, val) in enumerate(zip(r.lrs, r.val_losses, strict=True)))
    assert run(r.code) == expected


@checks(losses.cross_entropy)
def cross_entropy(r, run):
    assert run(r.code).splitlines() == [
        f"{r.loss} {r.loss_by_hand}", f"trap, softmax fed in: {r.loss_on_probs}",
        f"{r.batch_loss} {r.batch_loss_by_hand} {r.ignored_row_grad}"]


@checks(losses.bce_compare)
def bce_three_ways(r, run):
    assert run(r.code).splitlines() == [
        f"{fn.__name__} {loss} {grad}"
        for fn, (loss, grad) in zip(losses.BCE_WAYS.values(), (r.manual, r.bce, r.with_logits), strict=True)]


@checks(losses.robust_fit)
def robust_fits(r, run):
    assert run(r.code).splitlines() == [f"{name} slope, intercept {a} {b}" for name, (a, b) in r.fits.items()]


@checks(losses.reduction_scaling)
def reduction(r, run):
    assert run(r.code).splitlines() == [
        f"{b} {m} {s}" for b, m, s in zip(r.batch_sizes, r.grad_mean, r.grad_sum, strict=True)]


@checks(optimizers.race)
def optimizer_race(r, run):
    assert any(t.diverged_at for t in r.runs), "a diverging run is part of the case"
    assert run(r.code).splitlines() == [
        f"{t.name} {[t.xs[-1], t.ys[-1]]} {t.losses[-1]} {t.diverged_at}" for t in r.runs]


@checks(optimizers.decay_compare)
def adam_vs_adamw(r, run):
    assert r.final_gap > 0, "the two kinds of decay end in different places"
    assert run(r.code).splitlines() == [
        f"{t.name} {[t.xs[-1], t.ys[-1]]} {t.losses[-1]} {t.diverged_at}" for t in r.runs]


@checks(amp.autocast_ops)
def autocast_ops(r, run):
    lines = run(r.code).splitlines()
    assert lines[:-1] == [f"{phase} {op} {inputs} -> {output}" for phase, op, inputs, output in r.ops]
    assert lines[-1] == f"torch.{r.dtype} torch.float32 torch.float32"


@checks(amp.measure)
def autocast_time_and_memory(r, run):
    lines = run(r.code).splitlines()
    saved = [f"saved for backward {b / 2**20:.2f} MiB" for b in r.saved_bytes.values()]
    assert [line.split(" ms ")[1] for line in lines] == saved
    assert [line.split(" ")[0] for line in lines] == [name.split(" ")[0] for name in r.ms]


@checks(amp.scaler_run)
def grad_scaler(r, run):
    assert r.skipped[5] and not r.skipped[4]
    expected = [f"{i} scale 2^{math.log2(b):g} -> 2^{math.log2(a):g} {'skipped' if s else ''} {loss}"
                for i, (b, a, s, loss) in enumerate(zip(r.scale_before, r.scale_after, r.skipped, r.losses,
                                                        strict=True))]
    assert run(r.code).splitlines() == [
        *expected, f"bfloat16 without a scaler: every gradient finite: {r.bf16_finite}"]
