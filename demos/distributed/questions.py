"""Predict-then-run questions. Most run real gloo ranks as threads of one process (ProcessGroupGloo on a
HashStore): the same collectives as separate processes, started in milliseconds. DDP and FSDP need a full
process group, so those questions start real rank processes through this project's launcher."""

import datetime
import threading

import torch
import torch.distributed as dist

from demos.distributed.launcher import run_ranks
from demos.distributed.pipeline import pipeline_schedule
from demos.quiz import Question

_THREADS = "import datetime\nimport threading\n\nimport torch\nimport torch.distributed as dist"


def _reduce_scatter_rank1():
    world, store, out = 2, dist.HashStore(), {}

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        x = torch.tensor([1.0, 2.0, 3.0, 4.0]) * (r + 1)  # rank 0: [1,2,3,4], rank 1: [2,4,6,8]
        y = torch.zeros(2)
        pg.reduce_scatter([y], [list(x.chunk(world))]).wait()
        out[r] = y.tolist()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out[1]


def _all_reduce_sum_rank2():
    world, store, out = 4, dist.HashStore(), {}

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        x = torch.tensor([float(r + 1)])
        pg.allreduce([x]).wait()  # default op: SUM
        out[r] = x

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out[2]


def _all_gather_shape():
    world, store, out = 3, dist.HashStore(), {}

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        x = torch.full((2,), float(r))
        pieces = [torch.empty(2) for _ in range(world)]
        pg.allgather([pieces], [x]).wait()
        out[r] = torch.cat(pieces)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out[0].shape


def _all_to_all_rank0():
    world, store, out = 2, dist.HashStore(), {}

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        x = torch.tensor([10.0 * r, 10.0 * r + 1])  # rank 0: [0, 1], rank 1: [10, 11]
        y = torch.empty(2)
        pg.alltoall_base(y, x, [], []).wait()
        out[r] = y.tolist()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out[0]


def _broadcast_rank1():
    world, store, out = 2, dist.HashStore(), {}

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        x = torch.tensor([5.0]) if r == 0 else torch.tensor([7.0])
        pg.broadcast([x]).wait()  # root is rank 0 by default
        out[r] = x

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out[1]


def _ring_bytes_per_rank():
    world, store, sent = 4, dist.HashStore(), {}
    numel = 1024 * 256  # 1 MiB of float32

    def rank(r):
        pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))
        chunks = list(torch.ones(numel).tensor_split(world))
        total = 0
        for phase in (0, 1):  # 0: reduce-scatter, 1: all-gather
            for step in range(world - 1):
                send_i, recv_i = (r - step + phase) % world, (r - step - 1 + phase) % world
                incoming = torch.empty_like(chunks[recv_i])
                send = pg.send([chunks[send_i]], (r + 1) % world, step)
                pg.recv([incoming], (r - 1) % world, step).wait()
                send.wait()
                total += chunks[send_i].numel() * chunks[send_i].element_size()
                chunks[recv_i] = chunks[recv_i] + incoming if phase == 0 else incoming
        sent[r] = total

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return sent[0]


def _no_sync_all_reduces():
    params = {"layers": 1, "width": 8, "per_rank": 4, "bucket_cap_mb": 25.0, "micro_batches": 4,
              "head_first": False, "seed": 0, "iterations": 1}
    record, _ = run_ranks("ddp", 2, params)  # 2 real rank processes, DDP with a counting comm hook
    return record["ranks"][0]["accumulation"]["all_reduces"]["no_sync"]


def _fsdp_rank1_shard():
    record, _ = run_ranks("fsdp", 2, {"layers": 1, "width": 5, "per_rank": 2, "seed": 0})
    fc0_weight = next(s for s in record["ranks"][1]["shards"] if s["name"] == "fc0.weight")
    return tuple(fc0_weight["local"])  # rank 1's DTensor local shard of the (5, 5) weight


def _zero3_saving_at_4():
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)]).to(torch.bfloat16)
    model(torch.randn(8, 64, dtype=torch.bfloat16)).sum().backward()  # bf16 weights and bf16 grads
    master = [p.detach().float().requires_grad_() for p in model.parameters()]  # fp32 master weights
    for m, p in zip(master, model.parameters(), strict=True):
        m.grad = p.grad.float()
    adam = torch.optim.Adam(master)
    adam.step()  # creates exp_avg and exp_avg_sq, fp32
    held = [*model.parameters(), *(p.grad for p in model.parameters()), *master,
            *(t for state in adam.state.values() for t in state.values() if t.dim())]
    replica = sum(t.numel() * t.element_size() for t in held)  # DDP: every rank holds all of it
    shard = sum(c.numel() * c.element_size() for t in held for c in [t.flatten().chunk(4)[0]])  # ZeRO-3: rank 0
    return 1 - shard / replica


def _sampler_padding():
    from torch.utils.data import DistributedSampler

    data = list(range(10))
    per_rank = [list(DistributedSampler(data, num_replicas=4, rank=r, shuffle=False)) for r in range(4)]
    flat = [i for idx in per_rank for i in idx]
    return len(flat) - len(set(flat))  # indices read twice so every rank gets the same count


