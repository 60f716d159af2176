"""Saving & deployment: state_dict, checkpoint design, TorchScript vs torch.export, ONNX, quantization."""

import pandas as pd
import streamlit as st

from demos.isolated import run_isolated
from demos.saving.checkpoint import checkpoint_code, checkpoint_contents, crash_during_save
from demos.saving.export import export_demo, trace_vs_script
from demos.saving.figures import (
    checkpoint_figure,
    onnx_latency_figure,
    paths_figure,
    quant_figure,
    scales_figure,
    state_bytes_figure,
)
from demos.saving.onnx_export import onnx_roundtrip
from demos.saving.quant import quant_report
from demos.saving.questions import QUESTIONS
from demos.saving.state import state_dict_report
from demos.saving.targets import deployment_table
from demos.saving.trace_sweep import trace_sweep, trace_sweep_figure
from demos.saving.traps import best_weights, strict_false
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

WIDTHS = (16, 32, 64, 128, 256, 512)
TRACE_X = -3.0  # the trace-vs-script test input until the visitor sets one
ONNX_SIZE = (64, 2)  # (width, hidden layers) of each tab's default case, run once per server without a press
QUANT_SIZE = (256, 2)


@ui.cache_data(max_entries=1)
def cached_traps() -> dict:
    return {"strict": strict_false(), "best": best_weights()}


@ui.cache_data(max_entries=1)
def cached_state():
    return state_dict_report()


@ui.cache_data(max_entries=16)
def cached_crash(fraction: float, width: int):
    return crash_during_save(fraction, width)


@ui.cache_data(max_entries=8)
def cached_contents(width: int):
    return checkpoint_contents(width)


@ui.cache_data(max_entries=16)
def cached_trace(test_value: float):
    return trace_vs_script(test_value)


@ui.cache_resource(max_entries=1, show_spinner=False)
def shared_sweep():
    """Run once per server and shared read-only (a frozen dataclass: nothing to copy on a rerun)."""
    return trace_sweep()


@ui.cache_resource(max_entries=16, show_spinner=False)
def sweep_chart(test_value: float):
    """Built once per test input and shared read-only: a warm rerun does not rebuild the figure."""
    return trace_sweep_figure(shared_sweep(), test_value)


@ui.cache_data(max_entries=1)
def cached_export():
    return run_isolated(export_demo)  # the default case runs on open: torch.export's state leaves with the child


@ui.cache_data(max_entries=8)
def cached_onnx(width: int, depth: int):
    return run_isolated(onnx_roundtrip, width, depth)  # onnx and onnxruntime leave with the child


@ui.cache_data(max_entries=8)
def cached_quant(width: int, depth: int):
    return run_isolated(quant_report, width, depth)  # torchao's imports (about 120 MB) leave with the child


# Figures are built once per measurement and shared read-only: building them costs more than a warm rerun may.
# Each is keyed on the timings it draws, so a result measured again (its cache entry evicted) gets its own figure.
@ui.cache_resource(max_entries=8, show_spinner=False)
def onnx_chart(_onnx, width: int, depth: int, timings: tuple[float, ...]):
    return onnx_latency_figure(_onnx, width, depth)


def timings_of(onnx, quant=None) -> tuple[float, ...]:
    """The measured times a figure draws: onnx's eager and onnxruntime medians, and the quantized rows' latency."""
    rows = quant.rows if quant is not None else ()
    return (onnx.eager_ms, onnx.ort_ms, *(r["latency ms (batch 256)"] for r in rows))


@ui.cache_resource(max_entries=8, show_spinner=False)
def quant_charts(width: int, depth: int):
    s = cached_quant(width, depth)[1]
    return quant_figure(s), scales_figure(s)


@ui.cache_resource(show_spinner=False)
def state_bytes_chart():
    return state_bytes_figure(cached_state().model_rows)


def table(rows) -> None:
    ui.table(pd.DataFrame(list(rows)), whole=True)  # cells hold sentences: shown whole, wrapped


