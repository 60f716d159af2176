"""Public demos of the distributed page: validate plain parameters, run real ranks, return frozen results.

`run_demo` starts gloo ranks through the launcher; `from_file` reads a result file written by the same workers
under torchrun. Both return a `DistRun`; the `*_view` functions turn one into what a figure needs.
"""

import ast
import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from demos import guests
from demos.distributed.launcher import MAX_WORLD, MIN_WORLD, run_ranks
from demos.distributed.models import ENV_KEYS, Tower
from demos.distributed.results import check_ranks, load_result
from demos.errors import InputError, quoted
from demos.memory.models import GPT, GPT2_CONTEXT  # the Memory page's model: one parameter count for both pages
from demos.parsing import parse_int, parse_number
from demos.shown import print_each, script
from demos.traps import TrapPair

# name: (low, high) for whole-number parameters of each demo
LIMITS = {
    "length": (1, 6), "ring_numel": (1, 1_000_000), "seed": (0, 9999), "layers": (1, 6), "width": (2, 256),
    "per_rank": (2, 32), "micro_batches": (1, 8), "dataset": (1, 64), "d_in": (2, 256), "d_out": (2, 256),
    "batch": (1, 16),
}
BUCKET_MB = (0.001, 25.0)
DEMO_PARAMS = {
    "env": (),
    "collectives": ("length", "ring_numel", "seed"),
    "ddp": ("layers", "width", "per_rank", "bucket_cap_mb", "micro_batches", "head_first", "seed"),
    "fsdp": ("layers", "width", "per_rank", "seed"),
    "tensor_parallel": ("d_in", "d_out", "batch", "seed"),
    "sampler": ("dataset", "shuffle", "drop_last", "seed"),
}
DDP_ITERATIONS = 3
FLAGS = ("head_first", "shuffle", "drop_last")
LABELS = {"length": "Elements per rank", "ring_numel": "Ring message size", "seed": "Seed", "layers": "Layers",
          "width": "Width", "per_rank": "Samples per rank", "micro_batches": "Micro-batches",
          "dataset": "Dataset size", "d_in": "Input features", "d_out": "Output features", "batch": "Batch"}


@dataclass(frozen=True)
class DistRun:
    """One distributed run: every rank's raw result, where it came from, and the code that reproduces it."""

    demo: str
    world_size: int
    backend: str
    params: dict = field(hash=False)
    ranks: tuple = field(hash=False)
    source: str
    wall_s: float | None
    code: str
    scaled: str = ""  # what the server's memory limit changed, said on the page


def _whole(name: str, value) -> int:
    low, high = LIMITS[name]
    return parse_int(str(value), LABELS[name], low, high)


def feature_choices(world: int) -> tuple[int, ...]:
    """Tensor-parallel feature counts each rank can hold an equal share of: the multiples of the world size."""
    low, high = LIMITS["d_in"]
    return tuple(n for n in range(low, high + 1) if n % world == 0)


def micro_batch_choices(per_rank: int) -> tuple[int, ...]:
    """DDP micro-batch counts that give every micro-batch at least one sample."""
    low, high = LIMITS["micro_batches"]
    return tuple(range(low, min(high, per_rank) + 1))


def nearest_choice(choices: tuple[int, ...], wanted: int) -> int:
    """The largest choice not above `wanted`, else the smallest choice."""
    return max((c for c in choices if c <= wanted), default=choices[0])


def validate_world(world_size) -> int:
    return parse_int(str(world_size), "World size", MIN_WORLD, MAX_WORLD)


def validate_params(demo: str, world: int, raw: dict) -> dict:
    """Check every parameter of a demo against its limit; return them as plain JSON values."""
    if demo not in DEMO_PARAMS:
        raise InputError(f"Unknown demo {quoted(demo)}; choose one of {', '.join(DEMO_PARAMS)}.")
    p = {}
    for name in DEMO_PARAMS[demo]:
        if name not in raw:
            raise InputError(f"The {demo} demo needs the parameter {quoted(name)}.")
        value = raw[name]
        if name == "bucket_cap_mb":
            mb = parse_number(str(value), "bucket_cap_mb")
            if not BUCKET_MB[0] <= mb <= BUCKET_MB[1]:
                raise InputError(f"bucket_cap_mb: {quoted(value)} is out of range; it must be from {BUCKET_MB[0]} "
                                 f"to {BUCKET_MB[1]} MB.")
            p[name] = mb
        elif name in FLAGS:
            p[name] = bool(value)
        else:
            p[name] = _whole(name, value)
    if demo == "ddp":
        if p["micro_batches"] > p["per_rank"]:
            raise InputError(f"Micro-batches: {p['micro_batches']} is more than the {p['per_rank']} samples per rank, "
                             "so some micro-batch would be empty.")
        p["iterations"] = DDP_ITERATIONS
    if demo == "tensor_parallel":
        for name in ("d_in", "d_out"):
            if p[name] % world:
                raise InputError(f"{LABELS[name]}: {p[name]} does not split into {world} equal shards; use a "
                                 f"multiple of {world}.")
    return p


