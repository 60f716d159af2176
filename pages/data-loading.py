"""Data loading: real DataLoader timelines, epoch boundaries, IterableDataset sharding, samplers, collate, pinning."""

from dataclasses import replace

import streamlit as st

from demos.data import figures, recording
from demos.data.collate import bucketing, pad_batch
from demos.data.pinning import MAX_MB, d2h_demo, d2h_verdict, pin_demo
from demos.data.questions import QUESTIONS
from demos.data.samplers import distributed_partition, repeats_caption, sampler_orders, weighted_sampling
from demos.data.streams import MAX_LENGTH, stream_demo
from demos.data.timeline import (
    DEFAULT_A,
    DEFAULT_B,
    EPOCH_DEFAULT,
    EPOCH_SETUP_MS,
    MAX_BATCH,
    MAX_IO_MS,
    MAX_PREFETCH,
    MAX_SETUP_MS,
    MAX_STEP_MS,
    MAX_TRANSFORM_MS,
    MAX_WORKERS,
    SERIAL_BUDGET_MS,
    LoaderConfig,
    Workload,
    compare,
    cores,
    default_cases,
    default_samples,
    epoch_boundaries,
    sample_choices,
    validate,
)
from demos.processes import START_METHOD
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

SLUG = "data-loading"


# ---------- widgets ----------

EPOCH_PREFETCH = 2
STREAM_LENGTH, STREAM_WORKERS = 12, 3  # the IterableDataset section's defaults

# The Workers tab opens on a recording of its two default runs (demos/data/recording.py: real runs of the same demos,
# with where and when they ran shown beside the figures); the IterableDataset tab runs its default case, once per
# server, when it opens. Every other setting, and the defaults again here, wait for their button.
DEFAULT_TIMELINE, DEFAULT_EPOCHS = default_cases()
DEFAULT_STREAMS = (STREAM_LENGTH, STREAM_WORKERS)


def batch_before_drawn(key: str, default: int) -> int:
    """A batch_size slider's value before it is drawn this run: its state, else its URL value, else its default. A URL
    value the slider cannot take counts as the default, as the slider will show it (not clamped: a clamped guess
    would offer other sample counts than the drawn slider does, and the tab would draw again)."""
    try:
        value = int(st.session_state.get(key, st.query_params.get(key, default)))
    except (TypeError, ValueError, OverflowError):
        return default
    return value if 1 <= value <= MAX_BATCH else default


OFFERED = "dl_offered_samples"  # session state: the sample counts the Samples slider offered on its last draw


def offered_samples(io_ms: float, transform_ms: float, step_ms: float) -> tuple[int, ...]:
    """Only sample counts whose run without workers fits the budget, at the smallest batch size of the tab."""
    smallest = min(batch_before_drawn(k, d) for k, d in (("dl_a_batch", DEFAULT_A.batch_size),
                                                          ("dl_b_batch", DEFAULT_B.batch_size),
                                                          ("dl_epoch_batch", EPOCH_DEFAULT.batch_size)))
    return sample_choices(io_ms, transform_ms, step_ms, smallest)


def workload_ui() -> Workload:
    st.markdown("**The workload** (shared by both configurations)")
    c1, c2, c3, c4 = st.columns(4)
    default = Workload()
    io_ms = c2.slider("I/O latency per sample (ms)", 0, MAX_IO_MS, int(default.io_ms), key="dl_io", bind="query-params",
                      help="__getitem__ sleeps this long: a read from disk or network.")
    transform_ms = c3.slider("CPU transform per sample (ms)", 0, MAX_TRANSFORM_MS, int(default.transform_ms),
                             key="dl_cpu", bind="query-params",
                             help="Real torch work (elementwise arithmetic on a 3x64x64 image) sized to take about "
                             "this long on one idle core.")
    step_ms = c4.slider("Training step per batch (ms)", 0, MAX_STEP_MS, int(default.step_ms), 5, key="dl_step",
                        bind="query-params",
                        help="The main process sleeps this long, like a CPU waiting for a GPU step.")
    choices = st.session_state[OFFERED] = offered_samples(io_ms, transform_ms, step_ms)
    samples = c1.select_slider("Samples", choices, value=default_samples(choices), key="dl_samples",
                               bind="query-params", help=f"Counts whose run without workers stays under "
                               f"{SERIAL_BUDGET_MS / 1000:g} s with these costs: up to {choices[-1]} now.")
    return Workload(samples, float(io_ms), float(transform_ms), float(step_ms))


