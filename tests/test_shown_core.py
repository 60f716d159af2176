"""The code each core page shows is the code that drew its figure: per demo, call it (every function and class the
snippet shows must run, tests/provenance.py), then run the snippet alone (tests/snippet_runner.py) and check it
prints the figure's numbers."""

import dataclasses
import math
import re

from demos.autograd import accumulate, backward, custom, graph, modes
from demos.gradient_flow import clipping, dead_relu, flow
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
    "pages/gradient-flow.py": {
        "gf_flow_code": "test_gradient_flow", "gf_clip_code": "test_clipping_compare",
        "gf_run_code": "test_clipping_run", "gf_dead_code": "test_dead_relus",
    },
    "pages/autograd.py": {
        "ag_graph_code": "test_autograd_graph", "ag_backward_code": "test_autograd_backward",
        "ag_modes_code": "test_autograd_modes", "ag_sharing_code": "test_detach_shares_storage",
        "ag_version_code": "test_inplace_version", "ag_trap_code": "test_wrong_backward_trap",
        "ag_repeat_code": "test_grad_accumulates", "ag_micro_code": "test_micro_batches",
        "ag_freed_code": "test_retain_graph", "ag_penalty_code": "test_gradient_penalty",
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



# Gradient flow ----------------------------------------------------------------------------------------------------


def test_gradient_flow(tmp_path, snippet_server):
    r = assert_shows_what_ran(flow.gradient_flow, 6, 16, "tanh", "normal", "layer", True, 1)
    norms, p = r.yours.grad_norms, r.yours
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"loss {p.loss}", f"layer 1: {norms[0]}  last layer: {norms[-1]}  ratio: {norms[0] / max(norms[-1], 1e-45)}"]


def test_clipping_compare(tmp_path, snippet_server):
    r = assert_shows_what_ran(clipping.compare_clipping, 1.0, 0.01)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"norm before {r.norm_before} returned {r.returned_norm}",
        f"after norm clip {r.norm_after_norm_clip} after value clip {r.norm_after_value_clip}",
        f"cosine kept: {r.cosine_norm_clip} {r.cosine_value_clip}"]


def test_clipping_run(tmp_path, snippet_server):
    r = assert_shows_what_ran(clipping.clipping_run, "0.5", 1.0)
    assert r.plain_diverged, "the case shows the rescue"
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"clip_grad_norm_ {clip} steps {len(losses)} last loss {losses[-1]}"
        for clip, losses in ((None, r.loss_plain), (r.max_norm, r.loss_clipped))]


def test_dead_relus(tmp_path, snippet_server):
    dead_relu.dead_run.cache_clear()  # a cached run would not run again
    r = assert_shows_what_ran(dead_relu.dead_relus, 0.3, "default")
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"dead before: {r.yours.dead_before}", f"dead after: {r.yours.dead_after}",
        f"final loss: {r.yours.final_loss}"]



# Autograd ---------------------------------------------------------------------------------------------------------


def test_grad_accumulates(tmp_path, snippet_server):
    r = assert_shows_what_ran(accumulate.repeated_backward, 3)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"not zeroed: {[list(g) for g in r.accumulated]}", f"zeroed first: {[list(g) for g in r.zeroed]}"]


def test_micro_batches(tmp_path, snippet_server):
    r = assert_shows_what_ran(accumulate.micro_batches, 12, 3)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{r.max_diff}", f"{[f / u for f, u in zip(r.forgot, r.full, strict=True)]}"]


def test_retain_graph(tmp_path, snippet_server):
    r = assert_shows_what_ran(accumulate.freed_graph)
    lines = printed(r.code, tmp_path, snippet_server).splitlines()
    assert lines[0] == f"{list(r.first_grad)}" and lines[1].startswith(r.second_error[:-1])
    assert lines[-1] == f"{[list(g) for g in r.retained_grads]}"


def test_gradient_penalty(tmp_path, snippet_server):
    r = assert_shows_what_ran(accumulate.gradient_penalty)
    assert printed(r.code, tmp_path, snippet_server).splitlines() == [
        f"{list(r.second)} {list(r.analytic)}", f"gradgradcheck: {r.gradgradcheck_ok}", r.no_create_graph_error]


