"""Modules & hooks: parameters vs buffers, hook outputs, freezing, weight sharing, containers."""

import pandas as pd
import streamlit as st

from demos.modules import containers, freezing, hooks, params, sharing, traps
from demos.modules import figures as figs
from demos.modules.common import fmt, source_of
from demos.modules.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


def show_source(*objects) -> None:
    """Source of the classes or functions a demo runs, wrapped so long lines stay readable."""
    st.code(source_of(*objects), language="python", wrap_lines=True)


def verdict(ok: bool, text: str) -> None:
    """A one-line check the demo ran against torch: green when it holds."""
    (st.success if ok else st.warning)(text, icon=":material/check_circle:" if ok else ":material/warning:")


# ---- 1. parameters, buffers, plain attributes -----------------------------------------------------------------


def batchnorm_ui() -> tuple[int, float]:
    left, right = st.columns(2)
    steps = left.slider("train() steps before eval()", 1, params.MAX_TRAIN_STEPS, 5, key="modules_bn_steps",
                        bind="query-params")
    momentum = right.slider("BatchNorm momentum", 0.01, 1.0, 0.1, 0.01, key="modules_bn_momentum",
                            bind="query-params")
    return steps, momentum


def params_section() -> None:
    ui.prose(
        "An `nn.Module` tracks three kinds of tensors differently. **Parameters** (`nn.Parameter`, or any layer's "
        "weights) are trained: `parameters()` yields them, the optimizer updates them, `state_dict()` saves them, "
        "`.to()` moves them. **Buffers** (`register_buffer`) are state that is saved and moved but not trained, "
        "such as BatchNorm's running statistics; `persistent=False` keeps one out of the `state_dict`. A **plain "
        "tensor attribute** is invisible to all of it. Every cell below is read from torch for this model:"
    )
    show_source(params.Tagged)
    table = ui.compute(params.registry_table)
    frame = params.registry_frame(table)
    ui.table(frame, hide_index=True, width="stretch", height=35 * (len(frame) + 1) + 3)
    st.caption(f"No accelerator on this host, so `.to('{table.device}')` stands in for `.to('cuda')`: "
               "both go through the same `Module._apply` that moves parameters and buffers and nothing else.")
    ui.show_code(table.code, key="modules_registry_code", file_name="parameters_buffers.py")

    st.subheader("Correct vs trap: a constant the model needs")
    result = ui.compute(params.buffer_vs_attribute)
    good, bad = st.columns(2)
    with good.container(border=True):
        st.markdown("**`register_buffer`**")
        st.markdown(f"state_dict keys: `{list(result.buffer_keys)}`  \n`scale` after `.to()`: "
                    f"`{result.buffer_device}`")
        verdict(True, result.buffer_outcome)
    with bad.container(border=True):
        st.markdown("**plain attribute `self.scale = torch.tensor(...)`**")
        st.markdown(f"state_dict keys: `{list(result.attribute_keys)}` (lost on save)  \n`scale` after `.to()`: "
                    f"`{result.attribute_device}`")
        verdict(False, result.attribute_outcome)
    ui.show_code(result.code, key="modules_buffer_trap_code", file_name="buffer_vs_attribute.py")
    batchnorm_part()
    ui.trap_pair(ui.compute(traps.batchnorm_running_var), key="modules_trap_running_var")


