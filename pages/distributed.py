"""Distributed: real gloo process groups on this server — collectives, DDP, sampler, FSDP, TP/PP, launch."""

import pandas as pd
import streamlit as st

from demos.distributed import calculators, pipeline, runs, stories, views
from demos.distributed import figures as figs
from demos.distributed.params import BUCKET_MB, feature_choices, micro_batch_choices, nearest_choice, validate_params
from demos.distributed.questions import QUESTIONS
from pages import ui
from pages.shell.entry import require_shell

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead

SLUG = "distributed"


def collective_figure(run: runs.DistRun, op: str):
    """Every rank's tensor before and after `op`, computed once per run and collective."""
    return ui.compute(figs.collective_figure, ui.compute(views.collective_view, run, op))


def sampler_figure(run: runs.DistRun, label: str):
    return ui.compute(figs.sampler_figure, ui.compute(views.sampler_view, run), label)


DEFAULT_WORLD = 2
MODEL_DEFAULTS = {"layers": 3, "width": 64, "per_rank": 8}
# Each tab's settings when it opens (its widgets start from them). At these settings and DEFAULT_WORLD ranks the
# tab's run shows without a press: it runs once per server and every visitor shares it. FSDP opens on its ZeRO
# chart instead, so its run waits for the button.
DEFAULTS = {
    "collectives": {"length": 3, "ring_numel": "100000", "seed": 0},
    "ddp": {**MODEL_DEFAULTS, "bucket_cap_mb": "0.02", "micro_batches": 4, "head_first": True, "seed": 0},
    "sampler": {"dataset": 10, "shuffle": True, "drop_last": False, "seed": 0},
    "tensor_parallel": {"d_in": 8, "d_out": 8, "batch": 2, "seed": 0},
    "env": {},
}


def button_params(demo: str, world: int, raw: dict) -> tuple:
    """What a run of `demo` is cached on: the world size and the validated parameters."""
    return world, tuple(sorted(validate_params(demo, world, raw).items()))


def run_button(demo: str, world: int, raw: dict, label: str, place) -> runs.DistRun | None:
    """Validate now; run the tab's default case at once, any other setting when the button is pressed, and show
    that run until its inputs change. The button goes in `place` (beside its key inputs), the run's lines below."""
    params = button_params(demo, world, raw)
    default = button_params(demo, DEFAULT_WORLD, DEFAULTS[demo]) if demo in DEFAULTS else None
    with place:
        shown = ui.run_button(f"Run {label} on {world} ranks", f"dist_{demo}", params, default=default,
                              type="primary")
    if not shown:
        if ui.ran_with(f"dist_{demo}") is None:
            st.info(f"Press the button to start {world} real processes (gloo on 127.0.0.1). Each setting's result "
                    "is cached, so running it again is instant.", icon=":material/info:")
        return None
    shown = st.session_state.setdefault("dist_shown_runs", set())
    if (demo, params) in shown:  # cached since this session saw it: a line, not st.status (which pauses 50 ms)
        run = ui.queued(runs.run_demo, demo, *params)
        st.caption(f"{label}: {run.source}")
    else:
        line = st.empty()  # the place in line, if the run waits, above the status
        with st.status(f"{label}: starting {world} gloo ranks…") as status:
            run = ui.queued(runs.run_demo, demo, *params, notice=line)
            status.update(label=f"{label}: {run.source}", state="complete")
        shown.add((demo, params))
    if run.scaled:
        st.info(run.scaled, icon=":material/memory:")
    return run


# ---- renderers (used for live runs and for loaded result files) ---------------------------------------------

def show_collectives(run: runs.DistRun, key: str) -> None:
    collective_part(run, key)
    st.subheader("The trap: reduce is not all_reduce")
    left, right = st.columns(2)
    with left:
        st.markdown("**all_reduce(SUM)**: every rank holds the sum.")
        ui.plot(collective_figure(run, "all_reduce_sum"), key=f"{key}_trap_ok")
    with right:
        st.markdown(stories.reduce_caption(run.world_size))
        ui.plot(collective_figure(run, "reduce"), key=f"{key}_trap_bad")
    st.subheader("Ring all_reduce: bytes sent per rank")
    rows = ui.compute(views.ring_rows, run)
    ui.prose(ui.compute(stories.ring_summary, run, rows))
    ui.plot(ui.compute(figs.ring_figure, rows), key=f"{key}_ring_fig")
    ui.table(pd.DataFrame(rows), hide_index=True)


