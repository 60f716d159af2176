"""Training loop: the order of a step, its mistakes, optimizers, schedulers, losses, mixed precision, exact resume."""

import pandas as pd
import streamlit as st

from demos.shown import source
from demos.training import amp, losses, mistakes, optimizers, resume, schedulers, step
from demos.training.questions import QUESTIONS
from demos.training.traps import clip_before_unscale_trap
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

SLUG = "training-loop"
WALK_KEY = "tl_walk"  # the sub-step on screen, counted from 1; in the URL, so a link opens at "sub-step 6"


def side_by_side(left_title: str, left_code: str, right_title: str, right_code: str) -> None:
    """Correct code beside the trap: the source of two functions that ran for the figures above."""
    left, right = st.columns(2)
    with left:
        st.markdown(f":green[**{left_title}**]")
        st.code(left_code, language="python", wrap_lines=True)  # half width: long lines wrap instead of hiding
    with right:
        st.markdown(f":red[**{right_title}**]")
        st.code(right_code, language="python", wrap_lines=True)


# 1. One step, in order ------------------------------------------------------------------------------------------


WALK_LAST = step.MAX_ITERATIONS * len(step.SUBSTEPS)


def _move_walk(delta: int) -> None:
    st.session_state[WALK_KEY] = min(max(st.session_state.get(WALK_KEY, 1) + delta, 1), WALK_LAST)


def _reset_walk() -> None:
    st.session_state[WALK_KEY] = 1


def walk_ui():
    a, b, c, d = st.columns(4)
    optimizer = a.selectbox("Optimizer", step.WALK_OPTIMIZERS, index=1, key="tl_walk_opt", bind="query-params")
    lr = b.select_slider("Learning rate", (0.001, 0.005, 0.01, 0.05, 0.1, 0.5), value=0.05, key="tl_walk_lr",
                         bind="query-params")
    max_norm = c.select_slider("Clip max_norm", (0.01, 0.05, 0.1, 0.5, 1.0, 5.0), value=0.05, key="tl_walk_clip",
                               bind="query-params", help="clip_grad_norm_ rescales .grad when its norm is larger.")
    seed = d.number_input("Seed", 0, 10_000, 0, key="tl_walk_seed", bind="query-params")
    return optimizer, lr, max_norm, int(seed)


def walk_position() -> int:
    """The walk's buttons and the sub-step slider they move; returns the index of the sub-step shown (from 0)."""
    with st.container(horizontal=True, vertical_alignment="bottom"):
        st.button("Back", key="tl_walk_back", icon=":material/arrow_back:", on_click=_move_walk, args=(-1,))
        st.button("Next sub-step", key="tl_walk_next", icon=":material/arrow_forward:", type="primary",
                  on_click=_move_walk, args=(1,))
        st.button("Next iteration", key="tl_walk_iter", icon=":material/fast_forward:", on_click=_move_walk,
                  args=(len(step.SUBSTEPS),))
        st.button("Start over", key="tl_walk_reset", icon=":material/restart_alt:", on_click=_reset_walk)
        # no value=: the buttons set this key from their callbacks, and a default here would clash with that
        position = st.slider(f"Sub-step ({len(step.SUBSTEPS)} per iteration)", 1, WALK_LAST, key=WALK_KEY,
                             bind="query-params")
    return position - 1