@st.fragment  # its own key row: a change reruns this part alone
def batchnorm_part() -> None:
    st.subheader("BatchNorm's running statistics: updated in train(), read in eval()")
    with ui.key_controls("modules_bn"):
        steps, momentum = batchnorm_ui()
    with ui.input_errors():
        trace = ui.compute(params.batchnorm_stats, steps, momentum)
        ui.plot(ui.compute(figs.batchnorm_figure, trace), key="modules_bn_fig")
        ui.steps([
            "In `train()`, each forward normalizes with the **batch's** mean and variance, then updates "
            "`running_mean`/`running_var` and adds 1 to `num_batches_tracked`.",
            f"First step, channel 0: {params.momentum_formula(trace)}.",
            "In `eval()`, the layer normalizes with the running statistics and leaves them untouched: "
            f"they moved by {fmt(params.batchnorm_norm_check(trace))} over {params.EVAL_STEPS} eval steps, and "
            f"`num_batches_tracked` stayed at {trace.num_batches[-1]}.",
        ], key="modules_bn_steps_text")
        verdict(trace.eval_uses_running_stats,
                "Checked: every eval() output equals (x − running_mean) / √(running_var + eps) · weight + bias.")
        ui.show_code(trace.code, key="modules_bn_code", file_name="batchnorm_running_stats.py")


# ---- 2. hooks --------------------------------------------------------------------------------------------------


def network_ui() -> tuple[str, int, str, int]:
    a, b, c, d = st.columns([2, 2, 1, 1])
    channels = a.text_input("Conv channels per block (1–3 blocks of 1–16)", "4, 8", key="modules_channels",
                            bind="query-params")
    size = b.slider("Image size (pixels)", hooks.MIN_SIZE, hooks.MAX_SIZE, 32, 8, key="modules_size",
                    bind="query-params")
    pattern = c.selectbox("Synthetic images", hooks.PATTERNS, key="modules_pattern", bind="query-params")
    seed = d.number_input("Seed", 0, 9999, 0, key="modules_seed", bind="query-params")
    return channels, size, pattern, int(seed)


def layer_table(run) -> pd.DataFrame:
    return pd.DataFrame([{
        "layer": v.name, "type": v.kind, "input shape": str(v.in_shape), "output shape": str(v.out_shape),
        "mean": v.out_mean, "std": v.out_std, "fraction of zeros": v.zero_fraction,
        "‖grad_output‖": v.grad_output_norm, "‖grad_input‖": v.grad_input_norm,
        "hooked output == layer(hooked input)": v.matches_layer,
    } for v in run.layers])


def hooks_section() -> None:
    ui.prose(
        "Hooks let you watch or change a module without editing it. `register_forward_pre_hook(fn)` runs before "
        "`forward` and may return new inputs; `register_forward_hook(fn)` receives `(module, args, output)` and may "
        "return a new output; `register_full_backward_hook(fn)` receives `grad_input` and `grad_output`; "
        "`tensor.register_hook(fn)` receives a tensor's gradient and may return a new one. Each `register_*` "
        "returns a handle: `handle.remove()` is the only way to take the hook off. Below, every leaf layer of a "
        "small CNN is hooked four ways over one real forward and backward on seeded synthetic images."
    )
    with ui.key_controls("modules_net"):
        net = network_ui()
    with ui.input_errors():
        run = ui.compute(hooks.hook_outputs, *net)
        titles = tuple(f"image {i}" for i in range(len(run.images)))
        ui.plot(ui.compute(figs.images_figure, run.images, titles), key="modules_images_fig")
        st.subheader("Forward hooks: what every layer produced")
        ui.table(layer_table(run), hide_index=True, width="stretch")
        st.caption(f"{run.hooks_registered} hooks were registered for this run; after `handle.remove()` on each, "
                   f"{run.hooks_left} remain.")
        with ui.key_controls("modules_map_layer"):  # the later figures' key rows stay just above them
            conv_layer = st.selectbox("Feature maps of image 0 (one heatmap per channel) from",
                                      [name for name, _ in run.feature_maps], key="modules_map_layer",
                                      bind="query-params")
        if conv_layer in dict(run.feature_maps):
            ui.plot(ui.compute(figs.feature_maps_figure, run, conv_layer), key="modules_maps_fig")
        st.markdown("**Activation histograms** (what each forward hook received as `output`)")
        ui.plot(ui.compute(figs.histograms_figure, run), key="modules_hist_fig")

        st.subheader("Full backward hooks: gradient norms per layer")
        ui.plot(ui.compute(figs.grad_norms_figure, run), key="modules_grads_fig")
        for warning in run.warnings:
            st.info(f"torch warned while these hooks ran: “{warning}” The first conv's input does not require "
                    "grad, so its `grad_input` is `(None,)`.", icon=":material/info:")

        st.subheader("Hook firing order")
        st.caption("cyan ▶ pre-forward · green ● forward · olive ◆ tensor hook (`output.register_hook`) · "
                   "orange ■ full backward. Hover a marker for what the hook received.")
        ui.plot(ui.compute(figs.timeline_figure, run), key="modules_timeline_fig")
        with st.expander("Every hook call, in order"):
            ui.table(pd.DataFrame([e.__dict__ for e in run.events]), hide_index=True, width="stretch")
        ui.show_code(run.code, key="modules_hooks_code", file_name="hooks_every_layer.py")
        pre_hook_part(net)
        zero_channel_part(net, run)
        surgery_part(net)
    pileup_part()
    ui.trap_pair(ui.compute(traps.backward_hooks), key="modules_trap_hooks")