@st.fragment  # its own key row: choosing a collective reruns this part alone
def collective_part(run: runs.DistRun, key: str) -> None:
    # Its eleven choices take the whole key row and wrap onto two lines there; on the whiteboard its label's line
    # would make the row too tall (the figure names the collective shown).
    label = "collapsed" if ui.whiteboard_on() else "visible"
    with ui.key_controls(key):
        op = st.segmented_control("Collective", list(views.OPS), default="all_reduce_sum", key=f"{key}_op", wrap=True,
                                  label_visibility=label,
                                  bind="query-params" if key == "dist_live" else None) or "all_reduce_sum"
    st.markdown(f"**{op}** — {views.OPS[op]}")
    ui.plot(collective_figure(run, op), key=f"{key}_coll_fig")
    ui.legend(figs.collective_legend(run.world_size))
    st.caption("Block colour = the rank the value came from (rank 0 blue, rank 1 orange, rank 2 green, rank 3 red); "
               "pink = mixed from every rank by a reduction; grey ? = undefined: after reduce a non-root rank's "
               "buffer holds whatever the backend left there.")


def show_ddp(run: runs.DistRun, key: str) -> None:
    view = ui.compute(views.ddp_view, run)
    last = len(view["iterations"]) - 1
    first_it, last_it = view["iterations"][0], view["iterations"][last]
    a, b, c, d = st.columns(4)
    a.metric("buckets, iteration 1", len(first_it["buckets"]))
    b.metric(f"buckets, iteration {last + 1}", len(last_it["buckets"]))
    c.metric(f"overlap in iteration {last + 1}", f"{views.overlap_ms(last_it):.2f} ms",
             help="Time bucket all_reduces ran while some layer's backward was still running.")
    d.metric("max |DDP grad − 1-process grad|", f"{view['max_diff_vs_single']:.1e}",
             help=f"Across ranks, gradients differ by at most {view['max_diff_across_ranks']:.1e}.")
    ui.plot(ui.compute(figs.ddp_timeline_figure, view, (0, last)), key=f"{key}_timeline")
    ui.legend(figs.DDP_LEGEND)
    cap_mb = float(run.params["bucket_cap_mb"])
    ddp_steps_part(ui.compute(stories.ddp_story, view, cap_mb), key)
    buckets_part(view, views.bucket_cap_bytes(cap_mb), key)
    st.subheader("Gradient accumulation: no_sync() vs syncing every micro-batch")
    acc = view["accumulation"]
    left, right = st.columns(2)
    left.metric(f"all_reduces with no_sync() over {acc['micro_batches']} micro-batches",
                acc["all_reduces"]["no_sync"])
    right.metric("all_reduces when every micro-batch syncs (the trap)", acc["all_reduces"]["every_step"],
                 delta=acc["all_reduces"]["every_step"] - acc["all_reduces"]["no_sync"], delta_color="inverse")
    st.caption(stories.accumulation_caption(acc))
    ui.trap_pair(ui.compute(stories.no_sync_trap, run), key=f"{key}_trap_no_sync")
    st.subheader("find_unused_parameters")
    ok, bad = view["unused"]["True"], view["unused"]["False"]
    left, right = st.columns(2)
    with left:
        st.markdown("**Without it** (the model has a branch forward never uses), the second iteration raises:")
        st.code(f"RuntimeError: {bad['error']}" if not bad["ok"] else "no error on this backend", language="text",
                wrap_lines=True)
    with right:
        st.markdown("**With `find_unused_parameters=True`**:")
        if ok["ok"]:
            st.success("Two iterations ran: DDP marks unused parameters ready after each forward.",
                       icon=":material/check_circle:")
        else:  # the recorded error text, shown literally (it may come from an uploaded file)
            st.code(f"RuntimeError: {ok['error']}", language="text", wrap_lines=True)


