"""Debugging & reproducibility: NaN tracing, seeds and determinism, leaks, model unit tests, the profiler."""

import streamlit as st

from demos.debugging import figures, leaks, model_tests, nan_trace, profiling, repro, workers
from demos.debugging.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


def nan_section() -> None:
    ui.prose(
        "A loss that turns NaN is found in two complementary ways. **Forward hooks** on every module report the "
        "first module whose output is not finite. **`torch.autograd.detect_anomaly()`** checks every backward "
        "node's output and, when one returns NaN, raises and prints the traceback of the *forward* call that "
        "created that node: the first backward node that produced a NaN, which need not be where the first "
        "non-finite value appeared. An **op-level forward tracer** (a `TorchDispatchMode` that checks every op's "
        "output) finds that origin. Pick a planted source: the batch has an all-zero (padding) row, as real "
        "batches do."
    )
    with ui.key_controls("dbg_nan"):
        source = st.selectbox("NaN source", nan_trace.SOURCES, format_func=nan_trace.SOURCE_LABELS.get,
                              key="dbg_nan_src", bind="query-params")
    with ui.input_errors():
        r = ui.compute(nan_trace.trace_nan, source)
        ui.graph(ui.compute(figures.nan_graph, r))
        planted, fix = ui.compute(nan_trace.planted_sources, source)
        broken, fixed = st.columns(2, gap="large")
        with broken:
            st.markdown("**The planted op**")
            st.code(planted, language="python", wrap_lines=True)
            st.markdown(f"loss = `{r.loss}`. Forward-hook tracer: first non-finite output in "
                        f"**`{r.first_bad or 'none'}`**.")
            ui.table([{"module": h.module, "type": h.kind, "finite": h.finite, "non-finite": h.nonfinite}
                      for h in r.hook_rows], hide_index=True)
            if r.origin is not None:
                o = r.origin
                st.markdown(f"Op-level tracer: first non-finite output from **`{o.op}`** (`{o.line}`), "
                            f"{o.nonfinite} of {o.numel} values ({o.nan} NaN); non-finite inputs: "
                            f"{o.inputs_nonfinite}.")
            st.markdown("`detect_anomaly` raised:")
            st.code(r.error or "(no error)", language="text", wrap_lines=True)
            st.markdown("…and printed the forward traceback of that node (library frames left out):")
            st.code(r.traceback or "(none)", language="text", wrap_lines=True)
            if why := nan_trace.anomaly_vs_origin(r):
                st.info(why, icon=":material/lightbulb:")
        with fixed:
            st.markdown("**The fix**")
            st.code(fix, language="python", wrap_lines=True)
            st.markdown(f"loss = `{r.fixed_loss:.6g}`; every gradient finite: **{r.fixed_grads_finite}**.")
            st.markdown(FIX_NOTES[source])
        ui.show_code(r.code, key="dbg_nan_code", file_name="nan_trace.py")


FIX_NOTES = {
    "log_zero": "`h · log h` is the entropy term: at h = 0 the forward is 0 · (−inf) = nan and the backward of "
                "log divides by 0. Clamp what log sees (or add an epsilon). Note `torch.xlogy(h, h)` fixes the "
                "forward but not the gradient with respect to its second argument.",
    "div_zero": "Normalizing by a sum (or a norm) that can be 0 gives 0/0 in the forward and 1/0² in the "
                "backward. Clamp the denominator, or use `F.normalize`, which does exactly that.",
    "sqrt_negative": "sqrt of a value taken for ≥ 0 that is not: here a centred value, `h − h.mean()`, negative "
                     "wherever h is below its mean (a variance written as E[x²] − E[x]² can also go slightly "
                     "negative by rounding). sqrt of a negative is nan, and sqrt's gradient at 0 is inf. Clamp to 0 "
                     "and add an epsilon inside the sqrt.",
    "fp16_overflow": "exp overflows float16 (max 65504) long before float32, and inf/inf = nan. Use the stable "
                     "`torch.softmax` (it subtracts the max) and keep reductions in float32; autocast does this "
                     "for you, and GradScaler skips steps whose gradients overflowed.",
}


def seeds_ui() -> tuple[int, int]:
    a, b = st.columns(2)
    steps = a.slider("Training steps", 2, repro.MAX_STEPS, 20, key="dbg_steps", bind="query-params")
    seed_text = b.text_input("Seed", "0", key="dbg_seed", bind="query-params", help="A whole number ≥ 0.")
    return steps, repro.parse_seed(seed_text)


def repro_section() -> None:
    seeds_part()
    workers_part()
    determinism_part()


