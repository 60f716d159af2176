"""The code each core page shows is the code that drew its figure: per demo, call it (every function and class the
snippet shows must run, tests/provenance.py), then run the snippet alone (tests/snippet_runner.py) and check it
prints the figure's numbers."""

import dataclasses
import re
import subprocess
import sys

from demos.autograd import accumulate, backward, custom, graph, modes
from demos.gradient_flow import clipping, dead_relu, flow
from demos.quiz import format_answer
from demos.registry import ROOT
from demos.tensors import broadcasting, devices, dtypes, einsum, layout, shapes
from demos.training import questions as training_questions
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone

# Every ui.show_code key on these pages, and the test below that checks its snippet (tests/test_shown.py holds
# the union of this map and tests/test_shown_systems.py's to every show_code call in the app).
TESTED_BY = {
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
