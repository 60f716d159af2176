"""Oracle tests: every number on the Modules page equals what torch reports when asked directly."""

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.modules import containers, freezing, hooks, params, sharing
from demos.modules.common import target_device
from demos.modules.params import Tagged, plain_tensor_attributes

# ---- parameters, buffers, attributes ----


def test_registry_table_matches_torch():
    table = params.registry_table(seed=0)
    model = Tagged()
    rows = {r.name: r for r in table.rows}
    param_names = [n for n, _ in model.named_parameters()]
    buffer_names = [n for n, _ in model.named_buffers()]
    assert [r.name for r in table.rows if r.kind == "parameter"] == param_names
    assert [r.name for r in table.rows if r.kind.startswith("buffer")] == buffer_names
    assert [r.name for r in table.rows if r.kind == "plain attribute"] == ["temperature"]
    assert table.state_dict_keys == tuple(model.state_dict())
    moved = copy.deepcopy(model).to(target_device())
    for name, row in rows.items():
        tensor = moved
        for part in name.split("."):
            tensor = getattr(tensor, part)
        assert row.device_after_to == str(tensor.device)
        assert row.in_parameters == (name in param_names)
        assert row.in_state_dict == (name in model.state_dict())
        assert row.in_optimizer == (name in param_names)
    assert rows["last_logits"].kind == "buffer (persistent=False)" and not rows["last_logits"].in_state_dict
    assert rows["temperature"].requires_grad and not rows["temperature"].changed_by_step
    assert rows["temperature"].device_after_to == "cpu"
    assert all(rows[n].changed_by_step for n in param_names)
    assert not rows["class_weight"].changed_by_step and rows["bn.running_mean"].changed_by_step


def test_plain_attributes_are_found_in_submodules_too():
    model = nn.Sequential(nn.Linear(2, 2))
    model[0].extra = torch.ones(1)
    assert [n for n, _ in plain_tensor_attributes(model)] == ["0.extra"]


def test_buffer_vs_attribute_outcomes():
    r = params.buffer_vs_attribute()
    assert r.buffer_keys == ("scale",) and r.attribute_keys == ()
    assert r.buffer_device.startswith(target_device()) and r.attribute_device == "cpu"
    assert r.buffer_outcome.startswith("forward works") and r.attribute_outcome.startswith("RuntimeError")


@pytest.mark.parametrize("steps, momentum", [(5, 0.1), (1, 1.0), (12, 0.37)])
def test_batchnorm_running_mean_follows_the_momentum_formula(steps, momentum):
    trace = params.batchnorm_stats(steps, momentum, seed=3)
    torch.manual_seed(3)
    bn = nn.BatchNorm1d(3, momentum=momentum)
    mean, std = torch.tensor(params.TRUE_MEAN), torch.tensor(params.TRUE_STD)
    expected = torch.zeros(3)
    for step in range(steps + params.EVAL_STEPS):
        x = torch.randn(16, 3) * std + mean
        if step < steps:
            expected = (1 - momentum) * expected + momentum * x.mean(0)
        assert torch.allclose(torch.tensor(trace.running_means[step + 1]), expected, atol=1e-5)
    assert trace.num_batches == tuple(range(steps + 1)) + (steps,) * params.EVAL_STEPS
    assert trace.eval_uses_running_stats
    assert params.batchnorm_norm_check(trace) == 0.0
    del bn


@pytest.mark.parametrize("steps, momentum", [(0, 0.1), (21, 0.1), (5, 0.0), (5, 1.5)])
def test_batchnorm_limits(steps, momentum):
    with pytest.raises(InputError):
        params.batchnorm_stats(steps, momentum)


# ---- hooks ----


def _manual_forward(channels, size, pattern, seed):
    """Each leaf applied by hand, no hooks: name -> (input, output), plus the logits and loss."""
    model, x, target = hooks.build(channels, size, pattern, seed)
    outs, h = {}, x
    for name, layer in hooks.leaf_layers(model):
        out = layer(h)
        out.retain_grad()
        outs[name] = (h, out)
        h = out
    loss = F.cross_entropy(h, target)
    loss.backward()
    return model, x, outs, h