@st.fragment  # its own key row: a change reruns this part alone
def seeds_part() -> None:
    st.subheader("Seeds: the same code, four runs")
    ui.prose(
        "Initialization, data order and dropout all draw from torch's global generator. Without a seed every "
        "run starts from fresh entropy; `torch.manual_seed` fixes the sequence, so the same calls in the same "
        "order give the same bits — checked here with `torch.equal` on every loss and parameter."
    )
    with ui.input_errors():
        with ui.key_controls("dbg_seeds"):
            steps, seed = seeds_ui()
        with st.spinner("Training four times…"):
            r = ui.compute(repro.seeded_runs, steps, seed)
        a, b, c = st.columns(3)
        a.metric("Unseeded runs identical", str(r.unseeded_equal))
        b.metric("Seeded runs identical (bit for bit)", str(r.seeded_equal))
        c.metric("Largest unseeded loss gap", f"{r.unseeded_max_diff:.3g}")
        left, right = st.columns([3, 2])
        with left:
            ui.plot(ui.compute(figures.seed_figure, r), key="dbg_seed_fig")
        with right:
            ui.table([{"run": x.label, "final loss": x.losses[-1], "sha256 of final weights": x.digest}
                      for x in r.runs], hide_index=True)
        ui.show_code(r.code, key="dbg_seed_code", file_name="seeds.py")


def _worker_table(rows) -> list[dict]:
    return [{"item": r[0], "worker": r[1], "worker seed": str(r[2]), "dataset's np Generator": round(r[3], 6),
             "global np.random": round(r[4], 6), "torch.rand": round(r[5], 6)} for r in rows.rows]


@st.fragment  # its button reruns this part alone
def workers_part() -> None:
    st.subheader("DataLoader workers and NumPy randomness")
    ui.prose(
        "Each worker process gets a *copy* of the dataset. torch seeds each worker's `torch`, `random` and the "
        "global `np.random` from a per-worker seed (since PyTorch 1.9; the global-`np.random` version of this "
        "bug is the one older tutorials show). A NumPy `Generator` stored on the dataset is copied with the "
        "same state into every worker, so the workers draw the *same* 'random' augmentations. The fix reseeds "
        "it in `worker_init_fn` from `get_worker_info().seed`; passing `generator=` to the DataLoader makes "
        "those seeds the same in every run."
    )
    with ui.key_controls("dbg_workers"):  # after the seeds figure: stays in place, above what it starts
        start = st.button("Start 2 workers for each loader", key="dbg_workers_run", icon=":material/play_arrow:")
    if start:
        line = st.empty()  # the place in line, if the run waits, above the folded status
        with ui.input_errors(), st.status("Starting worker processes…") as status:
            ui.queued(workers.worker_seeds, notice=line)
            st.session_state["dbg_workers_done"] = True
            status.update(label="Workers finished and shut down", state="complete")
    if not _workers_cached():
        st.caption("Starting workers takes a few seconds on this host, so it waits for the button.")
        return
    with ui.input_errors():
        w = ui.compute(workers.worker_seeds)
        st.markdown(f"**Bug** — {w.bug.duplicates} of {len(w.bug.rows)} 'random' values repeat: worker 1 draws "
                    "exactly what worker 0 draws")
        ui.table(_worker_table(w.bug), hide_index=True)
        st.markdown(f"**Fix** — {w.fixed.duplicates} repeated values")
        ui.table(_worker_table(w.fixed), hide_index=True)
        st.caption(f"Base seed drawn from `generator=torch.Generator().manual_seed(0)` in two fresh runs: "
                   f"{w.base_seeds[0]} and {w.base_seeds[1]} (worker seed = base seed + worker id). "
                   f"Took {w.seconds:.1f} s with worker processes forked from a fork server.")
        ui.show_code(w.code, key="dbg_workers_code", file_name="worker_seeds.py")


def _workers_cached() -> bool:
    return bool(st.session_state.get("dbg_workers_done"))


def determinism_part() -> None:
    st.subheader("torch.use_deterministic_algorithms(True)")
    ui.prose(
        "Seeds fix the random numbers, not the arithmetic: some kernels (mostly CUDA backward passes using "
        "atomicAdd) sum in a different order each run. Deterministic mode switches those to deterministic "
        "kernels where they exist and **raises** where none exists. It also fills `torch.empty` with NaN, so a "
        "read of uninitialized memory is the same every run. On CUDA also set `CUBLAS_WORKSPACE_CONFIG=:4096:8` "
        "and `torch.backends.cudnn.benchmark = False`."
    )
    d = ui.compute(repro.determinism_checks)
    a, b = st.columns(2)
    a.markdown(f"`torch.empty(4)`, flag off: `{d.empty_default}`")
    b.markdown(f"flag on: `{d.empty_deterministic}`")
    why = {name: reason for name, _fn, reason in repro.CHECKS}
    cuda = {c.op: c for c in d.cuda_checks}
    ui.table(
        [{"op": c.op, "what deterministic mode does": why[c.op], "CPU here": c.outcome,
          "CUDA": (cuda[c.op].outcome if c.op in cuda else "not run: no CUDA on this host"),
          "message": c.detail or (cuda[c.op].detail if c.op in cuda else "")} for c in d.cpu_checks],
        whole=True,
    )
    if not d.cuda:
        st.info("No CUDA on this host: the CUDA column runs automatically where a GPU is present.",
                icon=":material/info:")
    ui.show_code(d.code, key="dbg_det_code", file_name="deterministic.py")