def config_ui(prefix: str, title: str, default: LoaderConfig, workers_box) -> LoaderConfig:
    """A loader's settings; its num_workers, the one a presenter changes while talking, goes in `workers_box`."""
    num_workers = workers_box.slider(f"{prefix.upper()}: num_workers", 0, MAX_WORKERS, default.num_workers,
                                     key=f"dl_{prefix}_workers", bind="query-params")
    st.markdown(f"**{title}**")
    batch_size = st.slider("batch_size", 1, MAX_BATCH, default.batch_size, key=f"dl_{prefix}_batch",
                           bind="query-params")
    prefetch = st.slider("prefetch_factor", 1, MAX_PREFETCH, default.prefetch_factor, key=f"dl_{prefix}_prefetch",
                         bind="query-params",
                         disabled=num_workers == 0, help="Batches each worker may have requested ahead.")
    left, right = st.columns(2)
    persistent = left.toggle("persistent_workers", default.persistent_workers, key=f"dl_{prefix}_persistent",
                             bind="query-params", disabled=num_workers == 0)
    pin = right.toggle("pin_memory", default.pin_memory, key=f"dl_{prefix}_pin", bind="query-params")
    return LoaderConfig(num_workers, batch_size, prefetch, persistent, pin)


def recorded_note(runs, button: str) -> None:
    """Where the recording shown was made, beside its figure, and how to run it here instead."""
    p = runs.provenance
    st.caption(f":material/history: **Recorded**, not run on this server: this app's own code ran these settings "
               f"with `{p['command']}` on {p['date']}, host `{p['host']}` ({p['cpu']}, {p['cores']} cores), torch "
               f"{p['torch']}. Press **{button}** to run them here.")


def live_or_recorded(key: str, params: tuple, running: str, demo, button: str, part: str):
    """(result, where it was recorded): the visitor's run once they pressed `key`'s button for these `params`, else
    the recording's `part` ("comparison" or "epochs") of the defaults, with its provenance beside it ("" for a run)."""
    if ui.ran_with(key) == params:
        return ui.queued_status(running, finished(running), demo, *params, key=key), ""
    runs = ui.compute(recording.default_runs)
    recorded_note(runs, button)
    return getattr(runs, part), recording.recorded_on(runs.provenance)


# ---------- sections ----------

def intro() -> None:
    ui.page_header(SLUG)
    ui.prose(
        "Every timeline here comes from a real `torch.utils.data.DataLoader` with real worker processes: each "
        "sample is stamped inside the worker that produced it (`time.perf_counter`, which on Linux reads the "
        "machine-wide `CLOCK_MONOTONIC`, so worker and main-process times share one axis), and the main loop "
        f"stamps its own waits and steps. Workers start with `multiprocessing_context='{START_METHOD}'`: a "
        "threaded server must not `fork` itself, and `spawn` re-imports torch in every worker (seconds each). "
        f"This host has **{cores()} CPU cores**; torch warns when num_workers exceeds that, and the timeline shows "
        "why."
    )


def workers_section() -> None:
    """The headline timeline and the epoch boundary below it: the second runs the workload set in the first."""
    ui.legend(figures.GANTT_LEGEND)  # the colours of both timelines
    epochs_part(timeline_section())


def timeline_section() -> Workload:
    st.subheader("Timeline: who waits for whom")
    ui.steps([
        "Workers run `__getitem__` for the indices the sampler hands out and collate them into batches.",
        "The main loop asks for the next batch (red while it waits), then runs the training step (blue).",
        "With enough workers the next batch is ready before the step ends: no red between steps.",
        "The speedup is capped by the slowest stage: the step, the workers' share of loading, or the cores' "
        "share of CPU work. More workers than cores cannot speed up CPU-bound loading.",
    ], key="dl_timeline_steps")
    with ui.key_controls("dl_timeline"):
        workers_a, workers_b, run_box = st.columns(3, vertical_alignment="bottom")
    with ui.settings("dl_timeline", label="Workload and loader settings"):
        workload = workload_ui()
        left, right = st.columns(2, gap="large")
        with left:
            a = config_ui("a", "Configuration A", DEFAULT_A, workers_a)
        with right:
            b = config_ui("b", "Configuration B", DEFAULT_B, workers_b)
    params = (workload, a, b)
    with ui.input_errors():
        for cfg in (a, b):
            validate(workload, cfg)
        with run_box:
            shown = ui.run_button(RUN_BOTH, "dl_timeline", params, default=DEFAULT_TIMELINE, type="primary")
        if not shown:
            st.info(f"Press the button to run both DataLoaders (a few seconds on an idle host: the workload "
                    f"without workers is capped at {SERIAL_BUDGET_MS / 1000:g} s, and every run has a time limit).",
                    icon=":material/play_circle:")
            return workload
        result, recorded = live_or_recorded("dl_timeline", params, RUNNING_BOTH, compare, RUN_BOTH, "comparison")
        show_comparison(result, recorded)
    return workload