@pytest.mark.parametrize("channels_text, size, pattern, seed", [("4, 8", 32, "disc", 0), ("3", 16, "checker", 5),
                                                               ("2, 3, 5", 24, "stripes", 1)])
def test_hook_outputs_equal_the_layers_outputs(channels_text, size, pattern, seed):
    run = hooks.hook_outputs(channels_text, size, pattern, seed)
    channels = hooks.parse_channels(channels_text)
    _, x, outs, logits = _manual_forward(channels, size, pattern, seed)
    assert [v.name for v in run.layers] == list(outs)
    for view in run.layers:
        inp, out = outs[view.name]
        assert view.in_shape == tuple(inp.shape) and view.out_shape == tuple(out.shape)
        assert view.out_mean == pytest.approx(float(out.detach().mean()), rel=1e-5, abs=1e-7)
        counts, _ = torch.histogram(out.detach().flatten(), bins=hooks.BINS)
        assert view.hist_counts == tuple(int(c) for c in counts)
        assert view.matches_layer
        assert view.grad_output_norm == pytest.approx(float(out.grad.norm()), rel=1e-5)
    for name, maps in run.feature_maps:
        assert np.array_equal(maps, outs[name][1][0].detach().numpy())
    assert torch.allclose(torch.tensor(run.logits), logits.detach())
    assert np.array_equal(run.images, hooks.to_uint8(x))
    assert run.hooks_registered == 3 * len(outs) and run.hooks_left == 0


def test_hook_events_fire_in_forward_then_reverse_order():
    run = hooks.hook_outputs()
    names = [v.name for v in run.layers]
    forward = [(e.phase, e.layer) for e in run.events if e.phase in ("pre-forward", "forward")]
    assert forward == [(p, n) for n in names for p in ("pre-forward", "forward")]
    backward = [e.layer for e in run.events if e.phase == "full-backward"]
    assert backward == names[::-1]
    assert sorted(e.layer for e in run.events if e.phase == "tensor") == sorted(names)
    assert [e.order for e in run.events] == list(range(len(run.events)))


@pytest.mark.parametrize("kind", hooks.PRE_HOOKS)
def test_pre_hook_equals_running_on_the_transformed_input(kind):
    effect = hooks.pre_hook_effect(kind=kind)
    model, x, _ = hooks.build((4, 8), 32, "disc", 0)
    with torch.no_grad():
        direct = model(hooks.transform_input(kind, x))
        plain = model(x)
    assert torch.equal(torch.tensor(effect.logits_hooked), direct)
    assert torch.equal(torch.tensor(effect.logits_plain), plain)
    assert effect.equals_transformed_input


@pytest.mark.parametrize("layer, channel", [("conv1", 0), ("conv2", 7)])
def test_zeroed_channel_matches_zeroed_filter(layer, channel):
    effect = hooks.zero_channel_effect(layer=layer, channel=channel)
    model, x, _ = hooks.build((4, 8), 32, "disc", 0)
    conv = getattr(model.features, layer)
    with torch.no_grad():
        conv.weight[channel] = 0
        conv.bias[channel] = 0
        direct = model(x)
    assert torch.allclose(torch.tensor(effect.logits_hooked), direct, atol=1e-6)
    assert effect.zeroed_max_abs == 0.0
    change = dict(effect.relative_change)
    names = list(change)
    hooked_at = names.index(f"features.{layer}")
    assert all(change[n] == 0 for n in names[:hooked_at])
    assert all(change[n] > 0 for n in names[hooked_at:])


def test_zero_channel_without_hook_changes_nothing():
    effect = hooks.zero_channel_effect(enabled=False)
    assert all(c == 0 for _, c in effect.relative_change)
    assert effect.logits_plain == effect.logits_hooked


def test_zero_channel_refuses_missing_channel():
    with pytest.raises(InputError, match="channel must be between 0 and 3"):
        hooks.zero_channel_effect(channel=4)
    with pytest.raises(InputError):
        hooks.zero_channel_effect(channels_text="4", layer="conv2")


def test_scale_hook_scales_only_upstream_gradients():
    r = hooks.grad_surgery(mode="scale", value_text="-3")
    for name, plain, hooked in r.param_grad_norms:
        factor = 3.0 if name.startswith("features.") else 1.0
        assert hooked == pytest.approx(factor * plain, rel=1e-4)
    assert r.tensor_grad_norm_hooked == pytest.approx(3 * r.tensor_grad_norm_plain, rel=1e-5)
    assert r.verified


