"""What each tab of the distributed page draws, read from a run's per-rank results."""

from demos.distributed.models import ENV_KEYS
from demos.distributed.runs import DistRun
from demos.errors import InputError, quoted

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


# ---- FSDP, tensor parallel, launch ----------------------------------------------------------------------------

def fsdp_view(run: DistRun) -> dict:
    """Shard rows per parameter per rank, the recorded collectives and measured memory per rank."""
    names = [s["name"] for s in run.ranks[0]["shards"]]
    shards = {n: [next(s for s in e["shards"] if s["name"] == n) for e in run.ranks] for n in names}
    return {
        "names": names, "shards": shards, "collectives": run.ranks[0]["collectives"],
        "memory": [e["memory"] for e in run.ranks], "param_count": int(run.ranks[0]["param_count"]),
        "exact": all(s["matches_full_rows"] for per in shards.values() for s in per),
    }


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