def state_dict_section() -> None:
    r = cached_state()
    ui.prose("`state_dict()` is an ordered map from names to tensors: parameters **and** persistent buffers "
             "(BatchNorm's running statistics). It holds no code. The optimizer's own `state_dict()` keys its "
             "state by parameter *index*, so it only makes sense next to the same model.")
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Model `state_dict()`** (a Linear, a BatchNorm, and a non-persistent buffer)")
        table(r.model_rows)
        st.caption(f"On the module but not saved: {', '.join(r.hidden)} (registered with persistent=False).")
    with right:
        ui.plot(state_bytes_chart(), key="sv_state_bytes")
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Optimizer `state_dict()['state']`** after one Adam step")
        table(r.optimizer_state)
    with c2:
        st.markdown("**`param_groups`**: hyper-parameters and parameter indices")
        table(r.param_groups)
        st.metric("torch.save: weights only", f"{r.file_bytes_model:,} B")
        st.metric("torch.save: weights + Adam state", f"{r.file_bytes_checkpoint:,} B")
    st.subheader("Loading: strict keys, prefixes, devices, safety")
    a, b = st.columns(2)
    with a:
        st.markdown("`load_state_dict` after renaming `norm` → `bn` (**strict=True**, the default):")
        st.code(r.strict_error, language="text", wrap_lines=True)
        st.markdown(f"**strict=False** loads what matches and reports: missing `{list(r.missing)}`, "
                    f"unexpected `{list(r.unexpected)}`. Those layers keep random weights: read the report.")
    with b:
        st.markdown(f"`nn.DataParallel` and DDP hold the model as `self.module`, so their keys start with `module.`: "
                    f"`{r.prefixed_keys[0]}`. Loading them into the bare model fails:")
        st.code(r.prefix_error, language="text", wrap_lines=True)
        fixed = "loads, identical tensors" if r.prefix_fixed else "still differs"
        st.markdown(f"After `consume_prefix_in_state_dict_if_present(sd, 'module.')`: **{fixed}**.")
    a, b = st.columns(2)
    with a:
        st.markdown(f"**map_location**: a callable saw storages saved on `{', '.join(r.locations)}` "
                    f"({r.device_note}). `torch.load(f, map_location='cpu')` loads a GPU checkpoint on a laptop.")
    with b:
        st.markdown("**weights_only=True** (the default) refuses a checkpoint holding a custom class:")
        st.code(r.weights_only_error, language="text", wrap_lines=True)
        st.markdown(f"Inside `torch.serialization.safe_globals([TrainingConfig])` it loads: `{r.safe_globals_config}`.")
    ui.show_code(r.code, key="sv_state_code", file_name="state_dict_anatomy.py")
    st.subheader("Traps")
    traps = cached_traps()
    ui.trap_pair(traps["strict"], key="sv_trap_strict")
    ui.trap_pair(traps["best"], key="sv_trap_best")


def checkpoint_section() -> None:
    ui.prose("A checkpoint for **exact resume** holds everything whose value the next step depends on; a file "
             "for **serving** holds the weights. A save that crashes half-way must not destroy the last good "
             "checkpoint: write a temporary file, then `os.replace` it over the old one.")
    with ui.key_controls("sv_ckpt"):
        width = st.select_slider("Model width", WIDTHS, value=128, key="sv_ckpt_width", bind="query-params")
    contents = cached_contents(width)
    left, right = st.columns([2, 3])
    with left:
        table(contents.rows)
    with right:
        ui.plot(checkpoint_figure(contents.rows), key="sv_ckpt_fig")
    st.subheader("A crash in the middle of torch.save")
    with ui.key_controls("sv_crash"):  # after the first figure: stays in place, above the two outcomes
        fraction = st.slider("The process dies after this fraction of the new file is written", 0.05, 0.95, 0.5,
                             0.05, key="sv_crash_at", bind="query-params")
    with ui.input_errors():
        results = cached_crash(fraction, width)
        cols = st.columns(2)
        for col, res in zip(cols, results, strict=True):
            with col.container(border=True):
                st.markdown(f"**{res.strategy}**")
                st.markdown(f"File on disk after the crash: {res.bytes_on_disk:,} of the new checkpoint's "
                            f"{res.new_file_bytes:,} bytes (width {width} weights and the step).")
                if res.loaded_step is not None:
                    st.success(f"torch.load: {res.load_outcome}", icon=":material/check_circle:")
                else:  # the trap being demonstrated, not an input error
                    st.warning(f"torch.load: {res.load_outcome}", icon=":material/broken_image:")
    ui.show_code(checkpoint_code(width, fraction), key="sv_ckpt_code", file_name="atomic_checkpoint.py")


