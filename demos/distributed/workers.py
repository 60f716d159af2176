"""What each rank runs. Every function here runs inside an initialised process group and returns plain JSON data.

A worker takes (rank, world, p) where p is a dict of validated parameters, and returns a dict of lists and numbers.
The same functions run under the page's launcher and under `torchrun -m demos.distributed.run`.
"""

import os
import re
import time
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DistributedSampler

from demos.distributed.models import ENV_KEYS, Tower
from demos.distributed.reports import REPORTS


def global_batch(world: int, per_rank: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch (every rank builds the same one from the seed and keeps its own shard)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(world * per_rank, width, generator=g)
    y = torch.randn(world * per_rank, 1, generator=g)
    return x, y


def env_seen(rank: int, world: int, p: dict) -> dict:
    """The launch environment as this rank sees it."""
    return {
        "env": {k: os.environ.get(k, "") for k in ENV_KEYS},
        "pid": os.getpid(),
        "dist_rank": dist.get_rank(),
        "dist_world": dist.get_world_size(),
        "backend": str(dist.get_backend()),
        "threads": torch.get_num_threads(),
    }


def collectives(rank: int, world: int, p: dict) -> dict:
    """Run each collective on small seeded integer tensors; record every rank's tensor before and after."""
    n = p["length"]
    g = torch.Generator().manual_seed(p["seed"] * 100 + rank)
    small = torch.randint(0, 10, (n,), generator=g).float()
    big = torch.randint(0, 10, (world * n,), generator=g).float()
    ops = {}

    def record(name, before, fn):
        try:
            ops[name] = {"before": before, "after": fn(), "error": ""}
        except Exception as err:  # a backend may not implement an op: that is the lesson, not a crash
            ops[name] = {"before": before, "after": None, "error": f"{type(err).__name__}: {str(err).splitlines()[0]}"}

    def reduced(op):
        t = small.clone()
        dist.all_reduce(t, op=op)
        return t.tolist()

    def broadcast():
        t = small.clone()
        dist.broadcast(t, src=0)
        return t.tolist()

    def reduce():
        t = small.clone()
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
        return t.tolist()

    def all_gather():
        out = [torch.zeros(n) for _ in range(world)]
        dist.all_gather(out, small)
        return torch.cat(out).tolist()

    def reduce_scatter():
        out = torch.zeros(n)
        dist.reduce_scatter(out, list(big.chunk(world)), op=dist.ReduceOp.SUM)
        return out.tolist()

    def scatter():
        out = torch.zeros(n)
        dist.scatter(out, list(big.chunk(world)) if rank == 0 else None, src=0)
        return out.tolist()

    def gather():
        out = [torch.zeros(n) for _ in range(world)] if rank == 0 else None
        dist.gather(small, out, dst=0)
        return torch.cat(out).tolist() if rank == 0 else []

    def all_to_all():
        out = [torch.zeros(n) for _ in range(world)]
        dist.all_to_all(out, list(big.chunk(world)))
        return torch.cat(out).tolist()

    record("broadcast", small.tolist(), broadcast)
    record("all_reduce_sum", small.tolist(), lambda: reduced(dist.ReduceOp.SUM))
    record("all_reduce_avg", small.tolist(), lambda: reduced(dist.ReduceOp.AVG))
    record("all_reduce_max", small.tolist(), lambda: reduced(dist.ReduceOp.MAX))
    record("reduce", small.tolist(), reduce)
    record("all_gather", small.tolist(), all_gather)
    record("reduce_scatter", big.tolist(), reduce_scatter)
    record("scatter", big.tolist() if rank == 0 else [], scatter)
    record("gather", small.tolist(), gather)
    record("all_to_all", big.tolist(), all_to_all)
    ops["barrier"] = barrier_times(rank)
    return {"ops": ops, "ring": ring_all_reduce(rank, world, p["ring_numel"], p["seed"])}


def barrier_times(rank: int) -> dict:
    """Rank r arrives 40*r ms late; everyone leaves the barrier when the last one has arrived.

    Times count from rank 0's clock reading after a first barrier, sent to every rank: perf_counter is one
    system-wide monotonic clock on a host, and ranks leave that first barrier at slightly different moments, so
    a per-rank origin would skew the ranks' times against each other by however late each was scheduled.
    """
    dist.barrier()
    t0 = torch.tensor([time.perf_counter()], dtype=torch.float64)
    dist.broadcast(t0, src=0)
    t0 = t0.item()
    time.sleep(0.04 * rank)
    arrive = time.perf_counter() - t0
    dist.barrier()
    leave = time.perf_counter() - t0
    return {"before": [round(arrive * 1e3, 3)], "after": [round(leave * 1e3, 3)], "error": ""}


def ring_all_reduce(rank: int, world: int, numel: int, seed: int) -> dict:
    """A ring all_reduce by hand (reduce-scatter then all-gather with send/recv), counting the bytes sent."""
    x = torch.randn(numel, generator=torch.Generator().manual_seed(seed * 100 + rank))
    chunks = list(x.clone().tensor_split(world))
    right, left = (rank + 1) % world, (rank - 1) % world
    sent = 0
    t0 = time.perf_counter()
    for phase in ("reduce_scatter", "all_gather"):
        for step in range(world - 1):
            offset = 0 if phase == "reduce_scatter" else 1
            send_i = (rank - step + offset) % world
            recv_i = (rank - step - 1 + offset) % world
            incoming = torch.empty_like(chunks[recv_i])
            reqs = [dist.isend(chunks[send_i], right), dist.irecv(incoming, left)]
            for req in reqs:
                req.wait()
            sent += chunks[send_i].numel() * chunks[send_i].element_size()
            chunks[recv_i] = chunks[recv_i] + incoming if phase == "reduce_scatter" else incoming
    ring_s = time.perf_counter() - t0
    ours = torch.cat(chunks)
    ref = x.clone()
    t0 = time.perf_counter()
    dist.all_reduce(ref)
    lib_s = time.perf_counter() - t0
    return {
        "numel": numel, "bytes": numel * x.element_size(), "sent_bytes": sent,
        "max_diff_vs_all_reduce": (ours - ref).abs().max().item(),
        "ring_ms": ring_s * 1e3, "all_reduce_ms": lib_s * 1e3,
    }


def _ddp_recorder(world: int, log: list, clock):
    """A DDP comm hook that averages each bucket like the default one and logs its size, params and timing."""

    def hook(state, bucket):
        start = clock()
        grads = bucket.buffer()
        fut = dist.all_reduce(grads.div_(world), async_op=True).get_future()
        entry = {"index": bucket.index(), "numel": grads.numel(), "bytes": grads.numel() * grads.element_size(),
                 "params": [state[id(t)] for t in bucket.parameters()], "start": start, "end": None}
        log.append(entry)

        def done(f):
            entry["end"] = clock()
            return f.value()[0]

        return fut.then(done)

    return hook


def _time_layers(model: nn.Module, names: list[str], log: dict, clock) -> list:
    """Full backward hooks: when each layer's backward starts (pre-hook) and ends (hook); returns the handles."""
    handles = []
    for name in names:
        module = getattr(model, name)
        handles.append(module.register_full_backward_pre_hook(lambda m, g, n=name: log.__setitem__(n, [clock(), None])))
        handles.append(module.register_full_backward_hook(lambda m, gi, go, n=name: log[n].__setitem__(1, clock())))
    return handles


def ddp(rank: int, world: int, p: dict) -> dict:
    """DDP with a user bucket cap: bucket timeline per iteration, gradients vs one process, no_sync, unused params."""
    warnings.filterwarnings("ignore")
    layers, width, per_rank, seed = p["layers"], p["width"], p["per_rank"], p["seed"]
    torch.manual_seed(seed)
    model = Tower(layers, width, head_first=p["head_first"])
    reference = Tower(layers, width, head_first=p["head_first"])
    reference.load_state_dict(model.state_dict())
    names = {id(t): n for n, t in model.named_parameters()}
    ddp_model = DDP(model, bucket_cap_mb=p["bucket_cap_mb"])
    log, clock_origin = [], [0.0]

    def clock():
        return (time.perf_counter() - clock_origin[0]) * 1e3

    ddp_model.register_comm_hook(names, _ddp_recorder(world, log, clock))
    order = [f"fc{i}" for i in range(layers)] + ["head"]
    x, y = global_batch(world, per_rank, width, seed)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    iterations = []
    for _ in range(p["iterations"]):
        layer_log = {}
        handles = _time_layers(model, order, layer_log, clock)
        ddp_model.zero_grad()
        loss = F.mse_loss(ddp_model(x[mine]), y[mine])
        del log[:]
        dist.barrier()  # start both ranks' backward together so the timeline shows overlap, not skew
        clock_origin[0] = time.perf_counter()
        loss.backward()
        backward_end = clock()
        for h in handles:
            h.remove()
        iterations.append({"layers": {n: layer_log[n] for n in order if n in layer_log},
                           "buckets": [dict(b) for b in log], "backward_end": backward_end})
    grads = {n: t.grad.clone() for n, t in model.named_parameters()}
    F.mse_loss(reference(x), y).backward()
    vs_single = max((grads[n] - t.grad).abs().max().item() for n, t in reference.named_parameters())
    return {
        "params": [[n, list(t.shape), t.numel()] for n, t in model.named_parameters()],
        "order": order, "iterations": iterations, "max_diff_vs_single": vs_single,
        "max_diff_across_ranks": _rank_spread(grads.values()),
        "accumulation": _accumulation(ddp_model, log, x[mine], y[mine], p["micro_batches"]),
        "unused": _unused_branch(rank, width, seed),
    }


def _rank_spread(tensors) -> float:
    """Largest difference between ranks over every element of these tensors (0 when all ranks hold the same)."""
    spread = 0.0
    for t in tensors:
        lo, hi = t.clone(), t.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        spread = max(spread, (hi - lo).abs().max().item())
    return spread


def _accumulation(ddp_model, log: list, x: torch.Tensor, y: torch.Tensor, micro: int) -> dict:
    """Accumulate over `micro` micro-batches: no_sync on all but the last (correct), syncing every micro-batch, and
    every one inside no_sync (the trap). Count the bucket all_reduces; measure how far the ranks' gradients differ."""
    counts, grads, spread = {}, {}, {}
    for mode in ("no_sync", "every_step", "never_synced"):
        ddp_model.zero_grad()
        del log[:]
        for i, (xb, yb) in enumerate(zip(x.tensor_split(micro), y.tensor_split(micro), strict=False)):
            last = i == micro - 1
            if mode == "never_synced" or (mode == "no_sync" and not last):
                with ddp_model.no_sync():
                    F.mse_loss(ddp_model(xb), yb).div(micro).backward()
            else:
                F.mse_loss(ddp_model(xb), yb).div(micro).backward()
        counts[mode] = len(log)
        grads[mode] = [t.grad.clone() for t in ddp_model.parameters()]
        if mode != "every_step":
            spread[mode] = _rank_spread(grads[mode])  # what optimizer.step() would apply differs by this much
    diff = max((a - b).abs().max().item() for a, b in zip(grads["no_sync"], grads["every_step"], strict=False))
    return {"micro_batches": micro, "all_reduces": counts, "max_grad_diff": diff, "rank_spread": spread}


def whole_sentences(text: str, limit: int = 1500) -> str:
    """An error message as its lines (a line that goes on in lower case joined to the one before: torch breaks
    lines inside sentences), cut after its last whole sentence within `limit` characters (the first sentence
    whole, however long), so it never stops mid-sentence."""
    lines: list[str] = []
    for line in (" ".join(raw.split()) for raw in text.strip().splitlines()):
        if lines and line[:1].islower():
            lines[-1] += " " + line
        elif line:
            lines.append(line)
    joined = "\n".join(lines)
    if len(joined) <= limit:
        return joined
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s+[A-Z])", joined)]  # not inside "e.g. list"
    fits = [e for e in ends if e <= limit]
    return joined[:fits[-1] if fits else (ends[0] if ends else len(joined))]