@st.fragment  # its own key row: a change reruns this part alone
def pre_hook_part(net) -> None:
    st.subheader("A forward pre-hook that changes the input")
    with ui.key_controls("modules_pre_kind"):
        kind = st.selectbox("The pre-hook on conv1 returns", hooks.PRE_HOOKS, key="modules_pre_kind",
                            format_func=lambda k: {"flip": "the image flipped left-right", "invert": "1 − image",
                                                   "grayscale": "the image in grayscale"}[k], bind="query-params")
    effect = ui.compute(hooks.pre_hook_effect, *net, kind)
    titles = tuple(f"conv1 received image {i}" for i in range(len(effect.images_seen)))
    ui.plot(ui.compute(figs.images_figure, effect.images_seen, titles), key="modules_pre_fig")
    ui.table(pd.DataFrame({"logits without hook": [str([round(v, 4) for v in r]) for r in effect.logits_plain],
                               "logits with pre-hook": [str([round(v, 4) for v in r]) for r in effect.logits_hooked]}),
                 hide_index=True, width="stretch")
    verdict(effect.equals_transformed_input,
            "Checked: model(x) with the pre-hook equals model(transformed x) without it, bit for bit.")
    ui.show_code(effect.code, key="modules_pre_code", file_name="forward_pre_hook.py")


@st.fragment
def zero_channel_part(net, run) -> None:
    st.subheader("A forward hook that zeroes a channel, and what happens downstream")
    with ui.key_controls("modules_zero"):
        on, left, right = st.columns([1, 2, 2], vertical_alignment="bottom")
        enabled = on.toggle("Hook registered", True, key="modules_zero_on", bind="query-params")
        layers = hooks.conv_names(run.channels)
        layer = left.selectbox("Layer", layers, key="modules_zero_layer", bind="query-params")
        width = run.channels[layers.index(layer)]  # only channels this layer has can be picked
        channel = right.number_input(f"Channel to zero (0 to {width - 1})", 0, width - 1, 0,
                                     key="modules_zero_channel", bind="query-params")
    with ui.input_errors():
        effect = ui.compute(hooks.zero_channel_effect, *net, layer, int(channel), enabled)
        ui.plot(ui.compute(figs.channel_effect_figure, effect), key="modules_zero_fig")
        if not effect.enabled:
            st.markdown("With no hook registered every layer's output is unchanged: all bars are 0.")
            return
        st.markdown(f"The hooked layer (red) changes where channel {effect.channel} was; every later layer inherits "
                    f"the change. Max |value| left in that channel: **{effect.zeroed_max_abs:g}**.")
        verdict(effect.equals_zeroed_weights, f"Checked: the hooked logits equal those of the same model with "
                                               f"filter {effect.channel} of {effect.layer} (weight and bias) set "
                                               "to zero and no hook.")
        ui.show_code(effect.code, key="modules_zero_code", file_name="forward_hook_zero_channel.py")