RUN_BOTH, RUN_EPOCHS = "Run both loaders", "Run two epochs, off and on"  # the buttons
RUNNING_BOTH, RUNNING_EPOCHS, RUNNING_STREAMS = ("Running real DataLoaders", "Running two epochs twice",
                                                 "Loading streams with real workers")  # their runs' status labels


def finished(label: str):
    """The label of a run's status once it is done."""
    return lambda _result: f"{label} done"


def show_comparison(result, recorded: str) -> None:
    cols = st.columns(2, gap="large")
    for col, name, run in ((cols[0], "A", result.a), (cols[1], "B", result.b)):
        with col:
            st.markdown(f"**{name}: {run.config.label}**")
            m1, m2, m3 = st.columns(3)
            m1.metric("samples/s", f"{run.samples_per_s:.1f}")
            m2.metric("starved", f"{run.starved_fraction:.0%}", help="Share of the run the main loop waited for data.")
            m3.metric("speedup", f"{result.speedup(run):.2f}x", delta=f"bound {result.bound(run):.1f}x",
                      delta_color="off", delta_arrow="off",
                      help="Measured samples/s over the same workload with num_workers=0, next to the best the "
                      "settings allow.")
            st.markdown(result.verdict(run))
            st.caption(f"Median transform {run.median_transform_ms:.1f} ms per sample as measured where it ran.")
            for note in run.warnings:
                st.caption(f"torch says: {note}")
    ui.plot(ui.compute(figures.comparison_gantt, result, recorded), key="dl_gantt")
    st.caption(f"Both runs on one time axis. {timeline_notes(result, recorded)}")
    ui.show_code(result.code, key="dl_timeline_code", file_name="dataloader_timeline.py")


def timeline_notes(result, recorded: str) -> str:
    """The fork server's part and the host's load, said of the host the runs were made on (a recording's or this
    server)."""
    server = (f"The fork server (torch imported once, {result.fork_server_s:.2f} s) was started before the clock "
              "and stopped after the run." if result.fork_server_s else "No worker process was needed.")
    host = "the recording host's" if recorded else "this host's"
    busy = (" — that host was busy, so CPU-heavy settings measured slower than the bound suggests"
            if result.load_average > result.cores else "")
    return (f"{server} The bound assumes perfect overlap; the measured number also pays worker start-up and the first "
            f"batch. Load average right after the run, {host}: {result.load_average:.1f} on {result.cores} cores"
            f"{busy}.")