def leaks_section() -> None:
    ui.prose(
        "Memory that grows every step is almost always a reference you did not mean to keep. Each panel runs "
        "the trap and the fix side by side and measures, after every step, what is still alive: autograd nodes "
        "reachable from what the loop keeps, the bytes of activations those nodes saved, and hook calls."
    )
    with ui.key_controls("dbg_leaks"):
        steps = st.slider("Steps", 1, leaks.MAX_STEPS, 30, key="dbg_leak_steps", bind="query-params")
    with ui.input_errors():
        with st.spinner("Running the loops…"):
            r = ui.compute(leaks.leaks, steps)
        ui.plot(ui.compute(figures.leak_figure, r), key="dbg_leaks")
        per = (r.nodes.leak[-1] - r.nodes.leak[0]) / max(r.steps - 1, 1)
        st.caption(f"`total_loss += loss` adds {per:.0f} autograd nodes per step; the `.item()` version keeps "
                   f"{r.nodes.fixed[-1]}. Backward already freed the training graph's saved tensors; the "
                   f"validation loop without `no_grad` keeps {r.saved_bytes.leak[-1] / 1024:.0f} KiB of "
                   f"activations after {r.steps} steps.")
        trap_code, fix_code = ui.compute(leaks.trap_and_fix_sources)  # what the loops above called
        trap, fix = st.columns(2)
        trap.markdown("**Trap**")
        trap.code(trap_code, language="python", wrap_lines=True)
        fix.markdown("**Fix**")
        fix.code(fix_code, language="python", wrap_lines=True)
        ui.show_code(r.code, key="dbg_leak_code", file_name="leaks.py")


def tests_section() -> None:
    ui.prose(
        "Four cheap tests catch most model bugs before a long run: the output shape (with batch size 1), "
        "overfitting one batch to ~0 loss, every parameter receiving a gradient, and determinism under a seed. "
        "Plant a bug and watch which test catches it; the correct model runs next to it."
    )
    with ui.key_controls("dbg_tests"):
        bug = st.selectbox("Planted bug", model_tests.BUGS[1:], format_func=model_tests.BUG_LABELS.get,
                           key="dbg_bug", bind="query-params")
    with ui.input_errors():
        with st.spinner("Running the tests…"):
            good, bad = ui.compute(model_tests.run_model_tests, "none"), ui.compute(model_tests.run_model_tests, bug)
        left, right = st.columns(2)
        for col, rep, title in ((left, good, "Correct model"), (right, bad, model_tests.BUG_LABELS[bug])):
            with col:
                st.markdown(f"**{title}**: {rep.passed} of {len(rep.rows)} passed")
                ui.table([{"test": t.test, "result": "pass" if t.passed else "FAIL", "detail": t.detail,
                           "ms": round(t.ms, 1)} for t in rep.rows], whole=True)
        ui.plot(ui.compute(figures.overfit_figure, good, bad), key="dbg_overfit")
        ui.show_code(bad.code, key="dbg_tests_code", file_name="model_tests.py", label="Show the tests")


def profiler_section() -> None:
    ui.prose(
        "`torch.profiler.profile` records every op of one training step; `record_function` labels mark the "
        "forward, backward and optimizer phases so they show up as blocks in the table and the trace. Sort by "
        "*self* time to find the ops that do the work; download the Chrome trace and open it in Perfetto "
        "(ui.perfetto.dev) for the full timeline."
    )
    a, b = ui.key_controls("dbg_prof").columns(2)
    width = a.select_slider("Layer width", [64, 128, 256, 512, profiling.MAX_WIDTH], 256, key="dbg_prof_width",
                            bind="query-params")
    batch = b.select_slider("Batch size", [8, 32, 64, 128, 256, profiling.MAX_BATCH], 64, key="dbg_prof_batch",
                            bind="query-params")
    with ui.input_errors():
        with st.spinner("Profiling one step…"):
            r = ui.compute(profiling.profile_step, width, batch)
        cols = st.columns(3)
        for col, phase in zip(cols, profiling.PHASES, strict=True):
            col.metric(f"{phase} (record_function)", f"{r.phase_us.get(phase, 0) / 1000:.2f} ms")
        ui.plot(ui.compute(figures.gantt_figure, r), key="dbg_gantt")
        ui.table([{"op": o.name, "self CPU (µs)": round(o.self_us, 1), "total CPU (µs)": round(o.total_us, 1),
                   "calls": o.calls} for o in r.top_ops], hide_index=True)
        with ui.settings("dbg_trace", label="Chrome trace for Perfetto"):
            # the trace (tens of KiB) is handed over when the button is pressed, not stored on every rerun
            st.download_button("Download the Chrome trace (JSON)", lambda: r.trace_json,
                               file_name="train_step_trace.json", mime="application/json", key="dbg_trace_download",
                               on_click="ignore", icon=":material/download:")
        ui.show_code(r.code, key="dbg_prof_code", file_name="profile_step.py")


ui.page_header("debugging")
ui.sections("debugging", "dbg_tab", {  # only the open section computes
    "NaN tracing": nan_section, "Reproducibility": repro_section, "Memory leaks": leaks_section,
    "Unit tests for models": tests_section, "Profiler": profiler_section,
})
ui.interview_corner("debugging", QUESTIONS)
