"""What rank 0 reports after a run: the quantities its tab shows, one line each, formatted as the tab does.

Rank 0 runs the demo's report on the list of every rank's result it gathered: workers.run_rank keeps the lines in
the result record, `python -m demos.distributed.run` prints them, and the standalone script of each demo
(snippets.py) holds the same function after the worker and prints what it returns. The page draws its figures from
the same results (views.py). Each report gives the numbers the tab shows: tensors before and after, bucket sizes,
shard shapes, counts, checks. A wall-clock time comes with its unit (ms); what changes with every launch (a port, a
pid) is left out. Plain standard Python only: the script has nothing else of this repository.
"""


def report_env(results: list, p: dict) -> list[str]:
    """The Launch tab's table: torchrun's variables and what torch.distributed reports, per rank."""
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")
    lines = []
    for seen in results:
        env = seen["env"]
        lines.append(" ".join(f"{k}={env.get(k, '')}" for k in keys)
                     + f" MASTER_PORT {'set' if env.get('MASTER_PORT') else 'unset'} (a free port, chosen at each "
                     f"launch) dist.get_rank()={seen['dist_rank']} dist.get_world_size()={seen['dist_world']} "
                     f"backend {seen['backend']}")
    pids = [seen["pid"] for seen in results]
    lines.append(f"one process per rank (pids all different: {len(set(pids)) == len(pids)})")
    return lines


def report_collectives(results: list, p: dict) -> list[str]:
    """The Collectives tab: each rank's tensor before and after every collective, then the hand-written ring."""
    world = len(results)
    lines = []
    for op in results[0]["ops"]:
        unit = " ms" if op == "barrier" else ""  # the barrier records when each rank arrived and left
        lines.append(op)
        for r, result in enumerate(results):
            rec = result["ops"][op]
            before = ", ".join(f"{v:g}{unit}" for v in rec["before"])
            after = ", ".join(f"{v:g}{unit}" for v in rec["after"] or [])
            lines.append(f"  rank {r}: before [{before}] after [{after}]"
                         + (f"  {rec['error']}" if rec["error"] else ""))
    factor = 2 * (world - 1) / world
    lines.append(f"ring all_reduce: each rank sends 2(N−1)/N × size = {factor:.2f}× the message")
    for r, result in enumerate(results):
        ring = result["ring"]
        lines.append(f"  rank {r}: message {ring['bytes']:,} B, sent {ring['sent_bytes']:,} B (formula "
                     f"{factor * ring['bytes']:,.0f} B), max |ring − all_reduce| "
                     f"{ring['max_diff_vs_all_reduce']:.1e}, ring {ring['ring_ms']:.2f} ms, all_reduce "
                     f"{ring['all_reduce_ms']:.2f} ms")
    return lines


def report_ddp(results: list, p: dict) -> list[str]:
    """The DDP tab (rank 0's timeline): bucket counts and sizes, overlap, gradient checks, no_sync, unused params."""
    first = results[0]
    iterations = first["iterations"]
    cap = int(p["bucket_cap_mb"] * 2**20)  # what DDP makes of bucket_cap_mb

    def span(pair):
        return pair[0], pair[1] if pair[1] is not None else pair[0]

    last = iterations[-1]
    overlap = sum(max(0.0, min(span((b["start"], b["end"]))[1], end) - max(b["start"], start))
                  for b in last["buckets"] for start, end in map(span, last["layers"].values()))
    lines = [f"buckets, iteration 1: {len(iterations[0]['buckets'])}; buckets, iteration {len(iterations)}: "
             f"{len(last['buckets'])}; overlap in iteration {len(iterations)}: {overlap:.2f} ms",
             f"max |DDP grad − 1-process grad| {max(r['max_diff_vs_single'] for r in results):.1e}; "
             f"across ranks {first['max_diff_across_ranks']:.1e}"]
    for i in (0, len(iterations) - 1):
        lines.append(f"iteration {i + 1} (cap {cap:,} B):")
        for b in iterations[i]["buckets"]:
            start, end = span((b["start"], b["end"]))
            lines.append(f"  bucket {b['index']}: {b['bytes']:,} B (bytes − cap {b['bytes'] - cap:,}), "
                         f"{', '.join(b['params'])}; all_reduce from {start:.3f} ms to {end:.3f} ms")
    acc = first["accumulation"]
    counts = acc["all_reduces"]
    lines.append(f"all_reduces over {acc['micro_batches']} micro-batches: {counts['no_sync']} with no_sync(), "
                 f"{counts['every_step']} syncing every micro-batch ({counts['every_step'] - counts['no_sync']:+d}); "
                 f"max difference of the final gradients {acc['max_grad_diff']:.1e}")
    spread = acc["rank_spread"]
    lines.append(f"every micro-batch inside no_sync(): {counts['never_synced']} all_reduces, the ranks' gradients "
                 f"differ by up to {spread['never_synced']:.4g} (last micro-batch synced: {spread['no_sync']:.2g})")
    for flag in ("False", "True"):
        run = first["unused"][flag]
        outcome = "two iterations ran" if run["ok"] else f"RuntimeError: {run['error']}"
        lines += f"find_unused_parameters={flag}: {outcome}".splitlines()  # torch's message has several lines
    return lines