def test_clip_hook_bounds_the_gradient_and_is_verified():
    r = hooks.grad_surgery(mode="clip", value_text="0.002")
    assert r.tensor_grad_max_hooked <= 0.002 + 1e-9 < r.tensor_grad_max_plain
    assert r.verified
    assert hooks.grad_surgery(enabled=False).verified


def test_hooks_pile_up_unless_removed():
    p = hooks.hook_pileup(6)
    assert p.fires_trap == (1, 2, 3, 4, 5, 6) and p.registered_trap == (1, 2, 3, 4, 5, 6)
    assert p.fires_correct == (1,) * 6 and p.registered_correct == (0,) * 6


@pytest.mark.parametrize("args", [dict(image_size=7), dict(image_size=65),
                                  dict(pattern="noise"), dict(channels_text="4, nope")])
def test_hook_inputs_are_validated(args):
    with pytest.raises(InputError):
        hooks.hook_outputs(**args)


# ---- freezing ----


@pytest.mark.parametrize("frozen", [(), ("stem", "bn"), ("stem", "bn", "body"), ("head",)])
@pytest.mark.parametrize("optimizer", freezing.OPTIMIZERS)
def test_frozen_parameters_are_bit_identical(frozen, optimizer):
    step = freezing.freeze_step(frozen, optimizer)
    for p in step.params:
        is_frozen = p.layer in frozen
        assert p.requires_grad == (not is_frozen)
        assert p.grad_is_none == is_frozen
        if is_frozen:
            assert p.bit_identical
        elif p.grad_norm > 1e-6:  # a bias right before BatchNorm gets a ~0 gradient: BN removes the mean
            assert not p.bit_identical
    held = [n for g in step.groups for n in g.names]
    assert held == [p.name for p in step.params if p.layer not in frozen]
    assert step.bn_running_mean_change > 0  # train() forward updates BatchNorm statistics either way


def test_freezing_everything_or_unknown_layers_is_refused():
    with pytest.raises(InputError):
        freezing.freeze_step(freezing.LAYERS)
    with pytest.raises(InputError):
        freezing.freeze_step(("trunk",))
    with pytest.raises(InputError):
        freezing.freeze_step((), "Adam?")


@pytest.mark.parametrize("optimizer, moves", [("SGD", False), ("SGD + momentum", True), ("AdamW", True)])
def test_late_freeze_moves_only_with_zero_grads_and_state(optimizer, moves):
    r = freezing.late_freeze(optimizer)
    assert r.change_set_to_none == 0
    assert (r.change_zeroed > 0) == moves


def test_eval_does_not_freeze():
    rows = {label: (a, b) for label, a, b in freezing.eval_vs_freeze().rows}
    assert rows["model.training"] == ("False", "True")
    assert rows["stem.weight.grad after backward"][0].startswith("tensor")
    assert rows["stem.weight.grad after backward"][1] == "None"
    assert float(rows["|change| of stem.weight after opt.step()"][0]) > 0
    assert float(rows["|change| of stem.weight after opt.step()"][1]) == 0
    assert rows["two forward passes on the same input"] == ("same", "different (dropout active)")


def test_per_group_learning_rates():
    g = freezing.per_group_lrs("0.003, 0.5")
    assert [grp.lr for grp in g.groups] == [0.003, 0.5]
    assert g.groups[1].names == ("head.weight", "head.bias")
    for name, group, ratio, lr in g.effective:
        assert group == (1 if name.startswith("head") else 0)
        assert ratio == pytest.approx(lr, rel=1e-3)
    assert g.verified


# ---- weight sharing ----


