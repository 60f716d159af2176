"""Memory & speed: memory over a training step, the caching allocator, transfers and streams, torch.compile."""

import pandas as pd
import streamlit as st
import torch

from demos.errors import InputError
from demos.memory import compiling, stream_recorder, streams, training
from demos.memory import figures as figs
from demos.memory.allocator import fmt_bytes
from demos.memory.cache_demo import MAX_CAPACITY_MIB, MIN_CAPACITY_MIB, PRESETS, run_script
from demos.memory.compiling import EXPLAIN_BUDGET_S, parse_shapes
from demos.memory.models import MODELS
from demos.memory.questions import QUESTIONS
from demos.memory.surprises import autocast_above, optimizer_peak, surprising_pairs, unfused_spec
from demos.memory.training import (
    CARDS,
    CONV_WORKSPACE_SOURCE,
    DTYPES,
    MAX_BATCH,
    MAX_SEQ,
    MAX_STEPS,
    OPTIMIZERS,
    OVERHEAD_SOURCE,
    SWEEP_BUDGET_S,
    SWEEP_STEPS,
    WORKSPACE_ALLOWANCE,
    RunSpec,
    default_device,
    gpu_fit,
    peak_phase,
    reserved_model_error,
    sweep_batches,
    usable,
    variant_spec,
)
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

DEVICE = default_device()
COMPILE_SHAPES = "8; 16; 32"  # the torch.compile tab's default cases, run once per server without a press
COMPILE_SIZE = 256


def timeline(spec: RunSpec, device: str):
    """A run of seconds waits for the server's run slot, showing its place in line (demos.memory.training)."""
    with st.spinner("Running the training steps under the tracker…"):  # shown only if it takes half a second
        return ui.queued(training.simulate, spec, device)


# ---------------------------------------------------------------------------------------------- section 1
def step_ui() -> tuple[RunSpec, str]:
    """The model and batch in the key row above the timeline; the recipe's other settings folded away."""
    with ui.key_controls("mem_step"):
        model, batch, seq, dtype = batch_ui()
    with ui.settings("mem_step"):
        optimizer, steps, card, ckpt, to_none = recipe_ui()
    return RunSpec(model, batch, seq, dtype, optimizer, ckpt, to_none, steps), card


def batch_ui() -> tuple[str, int, int, str]:
    c1, c2, c3, c4 = st.columns(4)
    model = c1.selectbox("Model", list(MODELS), index=3, key="mem_model", bind="query-params")
    kind = MODELS[model].kind
    batch = c2.number_input("Batch size", 1, MAX_BATCH[kind], 4, key="mem_batch", bind="query-params")
    seq = c3.number_input("Sequence length", 1, MAX_SEQ, 256, key="mem_seq", bind="query-params",
                          disabled=kind != "transformer", help="Transformers only.")
    dtype = c4.selectbox("Precision", DTYPES, key="mem_dtype", bind="query-params")
    return model, int(batch), int(seq), dtype


def recipe_ui() -> tuple[str, int, str, bool, bool]:
    c5, c6, c7, c8 = st.columns(4)
    optimizer = c5.selectbox("Optimizer", OPTIMIZERS, index=2, key="mem_opt", bind="query-params")
    steps = c6.slider("Steps", 1, MAX_STEPS, 2, key="mem_steps", bind="query-params")
    card = c7.selectbox("Card (OOM line)", list(CARDS), index=0, key="mem_card", bind="query-params")
    with c8:
        ckpt = st.toggle("Activation checkpointing", key="mem_ckpt", bind="query-params")
        to_none = st.toggle("Free grads in zero_grad", value=True, key="mem_none", bind="query-params",
                            help="On: `zero_grad(set_to_none=True)` (the default since PyTorch 2.0) frees the "
                                 "gradients. Off: `set_to_none=False` keeps them as zero tensors.")
    return optimizer, int(steps), card, ckpt, to_none


def run_device(spec: RunSpec) -> tuple[str, str | None]:
    """Where the steps run: on the GPU only if their meta prediction fits its free memory; else meta, and why."""
    if DEVICE != "cuda":
        return "meta", None
    try:
        why = gpu_fit(timeline(spec, "meta"))
    except InputError:
        return "meta", None  # the section below shows the sentence
    return ("meta", why) if why else ("cuda", None)