def _pipeline_bubble():
    return pipeline_schedule(4, 8, "1F1B").bubble


QUESTIONS = (
    Question("reduce_scatter", "Rank 0 holds [1, 2, 3, 4], rank 1 holds [2, 4, 6, 8]. After reduce_scatter (sum), "
             "what does rank 1 hold?", _reduce_scatter_rank1,
             "The sum is [3, 6, 9, 12]; it is split into one chunk per rank and rank 1 keeps chunk 1: [9, 12].",
             choices=("[3.0, 6.0]", "[9.0, 12.0]", "[2.0, 4.0]", "[3.0, 6.0, 9.0, 12.0]"), imports=_THREADS),
    Question("all_reduce_sum", "4 ranks hold r + 1 (1, 2, 3, 4). After all_reduce with the default op, what does "
             "rank 2 hold?", _all_reduce_sum_rank2,
             "The default op is SUM and all_reduce leaves the result on every rank: 1 + 2 + 3 + 4 = 10. DDP gets a "
             "mean by dividing by the world size itself.", kind="number", imports=_THREADS),
    Question("all_gather_shape", "3 ranks each hold a tensor of shape (2,). What shape is rank 0's concatenated "
             "all_gather output?", _all_gather_shape,
             "all_gather collects one tensor from every rank: 3 × 2 = 6 elements, on every rank.", kind="shape",
             imports=_THREADS),
    Question("all_to_all", "Rank 0 holds [0, 1], rank 1 holds [10, 11]. After all_to_all, what does rank 0 hold?",
             _all_to_all_rank0,
             "Chunk j of each rank goes to rank j: rank 0 receives chunk 0 of rank 0 (0) and chunk 0 of rank 1 (10). "
             "It is a transpose of the (rank, chunk) grid — the collective behind MoE token routing.",
             choices=("[0.0, 1.0]", "[0.0, 10.0]", "[10.0, 11.0]", "[1.0, 11.0]"), imports=_THREADS),
    Question("broadcast", "Rank 0 holds [5.], rank 1 holds [7.]. After broadcast from rank 0, what does rank 1 hold?",
             _broadcast_rank1, "Broadcast overwrites every rank's tensor with the root's. DDP does this with the "
             "parameters at construction so every replica starts identical.", kind="number", imports=_THREADS),
    Question("ring_bytes", "A ring all_reduce of 1 MiB (float32) across 4 ranks: how many bytes does each rank send?",
             _ring_bytes_per_rank,
             "2(N−1)/N × size = 2·3/4 × 1,048,576 = 1,572,864 bytes: reduce-scatter and all-gather each take N−1 steps "
             "of one size/N chunk. As N grows it approaches 2× the size, independent of N.", kind="number",
             imports=_THREADS),
    Question("no_sync", "DDP on 2 ranks, one bucket; 4 micro-batches, the first 3 inside no_sync(). How many bucket "
             "all_reduces run?", _no_sync_all_reduces,
             "Inside no_sync gradients only accumulate locally; the all_reduce happens once, in the backward of the "
             "last micro-batch. Without no_sync it would be 4 — same gradients, 4× the traffic.",
             choices=("0", "1", "3", "4"), imports="from demos.distributed.launcher import run_ranks"),
    Question("fsdp_shard", "fully_shard on 2 ranks, a Linear(5, 5). What shape is rank 1's local shard of the "
             "weight?", _fsdp_rank1_shard,
             "FSDP2 shards dim 0 like torch.chunk: 5 rows split as 3 + 2, so rank 1 holds rows 3–4: (2, 5).",
             kind="shape", imports="from demos.distributed.launcher import run_ranks"),
    Question("zero3_saving", "Mixed-precision Adam (16 bytes per parameter). What fraction of per-rank memory for "
             "weights, gradients and optimizer state does ZeRO-3 save at 4 ranks?", _zero3_saving_at_4,
             "The snippet holds what mixed-precision Adam keeps (bf16 weights and grads, fp32 master weights, m and "
             "v: 2 + 2 + 12 bytes per parameter) and shards every tensor over 4 ranks: rank 0 keeps a quarter, so "
             "ZeRO-3 saves 1 − 1/4 = 75% for any model size. Activations are not sharded by it.", kind="number"),
    Question("sampler_padding", "DistributedSampler over 10 samples on 4 ranks (drop_last=False). How many indices are "
             "read twice?", _sampler_padding,
             "Each rank gets ceil(10/4) = 3 samples, 12 in total, so the first 2 indices are appended again as "
             "padding. drop_last=True would instead give each rank 2 and skip 2 samples.", kind="number"),
    Question("bubble", "1F1B with 4 stages and 8 micro-batches: what fraction of stage time is idle?", _pipeline_bubble,
             "(p − 1)/(m + p − 1) = 3/11 ≈ 0.273, the same as GPipe; 1F1B lowers activation memory, not the bubble.",
             kind="number", imports="from demos.distributed.pipeline import pipeline_schedule",
             model="this app's pipeline schedule simulator (demos/distributed/pipeline.py: unit-time forward and "
                   "backward tasks in the GPipe and 1F1B orders of the GPipe and PipeDream-Flush papers)"),
)
