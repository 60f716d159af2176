"""Saving & deployment: state_dict, checkpoint design, TorchScript vs torch.export, ONNX, quantization."""

import pandas as pd
import streamlit as st

from demos.saving import checkpoint, export, onnx_export, quant, state, targets, trace_sweep, traps
from demos.saving import figures as figs
from demos.saving.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

WIDTHS = (16, 32, 64, 128, 256, 512)
TRACE_X = -3.0  # the trace-vs-script test input until the visitor sets one
ONNX_SIZE = (64, 2)  # (width, hidden layers) of each tab's default case, run once per server without a press
QUANT_SIZE = (256, 2)


def table(rows) -> None:
    ui.table(pd.DataFrame(list(rows)), whole=True)  # cells hold sentences: shown whole, wrapped


def state_dict_section() -> None:
    ui.prose("`state_dict()` is an ordered map from names to tensors: parameters **and** persistent buffers "
             "(BatchNorm's running statistics). It holds no code. The optimizer's own `state_dict()` keys its "
             "state by parameter *index*, so it only makes sense next to the same model.")
    r = ui.compute(state.state_dict_report)  # after the text: a first visit reads it while this runs
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Model `state_dict()`** (a Linear, a BatchNorm, and a non-persistent buffer)")
        table(r.model_rows)
        st.caption(f"On the module but not saved: {', '.join(r.hidden)} (registered with persistent=False).")
    with right:
        ui.plot(ui.compute(figs.state_bytes_figure, r.model_rows), key="sv_state_bytes")
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
    ui.trap_pair(ui.compute(traps.strict_false), key="sv_trap_strict")
    ui.trap_pair(ui.compute(traps.best_weights), key="sv_trap_best")


def checkpoint_section() -> None:
    ui.prose("A checkpoint for **exact resume** holds everything whose value the next step depends on; a file "
             "for **serving** holds the weights. A save that crashes half-way must not destroy the last good "
             "checkpoint: write a temporary file, then `os.replace` it over the old one.")
    with ui.key_controls("sv_ckpt"):
        width = st.select_slider("Model width", WIDTHS, value=128, key="sv_ckpt_width", bind="query-params")
    contents = ui.compute(checkpoint.checkpoint_contents, width)
    left, right = st.columns([2, 3])
    with left:
        table(contents.rows)
    with right:
        ui.plot(ui.compute(figs.checkpoint_figure, contents.rows), key="sv_ckpt_fig")
    crash_part(width)


@st.fragment  # its own key row: moving the crash point reruns this part alone
def crash_part(width: int) -> None:
    st.subheader("A crash in the middle of torch.save")
    with ui.key_controls("sv_crash"):  # after the first figure: stays in place, above the two outcomes
        fraction = st.slider("The process dies after this fraction of the new file is written", 0.05, 0.95, 0.5,
                             0.05, key="sv_crash_at", bind="query-params")
    with ui.input_errors():
        demo = ui.compute(checkpoint.checkpoint_demo, width, fraction)
        cols = st.columns(2)
        for col, res in zip(cols, demo.crashes, strict=True):
            with col.container(border=True):
                st.markdown(f"**{res.strategy}**")
                st.markdown(checkpoint.crash_sentence(res, width))
                if res.loaded_step is not None:
                    st.success(f"torch.load: {res.load_outcome}", icon=":material/check_circle:")
                else:  # the trap being demonstrated, not an input error
                    st.warning(f"torch.load: {res.load_outcome}", icon=":material/broken_image:")
        ui.show_code(demo.code, key="sv_ckpt_code", file_name="atomic_checkpoint.py")


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
        r = ui.compute(export.trace_vs_script, float(value))
        sweep = ui.compute(trace_sweep.trace_sweep)
        ui.plot(ui.compute(trace_sweep.trace_sweep_figure, sweep, float(value)), key="sv_trace_sweep_fig")
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
    export_part()


@st.fragment  # its own key row: the button reruns this part alone
def export_part() -> None:
    st.subheader("torch.export, dynamic shapes and torch.cond")
    with ui.key_controls("sv_export"):  # after the first figure: stays in place, above what it runs
        exported = ui.run_button("Run torch.export (a few seconds)", "sv_export", default=())  # no inputs: runs on open
    if exported:
        with ui.input_errors():  # a run refused (too long a wait in line, or past its time limit) is a sentence
            show_export()


def show_export() -> None:
    with st.spinner("Exporting…"):
        e = ui.queued(export.export_in_child)
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
        with ui.input_errors():  # a run refused (too long a wait in line, or past its time limit) is a sentence
            show_onnx(width, depth)


