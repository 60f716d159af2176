"""Gradient flow: each snippet prints the numbers of the figure its entry point drew."""

from demos.gradient_flow import clipping, dead_relu, flow
from tests.snippets import checks


@checks(flow.gradient_flow)
def gradient_flow(r, run):
    norms, p = r.yours.grad_norms, r.yours
    assert run(r.code).splitlines() == [
        f"loss {p.loss}", f"layer 1: {norms[0]}  last layer: {norms[-1]}  ratio: {norms[0] / max(norms[-1], 1e-45)}"]


@checks(clipping.compare_clipping)
def clipping_compare(r, run):
    assert run(r.code).splitlines() == [
        f"norm before {r.norm_before} returned {r.returned_norm}",
        f"after norm clip {r.norm_after_norm_clip} after value clip {r.norm_after_value_clip}",
        f"cosine kept: {r.cosine_norm_clip} {r.cosine_value_clip}"]


@checks(clipping.clipping_run)
def clipping_run(r, run):
    assert r.plain_diverged, "the case shows the rescue"
    assert run(r.code).splitlines() == [
        f"clip_grad_norm_ {clip} steps {len(losses)} last loss {losses[-1]}"
        for clip, losses in ((None, r.loss_plain), (r.max_norm, r.loss_clipped))]


@checks(dead_relu.dead_relus)
def dead_relus(r, run):
    assert run(r.code).splitlines() == [
        f"dead before: {r.yours.dead_before}", f"dead after: {r.yours.dead_after}",
        f"final loss: {r.yours.final_loss}"]
