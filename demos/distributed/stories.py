"""The sentences beside the distributed figures, each derived from the run it describes."""

import math

from demos.distributed.runs import DistRun
from demos.distributed.views import bucket_cap_bytes, ddp_view, overlap_ms
from demos.traps import TrapPair


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
        f"closes the bucket once it reaches `bucket_cap_mb={cap_mb:g}`, which DDP reads as MiB: "
        f"int({cap_mb:g} × 2**20) = {cap:,} B"
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
    return padding, backward_order(view, padded, world)


def backward_order(view: dict, padded: dict[str, tuple[int, int]], world: int) -> str:
    """Why backward runs all-gather, all-gather, reduce-scatter: the first all-gather rebuilds weights freed after
    forward for the first layer to run backward, any others before the first reduce-scatter are prefetches."""
    backward = [c for c in view["collectives"] if c["phase"] == "backward"]
    order = ["AG" if "allgather" in c["op"] else "RS" for c in backward]
    first_rs = order.index("RS") if "RS" in order else len(order)
    text = f"Backward order: {', '.join(order)} (AG all-gather, RS reduce-scatter). "
    if first_rs == 0:
        return text + "No all-gather ran before the first reduce-scatter: nothing was gathered ahead of need."
    root_shard = padded["root"][1] // world if "root" in padded else None
    needed = first_rs < len(backward) and backward[first_rs]["bytes"] != root_shard
    ahead = first_rs - 1 if needed else first_rs
    text += _needed_gather(backward, padded) if needed else \
        "The first reduce-scatter sends the root's gradients, whose weights were never freed"
    if ahead == 0:
        return text + "; no other all-gather ran ahead of it, so nothing was prefetched."
    return (text + f"; the {_count(ahead, 'other all-gather')} before that reduce-scatter "
            + ("is" if ahead == 1 else "are") + " FSDP2's backward prefetch: the next layer's weights, gathered "
            "while the current layer's gradients are computed, so communication overlaps compute.")


def _needed_gather(backward: list[dict], padded: dict[str, tuple[int, int]]) -> str:
    """The first backward all-gather, which the first layer to run backward needs (it is no prefetch)."""
    root_kept = "root" in padded and not any(c["bytes"] == padded["root"][1] for c in backward
                                             if "allgather" in c["op"])
    return ("Backward needs a layer's full weights, and `reshard_after_forward=True` freed them after forward, so "
            "the first all-gather rebuilds those of the first layer to run backward (the last layer forward resharded"
            + ("; no all-gather of the root group's size ran in backward: the root's own parameters stayed gathered"
               if root_kept else "") + "), whose gradients the first reduce-scatter then sends")


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def reduce_caption(world: int) -> str:
    """What reduce(dst=0) leaves on every rank but the root, naming those ranks for this world size."""
    others = "rank 1's is" if world == 2 else f"ranks 1–{world - 1}'s are"
    return (f"**reduce(dst=0)**: only rank 0's buffer is the sum; {others} undefined scratch (grey), so reading "
            f"{'it' if world == 2 else 'them'} there is wrong.")


def sampler_caption(view: dict, world: int, params: dict) -> str:
    """What epoch 0's split did with the indices that do not divide evenly over the ranks, from the split itself."""
    e0, size, per_rank = view["views"]["epoch 0"], view["dataset"], view["num_samples"]
    flat = [i for idx in e0["indices"] for i in idx]
    order = "shuffled order" if params["shuffle"] else "dataset's order"
    head = f"drop_last={params['drop_last']}: {size} indices over {world} ranks"
    if e0["dropped"]:
        dropped = sorted(set(range(size)) - set(flat))
        return (f"{head} do not split evenly, so the sampler dropped {_count(len(dropped), 'index', 'indices')} on "
                f"purpose ({', '.join(map(str, dropped))}: the tail of the {order}) and each rank reads {per_rank}. "
                f"The ranks cover {size - len(dropped)} of the {size} indices, each once: not the whole dataset, "
                "by design.")
    repeated = sorted({i for i in flat if flat.count(i) > 1})
    if repeated:
        return (f"{head} do not split evenly, so the sampler pads with {_count(e0['padding'], 'extra read')} of "
                f"{_count(len(repeated), 'index', 'indices')} from the start of the {order} "
                f"({', '.join(map(str, repeated))}, outlined in red) to give every rank {per_rank}. The ranks cover "
                f"all {size} indices; {'that one is' if len(repeated) == 1 else 'those are'} read more than once.")
    return (f"{head} split evenly, {per_rank} each: every index is read exactly once, with no padding and nothing "
            "dropped.")


def launch_caption(rows: list[dict]) -> str:
    """How the page's ranks met, against the torchrun environment the table shows them reading."""
    addr, port = rows[0]["MASTER_ADDR"], rows[0]["MASTER_PORT"]
    return ("Every value is what the rank read from its own environment and from torch.distributed. The launcher "
            f"sets MASTER_ADDR={addr} and MASTER_PORT={port} as torchrun sets them, but these ranks never used them: "
            "each called `init_process_group(\"gloo\", init_method=\"file://…/store\", rank=RANK, "
            "world_size=WORLD_SIZE)` and they met through a FileStore in the run's temporary folder, so nothing "
            f"listens on port {port} (gloo's own connections stay on 127.0.0.1). Under torchrun the same worker "
            "calls `init_process_group(backend)` with no init_method: the default `env://` then reads "
            "MASTER_ADDR:MASTER_PORT and meets at rank 0's TCPStore there.")