@st.fragment
def surgery_part(net) -> None:
    st.subheader("Tensor hooks: gradient surgery")
    st.markdown("`register_hook` on the last conv's output edits the gradient flowing back through it. Layers "
                "before it see the edited gradient; the classifier after it does not.")
    with ui.key_controls("modules_surgery"):
        on, left, right = st.columns([1, 2, 2], vertical_alignment="bottom")
        enabled = on.toggle("Hook registered", True, key="modules_surgery_on", bind="query-params")
        mode = left.radio("Edit", hooks.SURGERY_MODES, horizontal=True, key="modules_surgery_mode",
                          bind="query-params",
                          format_func=lambda m: {"scale": "scale by a factor", "clip": "clip to ±threshold"}[m])
        value = right.text_input("Factor (−100…100) or threshold (0…100]", "0.5", key="modules_surgery_value",
                                 bind="query-params")
    with ui.input_errors():
        result = ui.compute(hooks.grad_surgery, *net, mode, value, enabled)
        ui.plot(ui.compute(figs.surgery_figure, result), key="modules_surgery_fig")
        a, b = st.columns(2)
        a.metric("‖gradient at the hooked tensor‖", fmt(result.tensor_grad_norm_hooked),
                 f"{result.tensor_grad_norm_hooked - result.tensor_grad_norm_plain:+.3g} vs no hook",
                 delta_color="off", delta_arrow="off")
        b.metric("max |gradient| at the hooked tensor", fmt(result.tensor_grad_max_hooked),
                 f"{result.tensor_grad_max_hooked - result.tensor_grad_max_plain:+.3g} vs no hook",
                 delta_color="off", delta_arrow="off")
        if result.enabled:
            verdict(result.verified, "Checked: every parameter's .grad equals what torch.autograd.grad gives when "
                                     "the edited gradient is pushed back by hand, with no hook.")
        else:
            verdict(result.verified, "No hook registered: every .grad is bit-identical to the plain run.")
        ui.show_code(result.code, key="modules_surgery_code", file_name="tensor_hook_surgery.py")


@st.fragment
def pileup_part() -> None:
    st.subheader("Correct vs trap: hooks pile up when registered on every call")
    with ui.key_controls("modules_calls"):
        calls = st.slider("Calls", 1, hooks.MAX_CALLS, 5, key="modules_calls", bind="query-params")
    with ui.input_errors():
        pile = ui.compute(hooks.hook_pileup, calls)
        ui.plot(ui.compute(figs.pileup_figure, pile), key="modules_pileup_fig")
        good, bad = st.columns(2)
        with good.container(border=True):
            show_source(hooks.predict_clean)
            verdict(True, f"Call {calls} fired the hook {pile.fires_correct[-1]} time; "
                          f"{pile.registered_correct[-1]} hooks left registered.")
        with bad.container(border=True):
            show_source(hooks.predict_leaky)
            verdict(False, f"Call {calls} fired the hook {pile.fires_trap[-1]} times; "
                           f"{pile.registered_trap[-1]} hooks left registered (memory and time grow with every call).")
        ui.show_code(pile.code, key="modules_pileup_code", file_name="hook_pile_up.py")


# ---- 3. freezing ---------------------------------------------------------------------------------------------


def freeze_ui() -> tuple[tuple[str, ...], str]:
    left, right = st.columns([3, 1])
    frozen = left.multiselect("Freeze (requires_grad_(False))", freezing.LAYERS, default=["stem", "bn"],
                              key="modules_frozen", bind="query-params", max_selections=len(freezing.LAYERS) - 1,
                              help="At most all but one: with every layer frozen there is nothing to train.")
    optimizer = right.selectbox("Optimizer", freezing.OPTIMIZERS, key="modules_optimizer", bind="query-params")
    return tuple(frozen), optimizer