# Which worker functions make up the standalone script of each demo (shown as "the code"), in order.
_SNIPPET_PARTS = {
    "env": ("env_seen",),
    "collectives": ("barrier_times", "ring_all_reduce", "collectives"),
    "ddp": ("Tower", "global_batch", "_ddp_recorder", "_time_layers", "_rank_spread", "_accumulation", "_unused_branch",
            "ddp"),
    "fsdp": ("Tower", "global_batch", "_CommLog", "_tensors_in", "_tensor_bytes", "_local", "_memory", "fsdp"),
    "tensor_parallel": ("tensor_parallel",),
    "sampler": ("sampler",),
}
_SOURCES = ("models.py", "workers.py", "reports.py")  # read as text: the server never imports the ranks' DDP/FSDP


def _module_nodes(file: str) -> tuple[str, list]:
    text = (Path(__file__).parent / file).read_text(encoding="utf-8")
    return text, ast.parse(text).body


@functools.cache
def _definitions() -> dict[str, str]:
    """Source of every top-level function and class in the workers' modules, by name."""
    out = {}
    for file in _SOURCES:
        text, nodes = _module_nodes(file)
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                out[node.name] = ast.get_source_segment(text, node)
    return out


@functools.cache
def _header() -> str:
    """The workers' own imports (torch's; this app's own are the definitions the script holds) and ENV_KEYS."""
    text, nodes = _module_nodes("workers.py")
    imports = [ast.get_source_segment(text, n) for n in nodes if isinstance(n, ast.Import | ast.ImportFrom)
               and not (isinstance(n, ast.ImportFrom) and n.module.startswith("demos"))
               and not any(alias.name == "torch._dynamo" for alias in n.names)]
    models, model_nodes = _module_nodes("models.py")
    env = next(ast.get_source_segment(models, n) for n in model_nodes
               if isinstance(n, ast.Assign) and n.targets[0].id == "ENV_KEYS")
    return "\n".join(imports) + "\n\n" + env + "\n"


def backend_note() -> str:
    """Why the page's ranks use gloo, said as it is on this machine."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        return ("No GPU here, so gloo (the CPU backend) carries everything; under torchrun on a machine with a GPU "
                "per rank, `--backend auto` gives the same worker code a group that also has nccl.")
    return (f"This machine has {gpus} GPU{'s' * (gpus != 1)}, but the demos' tensors live on the CPU, so gloo "
            "carries them here too; under torchrun with a GPU per rank, `--backend auto` adds nccl for CUDA tensors.")


def snippet(demo: str, world: int, params: dict) -> str:
    """A standalone script with the exact worker code that ran; launch it with torchrun. Rank 0 prints what the
    demo's tab shows (reports.py), not the raw result (which holds per-launch timings and pids)."""
    parts = "\n\n".join(_definitions()[name] for name in (*_SNIPPET_PARTS[demo], f"report_{demo}"))
    name = _SNIPPET_PARTS[demo][-1]
    cli = " ".join(f"--param {k}={v}" for k, v in params.items() if k != "iterations")
    return (
        f"# Run with: torchrun --nproc-per-node {world} this_file.py\n"
        f"# or, in this repository: torchrun --nproc-per-node {world} -m demos.distributed.run --demo {demo} "
        f"{cli} --out result.json\n"
        f"{_header()}\n\n{parts}\n\n"
        "if __name__ == '__main__':\n"
        "    dist.init_process_group('gloo')\n"
        "    rank, world = dist.get_rank(), dist.get_world_size()\n"
        f"    p = {params!r}\n"
        f"    result = {name}(rank, world, p)\n"
        "    results = [None] * world if rank == 0 else None\n"
        "    dist.gather_object(result, results, dst=0)  # every rank's result, in rank order, on rank 0\n"
        "    if rank == 0:\n"
        f"        report_{demo}(results, p)\n"
        "    dist.destroy_process_group()\n"
    )


def run_demo(demo: str, world_size: int, **raw) -> DistRun:
    """Run one demo on real gloo ranks (2-4 processes on this machine) and return every rank's result.

    Under a container memory limit too small for `world_size` processes, fewer ranks run and the result says so.
    """
    world, note = guests.scaled(validate_world(world_size), "ranks", low=MIN_WORLD)
    params = validate_params(demo, world, raw)
    record, info = run_ranks(demo, world, params)
    source = f"live run: {world} gloo ranks on 127.0.0.1 (pids {', '.join(map(str, info.pids))}), {info.wall_s:.2f} s"
    return replace(_to_run(record, source, info.wall_s), scaled=note)


def from_file(data: bytes, name: str = "result.json") -> DistRun:
    """A result file from `torchrun -m demos.distributed.run --out FILE`, checked like live input before drawing.

    Its parameters must pass the live run's limits, and every field the views and figures read is checked
    (results.check_ranks), so a file draws nothing a live run could not.
    """
    record = load_result(data)
    demo, world = record["demo"], record["world_size"]
    params = params_from_file(demo, world, record["params"])
    check_ranks(demo, world, params, record["ranks"])
    source = f"loaded file {quoted(name, 60)}: {world} ranks, backend {quoted(record['backend'])}"
    return DistRun(demo, world, record["backend"], params, tuple(record["ranks"]), source, None,
                   snippet(demo, world, params))