def device_note(device: str, why: str | None = None) -> None:
    if device == "cuda":
        st.success(f"CUDA is available ({torch.cuda.get_device_name(0)}): the steps ran on the GPU; red markers "
                   "are torch.cuda.memory_allocated / memory_reserved read at each phase boundary, minus their "
                   "values when the run started (cuBLAS workspaces made first, cache emptied, peak reset).",
                   icon=":material/memory:")
    elif why:
        st.info(why, icon=":material/info:")
    else:
        st.info("No CUDA GPU here: the steps ran on **meta tensors** (shapes and dtypes, no data, no RAM). The "
                "timeline comes from the real op sequence and shapes of these training steps, not from a GPU; "
                "allocated and reserved come from the allocator model fed with those allocations.",
                icon=":material/info:")


RESERVED_HELP = ("What the allocator model reserves for these steps' tensors, starting from an empty cache: "
                 "segments only, without the CUDA context, the segments holding the cuBLAS workspaces (they pinned "
                 f"{fmt_bytes(WORKSPACE_ALLOWANCE)} in one H200 measurement; it depends on what ran before) or other "
                 "processes. On a GPU the measured reserved markers are counted the same way, from the reserved "
                 "bytes at the start.")


def reserved_error_text(model: str) -> str:
    """The allocator model's known error on peak reserved, measured against an H200 (short: a metric's delta)."""
    e = reserved_model_error(model)
    spread = f"{e.low_pct:+.1f}%" if round(e.low_pct, 1) == round(e.high_pct, 1) else \
        f"{e.low_pct:+.1f}% to {e.high_pct:+.1f}%"
    return f"{spread} ({e.rows} H200 run{'s' * (e.rows != 1)})"


def summary_metrics(t) -> None:
    m = st.columns([1, 1, 1, 1.4, 1.2])  # the reserved peak carries its known error as a delta
    m[0].metric("Parameters", f"{t.n_params / 1e6:,.1f} M", help=f"{t.n_params:,} parameters")
    m[1].metric("Peak (tracked tensors)", fmt_bytes(t.peak))
    m[2].metric("Peak allocated (model)", fmt_bytes(t.predicted_peak_allocated))
    m[3].metric("Peak reserved (model)", fmt_bytes(max(t.reserved)), reserved_error_text(t.spec.model),
                delta_color="off", delta_arrow="off",
                help=f"{RESERVED_HELP} Known error: (predicted - measured) / measured over "
                     f"{reserved_model_error(t.spec.model).scope}, assets/gpu/memtruth_h200_after.json.")
    if t.measured:
        measured = max(r[4] for r in t.measured)
        m[4].metric("Measured peak above the start", fmt_bytes(measured),
                    f"{100 * (t.predicted_peak_allocated - measured) / measured:+.1f}% predicted vs measured",
                    delta_color="off", help="max_memory_allocated() minus memory_allocated() when the run started.")
        st.caption(f"Already allocated when the run started, and left out of both figures: "
                   f"{fmt_bytes(t.baseline[0])} (reserved {fmt_bytes(t.baseline[1])}). That is the **cuBLAS "
                   "workspaces** (32 MiB for each thread that has run a matmul, 1 MiB for cuBLASLt; they stay for "
                   "the life of the process) and whatever else this server holds on the GPU.")
    else:
        m[4].metric("Optimizer state at the peak", fmt_bytes(t.peak_by_category["optimizer_state"]))


def holders_table(t) -> None:
    rows = [{"category": h.category.replace("_", " "), "made by op": h.op.removesuffix(".default"),
             "shape, dtype": h.kind, "bytes": fmt_bytes(h.nbytes)} for h in t.peak_holders]
    ui.table(pd.DataFrame(rows), hide_index=True, width="stretch")