def freezing_section() -> None:
    ui.prose(
        "Freezing means `requires_grad_(False)` on the parameters you keep fixed: autograd then leaves their "
        "`.grad` as `None`, and optimizers skip parameters without a gradient. Pass only the trainable ones to "
        "the optimizer so its param groups say what is trained. Pick layers and run one real step:"
    )
    show_source(freezing.FineTuneNet)
    with ui.key_controls("modules_freeze"):
        frozen, optimizer = freeze_ui()
    with ui.input_errors():
        step = ui.compute(freezing.freeze_step, frozen, optimizer)
        ui.plot(ui.compute(figs.freeze_figure, step), key="modules_freeze_fig")
        ui.table(pd.DataFrame([{
            "parameter": p.name, "requires_grad": p.requires_grad, ".grad is None": p.grad_is_none,
            "‖grad‖": p.grad_norm, "‖change‖": p.change_norm, "bit-identical after step": p.bit_identical,
        } for p in step.params]), hide_index=True, width="stretch")
        st.markdown("**What the optimizer's param groups hold**")
        ui.table(groups_frame(step.groups), hide_index=True, width="stretch")
        if "bn" in step.frozen:
            st.info(f"BatchNorm is frozen, yet its running_mean moved by {fmt(step.bn_running_mean_change)}: "
                    "running statistics are buffers updated by forward in train() mode, not by the optimizer. "
                    "Call `.eval()` on a frozen BatchNorm to keep them fixed.", icon=":material/info:")
        ui.show_code(step.code, key="modules_freeze_code", file_name="freeze_layers.py")

    st.subheader("eval() does not freeze")
    result = ui.compute(freezing.eval_vs_freeze)
    columns = ["after one step", "model.eval()", "backbone requires_grad_(False)"]
    ui.table(pd.DataFrame(result.rows, columns=columns), hide_index=True, width="stretch")
    st.markdown("`eval()` switches behaviour (dropout off, BatchNorm reads its running statistics); gradients and "
                "updates go on. `requires_grad_(False)` stops updates but leaves dropout and the running statistics "
                "active. Fine-tuning a frozen backbone usually wants both.")
    ui.show_code(result.code, key="modules_eval_code", file_name="eval_vs_freeze.py")
    late_freeze_part()
    group_lrs_part()


@st.fragment
def late_freeze_part() -> None:
    st.subheader("Correct vs trap: freezing after training has started")
    with ui.key_controls("modules_late_optimizer"):  # the comparison's own row, in place above it
        late_optimizer = st.selectbox("Optimizer for this comparison", freezing.OPTIMIZERS, index=1,
                                      key="modules_late_optimizer", bind="query-params")
    late = ui.compute(freezing.late_freeze, late_optimizer)
    good, bad = st.columns(2)
    with good.container(border=True):
        st.markdown("**`opt.zero_grad()`** (set_to_none=True, the default): the frozen stem's `.grad` is None")
        verdict(late.change_set_to_none == 0, f"stem.weight moved by {fmt(late.change_set_to_none)} in the next step.")
    with bad.container(border=True):
        st.markdown("**`opt.zero_grad(set_to_none=False)`**: the frozen stem's `.grad` is a zero tensor")
        verdict(late.change_zeroed == 0, f"stem.weight moved by {fmt(late.change_zeroed)} in the next step"
                + (" — momentum / Adam state and weight decay still act on a zero gradient." if late.change_zeroed
                   else " — plain SGD leaves it alone; pick SGD + momentum or AdamW to see it move."))
    ui.show_code(late.code, key="modules_late_code", file_name="late_freeze.py")


@st.fragment
def group_lrs_part() -> None:
    st.subheader("Per-group learning rates for fine-tuning")
    with ui.key_controls("modules_lrs"):
        lr_text = st.text_input("Learning rates: backbone, head (each in (0, 10])", "0.01, 0.1", key="modules_lrs",
                                bind="query-params")
    with ui.input_errors():
        groups = ui.compute(freezing.per_group_lrs, lr_text)
        ui.plot(ui.compute(figs.group_lr_figure, groups), key="modules_lr_fig")
        ui.table(groups_frame(groups.groups), hide_index=True, width="stretch")
        verdict(groups.verified, "Checked: with plain SGD each parameter moved by exactly −lr · grad of its own "
                                 "group.")
        ui.show_code(groups.code, key="modules_lr_code", file_name="per_group_lr.py")