def params_from_file(demo: str, world: int, raw: dict) -> dict:
    """A file's parameters: JSON types as the workers wrote them, then the same limits as a live run."""
    for name in DEMO_PARAMS[demo]:
        value = raw.get(name)
        if name in FLAGS:
            good, kind = isinstance(value, bool), "true or false"
        elif name == "bucket_cap_mb":
            good, kind = isinstance(value, int | float) and not isinstance(value, bool), "a number"
        else:
            good, kind = isinstance(value, int) and not isinstance(value, bool), "a whole number"
        if not good:
            raise InputError(f"The result file's params.{name} must be {kind}.")
    return validate_params(demo, world, raw)


def _to_run(record: dict, source: str, wall_s: float | None) -> DistRun:
    demo, world = record["demo"], record["world_size"]
    code = snippet(demo, world, record["params"])
    return DistRun(demo, world, str(record["backend"]), record["params"], tuple(record["ranks"]), source, wall_s, code)


# ---- collectives ---------------------------------------------------------------------------------------------

OPS = {
    "broadcast": "Rank 0's tensor is copied to every rank.",
    "all_reduce_sum": "Every rank ends with the element-wise sum over ranks.",
    "all_reduce_avg": "Every rank ends with the element-wise mean over ranks.",
    "all_reduce_max": "Every rank ends with the element-wise maximum over ranks.",
    "reduce": "Only rank 0 is guaranteed the sum; other ranks' buffers are scratch space: whatever the backend left "
              "there (grey) is undefined, not data to read.",
    "all_gather": "Every rank ends with all ranks' tensors concatenated in rank order.",
    "reduce_scatter": "Sum over ranks, then rank r keeps only chunk r of the sum.",
    "scatter": "Rank 0 splits its tensor into chunks; rank r receives chunk r.",
    "gather": "Rank 0 receives all tensors concatenated; the others receive nothing.",
    "all_to_all": "Rank r sends its chunk j to rank j; it ends with chunk r of every rank, in rank order.",
    "barrier": "Rank r arrives 40·r ms late; no rank leaves before the last one arrives (times in ms).",
}
_MOVES = ("broadcast", "all_gather", "scatter", "gather", "all_to_all")


SCRATCH = "scratch"  # an output element with no defined value: a non-root buffer after reduce