@st.fragment  # its own key row: pressing the button reruns the sweep alone
def sweep_part(spec: RunSpec, card: str) -> None:
    st.markdown("**Peak memory vs batch size**: the same steps at several batch sizes, with and without "
                f"checkpointing and autocast, against the card (at most {SWEEP_BUDGET_S} s on 2 cores, one heavy "
                "run at a time on this server).")
    with ui.key_controls("mem_sweep"):  # stays in place, just above the sweep's own figure
        pressed = ui.run_button("Run the batch sweep", "mem_sweep", spec)
    if pressed:
        with ui.input_errors():
            show_sweep(spec, card)


def show_sweep(spec: RunSpec, card: str) -> None:
    batches = sweep_batches(spec)
    calls = tuple((training.sweep_point, spec, b) for b in batches)  # one cached point per batch size
    points = ui.queued_each("Sweeping batch sizes…", "Sweep done", calls, key="mem_sweep",
                            step=lambda i: f"batch {batches[i]}")
    peaks = ui.compute(training.peaks_by_variant, spec, tuple(points))
    ui.plot(ui.compute(figs.card_sweep_figure, batches, peaks, card), key="mem_sweep_fig")
    capacity = CARDS[card]
    steps = min(spec.steps, SWEEP_STEPS)
    st.caption("Peak reserved (allocator model) is close to affine in batch size, so the largest batch that fits "
               "under the card less the CUDA context estimate and the workspace allowance "
               f"({fmt_bytes(usable(capacity))}: {OVERHEAD_SOURCE}) is interpolated between the swept sizes (≈). "
               f"Each point is a full tracked run of {steps} step{'s' * (steps != 1)} at that batch size"
               f"{' (from step 2 on, every step repeats step 2’s peak)' if spec.steps > steps else ''}.")
    for plain, auto, batch in surprising_pairs(list(peaks), batches, peaks):
        i = batches.index(batch)
        runs = [timeline(variant_spec(spec, name, batch), "meta") for name in (plain, auto)]
        why = autocast_above(plain, auto, batch, *runs, (peaks[plain][i], peaks[auto][i]))
        if why:
            st.info(why, icon=":material/lightbulb:")


def peak_callout(spec: RunSpec, t, device: str) -> None:
    """A peak inside optimizer.step() surprises: say why, with the same steps measured with foreach=False."""
    if peak_phase(t).startswith("optimizer"):
        why = optimizer_peak(t, timeline(unfused_spec(spec), device))
        if why:
            st.info(why, icon=":material/lightbulb:")


def training_section() -> None:
    st.header("1 · Memory over time of real training steps", divider="gray")
    ui.prose(
        "Pick a model and a recipe. The training steps below really run: forward, `loss.backward()`, "
        "`optimizer.step()`, `zero_grad()`, under a `TorchDispatchMode` that sees every storage each aten op "
        "creates and a weak reference that hears when each storage dies. Each storage is tagged parameter, input, "
        "gradient, optimizer state, activation (still alive at the end of forward: held by autograd for "
        "backward) or temporary, and sized as the CUDA allocator would (rounded up to 512 bytes)."
    )
    spec, card = step_ui()
    device, why = run_device(spec)
    device_note(device, why)
    with ui.input_errors():
        t = timeline(spec, device)
        summary_metrics(t)
        ui.legend(figs.category_legend(t))
        workspace = (f" workspace = cuDNN's convolution workspace, which no dispatch mode sees "
                     f"({CONV_WORKSPACE_SOURCE}).") if t.category_peaks["workspace"] else ""
        st.caption("input = the batch and its targets." + workspace)
        ui.plot(ui.compute(figs.timeline_figure, t, CARDS[card], card), key="mem_timeline")
        st.caption(training.headroom_sentence(t, card))
        left, right = st.columns([2, 3])
        with left:
            st.markdown(f"**What holds the peak** (op {t.op_index[t.peak_event]}, {fmt_bytes(t.peak)})")
            ui.plot(ui.compute(figs.peak_figure, t), key="mem_peak")
        with right:
            st.markdown("**Largest tensors alive at the peak**")
            holders_table(t)
        peak_callout(spec, t, device)
        timeline_steps()
        timeline_code_part(t, card)
        sweep_part(spec, card)
    trap_section()