@st.fragment  # a step shown in whiteboard mode reruns the steps alone
def ddp_steps_part(steps: list[str], key: str) -> None:
    ui.steps(steps, key=f"{key}_steps")


@st.fragment  # opening the tables reruns this part alone; closed, they are not sent
def buckets_part(view: dict, cap: int, key: str) -> None:
    panel = st.expander("Buckets: size and parameters, first vs last iteration", key=f"{key}_buckets",
                        on_change="rerun")
    if not panel.open:
        return
    last = len(view["iterations"]) - 1
    with panel:
        for label, it in (("iteration 1", view["iterations"][0]), (f"iteration {last + 1}", view["iterations"][last])):
            st.markdown(f"**{label}** (cap {cap:,} B)")
            ui.table(pd.DataFrame([{"bucket": bk["index"], "bytes": bk["bytes"], "bytes − cap": bk["bytes"] - cap,
                                    "parameters": ", ".join(bk["params"]),
                                    "all_reduce start ms": round(bk["start"], 3), "end ms": round(bk["end"], 3)}
                                   for bk in it["buckets"]]), hide_index=True)


def show_sampler(run: runs.DistRun, key: str) -> None:
    view = ui.compute(views.sampler_view, run)
    e0 = view["views"]["epoch 0"]
    a, b, c, d = st.columns(4)
    a.metric("dataset", view["dataset"])
    b.metric("samples per rank", view["num_samples"])
    c.metric("padding repeats", e0["padding"],
             help="Extra reads of indices from the start of the order, so every rank gets the same count.")
    d.metric("indices dropped", e0["dropped"], help="With drop_last=True the tail that does not divide evenly.")
    ui.plot(sampler_figure(run, "epoch 0"), key=f"{key}_s0")
    st.caption(stories.sampler_caption(view, run.world_size, run.params))
    left, right = st.columns(2)
    with left:
        ui.plot(sampler_figure(run, "epoch 1 after set_epoch(1)"), key=f"{key}_s1")
    with right:
        ui.plot(sampler_figure(run, "epoch 1, set_epoch forgotten"), key=f"{key}_s1bad")
    st.caption("Right: without `sampler.set_epoch(epoch)` the shuffle is seeded the same every epoch, so every epoch "
               "repeats epoch 0's order.")


def show_fsdp(run: runs.DistRun, key: str) -> None:
    view = ui.compute(views.fsdp_view, run)
    st.markdown(f"Every parameter is a DTensor sharded on dim 0; the local shards partition it exactly: "
                f"**{view['exact']}** (each local tensor equals its rows of the full parameter).")
    ui.plot(ui.compute(figs.fsdp_shard_figure, view), key=f"{key}_shards")
    ui.table(pd.DataFrame([{"parameter": n, "full shape": str(tuple(view["shards"][n][0]["full"])),
                                **{f"rank {r}": str(tuple(s["local"])) for r, s in enumerate(view["shards"][n])}}
                               for n in view["names"]]), hide_index=True)
    st.markdown("**Collectives recorded on rank 0 during one forward and backward** (from the dispatcher):")
    ui.table(pd.DataFrame([{"collective": c["op"].strip("_"), "phase": c["phase"], "output bytes": c["bytes"],
                                "input bytes": c.get("in_bytes", ""),
                                "ms since forward began": round(c["t_ms"], 2)} for c in view["collectives"]]),
                 whole=True)  # every row in view, no inner scroll: the last rows are what the sentences below read
    ui.prose("All-gathers before each layer's forward rebuild the full weights (and free them after: "
             "`reshard_after_forward=True`), again before its backward; reduce-scatters after backward leave each "
             "rank only its shard of the gradient.")
    for sentence in ui.compute(stories.fsdp_story, view, run.world_size):
        ui.prose(sentence)
    ui.plot(ui.compute(figs.memory_figure, view), key=f"{key}_memory")
    ui.legend(figs.MEMORY_LEGEND)