def test_autograd_modes(tmp_path, snippet_server):
    r = assert_shows_what_ran(modes.compare_modes, 16)
    facts = printed(r.code, tmp_path, snippet_server).splitlines()[::2]
    rows = r.table.to_dict("records")
    assert facts == [f"{row['mode']} " + str({
        "grad_fn": row["out.grad_fn"], "requires_grad": bool(row["out.requires_grad"]),
        "is_inference": bool(row["out.is_inference()"]), "saved_bytes": saved,
        "later": row["later: (out * W).sum().backward()"]}) for row, saved in zip(rows, r.saved_bytes, strict=True)]


def test_detach_shares_storage(tmp_path, snippet_server):
    r = assert_shows_what_ran(modes.detach_shares_storage)
    assert printed(r.code, tmp_path, snippet_server) == f"{dataclasses.astuple(r)[:-1]}\n"


def test_inplace_version(tmp_path, snippet_server):
    r = assert_shows_what_ran(modes.version_counter_trap)
    lines = printed(r.code, tmp_path, snippet_server).splitlines()
    assert lines[0] == f"version {r.version_before} -> {r.version_after}" and lines[1].startswith(r.trap_error)
    assert lines[-1] == f"{list(r.correct_grad)}"


def test_custom_functions(tmp_path, snippet_server):
    examples = [assert_shows_what_ran(example) for example in (custom.straight_through, custom.stable_logsumexp,
                                                               custom.swish)]
    for e in examples:
        forward, checked = printed(e.code, tmp_path, snippet_server).splitlines()
        shown = [float(v) for v in e.forward.strip("[]…, ").split(", ")]
        assert [float(f"{v:.4g}") for v in eval(forward)] == shown[:6], e.name
        assert checked.startswith(f"{e.max_abs_diff} {e.gradcheck_ok} ")
        assert e.gradcheck_message.startswith(checked.split(" ", 2)[2]), e.name


def test_wrong_backward_trap(tmp_path, snippet_server):
    r = assert_shows_what_ran(custom.wrong_backward_trap)
    naive, weighted, gradcheck = printed(r.code, tmp_path, snippet_server).splitlines()
    assert naive == f"{r.naive_passes}" == "True"
    assert gradcheck == f"{(r.gradcheck_ok, r.gradcheck_message)}" and not r.gradcheck_ok


# (leaves, expression): a matmul and a broadcast add; a leaf used three times, one use cut by .detach(), and a leaf
# without grad named `leaves`, which would overwrite the snippet's own `leaves` unless the snippet renames it
AUTOGRAD_EXPRESSIONS = [("x: 4,3; W: 3,2 grad; b: 2 grad", "sum(x @ W + b)"),
                        ("w: 3 grad; leaves: 3", "sum(w * (w * 2).detach() + leaves * w)")]


def test_autograd_graph(tmp_path, snippet_server):
    for (leaves, expr), show_saved in zip(AUTOGRAD_EXPRESSIONS, (False, True), strict=True):
        r = assert_shows_what_ran(graph.graph_view, leaves, expr, show_saved)
        table = r.nodes[["node", "grad_fn", "next functions"]].to_dict("records")
        assert printed(r.code, tmp_path, snippet_server).splitlines() == [str(row) for row in table], expr


def test_autograd_backward(tmp_path, snippet_server):
    for leaves, expr in AUTOGRAD_EXPRESSIONS:
        r = assert_shows_what_ran(backward.backward_view, leaves, expr)
        lines = printed(r.code, tmp_path, snippet_server).splitlines()
        order = [(int(row["node"].removeprefix("#")), row["grad_fn"]) for row in r.order.to_dict("records")]
        assert lines[0] == f"engine order: {order}", expr
        leaf_rows = [row for row in r.leaf_grads.to_dict("records") if row["requires_grad"]]
        assert lines[1:1 + len(leaf_rows)] == [f"{row['leaf']}.grad {row['.grad']}" for row in leaf_rows], expr
        labels, grads = zip(*(line.split(" ", 1) for line in lines[1 + len(leaf_rows):]), strict=True)
        assert [re.sub(r"^t\d+\.grad$", "t.grad", label) for label in labels] == ["t.grad"] * (len(labels) - 1) + [
            "out.grad"]
        assert list(grads) == ["None" if g == backward.CUT_BY_DETACH else g
                               for g in r.intermediate_grads["gradient flowing in (.grad)"]], expr