@st.fragment  # a step shown in whiteboard mode redraws the steps alone, not the timeline above them
def timeline_steps() -> None:
    ui.steps([
        "Parameters exist before the first op; the input batch is next to them.",
        "Forward: each op's output is allocated; what autograd saves for backward stays (activation), the rest "
        "is freed as soon as Python drops it (temporary).",
        "Backward frees saved activations as it consumes them and allocates gradients, which stay.",
        "The first `step()` allocates the optimizer state (Adam: two tensors per parameter); it never goes away.",
        "`zero_grad(set_to_none=True)` frees the gradients; with `set_to_none=False` they stay through the next "
        "forward, raising its peak.",
        "Checkpointing keeps only each block's input and recomputes the inside during backward: it helps where a "
        "block saves much more than its input (transformer, conv blocks), not for the MLP's Linear + ReLU pairs, "
        "which save one tensor each anyway.",
    ], key="mem_step_steps")


@st.fragment  # opening the code panel reruns the panel alone, not the timeline above it
def timeline_code_part(t, card: str) -> None:
    ui.show_code(ui.compute(training.timeline_code, t, card), key="mem_timeline_code", file_name="memory_timeline.py")


@st.fragment  # opening its code panel reruns this part alone, not the timeline above it
def trap_section() -> None:
    st.subheader("Correct vs trap: a validation loop that keeps its graphs")
    trap = ui.compute(training.logging_trap)
    batches = len(trap.kept_graph)
    left, right = st.columns(2)
    left.markdown("**Trap**: grad on, `total = total + loss`")
    left.metric(f"Kept after {batches} batches", fmt_bytes(trap.kept_graph[-1]),
                f"+{fmt_bytes(trap.kept_graph[-1] - trap.kept_graph[0])} since batch 1", delta_color="inverse")
    right.markdown("**Correct**: `with torch.no_grad():` (and `.item()` on a GPU)")
    right.metric(f"Kept after {batches} batches", fmt_bytes(trap.no_grad[-1]),
                 f"+{fmt_bytes(trap.no_grad[-1] - trap.no_grad[0])} since batch 1", delta_color="off")
    st.caption(training.trap_caption(trap))
    ui.show_code(trap.code, key="mem_trap_code", file_name="validation_trap.py")


# ---------------------------------------------------------------------------------------------- section 2
def allocator_ui() -> tuple[str, int, bool]:
    """A preset and the capacity in the key row; the script itself (a tall text area) folded away."""
    with ui.key_controls("mem_alloc"):
        preset_col, load_col, capacity_col = st.columns(3, vertical_alignment="bottom")
        preset = preset_col.selectbox("Start from", list(PRESETS), key="mem_preset")
        if load_col.button("Load this script", key="mem_preset_load"):  # before the text area is drawn
            st.session_state["mem_script"] = PRESETS[preset]
        capacity = capacity_col.number_input("Device capacity (MiB)", MIN_CAPACITY_MIB, MAX_CAPACITY_MIB, 128,
                                             key="mem_capacity", bind="query-params")
    with ui.settings("mem_alloc", label="The script"):
        script = st.text_area("Script: `name = 40 MiB`, `del name`, `empty_cache()`", PRESETS["Fragmentation"],
                              key="mem_script", height=180, bind="query-params")
    return script, int(capacity), False


def allocator_section() -> None:
    st.header("2 · The caching allocator and fragmentation", divider="gray")
    ui.prose(
        "PyTorch does not call `cudaMalloc` for each tensor. It rounds every request up to 512 bytes, serves "
        "requests of at most 1 MiB from 2 MiB *small-pool* segments and larger ones from *large-pool* segments "
        "(20 MiB below 10 MiB, otherwise the request rounded to 2 MiB), reuses the best-fitting free block, and "
        "splits blocks. Freed blocks stay **reserved** for reuse. Below, a script runs through a model of that "
        "allocator twice: with classic segments and with `expandable_segments:True`."
    )
    script, capacity, _ = allocator_ui()
    with ui.input_errors():
        classic = ui.compute(run_script, script, capacity, False)
        grown = ui.compute(run_script, script, capacity, True)
        ui.plot(ui.compute(figs.allocator_figure, classic), key="mem_alloc_fig")
        released = sum(classic.released)
        st.caption(f"empty_cache() and the allocator's own retry returned {fmt_bytes(released)} to the device in this "
                   "script (classic segments); only segments with no live block can be returned.")
        cache_drawings_part(classic, grown, capacity)
        allocator_steps()
        ui.show_code(classic.code, key="mem_alloc_code", file_name="allocator_script.py")