def show_tp(run: runs.DistRun, key: str) -> None:
    view = ui.compute(views.tp_view, run)
    first = view["ranks"][0]
    ui.graph(ui.compute(figs.tp_dot, view, run.world_size))
    a, b, c = st.columns(3)
    a.metric("weight bytes per rank", first["weight_bytes_local"], help=f"full: {first['weight_bytes_full']} B")
    b.metric("max |column-parallel − full|", f"{first['column']['max_diff']:.1e}")
    c.metric("max |row-parallel − full|", f"{first['row']['max_diff']:.1e}")
    st.caption(f"Megatron MLP (column-parallel then row-parallel): {first['mlp']['collectives']} all_reduce in "
               f"total, max difference from the full MLP {first['mlp']['max_diff']:.1e} — the hidden activation "
               "stays sharded between the two layers.")


def show_env(run: runs.DistRun, key: str) -> None:
    rows = ui.compute(views.env_view, run)
    live = run.wall_s is not None
    ui.graph(ui.compute(figs.launch_dot, rows, figs.launch_label(live)), key=f"{key}_launch")
    ui.legend(figs.launch_legend(len(rows)))
    if live:
        st.caption(stories.launch_caption(rows))
    ui.table(pd.DataFrame(rows), hide_index=True)


RENDER = {"collectives": show_collectives, "ddp": show_ddp, "sampler": show_sampler, "fsdp": show_fsdp,
          "tensor_parallel": show_tp, "env": show_env}


def show_run(run: runs.DistRun | None, key: str) -> None:
    if run is None:
        return
    if run.wall_s is None:  # a live run's source is already on its status line
        st.caption(f"Source: {run.source}")
    RENDER[run.demo](run, key)
    ui.show_code(run.code, key=f"{key}_{run.demo}_code", file_name=f"{run.demo}_ranks.py")


# ---- sections -------------------------------------------------------------------------------------------------
# A tab's key row holds the world size, a few key settings and the run button; its other settings fold away.

def ranks_ui() -> int:
    """The world size: one URL parameter every tab shares, drawn in the open tab's key row."""
    return st.segmented_control("Ranks (world size)", [2, 3, 4], default=DEFAULT_WORLD, key="dist_world",
                                bind="query-params") or DEFAULT_WORLD


def layers_slider(column, prefix: str) -> int:
    return column.slider("Layers", 1, 6, MODEL_DEFAULTS["layers"], key=f"{prefix}_layers", bind="query-params")


def width_slider(column, prefix: str) -> int:
    return column.slider("Width", 8, 256, MODEL_DEFAULTS["width"], 8, key=f"{prefix}_width", bind="query-params")


def model_ui(prefix: str, layers_place, width_place, per_rank_place) -> dict:
    return {
        "layers": layers_slider(layers_place, prefix),
        "width": width_slider(width_place, prefix),
        "per_rank": per_rank_place.slider("Samples per rank", 2, 32, MODEL_DEFAULTS["per_rank"],
                                          key=f"{prefix}_per_rank", bind="query-params"),
    }


def model_choice_ui(place) -> tuple[str, str]:
    """The model and precision of the memory calculators: the FSDP and Launch tabs share them (same keys)."""
    a, b = place.columns(2)
    preset = a.selectbox("Model", list(calculators.PRESETS), key="dist_model", bind="query-params")
    precision = b.selectbox("Precision and optimizer", list(calculators.PRECISIONS), key="dist_precision",
                            bind="query-params")
    return preset, precision


def mlp_shape(preset: str) -> tuple[int, int]:
    """Layers and width of the chosen model; for the page's MLP, the FSDP tab's sliders, drawn here too."""
    if calculators.PRESETS[preset] is not None:
        return calculators.PRESETS[preset][:2]
    a, b, _ = st.columns(3)
    return layers_slider(a, "dist_fsdp"), width_slider(b, "dist_fsdp")


def collectives_section() -> None:
    ui.prose("Each rank starts with its own small tensor of seeded integers. Pick a collective to see every rank's "
             "tensor before and after, exactly as the ranks returned it.")
    # The key row is the collective shown (drawn with the run); the run's settings and its button fold away here.
    settings = ui.settings("dist_coll", label="Ranks, elements, ring message size, seed")
    ranks, a, b, c = settings.columns(4)
    with ranks:
        world = ranks_ui()
    default = DEFAULTS["collectives"]
    raw = {"length": a.slider("Elements per rank", 1, 6, default["length"], key="dist_length", bind="query-params"),
           "ring_numel": b.text_input("Ring message size (elements, ≤ 1,000,000)", default["ring_numel"],
                                      key="dist_ring", bind="query-params"),
           "seed": c.number_input("Seed", 0, 9999, default["seed"], key="dist_coll_seed", bind="query-params")}
    with ui.input_errors():
        show_run(run_button("collectives", world, raw, "collectives", settings), "dist_live")