def groups_frame(groups) -> pd.DataFrame:
    return pd.DataFrame([{"group": g.index, "lr": g.lr, "weight_decay": g.weight_decay,
                          "parameters": len(g.names), "names": ", ".join(g.names)} for g in groups])


# ---- 4. weight sharing -----------------------------------------------------------------------------------------


def tying_ui() -> tuple[int, int, int]:
    a, b, c = st.columns(3)
    vocab = a.slider("Vocabulary size", sharing.MIN_VOCAB, sharing.MAX_VOCAB, 50, key="modules_vocab",
                     bind="query-params")
    dim = b.slider("Embedding size", sharing.MIN_DIM, sharing.MAX_DIM, 16, key="modules_dim", bind="query-params")
    steps = c.slider("SGD steps", 1, sharing.MAX_STEPS, 10, key="modules_tie_steps", bind="query-params")
    return vocab, dim, steps


def sharing_section() -> None:
    ui.prose(
        "Language models often use one matrix for the input embedding and the output projection. Tying means "
        "**assigning the same Parameter object** to both modules: one tensor, registered under two names."
    )
    show_source(sharing.TinyLM)
    with ui.key_controls("modules_tying"):
        vocab, dim, steps = tying_ui()
    with ui.input_errors():
        t = ui.compute(sharing.weight_tying, vocab, dim, steps)
        a, b, c = st.columns(3)
        a.metric("out.weight is embed.weight", str(t.same_object), f"id {t.ids[0]} / {t.ids[1]}",
                 delta_color="off", delta_arrow="off")
        b.metric("parameters() numbers, tied", f"{t.count_tied:,}", f"untied: {t.count_untied:,}",
                 delta_color="off", delta_arrow="off")
        c.metric("state_dict keys over one storage", len(t.state_dict_keys), f"same storage: {t.same_storage}",
                 delta_color="off", delta_arrow="off")
        st.markdown(f"`named_parameters()` lists `{list(t.names_dedup)}`; with `remove_duplicate=False`: "
                    f"`{list(t.names_all)}`. `state_dict()` keeps both keys `{list(t.state_dict_keys)}`, so a "
                    "checkpoint loads into tied and untied models alike.")
        ui.steps([
            f"Untied copy with the same values: the embedding's gradient has norm {fmt(t.grad_embed_use)}, "
            f"the projection's {fmt(t.grad_out_use)}.",
            f"Tied: one `.grad`, norm {fmt(t.grad_tied)}: autograd summed both uses into it.",
            f"max |tied grad − (embedding grad + projection grad)| = {t.grad_max_diff:.3g}.",
        ], key="modules_tie_steps_text")
        verdict(t.grad_max_diff <= 1e-5, "Checked: the tied gradient equals the sum of the untied copy's two "
                                         "gradients.")
        st.subheader("Correct vs trap: copying the weight instead of tying it")
        good, bad = st.columns(2)
        with good:
            show_source(sharing.TinyLM.__init__)  # tie=True: one Parameter
        with bad:
            show_source(sharing.copied_not_tied)  # a second Parameter
        ui.plot(ui.compute(figs.drift_figure, t), key="modules_drift_fig")
        st.markdown(f"The copy starts equal but is a second Parameter ({t.count_copied:,} numbers, like untied): "
                    f"each gets its own gradient, and after {steps} steps they are "
                    f"{fmt(t.drift_copied[-1])} apart. The tied pair stays at {fmt(t.drift_tied[-1])}.")
        ui.show_code(t.code, key="modules_tie_code", file_name="weight_tying.py")


# ---- 5. containers -------------------------------------------------------------------------------------------