@st.fragment  # its own key row: moving the slider redraws the two cache drawings alone
def cache_drawings_part(classic, grown, capacity_mib: int) -> None:
    actions = len(classic.labels)
    with ui.key_controls("mem_alloc_at"):  # stays in place, just above the two cache drawings
        at = st.select_slider("Draw the cache after", range(actions), actions - 1,
                              format_func=lambda i: f"{i}: {classic.labels[i]}", key=f"mem_alloc_at_{actions}")
    left, right = st.columns(2)
    for column, run, title, key in ((left, classic, "**Classic segments** (default)", "mem_blocks_classic"),
                                    (right, grown, "**expandable_segments:True**", "mem_blocks_expand")):
        with column:
            st.markdown(title)
            blocks = run.snapshots[min(at, len(run.snapshots) - 1)]
            ui.plot(ui.compute(figs.blocks_figure, blocks, capacity=capacity_mib * 2**20), key=key)
            _oom_or_ok(run)


@st.fragment  # a step shown in whiteboard mode redraws the steps alone
def allocator_steps() -> None:
    ui.steps([
        "A block freed in the middle of a segment can only be reused by a request that fits inside it.",
        "When no free block fits and the device is full, the allocator frees entirely empty segments and "
        "retries; if that is not enough, it raises OOM although 'reserved but unallocated' may be large.",
        "Expandable segments map physical pages into one growing virtual range per pool: a large request is "
        "appended at the end, and pages with nothing allocated can be unmapped to pay for it.",
    ], key="mem_alloc_steps")


def _oom_or_ok(run) -> None:
    if run.oom:
        st.markdown("**Out of memory.** The message, anatomy included:")
        st.code(run.oom, language=None, wrap_lines=True)
        st.caption("torch's CUDA OOM message, in its own format (c10/cuda/CUDACachingAllocator.cpp), filled in from "
                   "the model: 'Tried to allocate' is the segment the allocator asked the device for (the request "
                   "rounded up to its segment size). The model has no CUDA context, so 'this process has' equals "
                   "what it reserved; on a GPU it adds the context, and every other process using the GPU gets a "
                   "'Process <pid> has …' clause.")
    else:
        st.success(f"Ran to the end: allocated {fmt_bytes(run.allocated[-1])}, reserved {fmt_bytes(run.reserved[-1])}.",
                   icon=":material/check_circle:")


# ---------------------------------------------------------------------------------------------- section 3
def streams_section() -> None:
    st.header("3 · Transfers, pinned memory, streams, synchronization", divider="gray")
    ui.prose(
        "A host-to-device copy from ordinary (pageable) memory blocks the host; from pinned memory with "
        "`non_blocking=True` it is queued and the host moves on. On a side stream the copy of batch *i+1* can "
        "overlap the kernels of batch *i*, but it can hide only as much copy time as there is compute beside it. A "
        "`.item()` each step makes the host wait for the GPU, so nothing is queued ahead. 'GPU utilization' "
        "(nvidia-smi) is the fraction of time *some* kernel runs: a stream of one-element kernels keeps it high "
        "while the GPU does almost nothing."
    )
    keys = ui.key_controls("mem_streams")  # the record button and the scenario, above the lanes
    recording = recording_ui(keys)
    if recording is None:
        st.warning(no_recording_text(), icon=":material/warning:")
    else:
        show_recording(recording, keys)
    ui.show_code(ui.compute(streams.recorder_code), key="mem_recorder_code", file_name="stream_recorder.py",
                 label="Show the recorder")


def recording_ui(keys) -> dict | None:
    """This session's own recording if it made one (kept across reruns), else the shipped one."""
    if torch.cuda.is_available() and keys.button("Record on this GPU now", key="mem_record"):
        with st.status("Recording with CUDA events…"):
            st.session_state["mem_recording"] = stream_recorder.record(
                command="page button: stream_recorder.record()")
    return st.session_state.get("mem_recording") or ui.compute(stream_recorder.load_recording)