@st.fragment  # its own key row: a change reruns this part alone (the workload comes from the timeline above)
def epochs_part(workload: Workload) -> None:
    st.subheader("Epoch boundaries: persistent_workers")
    ui.prose("Without `persistent_workers`, every `iter(loader)` (every epoch) starts new workers, and each new "
             "worker pays whatever its dataset sets up once per process (opening files, connecting to storage, "
             "loading an index) before its first batch. With it, the same workers carry on into the next epoch. "
             "Starting a worker itself is cheap here (a warm fork server with torch imported); the setup is what "
             "the slider below sets.")
    with ui.key_controls("dl_epochs"):  # stays just above its own figure: the timeline's row is the one moved
        c1, c2, c3, run_box = st.columns([1, 1, 1, 1.4], vertical_alignment="bottom")  # the button label whole
    workers = c1.slider("num_workers", 1, MAX_WORKERS, EPOCH_DEFAULT.num_workers, key="dl_epoch_workers",
                        bind="query-params")
    batch = c2.slider("batch_size", 1, MAX_BATCH, EPOCH_DEFAULT.batch_size, key="dl_epoch_batch", bind="query-params")
    if offered_samples(workload.io_ms, workload.transform_ms, workload.step_ms) != st.session_state.get(OFFERED):
        st.rerun()  # this batch size changes which sample counts the workload above may offer: redraw the tab
    setup = c3.slider("Per-worker setup (ms)", 0, MAX_SETUP_MS, EPOCH_SETUP_MS, 50, key="dl_epoch_setup",
                      bind="query-params", help="Slept once per process, on its first sample, inside the dataset.")
    params = (replace(workload, setup_ms=float(setup)), LoaderConfig(workers, batch, EPOCH_PREFETCH, False, False))
    with ui.input_errors():
        validate(*params)
        with run_box:
            shown = ui.run_button(RUN_EPOCHS, "dl_epochs", params, default=DEFAULT_EPOCHS, type="primary")
        if not shown:
            st.info("Uses the workload above; press the button to run two epochs twice.",
                    icon=":material/play_circle:")
            return
        r, recorded = live_or_recorded("dl_epochs", params, RUNNING_EPOCHS, epoch_boundaries, RUN_EPOCHS, "epochs")
        off, on = r.off, r.on
        c1, c2 = st.columns(2)
        c1.metric("epoch 1 first batch, persistent off", f"{1000 * off.epoch_startup_s[1]:.0f} ms")
        c2.metric("epoch 1 first batch, persistent on", f"{1000 * on.epoch_startup_s[1]:.0f} ms",
                  delta=f"{1000 * (on.epoch_startup_s[1] - off.epoch_startup_s[1]):+.0f} ms", delta_color="inverse")
        st.markdown(r.sentence())
        ui.plot(ui.compute(figures.epochs_gantt, r, recorded), key="dl_epochs_fig")
        ui.show_code(r.code, key="dl_epochs_code", file_name="persistent_workers.py")


def streams_section() -> None:
    st.subheader("Dataset vs IterableDataset: sharding")
    ui.prose("A map-style `Dataset` is indexed: the sampler hands each index to one worker. An `IterableDataset` "
             "is a stream: each worker gets its own copy and iterates it from the start, so without sharding "
             "every sample arrives once per worker. The fix is to shard in `__iter__` with `get_worker_info()`.")
    with ui.key_controls("dl_streams"):
        c1, c2, run_box = st.columns(3, vertical_alignment="bottom")
    length = c1.slider("Stream length", 4, MAX_LENGTH, STREAM_LENGTH, key="dl_stream_len", bind="query-params")
    workers = c2.slider("num_workers", 1, MAX_WORKERS, STREAM_WORKERS, key="dl_stream_workers", bind="query-params")
    params = (length, workers)
    with ui.input_errors():
        with run_box:
            pressed = ui.run_button("Load both streams", "dl_streams", params, default=DEFAULT_STREAMS, type="primary")
        if not pressed:
            st.info("Press the button to load the unsharded and the sharded stream with real workers.",
                    icon=":material/play_circle:")
            return
        r = ui.queued_status(RUNNING_STREAMS, finished(RUNNING_STREAMS), stream_demo, *params, key="dl_streams")
        trap, right = st.columns(2)
        trap.metric("without sharding: samples (duplicates)", f"{len(r.naive)} ({r.naive_duplicates})")
        right.metric("sharded: samples (duplicates)", f"{len(r.sharded)} ({r.sharded_duplicates})")
        ui.plot(ui.compute(figures.stream_figure, r), key="dl_streams_fig")
        ui.show_code(r.code, key="dl_streams_code", file_name="iterable_sharding.py")


def samplers_section() -> None:
    ui.prose("A sampler yields the indices a map-style dataset is read at; `shuffle=True` is just a "
             "`RandomSampler`. A `BatchSampler` groups indices into batches, a `WeightedRandomSampler` draws by "
             "weight, and a `DistributedSampler` gives each rank its own slice. All drawn by torch now.")
    order_part()
    weighted_part()
    distributed_part()


@st.fragment  # each part below has its own key row: a change reruns that part alone
def order_part() -> None:
    st.subheader("Order: sequential, random, random with replacement")
    with ui.key_controls("dl_order"):
        c1, c2 = st.columns(2)
        length = c1.slider("Dataset length", 4, 24, 10, key="dl_order_len", bind="query-params")
        seed = c2.number_input("Seed", 0, 10_000, 0, key="dl_order_seed", bind="query-params")
    with ui.input_errors():
        orders = ui.compute(sampler_orders, length, int(seed))
        ui.plot(ui.compute(figures.order_figure, orders), key="dl_order_fig")
        st.caption(repeats_caption(orders.orders) + " BatchSampler then groups indices: "
                   + "; ".join(f"`{k}` → {v}" for k, v in orders.batches.items()))
        ui.show_code(orders.code, key="dl_order_code", file_name="samplers.py")