def section_step() -> None:
    st.subheader("One step, in order")
    ui.prose(
        "A 2-D spiral classifier (2 → 6 → 6 → 2, tanh) on 64 points. Each press runs one more sub-step of the loop; "
        "the page replays every sub-step from the seed, so what you see is the live state after exactly that call. "
        "The heatmaps show `fc2.weight` (6×6), its `.grad` and the optimizer's state for it."
    )
    ui.steps([
        ui.compute(step.train_mode_note),
        "`optimizer.zero_grad()` — `.grad` of every parameter becomes `None` (the last step's gradient is gone).",
        "**forward** `out = model(x)` — activations computed and the autograd graph recorded.",
        "**loss** `loss_fn(out, y)` — one scalar; nothing else changes.",
        "`loss.backward()` — the graph is walked backwards; every parameter's `.grad` is filled, the graph freed.",
        "`clip_grad_norm_(params, max_norm)` — if the total norm exceeds max_norm, every `.grad` is rescaled.",
        "`optimizer.step()` — parameters move; the optimizer's state (momentum, `exp_avg`, `exp_avg_sq`) updates.",
        f"`scheduler.step()` — the learning rate for the next step is set (here `{step.SCHEDULER}`). Always after "
        "`optimizer.step()`.",
        "With float16 AMP the same order holds: forward and loss under `torch.autocast`, then "
        "`scaler.scale(loss).backward()`, `scaler.unscale_(optimizer)` before `clip_grad_norm_` (clipping scaled "
        "gradients would clip the wrong norm), `scaler.step(optimizer)` (skipped on inf/NaN), `scaler.update()`, "
        "then `scheduler.step()`.",
    ], key="tl_order_steps")
    with ui.settings("tl_walk", label="Optimizer, learning rate, clipping, seed"):
        optimizer, lr, max_norm, seed = walk_ui()
    with ui.key_controls("tl_walk"):  # the presenter steps through the loop with these
        index = walk_position()
    with ui.input_errors():
        r = ui.compute(step.walk, index, optimizer, lr, max_norm, seed)
        graph_col, state_col = st.columns([1, 3], gap="medium")
        with graph_col:
            # no fixed key: the graph is drawn afresh on each press, which the browser does several times faster
            # than redrawing it in place (measured), though its tools (25 KiB) are then sent again
            ui.graph(step.loop_dot(r))
        with state_col:
            m1, m2, m3, m4 = st.columns(4)
            m1.metric("Iteration", r.iteration + 1, help="Counted from 1, like the sub-step.")
            m2.metric("Loss", "—" if r.after.loss is None else f"{r.after.loss:.4f}")
            norm = r.after.grad_norm
            m3.metric("Grad norm (before clip)", "—" if norm is None else f"{norm:.4f}")
            m4.metric("Learning rate", f"{r.after.lr:.5g}", delta=_delta(r.before.lr, r.after.lr),
                      help=f"Set by {step.SCHEDULER}: each scheduler.step() multiplies it by {step.GAMMA:g}.")
            note = ""
            if r.substep == "clip_grad_norm_" and ".grad" not in r.changed:
                note = " (the gradient norm was already below max_norm)"
            changed = ", ".join(r.changed) if r.changed else "nothing visible"
            if r.before.lr != r.after.lr:
                note += (f" ({step.SCHEDULER} moved the learning rate {r.before.lr:.5g} → {r.after.lr:.5g}, "
                         f"× {step.GAMMA:g})")
            st.markdown(f"**Just ran: `{r.substep}`** — changed: {changed}{note}")
            ui.legend(step.WALK_LEGEND)
            ui.plot(ui.compute(step.state_figure, r), key="tl_walk_fig")
        # whole: an HTML table wraps its cells, so all six columns fit the page's width (the grid cut the last)
        ui.table(pd.DataFrame(step.parameter_table(r)), whole=True)
        ui.show_code(r.code, key="tl_walk_code", file_name="training_step.py")


def _delta(old: float, new: float) -> str | None:
    return None if old == new else f"{new - old:+.3g}"


# 2. Mistakes --------------------------------------------------------------------------------------------------


def mistakes_ui():
    """Steps and learning rate in the key row; the seed and the chart's choice of mistakes folded in settings."""
    keys, rest = ui.key_controls("tl_mis"), ui.settings("tl_mis", label="Seed and mistakes on the chart")
    a, b = keys.columns(2)
    steps = a.slider("Steps", mistakes.MIN_STEPS, mistakes.MAX_STEPS, 150, 10, key="tl_mis_steps", bind="query-params")
    lr = b.select_slider("Learning rate (SGD, momentum 0.9)", (0.01, 0.05, 0.1, 0.2, 0.5, 1.0), value=0.5,
                         key="tl_mis_lr", bind="query-params")
    seed = rest.number_input("Seed", 0, 10_000, 0, key="tl_mis_seed", bind="query-params")
    shown = rest.multiselect("Mistakes on the chart", mistakes.MISTAKES, default=list(mistakes.MISTAKES),
                             format_func=mistakes.VARIANTS.get, key="tl_mis_shown", bind="query-params")
    return steps, lr, int(seed), shown