@pytest.mark.parametrize("vocab, dim", [(50, 16), (7, 3), (300, 64)])
def test_tied_gradient_equals_untied_sum(vocab, dim):
    t = sharing.weight_tying(vocab, dim, steps=3, seed=2)
    assert t.same_object and t.ids[0] == t.ids[1] and t.same_storage
    assert t.count_tied == vocab * dim and t.count_untied == t.count_copied == 2 * vocab * dim
    assert t.names_dedup == ("embed.weight",) and t.names_all == ("embed.weight", "out.weight")
    assert t.state_dict_keys == ("embed.weight", "out.weight")
    # independently: one leaf used twice vs two leaves with the same values
    torch.manual_seed(2)
    w = sharing.TinyLM(vocab, dim).embed.weight.detach()
    x, y = sharing.tokens(vocab, 2)
    tied = w.clone().requires_grad_()
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    for emb, out in ((tied, tied), (a, b)):
        logits = F.linear(torch.tanh(F.embedding(x, emb)), out)
        F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1)).backward()
    assert torch.allclose(tied.grad, a.grad + b.grad, atol=1e-6)
    assert t.grad_tied == pytest.approx(float(tied.grad.norm()), rel=1e-5)
    assert t.grad_embed_use == pytest.approx(float(a.grad.norm()), rel=1e-5)
    assert t.grad_out_use == pytest.approx(float(b.grad.norm()), rel=1e-5)
    assert t.grad_max_diff <= 1e-6


def test_copy_drifts_and_tie_does_not():
    t = sharing.weight_tying(steps=5)
    assert t.drift_tied == (0.0,) * 5
    assert all(d > 0 for d in t.drift_copied)


@pytest.mark.parametrize("vocab, dim, steps", [(3, 16, 1), (1001, 16, 1), (50, 129, 1), (50, 16, 21)])
def test_tying_limits(vocab, dim, steps):
    with pytest.raises(InputError):
        sharing.weight_tying(vocab, dim, steps)


# ---- containers ----


@pytest.mark.parametrize("n, width", [(3, 8), (1, 2), (8, 64)])
def test_container_counts_match(n, width):
    r = containers.list_vs_modulelist(n, width)
    assert r.param_tensors == (2, 2 * n + 2)
    assert r.numel == (width + 1, n * (width * width + width) + width + 1)
    for model, count in ((containers.ListNet(n, width, False), 2), (containers.ListNet(n, width, True), 2 * n + 2)):
        assert len(list(model.parameters())) == count == len(model.state_dict())
    assert r.first_layer_change[0] == 0 and r.first_layer_change[1] > 0
    rows = {label: (a, b) for label, a, b in r.rows}
    plain_device, registered_device = rows[f"layers[0].weight device after .to('{target_device()}')"]
    assert plain_device == "cpu" and registered_device.startswith(target_device())


def test_module_dict_rows():
    r = containers.module_dict_demo("cls, box, aux", width=5)
    model = containers.MultiHead(("cls", "box", "aux"), 5)
    assert [row[0] for row in r.rows] == ["cls", "box", "aux"]
    for i, (name, keys, shape, count) in enumerate(r.rows):
        assert keys.split(", ") == [k for k in model.state_dict() if k.startswith(f"heads.{name}.")]
        assert shape == str((4, i + 1)) and count == 5 * (i + 1) + i + 1
    assert r.total_params == sum(p.numel() for p in model.parameters())


def test_sequential_vs_modulelist_facts():
    s = containers.sequential_vs_modulelist(4, 6)
    assert s.sequential_equals_loop and s.modulelist_loop_equals
    assert s.slice_type == "Sequential" and s.slice_len == 2 * 4 - 1
    assert s.modulelist_call.startswith("NotImplementedError")
    assert (s.parameterlist_count, s.plain_parameter_list_count) == (4, 0)


def test_module_tree_is_named_modules_plus_the_hidden_list():
    tree = containers.module_tree(3, 4, "a, b")
    model = containers.Zoo(3, 4, ("a", "b"))
    registered = [n.name for n in tree.nodes if n.kind in ("container", "layer")]
    assert registered == [n for n, _ in model.named_modules()] == list(tree.named_modules)
    assert [n.name for n in tree.nodes if n.kind == "parameter"] == [f"scales.{i}" for i in range(3)]
    assert [n.name for n in tree.nodes if n.kind == "unregistered"] == ["forgotten", "forgotten[0]"]
    own = dict(model.named_modules())
    for n in tree.nodes:
        if n.kind in ("container", "layer"):
            assert n.params == sum(p.numel() for p in own[n.name].parameters(recurse=False))