def _unused_branch(rank: int, width: int, seed: int) -> dict:
    """A model whose `unused` branch never runs: DDP fails without find_unused_parameters, works with it."""
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(width, 1)
            self.unused = nn.Linear(width, 1)

        def forward(self, x):
            return self.used(x)

    out = {}
    x = torch.randn(4, width, generator=torch.Generator().manual_seed(seed + rank))
    for flag in (False, True):
        torch.manual_seed(seed)
        model = DDP(Branchy(), find_unused_parameters=flag)
        try:
            for _ in range(2):
                model(x).sum().backward()
            out[str(flag)] = {"ok": True, "error": ""}
        except RuntimeError as err:
            out[str(flag)] = {"ok": False, "error": whole_sentences(str(err))}
    return out


class _CommLog(TorchDispatchMode):
    """Logs every c10d collective that passes through the dispatcher, with its phase and payload size."""

    def __init__(self):
        super().__init__()
        self.phase, self.events, self.t0 = "forward", [], time.perf_counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":  # c10d ops take (output, input, ...): record both sizes
            out_bytes, in_bytes = (_tensor_bytes(_tensors_in(a)) for a in (list(args) + [None, None])[:2])
            self.events.append({"op": func._opname, "phase": self.phase, "bytes": out_bytes, "in_bytes": in_bytes,
                                "t_ms": (time.perf_counter() - self.t0) * 1e3})
        return func(*args, **(kwargs or {}))