def section_mistakes() -> None:
    st.subheader("Mistakes, executed beside the correct loop")
    ui.prose(
        "The same spiral classifier (with dropout and batch norm), the same data and seed, trained by the correct "
        "loop and by seven broken ones. Every curve below is a real run; every symptom sentence is measured from it. "
        "Several mistakes raise no error at all — the loss curve is the only witness."
    )
    steps, lr, seed, shown = mistakes_ui()
    with ui.input_errors():
        with st.spinner("Training the correct loop and seven broken ones…"):
            result = ui.compute(mistakes.mistakes, steps, lr, seed)
        ui.plot(ui.compute(mistakes.loss_figure, result, tuple(shown)), key="tl_mis_fig")
        correct = result.runs["correct"]
        st.table(pd.DataFrame([
            {"loop": mistakes.VARIANTS[v], "final loss": f"{run.losses[-1]:.4g}",
             "validation loss": f"{run.val_loss:.4g}", "measured symptom": mistakes.symptom(run, correct)}
            for v, run in result.runs.items()
        ]).set_index("loop"))
        mistake_focus_part(result)


@st.fragment  # its own key row: a change reruns this part alone
def mistake_focus_part(result) -> None:
    with ui.key_controls("tl_mis_focus"):  # the symptom figure's own row, in place above it
        focus = st.selectbox("Look closer at", mistakes.MISTAKES, format_func=mistakes.VARIANTS.get,
                             key="tl_mis_focus", bind="query-params")
    st.info(mistakes.symptom(result.runs[focus], result.runs["correct"]), icon=":material/troubleshoot:")
    if focus == "no_train_after_eval" and mistakes.why_eval_scores_better(result):
        st.caption(mistakes.why_eval_scores_better(result))
    ui.plot(ui.compute(mistakes.symptom_figure, result, focus), key="tl_mis_symptom")
    good, bad = mistakes.differing_source(focus)
    side_by_side("Correct (ran above)", good, f"{mistakes.VARIANTS[focus]} (ran above)", bad)
    ui.show_code(result.runs[focus].code, key="tl_mis_code", file_name=f"mistake_{focus}.py",
                 label="Show the full runnable script")


# 3. Optimizers ------------------------------------------------------------------------------------------------

LR_CHOICES = optimizers.LR_OPTIONS


def optimizer_ui():
    """Surface, steps and the extra optimizer in the key row; the hyperparameters folded in settings."""
    keys, rest = ui.key_controls("tl_opt"), ui.settings("tl_opt", label="Learning rates, momentum, betas, decay")
    a, b, c = keys.columns(3)
    surface = a.segmented_control("Surface", tuple(optimizers.SURFACES), default="ravine", required=True,
                                  key="tl_opt_surface", bind="query-params")
    surface = surface or "ravine"
    steps = b.slider("Steps", 10, optimizers.MAX_STEPS, 150, 10, key="tl_opt_steps", bind="query-params")
    extra = c.selectbox("Your extra optimizer", optimizers.EXTRA, key="tl_opt_extra", bind="query-params")
    defaults = optimizers.SURFACES[surface]
    a, b, c, d, e, f = rest.columns(6)
    sgd_lr = a.select_slider("SGD lr", LR_CHOICES, value=defaults["sgd_lr"], key=f"tl_opt_sgd_lr_{surface}",
                             bind="query-params")
    momentum = b.slider("Momentum", 0.0, 0.99, 0.9, 0.01, key="tl_opt_momentum", bind="query-params")
    adam_lr = c.select_slider("Adam lr", LR_CHOICES, value=defaults["adam_lr"], key=f"tl_opt_adam_lr_{surface}",
                              bind="query-params")
    beta1 = d.slider("beta1", 0.0, 0.99, 0.9, 0.01, key="tl_opt_beta1", bind="query-params")
    beta2 = e.select_slider("beta2", (0.9, 0.99, 0.999, 0.9999), value=0.999, key="tl_opt_beta2",
                            bind="query-params")
    wd = f.slider("Weight decay", 0.0, 2.0, 0.1, 0.05, key="tl_opt_wd", bind="query-params")
    return surface, steps, sgd_lr, momentum, adam_lr, beta1, beta2, wd, extra