def block_origins(op: str, world: int, n: int, rank: int, count: int) -> list[int | str | None]:
    """Which rank each output element came from (None when it mixes ranks, as in a reduction; SCRATCH when the
    collective leaves it undefined)."""
    if op == "broadcast":
        return [0] * count
    if op in ("all_gather", "gather", "all_to_all"):
        return [i // n for i in range(count)]
    if op == "scatter":
        return [0] * count
    if op == "reduce" and rank != 0:
        return [SCRATCH] * count
    return [None] * count


def collective_view(run: DistRun, op: str) -> dict:
    """Every rank's tensor before and after one collective, with where each element came from."""
    if op not in OPS:
        raise InputError(f"Unknown collective {quoted(op)}; choose one of {', '.join(OPS)}.")
    n = int(run.params["length"])
    rows = []
    for r, entry in enumerate(run.ranks):
        rec = entry["ops"][op]
        after = rec["after"] or []
        rows.append({"rank": r, "before": [float(v) for v in rec["before"]], "after": [float(v) for v in after],
                     "origins": block_origins(op, run.world_size, n, r, len(after)), "error": str(rec["error"])})
    return {"op": op, "about": OPS[op], "rows": rows}


def ring_rows(run: DistRun) -> list[dict]:
    """Per rank: message bytes, bytes it sent in the hand-written ring, the 2(N-1)/N formula, and the check."""
    n = run.world_size
    out = []
    for r, entry in enumerate(run.ranks):
        ring = entry["ring"]
        out.append({"rank": r, "message bytes": int(ring["bytes"]), "sent bytes (measured)": int(ring["sent_bytes"]),
                    "2(N-1)/N × size": 2 * (n - 1) / n * ring["bytes"],
                    "max |ring − all_reduce|": float(ring["max_diff_vs_all_reduce"]),
                    "ring ms": round(float(ring["ring_ms"]), 2),
                    "all_reduce ms": round(float(ring["all_reduce_ms"]), 2)})
    return out


def ring_summary(run: DistRun, rows: list[dict]) -> str:
    """The ring's cost, from this run: 2(N-1)/N of the message per rank, what the ranks measured, and the check."""
    n = run.world_size
    size = rows[0]["message bytes"]
    numel = size // 4
    factor = 2 * (n - 1) / n
    sent = [r["sent bytes (measured)"] for r in rows]
    text = (f"A ring all_reduce is a reduce-scatter then an all-gather, each of N−1 steps sending one chunk of "
            f"size/N to the right-hand neighbour, so each rank sends 2(N−1)/N × size: here 2·{n - 1}/{n} × "
            f"{size:,} B = {factor * size:,.0f} B, {factor:.2f}× the message. The factor grows with N but stays "
            "below 2 (" + ", ".join(f"N = {k}: {2 * (k - 1) / k:.2f}×" for k in (2, 4, 8, 64)) + "), so the "
            "bytes per rank never reach twice the message however many ranks join, while the number of sequential "
            "steps, 2(N−1) = "
            f"{2 * (n - 1)} here, grows linearly. ")
    measured = f"{sent[0]:,} B" if min(sent) == max(sent) else f"{min(sent):,} to {max(sent):,} B"
    if all(b == factor * size for b in sent):
        text += f"Every rank measured exactly {measured}. "
    elif numel % n:
        text += (f"The ranks measured {measured}, not exactly the formula: {numel:,} elements do not split into {n} "
                 "equal chunks. ")
    else:
        text += f"The ranks measured {measured}. "
    worst = max(r["max |ring − all_reduce|"] for r in rows)
    return text + (f"The ranks ran the ring by hand with send/recv; its result differs from `dist.all_reduce` by at "
                   f"most {worst:.1e}.")


# ---- DDP ------------------------------------------------------------------------------------------------------

def ddp_view(run: DistRun, rank: int = 0) -> dict:
    """Timelines of each recorded iteration on one rank, plus the gradient checks and counts."""
    entry = run.ranks[rank]
    iterations = []
    for it in entry["iterations"]:
        layers = [{"name": k, "start": float(v[0]), "end": float(v[1] if v[1] is not None else v[0])}
                  for k, v in it["layers"].items()]
        buckets = [{"index": int(b["index"]), "bytes": int(b["bytes"]), "params": list(b["params"]),
                    "start": float(b["start"]), "end": float(b["end"] if b["end"] is not None else b["start"])}
                   for b in it["buckets"]]
        iterations.append({"layers": layers, "buckets": buckets, "backward_end": float(it["backward_end"])})
    return {
        "rank": rank, "iterations": iterations, "params": entry["params"],
        "head_first": bool(run.params.get("head_first")),
        "order": [f"fc{i}" for i in range(int(run.params["layers"]))] + ["head"],  # Tower.forward's order
        "max_diff_vs_single": max(float(e["max_diff_vs_single"]) for e in run.ranks),
        "max_diff_across_ranks": float(entry["max_diff_across_ranks"]),
        "accumulation": entry["accumulation"], "unused": entry["unused"],
    }


def overlap_ms(iteration: dict) -> float:
    """How long bucket all_reduces ran while some layer's backward was still running."""
    total = 0.0
    for b in iteration["buckets"]:
        for layer in iteration["layers"]:
            total += max(0.0, min(b["end"], layer["end"]) - max(b["start"], layer["start"]))
    return total


def bucket_cap_bytes(cap_mb: float) -> int:
    """The byte cap DDP derives from bucket_cap_mb: int(bucket_cap_mb * 2**20)."""
    return int(cap_mb * 2**20)


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _modules(names: list[str]) -> list[str]:
    """Module names in first-seen order from parameter names (`fc1.weight` -> `fc1`)."""
    out = []
    for n in names:
        m = n.rsplit(".", 1)[0]
        if m not in out:
            out.append(m)
    return out


def bucket_sentences(buckets: list[dict], sizes: dict, cap: int) -> list[str]:
    """What each bucket's size says about the cap, measured: over it (and which parameter pushed it), at, or under."""
    out = []
    for i, b in enumerate(buckets):
        last = b["params"][-1] if b["params"] else ""
        before = b["bytes"] - 4 * sizes.get(last, 0)
        if b["bytes"] > cap and last in sizes and 0 <= before < cap:
            out.append(f"bucket {b['index']} holds {b['bytes']:,} B, {b['bytes'] - cap:,} B over the cap: it held "
                       f"{before:,} B, under the cap, until `{last}` ({4 * sizes[last]:,} B) was added and closed it")
        elif b["bytes"] > cap:
            out.append(f"bucket {b['index']} holds {b['bytes']:,} B, {b['bytes'] - cap:,} B over the cap")
        elif b["bytes"] == cap:
            out.append(f"bucket {b['index']} holds exactly the cap, {cap:,} B")
        elif i == len(buckets) - 1 and len(buckets) > 1:
            out.append(f"the last bucket, {b['index']}, holds the {b['bytes']:,} B left over, under the cap")
        else:
            out.append(f"bucket {b['index']} holds {b['bytes']:,} B, under the cap")
    return out


def ddp_story(view: dict, cap_mb: float) -> list[str]:
    """The DDP steps, each sentence derived from this run's buckets, timings and gradient checks."""
    cap = bucket_cap_bytes(cap_mb)
    sizes = {name: int(n) for name, _, n in view["params"]}
    registered = list(sizes)
    its = view["iterations"]
    first, last = its[0], its[-1]
    n_last = len(its)
    rebuilt = bucket_sentences(last["buckets"], sizes, cap)
    over = any(b["bytes"] > cap for b in last["buckets"])
    steps = [
        f"DDP hooks each parameter's gradient and packs parameters into buckets: it adds parameters to a bucket and "
        f"closes the bucket once it reaches `bucket_cap_mb` = {cap_mb:g} MB = {cap:,} B"
        + (", so a bucket can pass the cap by up to its last parameter. " if over else ". ")
        + f"In iteration {n_last}: " + "; ".join(rebuilt) + "."
    ]
    b0 = first["buckets"][0] if first["buckets"] else {}
    layer_end = max((lay["end"] for lay in first["layers"]), default=b0.get("start", 0.0))
    if not b0:
        steps.append("Iteration 1 recorded no bucket.")
    elif len(first["buckets"]) == 1:
        order = "registration order" if b0["params"] == registered else "this order"
        when = (f"its all_reduce started at {b0['start']:.2f} ms, after every layer's backward had ended "
                f"({layer_end:.2f} ms): no overlap" if b0["start"] >= layer_end else
                f"its all_reduce started at {b0['start']:.2f} ms, once every gradient was ready")
        steps.append(
            f"Iteration 1 is a single bucket of all {len(b0['params'])} parameters ({b0['bytes']:,} B"
            + (", over the cap" if b0["bytes"] > cap else "")
            + "): with `find_unused_parameters=False` DDP does not split buckets before it has seen the order "
            f"gradients arrive in, so {when}. The bucket lists the parameters in {order} ({_names(b0['params'])})"
            + (", the head first because it was registered first" if view.get("head_first") and
               b0["params"][:1] == ["head.weight"] else "")
            + ": a single bucket is reduced once, whatever the order of its names.")
    else:
        steps.append(f"Iteration 1 used {len(first['buckets'])} buckets, built from the registration order: "
                     + "; ".join(bucket_sentences(first["buckets"], sizes, cap)) + ".")
    ready = _modules([p for b in last["buckets"] for p in b["params"]])
    forward = [lay for lay in view.get("order", []) if lay in ready]
    rebuild = (f"After iteration 1 DDP rebuilt the buckets in the order gradients became ready: "
               f"{_names(ready)}")
    backwards = _modules(registered)[::-1]
    if forward and ready == forward[::-1]:
        rebuild += (" (the reverse of the forward order, which here is also the reverse of the registration order)"
                    if ready == backwards else
                    f" (the reverse of the forward order, not of the registration order, {_names(backwards)})")
    steps.append(rebuild + f", giving {len(last['buckets'])} bucket{'s' if len(last['buckets']) != 1 else ''}.")
    ov = overlap_ms(last)
    if not last["buckets"]:
        steps.append(f"Iteration {n_last} recorded no bucket, so nothing could overlap.")
    elif len(last["buckets"]) == 1:
        steps.append(f"With one bucket, its all_reduce can only start once the last gradient is ready, so nothing "
                     f"overlaps (measured {ov:.2f} ms in iteration {n_last}).")
    else:
        first_b = min(last["buckets"], key=lambda b: b["start"])
        running = [lay["name"] for lay in sorted(last["layers"], key=lambda x: x["end"])
                   if lay["end"] > first_b["start"]]
        if ov > 0 and running:
            steps.append(f"From then on a bucket's all_reduce starts (async) as soon as its last gradient is ready: in "
                         f"iteration {n_last} bucket {first_b['index']} started at {first_b['start']:.2f} ms while "
                         f"the backward of {_names(running)} had not finished, so communication overlapped "
                         f"computation for {ov:.2f} ms.")
        else:
            steps.append(f"A bucket's all_reduce starts (async) as soon as its last gradient is ready, but in "
                         f"iteration {n_last} no all_reduce ran during a layer's backward (measured overlap "
                         f"{ov:.2f} ms): the layers finished first.")
    steps.append(f"The comm hook divides by the world size, so every rank ends with the same mean gradient: the "
                 f"ranks' gradients differ by at most {view['max_diff_across_ranks']:.1e}, and differ from one "
                 f"process on the whole batch by at most {view['max_diff_vs_single']:.1e}.")
    return steps


def accumulation_caption(acc: dict) -> str:
    """What no_sync saved in this run, from the counted all_reduces."""
    counts, micro = acc["all_reduces"], acc["micro_batches"]
    same = f"Same final gradients either way (max difference {acc['max_grad_diff']:.1e}); "
    if counts["no_sync"] == counts["every_step"]:
        return same + (f"with {micro} micro-batch{'es' if micro != 1 else ''} there is nothing to skip: both ran "
                       f"{counts['no_sync']} all_reduces.")
    return same + (f"only the communication differs: without no_sync each of the {micro} micro-batches all_reduces "
                   f"every bucket ({counts['every_step']} all_reduces instead of {counts['no_sync']}).")


def no_sync_trap(run: DistRun) -> TrapPair:
    """Every micro-batch inside no_sync() (the trap) beside no_sync() on all but the last, from this run's counts."""
    acc = ddp_view(run)["accumulation"]
    counts, spread = acc["all_reduces"], acc["rank_spread"]
    key = "max |grad on rank i − grad on rank j|"
    trap = {"bucket all_reduces": counts["never_synced"], key: float(f"{spread['never_synced']:.4g}")}
    correct = {"bucket all_reduces": counts["no_sync"], key: float(f"{spread['no_sync']:.4g}")}
    micro, world = acc["micro_batches"], run.world_size
    sentence = (f"With all {micro} micro-batches inside `no_sync()`, DDP ran {trap['bucket all_reduces']} all_reduces: "
                f"each of the {world} ranks kept only its own shard's gradient, and they differ by up to "
                f"{trap[key]:.4g}, so `optimizer.step()` would move the replicas apart without any error. Leaving the "
                f"last micro-batch outside `no_sync()` ran {correct['bucket all_reduces']} all_reduces in its "
                f"backward, and the ranks' gradients agree (max difference {correct[key]:.2g}).")
    return TrapPair("no_sync", "DDP `no_sync()` around every micro-batch", "Trap: every micro-batch in `no_sync()`",
                    "Correct: the last micro-batch outside `no_sync()`", trap, correct, sentence, run.code)


# ---- DistributedSampler ---------------------------------------------------------------------------------------

def sampler_view(run: DistRun) -> dict:
    """Indices per rank per epoch, which ones are padding repeats, and whether the ranks cover the dataset."""
    size = int(run.params["dataset"])
    views = {}
    for label, pick in (("epoch 0", lambda e: e["epochs"][0]), ("epoch 1 after set_epoch(1)", lambda e: e["epochs"][1]),
                        ("epoch 1, set_epoch forgotten", lambda e: e["epoch1_without_set_epoch"])):
        per_rank = [[int(i) for i in pick(e)] for e in run.ranks]
        flat = [i for idx in per_rank for i in idx]
        views[label] = {"indices": per_rank, "padding": len(flat) - len(set(flat)),
                        "covered": sorted(set(flat)) == list(range(size)), "dropped": size - len(set(flat))}
    first = run.ranks[0]
    return {"views": views, "num_samples": int(first["num_samples"]), "total_size": int(first["total_size"]),
            "dataset": size}


# ---- FSDP -----------------------------------------------------------------------------------------------------

def fsdp_view(run: DistRun) -> dict:
    """Shard rows per parameter per rank, the recorded collectives and measured memory per rank."""
    names = [s["name"] for s in run.ranks[0]["shards"]]
    shards = {n: [next(s for s in e["shards"] if s["name"] == n) for e in run.ranks] for n in names}
    return {
        "names": names, "shards": shards, "collectives": run.ranks[0]["collectives"],
        "memory": [e["memory"] for e in run.ranks], "param_count": int(run.ranks[0]["param_count"]),
        "exact": all(s["matches_full_rows"] for per in shards.values() for s in per),
    }


def _fsdp_groups(view: dict) -> dict[str, list[str]]:
    """Parameter names per fully_shard group: one per `fcN` layer, and the root's group holding the rest (head)."""
    groups: dict[str, list[str]] = {}
    for n in view["names"]:
        owner = n.split(".")[0]
        groups.setdefault(owner if owner.startswith("fc") else "root", []).append(n)
    return groups


def _group_bytes(view: dict, names: list[str], world: int) -> tuple[int, int]:
    """(the group's parameter bytes, what an all-gather returns): FSDP2 pads each parameter's dim 0 to a multiple of
    the world size so every rank's shard has the same shape, and the all-gather returns world x that shard."""
    full = padded = 0
    for n in names:
        shape = view["shards"][n][0]["full"]
        rest = math.prod(shape[1:])
        full += shape[0] * rest * 4
        padded += world * -(-shape[0] // world) * rest * 4
    return full, padded


def fsdp_story(view: dict, world: int) -> tuple[str, str]:
    """Two sentences from the recorded collectives: why an all-gather returns more bytes than its parameters hold
    (padding), and why backward runs all-gather, all-gather, reduce-scatter (prefetch)."""
    padded = {g: _group_bytes(view, names, world) for g, names in _fsdp_groups(view).items()}
    uneven = {g: b for g, b in padded.items() if b[0] != b[1]}
    if uneven:
        group, (full, out) = next(iter(uneven.items()))
        names = _fsdp_groups(view)[group]
        shapes = ", ".join(f"{n} {tuple(view['shards'][n][0]['full'])}" for n in names)
        recorded = {c["bytes"] for c in view["collectives"] if "allgather" in c["op"]}
        seen = "as the table records" if out in recorded else "by FSDP2's padding rule (the table differs)"
        padding = (f"Padding: FSDP2 shards dim 0 into {world} equal pieces, rounding up, so every rank's shard has "
                   f"the same shape. The {group} group ({shapes}) holds {full:,} B, but each rank's shard is padded "
                   f"to {out // world:,} B (the last ranks' rows end in padding), so its all-gather returns "
                   f"{world} × {out // world:,} = {out:,} B, {seen}; the padding is sliced off when the full "
                   f"parameters are rebuilt. Padded groups here: {len(uneven)} of {len(padded)}.")
    else:
        padding = (f"Every group's dim 0 splits evenly over {world} ranks, so each all-gather returns exactly the "
                   "group's parameter bytes (no padding).")
    order = ["AG" if "allgather" in c["op"] else "RS" for c in view["collectives"] if c["phase"] == "backward"]
    first_rs = order.index("RS") if "RS" in order else len(order)
    prefetch = (f"Backward order: {', '.join(order)} (AG all-gather, RS reduce-scatter). The last layer's weights "
                "were freed after forward (`reshard_after_forward=True`), so backward gathers them again; ")
    if first_rs >= 2:
        prefetch += (f"the {first_rs} all-gathers before the first reduce-scatter are FSDP2's backward prefetch: it "
                     "gathers the next layer's parameters while the current layer's gradients are computed, then "
                     "reduce-scatters those gradients, so communication overlaps compute.")
    else:
        prefetch += "no all-gather ran ahead of a reduce-scatter in this run (nothing was prefetched)."
    return padding, prefetch


def tp_view(run: DistRun) -> dict:
    return {"ranks": run.ranks, "max_diff": max(max(e["column"]["max_diff"], e["row"]["max_diff"], e["mlp"]["max_diff"])
                                                 for e in run.ranks)}


def env_view(run: DistRun) -> list[dict]:
    """What each rank saw: torchrun's environment variables, its pid, and what torch.distributed reports."""
    rows = []
    for e in run.ranks:
        seen = e["seen"]
        rows.append({**{k: str(seen["env"].get(k, "")) for k in ENV_KEYS}, "pid": int(seen["pid"]),
                     "dist.get_rank()": int(seen["dist_rank"]), "dist.get_world_size()": int(seen["dist_world"]),
                     "backend": str(seen["backend"])})
    return rows


VIEWS = {
    "env": env_view, "collectives": lambda r: [collective_view(r, op) for op in OPS] + [ring_rows(r)],
    "ddp": ddp_view, "sampler": sampler_view, "fsdp": fsdp_view, "tensor_parallel": tp_view,
}


# ---- calculators (no processes) -------------------------------------------------------------------------------

PRESETS = {
    "This page's MLP": None,
    "GPT-2 small shape (12 × 768)": (12, 768, 12, 50257),
    "GPT-2 medium shape (24 × 1024)": (24, 1024, 16, 50257),
    "GPT-2 XL shape (48 × 1600)": (48, 1600, 25, 50257),
    "7B-class shape (32 × 4096)": (32, 4096, 32, 32000),
}
PRECISIONS = {
    "ZeRO's mixed precision + Adam (2 + 2 + 12 bytes)": (2, 2, 12),
    "fp32 + Adam (4 + 4 + 8 bytes)": (4, 4, 8),
}


def model_param_count(preset: str, layers: int, width: int) -> tuple[int, str]:
    """Real parameter count: the page's MLP, or the Memory page's GPT-2-style model built on the meta device.

    Both pages build the same `demos.memory.models.GPT` (token and 1024 position embeddings, pre-norm blocks with
    biases, final LayerNorm, output head tied to the token embedding), so GPT-2 small is 124,439,808 on both.
    """
    if preset not in PRESETS:
        raise InputError(f"Unknown model {quoted(preset)}.")
    if PRESETS[preset] is None:
        model = Tower(_whole("layers", layers), _whole("width", width))
        return sum(p.numel() for p in model.parameters()), f"Tower({layers}, {width}) in torch"
    n_layers, d, heads, vocab = PRESETS[preset]
    with torch.device("meta"):
        model = GPT(n_layers, d, heads, vocab, GPT2_CONTEXT)
    count = sum(p.numel() for p in model.parameters())  # parameters() lists the tied head weight once
    return count, (f"the Memory page's GPT({n_layers} blocks, d={d}, {heads} heads, vocab {vocab}, context "
                   f"{GPT2_CONTEXT}, head tied to the token embedding) built on meta")


def precision_note(name: str) -> str:
    """What the chosen byte accounting assumes, and what torch.autocast keeps instead."""
    p_b, g_b, o_b = _precision(name)
    if p_b == 4:
        return (f"fp32 + Adam: {p_b} + {g_b} + {o_b} = {p_b + g_b + o_b} bytes per parameter (fp32 weights, "
                "gradients, and Adam's m and v). This is also what training under `torch.autocast` holds: autocast "
                "casts ops' inputs and outputs, while parameters and their gradients stay fp32.")
    return (f"{p_b} + {g_b} + {o_b} = {p_b + g_b + o_b} bytes per parameter is the ZeRO paper's accounting: fp16/bf16 "
            f"weights and gradients ({p_b} + {g_b}), and in the optimizer fp32 master weights, m and v "
            f"({o_b}). Under `torch.autocast` parameters and gradients stay fp32 (the fp32 + Adam row); these "
            "numbers hold where the model itself is kept in half precision beside fp32 master weights, as "
            "DeepSpeed's fp16 and bf16 modes do.")


def _precision(name: str) -> tuple[int, int, int]:
    if name not in PRECISIONS:
        raise InputError(f"Unknown precision {quoted(name)}.")
    return PRECISIONS[name]


def zero_bytes(params: int, world: int, stage: int, precision: str) -> dict:
    """Bytes per rank for parameters, gradients and optimizer state under ZeRO stage 0-3 (the ZeRO paper's model)."""
    p_b, g_b, o_b = _precision(precision)
    shard = {0: (1, 1, 1), 1: (1, 1, world), 2: (1, world, world), 3: (world, world, world)}[stage]
    return {"parameters": params * p_b / shard[0], "gradients": params * g_b / shard[1],
            "optimizer_state": params * o_b / shard[2]}


WORLD_SIZES = (1, 2, 4, 8, 16, 32, 64)
STAGE_NAMES = {0: "DDP (no sharding)", 1: "ZeRO-1: optimizer state", 2: "ZeRO-2: + gradients",
               3: "ZeRO-3 / FSDP: + parameters"}


def zero_table(params: int, precision: str) -> list[dict]:
    """Total bytes per rank for every stage at every world size in WORLD_SIZES."""
    return [{"stage": s, "world": n, "bytes": sum(zero_bytes(params, n, s, precision).values())}
            for s in STAGE_NAMES for n in WORLD_SIZES]


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule: (stage, start slot, 'F' or 'B', micro-batch) for every task, and its measurements."""

    kind: str
    stages: int
    micro: int
    tasks: tuple
    makespan: int
    bubble: float
    formula: float
    peak_in_flight: tuple[int, ...]
    code: str


def _stage_order(kind: str, p: int, m: int, s: int) -> list[tuple[str, int]]:
    """The order in which stage s runs its forwards and backwards."""
    if kind == "GPipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(p - s - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


def simulate_schedule(kind: str, p: int, m: int) -> dict:
    """Simulate a schedule with unit-time forward and backward; measure the idle fraction of every stage."""
    tasks = run_schedule([_stage_order(kind, p, m, s) for s in range(p)])
    makespan = max(start + 1 for _, start, _, _ in tasks)
    return {"tasks": tuple(sorted(tasks, key=lambda t: (t[1], t[0]))), "makespan": makespan,
            "bubble": 1 - (2 * m) / makespan, "formula": (p - 1) / (m + p - 1),
            "peak_in_flight": tuple(peak_in_flight(tasks, p))}


def pipeline_schedule(stages: int, micro: int, kind: str) -> Schedule:
    """simulate_schedule for the visitor's pipeline, with the code that ran."""
    p = parse_int(str(stages), "Stages", 2, 8)
    m = parse_int(str(micro), "Micro-batches", 1, 16)
    if kind not in ("GPipe", "1F1B"):
        raise InputError(f"Unknown schedule {quoted(kind)}; choose GPipe or 1F1B.")
    code = script(_stage_order, run_schedule, peak_in_flight, simulate_schedule, imports="",
                  settings={"kind": kind, "p": p, "m": m}, run=print_each("simulate_schedule(kind, p, m)"))
    return Schedule(kind, p, m, **simulate_schedule(kind, p, m), code=code)


def run_schedule(orders: list) -> list[tuple[int, int, str, int]]:
    """(stage, start, F or B, micro-batch) for every task: unit-time tasks, each as early as its dependencies allow."""
    p = len(orders)
    done, free, pos, tasks = {}, [0] * p, [0] * p, []
    while any(pos[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if pos[s] == len(orders[s]):
                continue
            what, i = orders[s][pos[s]]
            deps = [("F", s - 1, i)] if what == "F" and s > 0 else []
            if what == "B":
                deps = [("F", s, i)] + ([("B", s + 1, i)] if s < p - 1 else [])
            if all(d in done for d in deps):
                start = max([free[s]] + [done[d] for d in deps])
                done[(what, s, i)] = start + 1
                free[s] = start + 1
                tasks.append((s, start, what, i))
                pos[s] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlocked")  # a bug in the orders, never user input
    return tasks


def peak_in_flight(tasks: list, p: int) -> tuple[int, ...]:
    """Per stage, the most micro-batches forwarded but not yet backwarded (their activations are held)."""
    peak = []
    for s in range(p):
        live, best = 0, 0
        for _, _, what, _ in sorted(t for t in tasks if t[0] == s):
            live += 1 if what == "F" else -1
            best = max(best, live)
        peak.append(best)
    return tuple(peak)


def tradeoff_rows(params: int, world: int, layers: int, width: int, tokens: int, precision: str) -> list[dict]:
    """Memory per rank, communication per step and complexity of DDP, FSDP, TP and PP for one model and world size."""
    p_b, g_b, o_b = _precision(precision)
    state = params * (p_b + g_b + o_b)
    act = tokens * width * p_b  # one layer's activation tensor for the batch
    ring = 2 * (world - 1) / world
    return [
        {"strategy": "DDP", "memory per rank": state, "communication per step": ring * params * g_b,
         "what is sent": "all_reduce of all gradients", "complexity": "low: wrap the model"},
        {"strategy": "FSDP (ZeRO-3)", "memory per rank": state / world,
         "communication per step": 1.5 * ring * params * p_b,
         "what is sent": "all_gather params (fwd + bwd) + reduce_scatter grads", "complexity": "medium: wrap policy"},
        {"strategy": "Tensor parallel", "memory per rank": state / world,
         "communication per step": 4 * layers * ring * act,
         "what is sent": "2 all_reduce of activations per layer, forward and backward",
         "complexity": "high: rewrite layers, needs fast links"},
        {"strategy": "Pipeline parallel", "memory per rank": state / world,
         "communication per step": min(2, world - 1) * act,
         "what is sent": (f"activations forward, their gradients backward, between neighbours: a middle stage "
                          f"sends both, an end stage one; {2 * (world - 1)} tensors of {human_bytes(act)} over all "
                          f"{world - 1} boundaries ({human_bytes(2 * (world - 1) * act)} in total)"),
         "complexity": "high: split stages, schedule, bubble"},
    ]


def human_bytes(n: float) -> str:
    """Bytes in binary units, labelled as such (KiB, MiB, GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"