def export_section() -> None:
    ui.prose("`torch.jit.trace` runs the model once and records the ops it saw: a Python `if` on tensor values is "
             "frozen into whichever branch the example took. `torch.jit.script` compiles the Python, keeping the "
             "branch, but TorchScript is **deprecated in this PyTorch** (the warnings below are torch's own). "
             "The modern path is `torch.export`, which refuses data-dependent Python control flow outright and "
             "takes `torch.cond` instead.")
    with ui.key_controls("sv_trace"):
        value = st.number_input("Test input: every entry equals", -100.0, 100.0, TRACE_X, 1.0, key="sv_trace_x",
                                bind="query-params")
    with ui.input_errors():
        r = cached_trace(float(value))
        sweep = shared_sweep()
        ui.plot(sweep_chart(float(value)), key="sv_trace_sweep_fig")
        st.caption(f"Traced once on an all-ones input, then run on {len(sweep.values)} inputs from "
                   f"{sweep.values[0]:g} to {sweep.values[-1]:g}: the traced model differs from eager on "
                   f"{len(sweep.traced_wrong)} of them (every input whose sum is not positive, where eager and "
                   "script take `-h`)" + (f"; the dotted line marks the test input, {value:g}." if
                                          sweep.values[0] <= value <= sweep.values[-1] else "."))
        table(r.rows)
        for w in r.trace_warnings + r.script_warnings:
            st.caption(w)
        a, b = st.columns(2)
        a.markdown("**traced.code**: one branch, baked in")
        a.code(r.traced_code, language="python")
        b.markdown("**scripted.code**: the `if` survives")
        b.code(r.scripted_code, language="python")
        ui.show_code(r.code, key="sv_trace_code", file_name="trace_vs_script.py")
    st.subheader("torch.export, dynamic shapes and torch.cond")
    with ui.key_controls("sv_export"):  # after the first figure: stays in place, above what it runs
        exported = ui.run_button("Run torch.export (a few seconds)", "sv_export", default=())  # no inputs: runs on open
    if exported:
        with st.spinner("Exporting…"):
            e = ui.queued(cached_export)
        st.markdown("`torch.export.export` on the model with the Python `if`:")
        st.code(e.branch_error, language="text", wrap_lines=True)
        st.markdown(f"With `torch.cond` and `Dim('batch', min=1, max=64)` it exports in {e.seconds:.1f} s; the "
                    "ExportedProgram's graph holds both branches:")
        st.code(e.graph_code, language="python")
        table(e.checks)
        st.markdown("A batch of 65, outside the declared range, is refused by the program's guard:")
        st.code(e.dynamic_error, language="text", wrap_lines=True)
        ui.show_code(e.code, key="sv_export_code", file_name="export_cond.py")


def sized_run(prefix: str, default: tuple[int, int], label: str) -> tuple[int, int, bool]:
    """The MLP's width and depth and the button that runs them, in one key row: (width, depth, show the result)."""
    a, b, c = ui.key_controls(prefix).columns(3, vertical_alignment="bottom")
    w = a.select_slider("MLP width", WIDTHS, value=default[0], key=f"{prefix}_width", bind="query-params")
    d = b.slider("Hidden layers", 1, 4, default[1], key=f"{prefix}_depth", bind="query-params")
    with c:
        shown = ui.run_button(label, f"{prefix}_run", (w, d), default=default)
    return w, d, shown


def onnx_section() -> None:
    ui.prose("The dynamo-based `torch.onnx.export` captures the model with `torch.export`, translates it to ONNX "
             "operators, and can keep the batch axis symbolic. onnxruntime then runs it without PyTorch.")
    width, depth, shown = sized_run("sv_onnx", ONNX_SIZE, "Export to ONNX and run onnxruntime")
    if shown:
        r = ui.queued_status("Exporting with the dynamo exporter, then running onnxruntime…",
                             lambda _: "Exported, then run in onnxruntime", cached_onnx, width, depth, key="sv_onnx")
        c = st.columns(4)
        c[0].metric("export time", f"{r.export_s:.1f} s")
        c[1].metric(".onnx file", f"{r.file_bytes:,} B")
        c[2].metric("eager, batch 32", f"{r.eager_ms:.3f} ms")
        c[3].metric("onnxruntime, batch 32", f"{r.ort_ms:.3f} ms")
        ui.plot(onnx_chart(r, width, depth, timings_of(r)), key="sv_onnx_latency_fig")
        st.markdown(f"onnxruntime reports the input shape as `{r.input_shape}`: the batch axis is symbolic.")
        table(r.checks)
        left, right = st.columns([1, 2])
        with left:
            ui.graph(r.dot)
        with right:
            table([{"op_type": n["op_type"], "inputs": ", ".join(n["inputs"]), "outputs": ", ".join(n["outputs"])}
                   for n in r.nodes])
        ui.show_code(r.code, key="sv_onnx_code", file_name="onnx_roundtrip.py")