def section_optimizers() -> None:
    st.subheader("Optimizers on a loss surface")
    ui.prose(
        "Each path is a real `torch.optim` optimizer stepping a 2-D point `p` (float64) from the same start: "
        "`zero_grad()`, `f(p).backward()`, `step()`. The **ravine** is steep across and flat along: plain SGD "
        "zig-zags across it, momentum builds speed along it, Adam rescales each coordinate. **Rosenbrock** has a "
        "curved valley with its minimum at (1, 1). RMSprop, Adagrad and Adadelta use multiples of the Adam lr "
        "(0.1×, 10×, 20×) so that one slider gives each a sensible step; the code panel shows them."
    )
    surface, steps, sgd_lr, momentum, adam_lr, beta1, beta2, wd, extra = optimizer_ui()
    with ui.input_errors():
        race_params = (surface, steps, sgd_lr, momentum, adam_lr, beta1, beta2, wd, extra)
        r = ui.compute(optimizers.race, *race_params)
        st.caption(f"f(x, y) = {optimizers.SURFACES[surface]['formula']}; contours of log10(1 + f).")
        left, right = st.columns([3, 2])
        with left:
            ui.plot(ui.compute(optimizers.surface_figure, r, r), key="tl_opt_fig")
        with right:
            ui.plot(ui.compute(optimizers.loss_curves_figure, r), key="tl_opt_loss")
        ui.table(pd.DataFrame([{"optimizer": t.name, "final x": t.xs[-1], "final y": t.ys[-1],
                                "final loss": t.losses[-1], "diverged at": t.diverged_at} for t in r.runs]),
                 width="stretch", column_config={
                     c: st.column_config.NumberColumn(format="%.4g") for c in ("final x", "final y", "final loss")})
        ui.show_code(r.code, key="tl_opt_code", file_name="optimizers_on_a_surface.py")

        st.markdown("##### Adam's L2 penalty vs AdamW's decoupled weight decay")
        ui.prose(
            "Same number, `weight_decay`, two different updates. **Adam** adds `wd·θ` to the gradient, so the decay "
            "is divided by `√v` like everything else: where gradients are large, the decay almost vanishes. "
            "**AdamW** shrinks `θ ← θ·(1 − lr·wd)` outside the adaptive step. Below: the first step computed by "
            "torch and by the written-out rule, then the full paths."
        )
        d = ui.compute(optimizers.decay_compare, surface, steps, adam_lr, beta1, beta2, wd)
        rows = [{"update": n, "x after step 1 (torch)": d.first_step[n][0], "y (torch)": d.first_step[n][1],
                 "x by the formula": d.first_step_formula[n][0], "y by the formula": d.first_step_formula[n][1]}
                for n in d.first_step]
        ui.table(pd.DataFrame(rows), hide_index=True, width="stretch", column_config={
            c: st.column_config.NumberColumn(format="%.9f") for c in rows[0] if c != "update"})
        if surface == "ravine":
            st.caption("On the ravine the minimum is the origin, where decay pulls anyway, so the paths differ but end "
                       "close; on Rosenbrock (minimum (1, 1)) the two kinds of decay end in visibly different places.")
        st.metric("Distance between the Adam (L2) and AdamW end points", f"{d.final_gap:.4g}",
                  help="0 would mean the two updates are the same; they are not unless weight_decay is 0.")
        ui.plot(ui.compute(optimizers.surface_figure, d, r, height=400), key="tl_decay_fig")
        side_by_side("AdamW: decoupled decay (its first step, ran for the table)",
                     source(optimizers.adamw_first_step),
                     "Adam: L2 inside the gradient (its first step, ran for the table)",
                     source(optimizers.adam_l2_first_step))
        ui.show_code(d.code, key="tl_decay_code", file_name="adam_vs_adamw.py")


# 4. Schedulers ------------------------------------------------------------------------------------------------


def schedule_ui():
    """The curves shown and the warmup in the key row; the other scheduler settings folded in settings."""
    rest, keys = ui.settings("tl_sch", label="Total steps, lr, StepLR"), ui.key_controls("tl_sch")
    a, b, c, d = rest.columns(4)
    total = a.slider("Total steps", 10, schedulers.MAX_TOTAL, 100, 10, key="tl_sch_total", bind="query-params")
    base_lr = b.select_slider("Base / max lr", (0.001, 0.01, 0.05, 0.1, 0.5, 1.0), value=0.1, key="tl_sch_lr",
                              bind="query-params")
    step_size = c.number_input("StepLR step_size", 1, schedulers.MAX_TOTAL, 30, key="tl_sch_step",
                               bind="query-params")
    gamma = d.slider("StepLR gamma", 0.05, 1.0, 0.5, 0.05, key="tl_sch_gamma", bind="query-params")
    curves, e = keys.columns([3, 1])
    chosen = curves.pills("Curves", schedulers.SCHEDULERS, selection_mode="multi",
                          default=list(schedulers.SCHEDULERS), key="tl_sch_shown", bind="query-params")
    warmup = e.number_input("Warmup steps", 1, total - 1, min(10, total - 1), key="tl_sch_warmup",
                            bind="query-params", help="Fewer than the total steps.")
    return total, base_lr, int(step_size), gamma, int(warmup), tuple(chosen or ())