def _tensors_in(arg) -> list:
    items = arg if isinstance(arg, list | tuple) else [arg]
    return [t for t in items if isinstance(t, torch.Tensor)]


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def fsdp(rank: int, world: int, p: dict) -> dict:
    """fully_shard (FSDP2) per layer and root: shard shapes, recorded collectives, memory vs a DDP-style replica."""
    from torch.distributed.fsdp import fully_shard  # imported when used: it takes seconds to import

    warnings.filterwarnings("ignore")
    layers, width, per_rank, seed = p["layers"], p["width"], p["per_rank"], p["seed"]
    torch.manual_seed(seed)
    model = Tower(layers, width)
    replica = Tower(layers, width)
    replica.load_state_dict(model.state_dict())
    full = {n: t.detach().clone() for n, t in model.named_parameters()}
    mesh = init_device_mesh("cpu", (world,))  # without it fully_shard builds its mesh on the accelerator
    for i in range(layers):
        fully_shard(getattr(model, f"fc{i}"), mesh=mesh)
    fully_shard(model, mesh=mesh)
    shards = []
    for n, t in model.named_parameters():
        local = _local(t)
        sizes = [len(c) for c in torch.arange(full[n].shape[0]).chunk(world)]
        sizes += [0] * (world - len(sizes))  # torch.chunk may return fewer chunks than ranks
        offset = sum(sizes[:rank])
        exact = local.shape[0] == sizes[rank] and torch.equal(local, full[n][offset:offset + local.shape[0]])
        shards.append({"name": n, "full": list(full[n].shape), "local": list(local.shape), "offset": offset,
                       "matches_full_rows": bool(exact), "dtensor": type(t).__name__})
    x, y = global_batch(world, per_rank, width, seed)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    comm = _CommLog()
    with comm:
        loss = F.mse_loss(model(x[mine]), y[mine])
        comm.phase = "backward"
        loss.backward()
    memory = {"fsdp": _memory(model, lambda t: _local(t)), "ddp": None}
    replica_loss = F.mse_loss(replica(x[mine]), y[mine])
    replica_loss.backward()
    memory["ddp"] = _memory(replica, lambda t: t)
    return {"shards": shards, "collectives": comm.events, "memory": memory,
            "param_count": sum(t.numel() for t in full.values())}