def quant_section() -> None:
    ui.prose("Dynamic quantization stores Linear weights as int8 with a scale (symmetric here: zero point 0, "
             "int8 = round(w / scale) with scale = max |w| / 127.5, as both APIs below do) and quantizes "
             "activations on the fly. Below, an MLP is trained here on a synthetic task, then quantized; size, "
             "held-out accuracy and latency are measured. Per-channel scales fit each output row's range, so "
             "they lose less than one scale for the whole tensor.")
    width, depth, shown = sized_run("sv_quant", QUANT_SIZE, "Train, quantize and measure")
    if shown:
        q, s = ui.queued_status("Training for 150 steps, quantizing, timing…",
                                lambda _: "Trained for 150 steps, quantized, timed", cached_quant, width, depth,
                                key="sv_quant")
        table(q.rows)
        st.markdown(f"The torchao int8 file is **{q.size_ratio:.1f}x smaller**. Latency is measured, not assumed: "
                    "int8 is only faster where the runtime has int8 kernels for this CPU.")
        st.caption(f"torch.ao.quantization says: “{q.legacy_warning}”")
        errors_fig, scales_fig = quant_charts(width, depth)
        ui.plot(errors_fig, key="sv_quant_fig")
        st.markdown(f"Per-tensor: one scale {s.tensor_scale:.2e}, zero point {s.tensor_zero_point}. Per-channel: "
                    f"{len(s.channel_scales)} scales from {min(s.channel_scales):.2e} to "
                    f"{max(s.channel_scales):.2e}.")
        ui.plot(scales_fig, key="sv_scales_fig")
        ui.show_code(q.code, key="sv_quant_code", file_name="quantize_torchao.py")


def targets_section() -> None:
    """Each row and bar quotes what this page measured: the last run behind each button, else its tab's default case
    (run once per server), and the trace at the default input.

    The trace row does not follow the other tab's input: only the open tab's widgets are in the URL, so a link to
    this tab could not carry it.
    """
    onnx_size, quant_size = ui.ran_with("sv_onnx_run") or ONNX_SIZE, ui.ran_with("sv_quant_run") or QUANT_SIZE
    export, onnx, (quant, _) = ui.queued_status(
        "Measuring each path (once per server)…", lambda _: "Each path measured", measured_paths, onnx_size,
        quant_size, key="sv_paths")
    ui.plot(paths_chart(onnx, quant, onnx_size, quant_size, timings_of(onnx, quant)), key="sv_paths_fig")
    st.caption(f"ONNX bars: MLP width {onnx_size[0]}, {onnx_size[1]} hidden layers; quantization bars: MLP width "
               f"{quant_size[0]}, {quant_size[1]} hidden layers, trained here. Different models and batches: compare "
               "bars within one model, not across. int8 is faster only where this CPU has int8 kernels.")
    table(deployment_table(state=cached_state(), trace=cached_trace(TRACE_X), export=export, onnx=onnx, quant=quant))
    st.caption(f"TorchScript row: the trace example and a test input of {TRACE_X:g}, which takes the other branch. "
               "The other rows and the bars quote the last run of each tab's button in this session, or that tab's "
               "default case.")


def measured_paths(onnx_size: tuple[int, int], quant_size: tuple[int, int]):
    """The export, ONNX and quantization results the Which path? tab quotes (cache hits once their tabs ran)."""
    return cached_export(), cached_onnx(*onnx_size), cached_quant(*quant_size)


@ui.cache_resource(max_entries=8, show_spinner=False)
def paths_chart(_onnx, _quant, onnx_size: tuple[int, int], quant_size: tuple[int, int], timings: tuple[float, ...]):
    return paths_figure(_onnx, onnx_size, _quant, quant_size)


ui.page_header("saving")
ui.prose("What to save for recovery, what to ship for serving, and which export path fits which target. Every "
         "export below really runs; every claim of equivalence is a measured difference.")
SECTIONS = (state_dict_section, checkpoint_section, export_section, onnx_section, quant_section, targets_section)
ui.section_tabs("saving", "sv_tab", SECTIONS)
ui.interview_corner("saving", list(QUESTIONS))