def no_recording_text() -> str:
    command = "`python -m demos.memory.stream_recorder --out assets/traces/streams.json`"
    if torch.cuda.is_available():
        return (f"No recording exists yet. Press **Record on this GPU now**, or run {command} and commit the file: "
                "this section then draws its copy and kernel lanes with the GPU, driver, torch version, date and "
                "command printed beside it.")
    return ("No GPU recording exists yet, and this machine has no CUDA GPU, so there is no timeline to show. It is "
            f"made by the recorder below on a machine with an NVIDIA GPU:\n\n{command}\n\nOnce that file is "
            "committed, this section draws its copy and kernel lanes with the GPU, driver, torch version, date and "
            "command printed beside it.")


def show_recording(recording: dict, keys) -> None:
    p = recording["provenance"]
    st.caption(f"Recorded on **{p['gpu']}**, driver {p['driver']}, torch {p['torch']} (CUDA {p['cuda']}), "
               f"{p['date']}, with `{p['command']}`. {recording_method(recording)}")
    scenario = keys.selectbox("Scenario", recording["scenarios"], key="mem_scenario", bind="query-params")
    steady = ui.compute(stream_recorder.steady, recording)
    ui.plot(ui.compute(figs.streams_figure, steady, scenario), key="mem_streams_fig")
    rows = ui.compute(stream_recorder.summarize, recording)
    ui.table(pd.DataFrame(rows).round(3), hide_index=True, width="stretch")
    lessons = ui.compute(stream_recorder.lessons, rows)
    if lessons:
        st.markdown("**In this recording:**\n" + "\n".join(f"- {line}" for line in lessons))


def recording_method(recording: dict) -> str:
    """How this recording was made, from its own fields: warm-up, compute sizing, what the spans measure."""
    measured = ("Spans are CUDA events on each stream around each step's copy or kernels, so a kernel span includes "
                "gaps between its kernels.")
    if recording["schema"] == 1:
        return ("This recorder had no untimed warm-up, so step 0 of each scenario (CUDA start-up) is left out of "
                "the chart and the table, and its compute was not sized to the copies. " + measured)
    sizing = recording["sizing"]
    return (f"Every scenario ran untimed first; then a batch got {sizing['matmuls per batch']} matmuls of "
            f"{sizing['matmul size']}² ({sizing['matmul ms']:.3f} ms each) against {sizing['pinned copy ms']:.3f} ms "
            "per pinned copy. " + measured)


# ---------------------------------------------------------------------------------------------- section 4
def compile_section() -> None:
    st.header("4 · torch.compile", divider="gray")
    ui.prose(
        "`torch.compile` traces Python into FX graphs (dynamo) and generates kernels (inductor; C++/OpenMP on "
        "CPU). What it cannot trace splits the function into several graphs with Python in between (graph "
        "breaks); each graph is guarded by what it assumed (shapes, dtypes), and a failed guard recompiles."
    )
    explain_title, time_title = st.columns(2)
    explain_title.markdown(f"**Graph breaks and recompiles** (dynamo only, at most {EXPLAIN_BUDGET_S} s on 2 cores)")
    time_title.markdown("**Eager vs compiled** (inductor: the first call compiles; how long it took is measured)")
    with ui.key_controls("mem_compile"):  # both runs in one row, under the two titles above
        explain_half, time_half = st.columns(2)
        shapes_col, explain_col = explain_half.columns(2, vertical_alignment="bottom")  # wide enough for whole labels
        size_col, time_col = time_half.columns(2, vertical_alignment="bottom")
    shapes = shapes_col.text_input("Input shapes, one per ';'", COMPILE_SHAPES, key="mem_shapes",
                                   bind="query-params")
    run_dynamo = False
    with ui.input_errors():
        parse_shapes(shapes)  # bad text is answered now, not after the button
        with explain_col:
            run_dynamo = ui.run_button("Explain and count", "mem_explain", shapes, default=COMPILE_SHAPES)
    size = size_col.select_slider("Matrix size", [64, 128, 256, 512, 1024], COMPILE_SIZE, key="mem_size",
                                  bind="query-params")
    with time_col:
        run_inductor = ui.run_button("Compile and time", "mem_time", size, icon=":material/timer:",
                                     default=COMPILE_SIZE)
    with ui.input_errors():
        if run_dynamo:
            reports, recompiles, strict = ui.queued_status("Running torch._dynamo.explain…", lambda _: "Dynamo done",
                                                           compiling.dynamo_in_child, shapes, key="mem_dynamo")
            _show_breaks(reports)
            _show_recompiles(recompiles)
            _show_strict(strict, reports)
        if run_inductor:
            timing = ui.queued_status("Compiling with inductor…", lambda t: f"Compiled in {t.compile_s:.1f} s",
                                      compiling.compile_timing_in_child, int(size), key="mem_inductor")
            ui.plot(ui.compute(figs.compile_figure, timing), key="mem_compile_fig")
            st.caption(f"{compiling.payoff_sentence(timing)} Largest difference between eager and compiled outputs: "
                       f"{timing.max_abs_diff:.2e}.")
            ui.show_code(timing.code, key="mem_compile_code", file_name="compile_timing.py")