def _memory(model: nn.Module, local) -> dict:
    """Bytes of this rank's parameters, gradients and Adam state, measured from the real local tensors."""
    params = list(model.parameters())
    grads = _tensor_bytes(local(t.grad) for t in params if t.grad is not None)
    opt = torch.optim.Adam(params, lr=1e-3)
    opt.step()
    state = _tensor_bytes(local(v) for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    return {"parameters": _tensor_bytes(local(t) for t in params), "gradients": grads, "optimizer_state": state}


def tensor_parallel(rank: int, world: int, p: dict) -> dict:
    """Column- and row-parallel Linear with each rank holding 1/world of the weight, checked against the full one."""
    d_in, d_out, batch, seed = p["d_in"], p["d_out"], p["batch"], p["seed"]
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d_out, d_in, generator=g)
    b = torch.randn(d_out, generator=g)
    x = torch.randn(batch, d_in, generator=g)
    full = F.linear(x, w, b)

    w_col, b_col = w.chunk(world, dim=0)[rank], b.chunk(world)[rank]
    y_col_local = F.linear(x, w_col, b_col)
    pieces = [torch.empty_like(y_col_local) for _ in range(world)]
    dist.all_gather(pieces, y_col_local)
    y_col = torch.cat(pieces, dim=1)

    w_row, x_row = w.chunk(world, dim=1)[rank], x.chunk(world, dim=1)[rank]
    y_row = F.linear(x_row, w_row)
    dist.all_reduce(y_row)
    y_row = y_row + b

    w2 = torch.randn(d_in, d_out, generator=g)
    mlp_full = F.linear(F.gelu(full), w2)
    hidden_local = F.gelu(y_col_local)  # column-parallel output stays sharded: no communication here
    mlp = F.linear(hidden_local, w2.chunk(world, dim=1)[rank])
    dist.all_reduce(mlp)
    return {
        "column": {"weight_local": list(w_col.shape), "out_local": list(y_col_local.shape),
                   "max_diff": (y_col - full).abs().max().item(), "comm": "all_gather",
                   "comm_bytes": y_col_local.numel() * 4 * (world - 1)},
        "row": {"weight_local": list(w_row.shape), "in_local": list(x_row.shape),
                "max_diff": (y_row - full).abs().max().item(), "comm": "all_reduce",
                "comm_bytes": full.numel() * 4},
        "mlp": {"max_diff": (mlp - mlp_full).abs().max().item(), "collectives": 1},
        "weight_bytes_local": w_col.numel() * 4, "weight_bytes_full": w.numel() * 4,
    }


