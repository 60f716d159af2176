"""Modules & hooks: each snippet prints the numbers of the table or figure its entry point drew."""

import dataclasses

from demos.modules import containers, freezing, hooks, params, sharing
from tests.snippets import checks


@checks(params.registry_table)
def parameters_buffers_attributes(r, run):
    assert run(r.code).splitlines() == [
        f"state_dict(): {list(r.state_dict_keys)}", *(f"{dataclasses.asdict(row)}" for row in r.rows)]


@checks(params.buffer_vs_attribute)
def buffer_vs_attribute(r, run):
    assert "RuntimeError" in r.attribute_outcome
    assert run(r.code).splitlines() == [
        f"WithBuffer {(list(r.buffer_keys), r.buffer_device, r.buffer_outcome)}",
        f"WithAttribute {(list(r.attribute_keys), r.attribute_device, r.attribute_outcome)}"]


@checks(params.batchnorm_stats)
def batchnorm_running_stats(t, run):
    rows = list(zip(t.modes, t.batch_means, t.running_means, t.running_vars, t.num_batches, strict=True))[1:]
    assert run(t.code).splitlines() == [
        str(dict(mode=mode, batch_mean=batch, running_mean=mean, running_var=var, num_batches_tracked=count,
                 eval_as_formula=t.eval_uses_running_stats)) for mode, batch, mean, var, count in rows]


@checks(freezing.freeze_step)
def freeze_layers(r, run):
    assert run(r.code).splitlines() == [
        *(f"{dataclasses.asdict(row)}" for row in r.params),
        f"param groups: {[len(g.names) for g in r.groups]} bn.running_mean moved: {r.bn_running_mean_change}"]


@checks(freezing.late_freeze)
def late_freeze(r, run):
    grads = dict(part.split(": ") for part in r.grad_after_zero_grad.split("; "))
    assert run(r.code).splitlines() == [
        f"set_to_none {flag} stem.weight.grad: {grads[f'set_to_none={flag}']} frozen stem moved by {moved}"
        for flag, moved in ((True, r.change_set_to_none), (False, r.change_zeroed))]


@checks(freezing.eval_vs_freeze)
def eval_vs_freeze(r, run):
    assert run(r.code).splitlines() == [
        f"{variant} {tuple(row[column] for row in r.rows)}" for column, variant in ((1, "eval"), (2, "freeze"))]


@checks(freezing.per_group_lrs)
def per_group_lrs(r, run):
    assert run(r.code).splitlines() == [
        *(f"{name} group {group} lr {lr} |change| / |grad| = {ratio}" for name, group, ratio, lr in r.effective),
        f"every change is -lr * grad: {r.verified}"]


@checks(sharing.weight_tying)
def weight_tying(t, run):
    lines = run(t.code).splitlines()
    shown = {f.name: getattr(t, f.name) for f in dataclasses.fields(t) if f.name not in ("ids", "code")}
    assert sorted(lines) == sorted(f"{name} {value}" for name, value in shown.items())
    assert t.count_tied * 2 == t.count_untied and t.grad_max_diff < 1e-6


@checks(containers.list_vs_modulelist)
def plain_list_vs_modulelist(r, run):
    facts = [eval("{" + line.split(" {", 1)[1]) for line in run(r.code).splitlines()]
    assert [(f["tensors"], f["numel"], f["change"]) for f in facts] == list(
        zip(r.param_tensors, r.numel, r.first_layer_change, strict=True))


@checks(containers.module_dict_demo)
def module_dict(r, run):
    assert run(r.code).splitlines() == [
        *map(str, r.rows), f"parameters: {r.total_params}"]


@checks(containers.sequential_vs_modulelist)
def sequential_vs_modulelist(r, run):
    assert run(r.code) == f"{dataclasses.astuple(r)[:-1]}\n"


@checks(containers.module_tree)
def module_tree(r, run):
    assert run(r.code).splitlines() == [
        *(str(dataclasses.astuple(node)) for node in r.nodes), f"named_modules(): {list(r.named_modules)}"]


@checks(hooks.hook_pileup)
def hook_pile_up(r, run):
    assert r.registered_trap == (1, 2, 3) and r.registered_correct == (0, 0, 0)
    assert run(r.code).splitlines() == [
        f"{name} hook firings per call: {fires} hooks registered after each: {registered}"
        for name, fires, registered in (("predict_leaky", r.fires_trap, r.registered_trap),
                                        ("predict_clean", r.fires_correct, r.registered_correct))]


@checks(hooks.pre_hook_effect)
def forward_pre_hook(r, run):
    assert run(r.code).splitlines() == [
        f"plain  {[list(row) for row in r.logits_plain]}", f"hooked {[list(row) for row in r.logits_hooked]}",
        f"hooked == model(transformed x): {r.equals_transformed_input}"]


@checks(hooks.zero_channel_effect)
def forward_hook_zeroes_a_channel(r, run):
    assert run(r.code).splitlines() == [
        f"plain  {[list(row) for row in r.logits_plain]}", f"hooked {[list(row) for row in r.logits_hooked]}",
        f"hooked == the channel's weights zeroed: {r.equals_zeroed_weights}"]


@checks(hooks.grad_surgery)
def gradient_surgery(r, run):
    assert run(r.code).splitlines() == [
        f"{name} grad norm {hooked}" for name, _, hooked in r.param_grad_norms]


@checks(hooks.hook_outputs)
def hooks_on_every_layer(r, run):
    assert run(r.code).splitlines() == [
        *(f"{e.phase:13} {e.layer} {e.received}" for e in r.events),
        f"hooks registered during the run: {r.hooks_registered} after: {r.hooks_left}",
        f"logits {[list(row) for row in r.logits]}"]
