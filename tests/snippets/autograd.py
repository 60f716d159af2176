"""Autograd: each snippet prints the numbers of the table, figure or sentence its entry point drew."""

import dataclasses
import re

from demos.autograd import accumulate, backward, custom, graph, modes
from tests.snippets import checks


@checks(accumulate.repeated_backward)
def grad_accumulates(r, run):
    assert run(r.code).splitlines() == [
        f"not zeroed: {[list(g) for g in r.accumulated]}", f"zeroed first: {[list(g) for g in r.zeroed]}"]


@checks(accumulate.micro_batches)
def micro_batches(r, run):
    assert run(r.code).splitlines() == [
        f"{r.max_diff}", f"{[f / u for f, u in zip(r.forgot, r.full, strict=True)]}"]


@checks(accumulate.freed_graph)
def retain_graph(r, run):
    lines = run(r.code).splitlines()
    assert lines[0] == f"{list(r.first_grad)}" and lines[1].startswith(r.second_error[:-1])
    assert lines[-1] == f"{[list(g) for g in r.retained_grads]}"


@checks(accumulate.gradient_penalty)
def gradient_penalty(r, run):
    assert run(r.code).splitlines() == [
        f"{list(r.second)} {list(r.analytic)}", f"gradgradcheck: {r.gradgradcheck_ok}", r.no_create_graph_error]


@checks(modes.compare_modes)
def autograd_modes(r, run):
    facts = run(r.code).splitlines()[::2]
    rows = r.table.to_dict("records")
    assert facts == [f"{row['mode']} " + str({
        "grad_fn": row["out.grad_fn"], "requires_grad": bool(row["out.requires_grad"]),
        "is_inference": bool(row["out.is_inference()"]), "saved_bytes": saved,
        "later": row["later: (out * W).sum().backward()"]}) for row, saved in zip(rows, r.saved_bytes, strict=True)]


@checks(modes.detach_shares_storage)
def detach_shares_storage(r, run):
    assert run(r.code) == f"{dataclasses.astuple(r)[:-1]}\n"


@checks(modes.version_counter_trap)
def inplace_version(r, run):
    lines = run(r.code).splitlines()
    assert lines[0] == f"version {r.version_before} -> {r.version_after}" and lines[1].startswith(r.trap_error)
    assert lines[-1] == f"{list(r.correct_grad)}"


@checks(custom.straight_through, custom.stable_logsumexp, custom.swish)
def custom_function(e, run):
    forward, checked = run(e.code).splitlines()
    shown = [float(v) for v in e.forward.strip("[]…, ").split(", ")]
    assert [float(f"{v:.4g}") for v in eval(forward)] == shown[:6], e.name
    assert checked.startswith(f"{e.max_abs_diff} {e.gradcheck_ok} ")
    assert e.gradcheck_message.startswith(checked.split(" ", 2)[2]), e.name


@checks(custom.wrong_backward_trap)
def wrong_backward_trap(r, run):
    naive, weighted, gradcheck = run(r.code).splitlines()
    assert naive == f"{r.naive_passes}" == "True"
    assert gradcheck == f"{(r.gradcheck_ok, r.gradcheck_message)}" and not r.gradcheck_ok


# The entries' example is a leaf used three times, one use cut by .detach(), and a leaf without grad named `leaves`,
# which would overwrite the snippet's own `leaves` unless the snippet renames it. tests/test_autograd_graph.py runs
# the same checks on a matmul and a broadcast add.
@checks(graph.graph_view)
def autograd_graph(r, run):
    table = r.nodes[["node", "grad_fn", "next functions"]].to_dict("records")
    assert run(r.code).splitlines() == [str(row) for row in table], r.expression


@checks(backward.backward_view)
def autograd_backward(r, run):
    lines = run(r.code).splitlines()
    order = [(int(row["node"].removeprefix("#")), row["grad_fn"]) for row in r.order.to_dict("records")]
    assert lines[0] == f"engine order: {order}"
    leaf_rows = [row for row in r.leaf_grads.to_dict("records") if row["requires_grad"]]
    assert lines[1:1 + len(leaf_rows)] == [f"{row['leaf']}.grad {row['.grad']}" for row in leaf_rows]
    labels, grads = zip(*(line.split(" ", 1) for line in lines[1 + len(leaf_rows):]), strict=True)
    assert [re.sub(r"^t\d+\.grad$", "t.grad", label) for label in labels] == ["t.grad"] * (len(labels) - 1) + [
        "out.grad"]
    assert list(grads) == ["None" if g == backward.CUT_BY_DETACH else g
                           for g in r.intermediate_grads["gradient flowing in (.grad)"]]