def containers_ui() -> tuple[int, int, str]:
    """The layers and the ModuleDict's heads: every demo of the tab reads them, and the module tree shows them all."""
    a, b, c = st.columns(3)
    n_layers = a.slider("Layers", 1, containers.MAX_LAYERS, 3, key="modules_layers", bind="query-params")
    width = b.slider("Width", containers.MIN_WIDTH, containers.MAX_WIDTH, 8, key="modules_width",
                     bind="query-params")
    heads_text = c.text_input("Head names (1–6 identifiers)", "cls, box", key="modules_heads", bind="query-params")
    return n_layers, width, heads_text


def containers_section() -> None:
    ui.prose(
        "`nn.Module` registers a submodule when you assign a Module (or a container of Modules) to an attribute. "
        "A plain Python list is not a Module, so layers kept in one are never registered."
    )
    with ui.key_controls("modules_containers"):
        n_layers, width, heads_text = containers_ui()
    with ui.input_errors():
        st.subheader("Correct vs trap: nn.ModuleList vs a plain list")
        show_source(containers.ListNet)
        lists = ui.compute(containers.list_vs_modulelist, n_layers, width)
        ui.table(pd.DataFrame(lists.rows, columns=["", "plain list (trap)", "nn.ModuleList"]), hide_index=True,
                     width="stretch")
        st.markdown("The plain list's layers even get a `.grad` (autograd follows the computation), but the "
                    "optimizer never saw them, so they do not change; they are not saved and not moved.")
        ui.show_code(lists.code, key="modules_lists_code", file_name="plain_list_vs_modulelist.py")

        st.subheader("nn.Sequential vs nn.ModuleList, and nn.ParameterList")
        seq = ui.compute(containers.sequential_vs_modulelist, n_layers, width)
        left, right = st.columns(2)
        with left.container(border=True):
            st.markdown("**nn.Sequential**: order is the forward")
            verdict(seq.sequential_equals_loop, "seq(x) equals the layers applied in order.")
            st.markdown(f"`seq[0]` → `{seq.first_item}`  \n`seq[1:]` → a `{seq.slice_type}` of {seq.slice_len} "
                        "layers")
        with right.container(border=True):
            st.markdown("**nn.ModuleList**: registers, does not compose")
            verdict(False, f"mlist(x) → {seq.modulelist_call}")
            verdict(seq.modulelist_loop_equals, "Looping `for layer in mlist` gives the same output.")
        st.markdown(f"`nn.ParameterList` of {n_layers} Parameters registers **{seq.parameterlist_count}**; a plain "
                    f"list of the same Parameters registers **{seq.plain_parameter_list_count}**.")
        ui.show_code(seq.code, key="modules_seq_code", file_name="sequential_vs_modulelist.py")

        st.subheader("nn.ModuleDict: heads by name")
        heads = ui.compute(containers.module_dict_demo, heads_text, width)
        ui.table(pd.DataFrame(heads.rows, columns=["head", "state_dict keys", "output shape", "parameters"]),
                     hide_index=True, width="stretch")
        ui.show_code(heads.code, key="modules_heads_code", file_name="module_dict.py")

        st.subheader("The module tree named_modules() walks")
        tree = ui.compute(containers.module_tree, n_layers, width, heads_text)
        ui.graph(ui.compute(figs.tree_dot, tree))
        st.caption("Folders: containers · boxes: layers · ellipses: ParameterList entries · red dashed: a layer in "
                   f"a plain list, absent from named_modules() ({len(tree.named_modules)} modules found).")
        ui.show_code(tree.code, key="modules_tree_code", file_name="module_tree.py")


ui.page_header("modules")
ui.prose("Every table and figure below comes from a real module running in PyTorch when you open the tab. "
         "Only the open tab is computed.")
ui.sections("modules", "modules_tab", {
    "Parameters & buffers": params_section, "Hooks": hooks_section, "Freezing": freezing_section,
    "Weight sharing": sharing_section, "Containers": containers_section,
})
ui.interview_corner("modules", QUESTIONS)