def report_fsdp(results: list, p: dict) -> list[str]:
    """The FSDP tab: shard shapes per rank, rank 0's collectives, measured bytes per rank (FSDP vs a replica)."""
    names = [s["name"] for s in results[0]["shards"]]
    shards = {n: [next(s for s in r["shards"] if s["name"] == n) for r in results] for n in names}
    exact = all(s["matches_full_rows"] for per in shards.values() for s in per)
    lines = [f"the local shards partition every parameter exactly: {exact}"]
    for n in names:
        lines.append(f"  {n}: full {tuple(shards[n][0]['full'])}, "
                     + ", ".join(f"rank {r} {tuple(s['local'])}" for r, s in enumerate(shards[n])))
    lines.append("collectives on rank 0 during one forward and backward:")
    for c in results[0]["collectives"]:
        lines.append(f"  {c['op'].strip('_')} ({c['phase']}): output {c['bytes']:,} B, input {c['in_bytes']:,} B, "
                     f"{c['t_ms']:.2f} ms after forward began")
    for r, result in enumerate(results):
        for kind in ("fsdp", "ddp"):
            m = result["memory"][kind]
            lines.append(f"rank {r} {kind.upper()}: parameters {m['parameters']:,} B, gradients {m['gradients']:,} "
                         f"B, optimizer state {m['optimizer_state']:,} B")
    return lines


def report_sampler(results: list, p: dict) -> list[str]:
    """The DistributedSampler tab: indices per rank per epoch, padding, dropped, coverage."""
    lines = [f"dataset {p['dataset']}, samples per rank {results[0]['num_samples']}"]
    views = (("epoch 0", lambda r: r["epochs"][0]), ("epoch 1 after set_epoch(1)", lambda r: r["epochs"][1]),
             ("epoch 1, set_epoch forgotten", lambda r: r["epoch1_without_set_epoch"]))
    for label, pick in views:
        per_rank = [pick(r) for r in results]
        flat = [i for indices in per_rank for i in indices]
        lines.append(f"{label}: padding repeats {len(flat) - len(set(flat))}, indices dropped "
                     f"{p['dataset'] - len(set(flat))}, covers the dataset: "
                     f"{sorted(set(flat)) == list(range(p['dataset']))}")
        for r, indices in enumerate(per_rank):
            lines.append(f"  rank {r}: {indices}")
    return lines


def report_tensor_parallel(results: list, p: dict) -> list[str]:
    """The tensor-parallel section: each rank's weight shard and the checks against the full Linear and MLP."""
    first = results[0]
    col, row, mlp = first["column"], first["row"], first["mlp"]
    return [f"weight bytes per rank {first['weight_bytes_local']}",
            f"column-parallel: W shard {tuple(col['weight_local'])}, all_gather, max |y − full| = "
            f"{col['max_diff']:.1e}",
            f"row-parallel: W shard {tuple(row['weight_local'])}, all_reduce(sum) + b, "
            f"max |y − full| = {row['max_diff']:.1e}",
            f"Megatron MLP: {mlp['collectives']} all_reduce in total, max difference from the full MLP "
            f"{mlp['max_diff']:.1e}"]


REPORTS = {"env": report_env, "collectives": report_collectives, "ddp": report_ddp, "fsdp": report_fsdp,
           "sampler": report_sampler, "tensor_parallel": report_tensor_parallel}