@st.fragment
def weighted_part() -> None:
    st.subheader("WeightedRandomSampler on an imbalanced dataset")
    with ui.key_controls("dl_weighted"):  # this and the next row stay just above their own figures
        c1, c2 = st.columns([2, 1])
        sizes = c1.text_input("Class sizes", "900, 90, 10", key="dl_class_sizes", bind="query-params",
                              help="2 to 8 whole numbers, each 1 to 10000.")
        batch = c2.slider("Batch size", 1, 256, 32, key="dl_weighted_batch", bind="query-params")
    with ui.input_errors():
        w = ui.compute(weighted_sampling, sizes, batch)
        ui.plot(ui.compute(figures.weighted_figure, w), key="dl_weighted_fig")
        st.caption(f"Batches holding the rarest class: {w.batches_with_rarest[0]:.0%} with shuffle=True, "
                   f"{w.batches_with_rarest[1]:.0%} weighted. The price: with replacement, a weighted epoch sees "
                   f"only {w.unique_fraction:.0%} distinct samples (rare ones repeat, common ones are skipped).")
        ui.show_code(w.code, key="dl_weighted_code", file_name="weighted_sampler.py")


@st.fragment
def distributed_part() -> None:
    st.subheader("DistributedSampler across simulated ranks")
    with ui.key_controls("dl_dist"):
        c1, c2, c3 = st.columns(3)
        d_len = c1.slider("Dataset length", 1, 64, 10, key="dl_dist_len", bind="query-params")
        ranks = c2.slider("Ranks (world size)", 1, 8, 4, key="dl_dist_ranks", bind="query-params")
        shuffle = c3.toggle("shuffle", True, key="dl_dist_shuffle", bind="query-params")
    with ui.input_errors():
        d = ui.compute(distributed_partition, d_len, ranks, shuffle)
        ui.plot(ui.compute(figures.distributed_figure, d), key="dl_dist_fig")
        same = d.epochs["epoch 0"] == d.epochs["epoch 1 without set_epoch"]
        st.caption(f"Padding: {d.padding} repeated index(es) (red) so every rank gets {len(d.epochs['epoch 0'][0])}. "
                   f"Epoch 1 without set_epoch is {'identical to' if same else 'different from'} epoch 0; "
                   "after set_epoch(1) the order changes.")
        ui.show_code(d.code, key="dl_dist_code", file_name="distributed_sampler.py")


def batches_section() -> None:
    """How a batch is built (collate_fn, bucketing) and handed to the device (pin_memory)."""
    st.subheader("collate_fn: variable-length sequences")
    ui.prose("`collate_fn` turns a list of samples into one batch. The default stacks tensors, which needs equal "
             "shapes; sequences need padding to the longest one and a mask that says which positions are real.")
    pad_part()
    bucket_part()
    pinning_part()
    d2h_section()


@st.fragment  # each part below has its own key row: a change reruns that part alone
def pad_part() -> None:
    with ui.key_controls("dl_pad"):
        lengths = st.text_input("Sequence lengths in one batch", "5, 3, 8, 2", key="dl_lengths",
                                bind="query-params", help="2 to 12 whole numbers, each 1 to 48.")
    with ui.input_errors():
        p = ui.compute(pad_batch, lengths)
        trap, correct = st.columns(2, gap="large")
        with trap:
            st.markdown("**The trap: default_collate**")
            if p.default_error:
                st.warning(f"torch: {p.default_error}", icon=":material/cancel:")
            else:
                st.success("All lengths are equal, so default_collate stacks them.", icon=":material/check_circle:")
        with correct:
            st.markdown(f"**A padding collate: batch {p.shape}, {p.padding_fraction:.0%} padding**")
            ui.plot(ui.compute(figures.pad_figure, p), key="dl_pad_fig")
        ui.show_code(p.code, key="dl_pad_code", file_name="pad_collate.py")