def ddp_section() -> None:
    ui.prose("DistributedDataParallel on real ranks, each holding a different shard of one global batch. A comm "
             "hook records every bucket (size, parameters, when its all_reduce started and finished); full backward "
             "hooks record when each layer's backward ran.")
    ranks, bucket, head, run = ui.key_controls("dist_ddp").columns([1, 1, 1.2, 1], vertical_alignment="bottom")
    with ranks:
        world = ranks_ui()
    a, b, c, d = ui.settings("dist_ddp", label="Model size and micro-batches").columns(4)
    raw = model_ui("dist_ddp", a, b, c)
    default = DEFAULTS["ddp"]
    raw["bucket_cap_mb"] = bucket.text_input("bucket_cap_mb", default["bucket_cap_mb"], key="dist_bucket",
                                             bind="query-params",
                                             help=f"{BUCKET_MB[0]} to {BUCKET_MB[1]}: DDP reads it as MiB "
                                                  "(it multiplies by 2**20)")
    micro = micro_batch_choices(raw["per_rank"])  # at most one micro-batch per sample
    raw["micro_batches"] = d.select_slider("Micro-batches (no_sync)", micro,
                                           nearest_choice(micro, default["micro_batches"]), key="dist_micro",
                                           bind="query-params")
    raw["head_first"] = head.toggle("Register the head first", default["head_first"], key="dist_head_first",
                                    bind="query-params",
                                    help="Registers the head before the blocks, so the registration order differs "
                                         "from the order gradients arrive in during backward.")
    raw["seed"] = default["seed"]
    with ui.input_errors():
        show_run(run_button("ddp", world, raw, "DDP", run), "dist_ddp")


def sampler_section() -> None:
    ui.prose("`DistributedSampler` on each real rank: which dataset indices that rank reads, how it pads so every "
             "rank gets the same count, and why `set_epoch` matters.")
    ranks, a, c, run = ui.key_controls("dist_sampler").columns([1, 1.5, 0.8, 1.7], vertical_alignment="bottom")
    with ranks:
        world = ranks_ui()
    b, d = ui.settings("dist_sampler", label="shuffle and seed").columns(2)
    default = DEFAULTS["sampler"]
    raw = {"dataset": a.slider("Dataset size", 1, 64, default["dataset"], key="dist_dataset", bind="query-params"),
           "shuffle": b.toggle("shuffle", default["shuffle"], key="dist_shuffle", bind="query-params"),
           "drop_last": c.toggle("drop_last", default["drop_last"], key="dist_drop_last", bind="query-params"),
           "seed": d.number_input("Seed", 0, 9999, default["seed"], key="dist_sampler_seed", bind="query-params")}
    with ui.input_errors():
        show_run(run_button("sampler", world, raw, "DistributedSampler", run), "dist_sampler")


def fsdp_section() -> None:
    ui.prose("`fully_shard` (FSDP2) on each Linear and on the root, on the same ranks. Shapes come from each rank's "
             "DTensor local tensors; collectives are recorded as they pass the dispatcher; memory is summed from the "
             "local parameter, gradient and Adam-state tensors, beside an unsharded (DDP-style) replica.")
    # The ZeRO chart opens this tab (the run waits for its button): this row sits above it, and a second row (the
    # chart's model and precision) would not fit on the screen, so those fold away.
    ranks, layers, width, run = ui.key_controls("dist_fsdp").columns(4, vertical_alignment="bottom")
    with ranks:
        world = ranks_ui()
    raw = model_ui("dist_fsdp", layers, width, ui.settings("dist_fsdp", label="Samples per rank"))
    raw["seed"] = 0
    with ui.input_errors():
        show_run(run_button("fsdp", world, raw, "FSDP", run), "dist_fsdp")
    zero_calculator(world, raw["layers"], raw["width"])