def section_schedulers() -> None:
    st.subheader("Schedulers")
    ui.prose(
        "Every curve comes from stepping a real scheduler: one `optimizer.step()` then one `scheduler.step()` per "
        "training step, reading `optimizer.param_groups[0]['lr']` — the rate the step actually used."
    )
    total, base_lr, step_size, gamma, warmup, chosen = schedule_ui()
    with ui.input_errors():
        r = ui.compute(schedulers.schedules, total, base_lr, step_size, gamma, warmup)
        ui.plot(ui.compute(schedulers.schedules_figure, r, chosen), key="tl_sch_fig")
        probe_part(r)
        ui.show_code(r.code, key="tl_sch_code", file_name="schedulers.py")
    plateau_part()


@st.fragment  # its own key row: a change reruns this part alone
def probe_part(r) -> None:
    with ui.key_controls("tl_sch_probe"):  # the table's own row, in place above it
        probe = st.slider("Read the LR at step", 0, r.total - 1, min(30, r.total - 1), key="tl_sch_probe",
                          bind="query-params")
    ui.table(pd.DataFrame([{"scheduler": n, f"lr at step {probe}": r.curves[n][probe]}
                           for n in schedulers.SCHEDULERS]), hide_index=True)


@st.fragment
def plateau_part() -> None:
    st.markdown("##### ReduceLROnPlateau, fed a real validation loss")
    a, b, c, d = ui.key_controls("tl_pl").columns(4)  # the second figure's own row, in place above it
    epochs = a.slider("Epochs", 5, schedulers.MAX_EPOCHS, 40, key="tl_pl_epochs", bind="query-params")
    lr = b.select_slider("Start lr", (0.01, 0.05, 0.1, 0.5, 1.0), value=0.5, key="tl_pl_lr", bind="query-params")
    factor = c.slider("factor", 0.1, 0.9, 0.5, 0.1, key="tl_pl_factor", bind="query-params")
    patience = d.slider("patience", 0, 10, 3, key="tl_pl_patience", bind="query-params")
    with ui.input_errors():
        with st.spinner("Training with ReduceLROnPlateau…"):
            p = ui.compute(schedulers.plateau, epochs, lr, factor, patience)
        ui.plot(ui.compute(schedulers.plateau_figure, p), key="tl_pl_fig")
        st.caption(f"LR cut after epochs {', '.join(map(str, p.reductions)) or '— none'} (dotted lines): each time "
                   f"the validation loss failed to improve for more than {patience} epochs.")
        ui.show_code(p.code, key="tl_pl_code", file_name="reduce_lr_on_plateau.py")


# 5. Losses ----------------------------------------------------------------------------------------------------


def section_losses() -> None:
    st.subheader("Loss functions")
    cross_entropy_part()
    bce_part()
    robust_part()
    reduction_part()


@st.fragment  # each loss below has its own key row: a change reruns that part alone
def cross_entropy_part() -> None:
    st.markdown("##### CrossEntropyLoss takes logits and class indices")
    a, b, c = ui.key_controls("tl_ce").columns([2, 1, 1])
    logits_text = a.text_input("Logits (one row)", "2, 1, 0.1", key="tl_ce_logits", bind="query-params")
    target = b.number_input("Target class", 0, 9, 0, key="tl_ce_target", bind="query-params")
    smoothing = c.slider("label_smoothing", 0.0, 0.9, 0.0, 0.05, key="tl_ce_smooth", bind="query-params")
    with ui.input_errors():
        ce = ui.compute(losses.cross_entropy, logits_text, int(target), smoothing)
        left, right = st.columns([2, 3])
        with left:
            ui.plot(ui.compute(losses.ce_figure, ce), key="tl_ce_fig")
        with right:
            m1, m2 = st.columns(2)
            m1.metric("nn.CrossEntropyLoss", f"{ce.loss:.6f}")
            m2.metric("By the formula", f"{ce.loss_by_hand:.6f}")
            st.markdown(
                f"(1 − ε)·(−log p_t) + ε/C·Σ −log p_j with ε = {ce.smoothing:g}, C = {len(ce.logits)}, "
                f"p_t = {ce.probs[ce.target]:.4f}. Fed **softmax outputs** instead of logits, the same loss says "
                f":red[{ce.loss_on_probs:.4f}] — it applies log_softmax a second time.")
            st.markdown(
                f"**ignore_index**: a batch of 4 rows with targets `{list(ce.batch_targets)}` gives "
                f"{ce.batch_loss:.5f} = the mean over the 3 kept rows ({ce.batch_loss_by_hand:.5f}); the ignored "
                f"row's gradient is {ce.ignored_row_grad:g}.")
        ui.show_code(ce.code, key="tl_ce_code", file_name="cross_entropy.py")