@st.fragment
def bucket_part() -> None:
    st.subheader("Bucketing by length")
    with ui.key_controls("dl_bucket"):  # this and pin_memory's row stay in place, below the first figure
        c1, c2 = st.columns(2)
        sequences = c1.slider("Sequences", 64, 4096, 1024, 64, key="dl_bucket_n", bind="query-params")
        batch = c2.slider("Batch size", 2, 128, 32, key="dl_bucket_batch", bind="query-params")
    with ui.input_errors():
        bk = ui.compute(bucketing, sequences, batch)
        m1, m2 = st.columns(2)
        m1.metric("padding, shuffled batches", f"{bk.random_padding:.1%}")
        m2.metric("padding, bucketed by length", f"{bk.bucketed_padding:.1%}",
                  delta=f"{100 * (bk.bucketed_padding - bk.random_padding):+.1f} points", delta_color="inverse")
        ui.plot(ui.compute(figures.bucket_figure, bk), key="dl_bucket_fig")
        ui.show_code(bk.code, key="dl_bucket_code", file_name="bucketing.py")


@st.fragment
def pinning_part() -> None:
    st.subheader("pin_memory")
    ui.prose("Pinned (page-locked) host memory cannot be paged out, so the GPU's DMA engine can read it directly: "
             "`x.to('cuda', non_blocking=True)` from pinned memory returns at once and the copy overlaps compute. "
             "From pageable memory the driver first copies into a pinned staging buffer and the copy blocks. "
             "`DataLoader(pin_memory=True)` pins each batch in a background thread of the main process.")
    with ui.key_controls("dl_pin"):
        megabytes = st.slider("Tensor size (MiB)", 1, MAX_MB, 16, key="dl_pin_mb", bind="query-params")
    with ui.input_errors():
        r = ui.compute(pin_demo, megabytes)
        c1, c2, c3 = st.columns(3)
        c1.metric("accelerator", r.accelerator or "none")
        c2.metric(f"host copy of {megabytes} MiB (ms)", f"{r.copy_ms:.2f}",
                  help="A pageable clone: the copy that pinning a batch also has to make.")
        c3.metric("tensor.pin_memory() (ms)", "unavailable" if r.pin_ms is None else f"{r.pin_ms:.2f}")
        if r.pin_error:
            st.warning(f"This host has no accelerator, so torch refuses to pin: {r.pin_error} "
                       f"DataLoader(pin_memory=True) warns: {r.loader_warning}", icon=":material/memory:")
        if r.h2d_pinned_gbps is not None:
            st.metric("host-to-device GB/s: pageable → pinned", f"{r.h2d_pageable_gbps:.1f} → {r.h2d_pinned_gbps:.1f}")
        else:
            st.caption("Host-to-device copy speed pinned vs pageable is measured only where CUDA is present; the code "
                       "below measures it on a CUDA machine.")
        ui.show_code(r.code, key="dl_pin_code", file_name="pinned_copy.py")


def d2h_section() -> None:
    st.subheader("The trap: reading a non_blocking copy to the host too early")
    ui.prose("`y = x.to('cpu', non_blocking=True)` returns before the copy has finished: `y` is page-locked host "
             "memory that the GPU is still writing. Reading it before `torch.cuda.synchronize()` (or an event's "
             "`synchronize()`) can see memory the copy has not reached yet: stale bytes of an earlier tensor (the "
             "caching host allocator reuses pinned blocks) or uninitialized memory, with no error. Host-to-device "
             "copies are safe to issue this way because later kernels on the same stream wait for them; the host "
             "does not.")
    view = ui.compute(d2h_demo)
    d = view.trap
    if d is None:
        st.info("No CUDA GPU here: a device-to-host copy is only asynchronous on a GPU, so this trap cannot run on "
                "this host. The snippet below runs it on yours and prints both reads.", icon=":material/memory:")
    else:
        trap, right = st.columns(2)
        trap.metric("sum read before synchronize (trap)", f"{d.read_early:,.0f}",
                    delta=f"{d.read_early - d.expected:+,.0f} vs the GPU's", delta_color="off")
        right.metric("sum read after synchronize", f"{d.read_after_sync:,.0f}",
                     delta=f"{d.read_after_sync - d.expected:+,.0f} vs the GPU's", delta_color="off")
        st.caption(d2h_verdict(d))
    ui.show_code(view.code, key="dl_d2h_code", file_name="d2h_non_blocking.py")


intro()
ui.sections(SLUG, "dl_tab", {"Workers & epochs": workers_section, "IterableDataset": streams_section,
                             "Samplers": samplers_section, "collate_fn & pin_memory": batches_section})
ui.interview_corner(SLUG, QUESTIONS)