@st.fragment  # its own settings (model, precision): a change reruns this part alone
def zero_calculator(world: int, layers: int, width: int) -> None:
    st.subheader("ZeRO stages: memory per rank")
    preset, precision = model_choice_ui(ui.settings("dist_zero", label="Model and precision"))
    with ui.input_errors():
        params, how = ui.compute(calculators.model_param_count, preset, layers, width)
        st.caption(f"Parameter count {params:,} from torch: {how}.")
        zero = ui.compute(calculators.zero_table, params, precision)
        ui.plot(ui.compute(figs.zero_figure, zero, world), key="dist_zero_fig")
        bytes_of = {s: calculators.zero_bytes(params, world, s, precision) for s in calculators.STAGE_NAMES}
        rows = [{"stage": name, **{k.replace("_", " "): calculators.human_bytes(v) for k, v in bytes_of[s].items()},
                 "total per rank": calculators.human_bytes(sum(bytes_of[s].values()))}
                for s, name in calculators.STAGE_NAMES.items()]
        st.markdown(f"**At {world} ranks** (weights + gradients + optimizer state; activations not included):")
        ui.table(pd.DataFrame(rows), hide_index=True)
        st.caption(calculators.precision_note(precision))


def tp_pp_section() -> None:
    st.subheader("Tensor parallel: column- and row-parallel Linear")
    ui.prose("Each rank holds 1/N of the weight. Column-parallel splits the output features and all-gathers the "
             "outputs; row-parallel splits the input features and all-reduces partial sums. Both are checked "
             "against the full `F.linear` on the same inputs.")
    ranks, a, b, run = ui.key_controls("dist_tp").columns([1, 1.2, 1.2, 1.5], vertical_alignment="bottom")
    with ranks:
        world = ranks_ui()
    c = ui.settings("dist_tp", label="Batch")
    default = DEFAULTS["tensor_parallel"]
    features = feature_choices(world)  # multiples of the world size: every rank gets an equal shard
    raw = {"d_in": a.select_slider("Input features", features, nearest_choice(features, default["d_in"]),
                                   key="dist_d_in", bind="query-params"),
           "d_out": b.select_slider("Output features", features, nearest_choice(features, default["d_out"]),
                                    key="dist_d_out", bind="query-params"),
           "batch": c.slider("Batch", 1, 16, default["batch"], key="dist_batch", bind="query-params"),
           "seed": default["seed"]}
    with ui.input_errors():
        show_run(run_button("tensor_parallel", world, raw, "tensor parallel", run), "dist_tp")
    pipeline_part()


@st.fragment  # its own key row: a change reruns this part alone
def pipeline_part() -> None:
    st.subheader("Pipeline parallel: GPipe vs 1F1B")
    a, b = ui.key_controls("dist_pp").columns(2)  # the second figure's own row, in place above it
    stages = a.slider("Stages p", 2, 8, 4, key="dist_stages", bind="query-params")
    micro = b.slider("Micro-batches m", 1, 16, 8, key="dist_pp_micro", bind="query-params")
    with ui.input_errors():
        scheds = tuple(ui.compute(pipeline.pipeline_schedule, stages, micro, kind) for kind in ("GPipe", "1F1B"))
        ui.plot(ui.compute(figs.pipeline_figure, scheds), key="dist_pp_fig")
        ui.legend(figs.PIPELINE_LEGEND)
        ui.table(pd.DataFrame([{"schedule": s.kind, "makespan (slots)": s.makespan,
                                    "bubble (measured)": round(s.bubble, 4), "(p-1)/(m+p-1)": round(s.formula, 4),
                                    "peak micro-batches in flight per stage": str(s.peak_in_flight)}
                                   for s in scheds]), hide_index=True)
        st.caption("Same bubble for both; 1F1B keeps at most p − stage micro-batches' activations alive instead of "
                   "all m. Bigger m shrinks the bubble.")
        ui.show_code(scheds[1].code, key="dist_pp_code", file_name="pipeline_schedule.py")