@st.fragment
def bce_part() -> None:
    st.markdown("##### sigmoid + BCELoss vs BCEWithLogitsLoss at large logits")
    a, b = ui.key_controls("tl_bce").columns([3, 1])
    logit = a.slider("Logit", -300.0, 300.0, 100.0, 1.0, key="tl_bce_logit", bind="query-params")
    target = b.segmented_control("Target", (0, 1), default=0, required=True, key="tl_bce_target", bind="query-params")
    with ui.input_errors():
        bce = ui.compute(losses.bce_compare, logit, int(target or 0))
        ui.table(pd.DataFrame([
            {"computed as": name, "loss": str(v[0]), "d loss / d logit": str(v[1])}
            for name, v in zip(losses.BCE_WAYS, (bce.manual, bce.bce, bce.with_logits), strict=True)
        ]), hide_index=True, width="stretch")
        ui.plot(ui.compute(losses.bce_figure, bce), key="tl_bce_fig")
        st.caption("float32 rounds sigmoid(x) to exactly 1.0 from x ≈ 17: the by-hand formula takes log(0) = −inf "
                   "(gap in its line, NaN gradient); BCELoss clamps each log at −100, so its loss stops at 100 and "
                   "its gradient is 0; BCEWithLogitsLoss works from the logit and stays exact.")
        ui.show_code(bce.code, key="tl_bce_code", file_name="bce_vs_with_logits.py")


@st.fragment
def robust_part() -> None:
    st.markdown("##### MSE vs L1 vs Huber under outliers")
    a, b = ui.key_controls("tl_rob").columns(2)
    n_out = a.slider("Outliers (of 40 points)", 0, 20, 4, key="tl_rob_n", bind="query-params")
    size = b.slider("Outlier offset", 0.0, 100.0, 15.0, 1.0, key="tl_rob_size", bind="query-params")
    with ui.input_errors():
        with st.spinner("Fitting three lines…"):
            rob = ui.compute(losses.robust_fit, n_out, size)
        ui.plot(ui.compute(losses.robust_figure, rob), key="tl_rob_fig")
        st.caption("MSE's gradient grows with the residual, so a few far points pull the whole line; L1's is ±1 "
                   "whatever the distance; Huber is MSE near zero and L1 beyond delta = 1.")
        ui.show_code(rob.code, key="tl_rob_code", file_name="robust_losses.py")


@st.fragment
def reduction_part() -> None:
    st.markdown('##### reduction="mean" vs "sum" scales the gradient')
    max_batch = ui.key_controls("tl_red").select_slider("Largest batch", (16, 64, 256, 1024, 4096), value=256,
                                                        key="tl_red_batch", bind="query-params")
    with ui.input_errors():
        red = ui.compute(losses.reduction_scaling, max_batch)
        ui.plot(ui.compute(losses.reduction_figure, red), key="tl_red_fig")
        ratios = [s / m for s, m in zip(red.grad_sum, red.grad_mean, strict=True)]
        st.caption("sum / mean gradient ratio per batch size: "
                   + ", ".join(f"{b}: {q:.4g}" for b, q in zip(red.batch_sizes, ratios, strict=True))
                   + ". With reduction='sum', the same learning rate takes a step batch-size times larger.")
        ui.show_code(red.code, key="tl_red_code", file_name="reduction.py")


# 6. Mixed precision -------------------------------------------------------------------------------------------