def show_onnx(width: int, depth: int) -> None:
    r = ui.queued_status("Exporting with the dynamo exporter, then running onnxruntime…",
                         lambda _: "Exported, then run in onnxruntime", onnx_export.onnx_in_child, width, depth,
                         key="sv_onnx")
    c = st.columns(4)
    c[0].metric("export time", f"{r.export_s:.1f} s")
    c[1].metric(".onnx file", f"{r.file_bytes:,} B")
    c[2].metric("eager, batch 32", f"{r.eager_ms:.3f} ms")
    c[3].metric("onnxruntime, batch 32", f"{r.ort_ms:.3f} ms")
    ui.plot(ui.compute(figs.onnx_latency_figure, r, width, depth), key="sv_onnx_latency_fig")
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
        with ui.input_errors():  # a run refused (too long a wait in line, or past its time limit) is a sentence
            show_quant(width, depth)


def show_quant(width: int, depth: int) -> None:
    q, s = ui.queued_status("Training for 150 steps, quantizing, timing…",
                            lambda _: "Trained for 150 steps, quantized, timed", quant.quant_in_child, width,
                            depth, key="sv_quant")
    table(q.rows)
    st.markdown(f"The torchao int8 file is **{q.size_ratio:.1f}x smaller**. Latency is measured, not assumed: "
                "int8 is only faster where the runtime has int8 kernels for this CPU.")
    st.caption(f"torch.ao.quantization says: “{q.legacy_warning}”")
    ui.plot(ui.compute(figs.quant_figure, s), key="sv_quant_fig")
    st.markdown(f"Per-tensor: one scale {s.tensor_scale:.2e}, zero point {s.tensor_zero_point}. Per-channel: "
                f"{len(s.channel_scales)} scales from {min(s.channel_scales):.2e} to "
                f"{max(s.channel_scales):.2e}.")
    ui.plot(ui.compute(figs.scales_figure, s), key="sv_scales_fig")
    ui.show_code(q.code, key="sv_quant_code", file_name="quantize_torchao.py")


def targets_section() -> None:
    """Each row and bar quotes what this page measured: the last run behind each button, else its tab's default case
    (run once per server), and the trace at the default input.

    The trace row does not follow the other tab's input: only the open tab's widgets are in the URL, so a link to
    this tab could not carry it.
    """
    onnx_size, quant_size = ui.ran_with("sv_onnx_run") or ONNX_SIZE, ui.ran_with("sv_quant_run") or QUANT_SIZE
    with ui.input_errors():  # a run refused (too long a wait in line, or past its time limit) is a sentence
        show_paths(onnx_size, quant_size)


def show_paths(onnx_size: tuple[int, int], quant_size: tuple[int, int]) -> None:
    calls = ((export.export_in_child,), (onnx_export.onnx_in_child, *onnx_size),
             (quant.quant_in_child, *quant_size))  # cache hits once their tabs ran
    exported, onnx, (quantized, _) = ui.queued_each("Measuring each path (once per server)…", "Each path measured",
                                                    calls, key="sv_paths")
    ui.plot(ui.compute(figs.paths_figure, onnx, onnx_size, quantized, quant_size), key="sv_paths_fig")
    st.caption(f"ONNX bars: MLP width {onnx_size[0]}, {onnx_size[1]} hidden layers; quantization bars: MLP width "
               f"{quant_size[0]}, {quant_size[1]} hidden layers, trained here. Different models and batches: compare "
               "bars within one model, not across. int8 is faster only where this CPU has int8 kernels.")
    table(ui.compute(targets.deployment_table, state=ui.compute(state.state_dict_report),
                     trace=ui.compute(export.trace_vs_script, TRACE_X), export=exported, onnx=onnx, quant=quantized))
    st.caption(f"TorchScript row: the trace example and a test input of {TRACE_X:g}, which takes the other branch. "
               "The other rows and the bars quote the last run of each tab's button in this session, or that tab's "
               "default case.")


ui.page_header("saving")
ui.prose("What to save for recovery, what to ship for serving, and which export path fits which target. Every "
         "export below really runs; every claim of equivalence is a measured difference.")
ui.sections("saving", "sv_tab", {
    "state_dict": state_dict_section, "Checkpoints": checkpoint_section, "TorchScript vs export": export_section,
    "ONNX": onnx_section, "Quantization": quant_section, "Which path?": targets_section,
})
ui.interview_corner("saving", list(QUESTIONS))