def launch_section() -> None:
    ui.prose("The launcher forks each rank from a warm server process, sets the environment torchrun would set, "
             "and calls the same `run_rank` that `torchrun -m demos.distributed.run` calls. Below: what the real "
             "ranks printed.")
    ranks, run = ui.key_controls("dist_env").columns([1, 3], vertical_alignment="bottom")
    with ranks:
        world = ranks_ui()
    with ui.input_errors():
        show_run(run_button("env", world, DEFAULTS["env"], "launch", run), "dist_env")
    left, right = st.columns(2)
    left.markdown("**mp.spawn**: you start the processes from Python; rank comes as an argument; you set "
                  "MASTER_ADDR/PORT yourself. One machine only.")
    left.code(SPAWN_CODE, language="python", wrap_lines=True)  # a half-width column: wrap, never cut
    right.markdown("**torchrun**: the launcher sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, restarts "
                   "failed workers (`--max-restarts`), and spans nodes (`--nnodes`, rendezvous).")
    right.code(TORCHRUN_CODE, language="python", wrap_lines=True)
    tradeoffs_part(world)
    upload_part()


@st.fragment  # its own settings (model, precision, tokens): a change reruns this part alone
def tradeoffs_part(world: int) -> None:
    st.subheader("Trade-offs for the chosen model")
    tradeoffs = ui.settings("dist_tradeoffs", label="Model, precision and tokens per step")
    preset, precision = model_choice_ui(tradeoffs)
    with tradeoffs:
        layers, width = mlp_shape(preset)
        tokens = st.slider("Tokens (samples) per step", 1, 8192, 2048, key="dist_tokens", bind="query-params")
    with ui.input_errors():
        params, how = ui.compute(calculators.model_param_count, preset, layers, width)
        rows = [{**r, "memory per rank": calculators.human_bytes(r["memory per rank"]),
                 "communication per step": calculators.human_bytes(r["communication per step"])}
                for r in ui.compute(calculators.tradeoff_rows, params, world, layers, width, tokens, precision,
                                    preset)]
        st.markdown(f"{preset}: {params:,} parameters ({how}), {world} ranks, {precision}.")
        ui.table(pd.DataFrame(rows), whole=True)  # whole: the "what is sent" cells are sentences
        st.caption(calculators.precision_note(precision))
        st.caption("Memory: weights, gradients and optimizer state per rank (activations excluded). Communication: "
                   "bytes one rank sends per step (with ring collectives every rank sends the same; in a pipeline, "
                   "a middle stage sends the most). The FSDP tab shares the model choice.")


@st.fragment  # its own file: loading one reruns this part alone
def upload_part() -> None:
    st.subheader("Load a result file from your own run")
    st.code("torchrun --nproc-per-node 8 -m demos.distributed.run --demo ddp --param width=256 --out result.json",
            language="bash", wrap_lines=True)
    with ui.settings("dist_upload", label="Result file"):
        upload = st.file_uploader("Result file (JSON written by demos.distributed.run)", type=["json"],
                                  key="dist_upload", max_upload_size=1)
    if upload is not None:
        with ui.input_errors():
            show_run(ui.compute(runs.from_file, upload.getvalue(), upload.name), "dist_file")


SPAWN_CODE = '''import os
import torch.distributed as dist
import torch.multiprocessing as mp

def main(rank, world):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ...
    dist.destroy_process_group()

if __name__ == "__main__":   # required: spawn re-imports this file
    mp.spawn(main, args=(2,), nprocs=2)
'''
TORCHRUN_CODE = '''# torchrun --nproc-per-node 2 train.py
import os
import torch.distributed as dist

dist.init_process_group("gloo")    # reads the env vars
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
...
dist.destroy_process_group()
'''


ui.page_header(SLUG)
ui.prose("Everything below runs in real `torch.distributed` process groups: 2–4 CPU processes on this server talking "
         f"over gloo on 127.0.0.1. {runs.backend_note()} The Launch tab loads the result file of a torchrun run. "
         "One distributed run at a time per server; results are cached by their settings.")
ui.sections(SLUG, "dist_tab", {
    "Collectives": collectives_section, "DDP": ddp_section, "DistributedSampler": sampler_section,
    "FSDP & ZeRO": fsdp_section, "Tensor & pipeline": tp_pp_section, "Launch": launch_section,
})
ui.interview_corner(SLUG, QUESTIONS)
