"""Generated questions on data and scale: batches per epoch, DistributedSampler shards, all_reduce results."""

import math
import random

from demos.practice.family import Family, answer_text, choices, ordinal
from demos.processes import bind_gloo_to_loopback
from demos.quiz import Question

DATA = "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n\n"


def batches_question(rng: random.Random) -> Question:
    n, batch = rng.randint(10, 1000), rng.choice((8, 10, 12, 16, 32, 64))
    drop_last, world = rng.random() < 0.5, rng.choice((None, 2, 4, 8))
    code = DATA + f"data = TensorDataset(torch.arange({n}))\n"
    if world:
        code += f"sampler = DistributedSampler(data, num_replicas={world}, rank=0, shuffle=False)\n"
    code += (f"loader = DataLoader(data, batch_size={batch}, drop_last={drop_last}"
             + (", sampler=sampler" if world else "") + ")\nprint(len(loader))\n")
    per_rank = math.ceil(n / world) if world else n
    batches = per_rank // batch if drop_last else math.ceil(per_rank / batch)
    share = (f"DistributedSampler pads {n} samples up to a multiple of {world} and gives each rank "
             f"⌈{n} / {world}⌉ = {per_rank}. " if world else f"One process sees all {n} samples. ")
    split = (f"drop_last=True drops the short last batch: ⌊{per_rank} / {batch}⌋ = {batches}." if drop_last else
             f"drop_last=False keeps a short last batch: ⌈{per_rank} / {batch}⌉ = {batches}.")
    prompt = (f"{n} samples, batch_size={batch}, drop_last={drop_last}"
              + (f", DistributedSampler with {world} ranks" if world else "") + ": how many batches per epoch?")
    return Question.from_code("", prompt, code, share + split, kind="number")


def shard(n: int, world: int, rank: int) -> list[int]:
    """DistributedSampler without shuffling: pad by wrapping to a multiple of world, then every world-th index."""
    total = math.ceil(n / world) * world
    indices = list(range(n))
    while len(indices) < total:
        indices += indices[: total - len(indices)]
    return indices[rank:total:world]


def sampler_question(rng: random.Random) -> Question:
    n, world = rng.randint(5, 14), rng.randint(2, 4)
    rank = rng.randrange(world)
    code = ("import torch\nfrom torch.utils.data import DistributedSampler\n\n"
            f"sampler = DistributedSampler(list(range({n})), num_replicas={world}, rank={rank}, shuffle=False)\n"
            "print(list(sampler))\n")
    per = math.ceil(n / world)
    block = [i % n for i in range(rank * per, (rank + 1) * per)]  # wrong: a contiguous block per rank
    others = [shard(n, world, r) for r in range(world) if r != rank]  # wrong: another rank's shard
    wrong = [str(block), str(list(range(rank, n, world))), *map(str, others)]
    padded = per * world - n
    return Question.from_code(
        "", f"A DistributedSampler over {n} samples with {world} ranks, no shuffling: which indices does rank "
            f"{rank} get?",
        code, f"The sampler pads {n} indices to {per * world} by wrapping around ({padded} repeated from the start), "
              f"then rank {rank} takes every {ordinal(world)} index starting at {rank}: {shard(n, world, rank)}.",
        choices=choices(answer_text(code), wrong, rng),
    )


bind_gloo_to_loopback()  # the all_reduce questions make gloo groups as threads of this process

OPS = {"SUM": sum, "MAX": max, "MIN": min, "PRODUCT": math.prod}


def all_reduce_question(rng: random.Random) -> Question:
    world, a, b = rng.randint(2, 4), rng.randint(1, 3), rng.randint(0, 3)
    op, asked = rng.choice(list(OPS)), rng.randrange(world)
    values = [a * r + b for r in range(world)]
    code = ("import datetime\nimport threading\n\nimport torch\nimport torch.distributed as dist\n\n"
            f"world, store, out = {world}, dist.HashStore(), {{}}\n\n\ndef rank(r):\n"
            "    pg = dist.ProcessGroupGloo(store, r, world, datetime.timedelta(seconds=30))\n"
            f"    x = torch.tensor([{float(a)} * r + {float(b)}])\n"
            f"    pg.allreduce([x], dist.ReduceOp.{op}).wait()\n    out[r] = x\n\n\n"
            "threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]\n"
            "[t.start() for t in threads]\n[t.join() for t in threads]\n"
            f"print(out[{asked}])\n")
    result = OPS[op](values)
    return Question.from_code(
        "", f"{world} gloo ranks; rank r holds [{a}·r + {b}]. After all_reduce with op={op}, what does rank {asked} "
            "hold?",
        code, f"The ranks hold {values}. all_reduce combines them with {op} and leaves the result on every rank, "
              f"not only rank 0: {float(result):g}.", kind="number",
    )


FAMILIES = (
    Family("batches", "Batches per epoch, with drop_last and DistributedSampler", "data-loading", "Batches per epoch",
           batches_question, "Samplers", (("dl_tab", "Samplers"),)),
    Family("sampler", "Which indices a rank gets from DistributedSampler", "distributed", "DistributedSampler",
           sampler_question, "DistributedSampler", (("dist_tab", "DistributedSampler"),)),
    Family("all_reduce", "all_reduce result across ranks", "distributed", "Collectives", all_reduce_question,
           "Collectives", (("dist_tab", "Collectives"),)),
)