def section_amp() -> None:
    st.subheader("Mixed precision")
    if amp.amp_device()[0] == "cpu":
        st.info("No CUDA device on this host: autocast runs on the CPU with bfloat16 (float16 on CUDA when one is "
                "present). The GradScaler demo uses float16 autocast on the CPU, where overflow is just as real.",
                icon=":material/memory:")
    autocast_ops_part()
    speed_part()
    scaler_part()
    ui.trap_pair(ui.compute(clip_before_unscale_trap), key="tl_trap_unscale")
    ranges_part()


@st.fragment  # each part below has its own key row: a change reruns that part alone
def autocast_ops_part() -> None:
    device, dtype = amp.amp_device()
    st.markdown(f"##### Which ops ran in which dtype under `torch.autocast('{device}', dtype={dtype})`")
    a, b = ui.key_controls("tl_amp_ops").columns(2)
    hidden = a.slider("Hidden size", 4, 256, 32, key="tl_amp_hidden", bind="query-params")
    batch = b.slider("Batch", 1, 256, 8, key="tl_amp_batch", bind="query-params")
    with ui.input_errors():
        ops = ui.compute(amp.autocast_ops, hidden, batch)
        left, right = st.columns([2, 3])
        with left:
            ui.plot(ui.compute(amp.ops_figure, ops), key="tl_amp_ops_fig")
            st.caption(amp.ops_caption(ops))
        with right:
            ui.table(pd.DataFrame(amp.ops_table(ops)), hide_index=True, width="stretch", height=320)
        ui.show_code(ops.code, key="tl_amp_ops_code", file_name="autocast_ops.py")


@st.fragment
def speed_part() -> None:
    st.markdown("##### Time and memory against float32")
    keys = ui.key_controls("tl_amp_speed")  # the timing figure's own row, its button included
    a, b, c = keys.columns(3)
    m_hidden = a.select_slider("Hidden size ", (128, 256, 512, 1024), value=512, key="tl_amp_m_hidden",
                               bind="query-params")
    m_batch = b.select_slider("Batch ", (32, 64, 128, 256, 512), value=256, key="tl_amp_m_batch", bind="query-params")
    reps = c.slider("Repeats", 1, amp.MAX_REPS, 5, key="tl_amp_reps", bind="query-params")
    params = (m_hidden, m_batch, reps)
    with keys:
        measured = ui.run_button("Measure float32 vs autocast", "tl_amp_measure", params, icon=":material/timer:")
    if measured:
        with ui.input_errors():
            line = st.empty()  # the place in line, if the run waits, above the folded status
            with st.status("Timing forward + backward, interleaved…", expanded=False) as status:
                speed = ui.queued(amp.measure, *params, notice=line)
                status.update(label="Measured", state="complete")
            ui.plot(ui.compute(amp.speed_figure, speed), key="tl_amp_speed_fig")
            st.caption(f"Median of {reps} interleaved runs on one CPU thread; memory = bytes autograd saved for "
                       "backward (saved_tensors_hooks), the part of a step's memory that autocast halves.")
            ui.show_code(speed.code, key="tl_amp_speed_code", file_name="amp_time_memory.py")
    elif ui.ran_with("tl_amp_measure") is None:
        st.caption("Press the button to time both on this machine (a few seconds at the largest sizes).")


@st.fragment
def scaler_part() -> None:
    st.markdown("##### GradScaler over steps: scale, skipped steps, growth")
    a, b, c, d = ui.key_controls("tl_gs").columns(4)
    steps = a.slider("Steps", 10, amp.MAX_AMP_STEPS, 80, 10, key="tl_gs_steps", bind="query-params")
    scale_exp = b.slider("Initial scale = 2^", 0, amp.MAX_SCALE_EXP, 24, key="tl_gs_scale", bind="query-params")
    growth = c.slider("growth_interval", 1, 100, 10, key="tl_gs_growth", bind="query-params")
    spikes = d.text_input("Loss spike (×1e9) at steps", "40", key="tl_gs_spikes", bind="query-params",
                          help="Comma-separated steps, e.g. 40, 41; empty for none.")
    with ui.input_errors():
        with st.spinner("Training under float16 autocast with a GradScaler…"):
            gs = ui.compute(amp.scaler_run, steps, scale_exp, growth, spikes)
        ui.plot(ui.compute(amp.scaler_figure, gs), key="tl_gs_fig")
        n_skipped = sum(gs.skipped)
        st.markdown(
            f"{n_skipped} of {gs.steps} steps skipped. A too-large scale overflows float16 in backward: the scaler "
            "sees inf, skips `optimizer.step()` and halves the scale; after every "
            f"{gs.growth_interval} clean steps it doubles it. The same loop in bfloat16 without any scaler: "
            f"gradients {'all finite' if gs.bf16_finite else 'not finite'}.")
        st.caption(ui.compute(amp.scaler_contrast, gs))
        ui.show_code(gs.code, key="tl_gs_code", file_name="grad_scaler.py")