def _show_breaks(reports) -> None:
    cols = st.columns(len(reports))
    for col, r in zip(cols, reports, strict=True):
        with col:
            st.markdown(f"**{r.name}**: {r.graph_count} graph{'s' * (r.graph_count != 1)}, "
                        f"{r.break_count} break{'s' * (r.break_count != 1)}")
            st.code(r.source, language="python", wrap_lines=True)
            for reason in r.reasons:
                st.caption(f"Break: {reason}")
            with st.expander("Captured FX graph code"):
                for code in r.graph_code:
                    st.code(code, language="python", wrap_lines=True)


def _show_recompiles(rc) -> None:
    st.markdown("**Recompilation when the input shape changes** (frames compiled for `x.sin().cos() * 2`)")
    ui.table(pd.DataFrame([{"setting": k, "compiles": v, "graph inputs": " | ".join(rc.graphs[k])}
                               for k, v in rc.compiles.items()]), hide_index=True, width="stretch")
    ui.show_code(rc.code, key="mem_recompile_code", file_name="recompiles.py")


def _show_strict(s, reports) -> None:
    st.markdown("**`fullgraph=True`**: a graph break becomes an error instead of a silent split")
    ui.table(pd.DataFrame([{"function": k, "torch.compile(fn, fullgraph=True)": v} for k, v in s.fullgraph.items()]),
             whole=True)
    traced = [r.name for r in reports
              if r.break_count and ".item()" in r.source and not s.fullgraph[r.name].startswith("raises")]
    if traced:
        st.caption(f"{', '.join(traced)}: explain() split {'it' if len(traced) == 1 else 'each'} at a break, yet "
                   "fullgraph=True compiled one graph without error: under fullgraph dynamo traces a tensor's "
                   "`.item()` into the graph as a symbolic scalar instead of breaking there.")
    st.markdown(recompile_limit_sentence(s))
    ui.show_code(s.code, key="mem_strict_code", file_name="fullgraph_and_recompile_limit.py")


def recompile_limit_sentence(s) -> str:
    """What the recompile limit did to the shapes above, from the count of frames compiled under it."""
    head = (f"**Recompile limit**: `torch._dynamo.config.recompile_limit` is {s.default_limit} by default. With "
            f"`dynamic=False` and the limit set to {s.limit}, the {len(s.shapes)} calls above compiled {s.compiled} "
            f"graph{'s' * (s.compiled != 1)}")
    eager = len(set(s.shapes)) - s.compiled  # distinct shapes left without a graph
    if eager <= 0:
        return head + ": one per shape, the limit was not reached."
    return (head + f", the limit: {eager} shape{'s' * (eager != 1)} ran eagerly, uncompiled, and only a warning "
            "was logged (`torch._dynamo.config.fail_on_recompile_limit_hit = True` makes it raise).")


ui.page_header("memory")
ui.sections("memory", "mem_tab", {
    "Training step": training_section, "Caching allocator": allocator_section,
    "Streams & transfers": streams_section, "torch.compile": compile_section,
})
ui.interview_corner("memory", QUESTIONS)