def sampler(rank: int, world: int, p: dict) -> dict:
    """DistributedSampler on this rank: indices for epochs 0 and 1, with and without set_epoch."""
    data = list(range(p["dataset"]))
    s = DistributedSampler(data, shuffle=p["shuffle"], seed=p["seed"], drop_last=p["drop_last"])
    epochs = []
    for epoch in range(2):
        s.set_epoch(epoch)
        epochs.append(list(s))
    stale = DistributedSampler(data, shuffle=p["shuffle"], seed=p["seed"], drop_last=p["drop_last"])
    return {"epochs": epochs, "epoch1_without_set_epoch": list(stale), "num_samples": s.num_samples,
            "total_size": s.total_size}


def sleep(rank: int, world: int, p: dict) -> dict:
    """Test helper: sleeps past any timeout."""
    time.sleep(p.get("seconds", 60))
    return {}


def fail(rank: int, world: int, p: dict) -> dict:
    """Test helper: rank 1 raises while rank 0 waits in a collective."""
    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    dist.barrier()
    return {}


WORKERS = {
    "env": env_seen, "collectives": collectives, "ddp": ddp, "fsdp": fsdp, "tensor_parallel": tensor_parallel,
    "sampler": sampler, "sleep": sleep, "fail": fail,
}


def every_local_rank_has_a_gpu() -> bool:
    """True if this machine has a GPU for each of its ranks (torchrun's LOCAL_WORLD_SIZE, else WORLD_SIZE): only
    then does a rank pick cuda:LOCAL_RANK. Two ranks on a one-GPU laptop stay on the CPU, where the tensors are."""
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    return torch.cuda.is_available() and local_world <= torch.cuda.device_count()


def run_rank(demo: str, params: dict, out_path: str | None, backend: str = "auto", timeout_s: float = 30.0,
             on_error=None, store_file: str | None = None) -> dict:
    """Join the process group named by the environment, run one worker, gather every rank's result to rank 0.

    With store_file the ranks meet through a FileStore at that path instead of rank 0's TCPStore (which listens
    on every interface): the page's launcher uses it so a run opens no network port. on_error(err) is called
    before the group is torn down, so the first failure is recorded before its peers'.
    """
    from datetime import timedelta

    if backend == "auto":  # the demos' tensors live on the CPU, so gloo always carries them
        backend = "cpu:gloo,cuda:nccl" if every_local_rank_has_a_gpu() and dist.is_nccl_available() else "gloo"
    if "nccl" in backend and every_local_rank_has_a_gpu():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    timeout = timedelta(seconds=timeout_s)
    if store_file is None:
        dist.init_process_group(backend, timeout=timeout)
    else:
        dist.init_process_group(backend, init_method=f"file://{store_file}", rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        t0 = time.perf_counter()
        result = {"rank": rank, "seen": env_seen(rank, world, params), **WORKERS[demo](rank, world, params)}
        result["work_ms"] = (time.perf_counter() - t0) * 1e3
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
        record = None
        if rank == 0:
            record = {"format": "pytorch-whiteboard/distributed", "version": 1, "demo": demo, "params": params,
                      "world_size": world, "backend": backend, "torch": torch.__version__, "ranks": gathered,
                      "report": REPORTS[demo](gathered, params) if demo in REPORTS else []}
            if out_path:
                _write_json(record, out_path)
        return record
    except BaseException as err:
        if on_error is not None:
            on_error(err)
        raise
    finally:
        dist.destroy_process_group()


def _write_json(record: dict, path: str) -> None:
    """Write atomically so a reader never sees half a file."""
    import json

    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, path)