@st.fragment
def ranges_part() -> None:
    st.markdown("##### Why bfloat16 needs no loss scaling")
    values = ui.key_controls("tl_amp_values").text_input("Values to cast", "1e-8, 3e-5, 1.001, 7e4",
                                                         key="tl_amp_values", bind="query-params")
    with ui.input_errors():
        rng = ui.compute(amp.dtype_ranges, values)
        ui.table(pd.DataFrame(rng.rows), hide_index=True, width="stretch")
        st.caption(ui.compute(amp.ranges_caption, rng))


# 7. Resume ----------------------------------------------------------------------------------------------------


def section_resume() -> None:
    st.subheader("Checkpoint and exact resume")
    ui.prose(
        "Adam, a warmup + cosine schedule, a GradScaler, dropout and random batches. Run N steps straight; then run "
        "k steps, save `{model, optimizer, scheduler, scaler, step, rng}` with `torch.save`, build **fresh** objects "
        "(as a new process would, with another seed), load, and continue to N. Restoring everything gives a maximum "
        "parameter difference of exactly 0; each trap leaves one piece out."
    )
    keys, rest = ui.key_controls("tl_res"), ui.settings("tl_res", label="Seed and runs on the chart")
    a, b = keys.columns(2)
    total = a.slider("Total steps N", 20, resume.MAX_STEPS, 120, 10, key="tl_res_total", bind="query-params")
    split = b.slider("Checkpoint at step k", 1, total - 1, min(60, total - 1), key="tl_res_split",
                     bind="query-params")
    c, d = rest.columns([1, 3])
    seed = c.number_input("Seed", 0, 10_000, 0, key="tl_res_seed", bind="query-params")
    shown = d.pills("Runs on the chart", tuple(resume.VARIANTS), selection_mode="multi",
                    default=list(resume.VARIANTS), format_func=resume.VARIANTS.get, key="tl_res_shown",
                    bind="query-params")
    with ui.input_errors():
        with st.spinner("Training straight, then resuming four ways…"):
            r = ui.compute(resume.resume_demo, total, split, int(seed))
        cols = st.columns(len(resume.VARIANTS))
        for col, (v, run) in zip(cols, r.resumed.items(), strict=True):
            col.metric(f"max |Δθ|, {resume.SHORT[v]}", f"{run.max_diff:.3g}",
                       help=f"{run.name}: max |θ_resumed − θ_straight| at step N")
        ui.plot(ui.compute(resume.resume_figure, r, tuple(shown or ())), key="tl_res_fig")
        st.caption(f"Checkpoint: {', '.join(r.checkpoint_keys)} — {r.checkpoint_bytes:,} bytes. Without the "
                   "optimizer, Adam restarts its moments (and bias correction) and its learning rate, which lives in "
                   "`optimizer.param_groups`, goes back to the initial one; without the RNG state dropout masks "
                   f"and batches differ. {resume.scheduler_trap(r)}")
        saved, loaded = st.columns(2)
        with saved:
            st.markdown("**Saved at step k** (ran above)")
            st.code(source(resume.checkpoint), language="python", wrap_lines=True)
        with loaded:
            st.markdown("**Loaded into fresh objects** (ran above: everything, then once per trap with `skip`)")
            st.code(source(resume.resume), language="python", wrap_lines=True)
        ui.show_code(r.code, key="tl_res_code", file_name="exact_resume.py")


ui.page_header(SLUG)
ui.prose(
    "The exact order of one training step, and what each call changes; the mistakes that break it silently, "
    "executed beside the correct loop; optimizers, schedulers and losses stepped by real torch; mixed precision; and "
    "a checkpoint that resumes bit for bit. Every curve is a real training run on this server."
)
ui.sections(SLUG, "tl_tab", {
    "One step": section_step, "Mistakes": section_mistakes, "Optimizers": section_optimizers,
    "Schedulers": section_schedulers, "Losses": section_losses, "Mixed precision": section_amp,
    "Resume": section_resume,
})
ui.interview_corner(SLUG, QUESTIONS)
