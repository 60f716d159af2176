"""The heaviest settings of each distributed demo, timed by `python -m bench` (BENCH_CASES).

The first case's first call includes starting the forkserver (torch's import): that is the cold 2-rank run.
"""

from demos.distributed.runs import run_demo

HEAVIEST = {
    "env, 2 ranks (first call: cold start)": ("env", 2, {}),
    "collectives, 4 ranks, 1M-element ring": ("collectives", 4, dict(length=6, ring_numel=1_000_000, seed=0)),
    "DDP, 4 ranks, 6x256, 32 per rank, 0.001 MB buckets, 8 micro-batches": (
        "ddp", 4, dict(layers=6, width=256, per_rank=32, bucket_cap_mb="0.001", micro_batches=8, head_first=True,
                       seed=0)),
    "FSDP, 4 ranks, 6x256, 32 per rank": ("fsdp", 4, dict(layers=6, width=256, per_rank=32, seed=0)),
    "tensor parallel, 4 ranks, 256x256, batch 16": ("tensor_parallel", 4, dict(d_in=256, d_out=256, batch=16, seed=0)),
    "sampler, 4 ranks, 64 samples": ("sampler", 4, dict(dataset=64, shuffle=True, drop_last=False, seed=0)),
}
BENCH_CASES = {name: (lambda case=case: run_demo(*case)) for name, case in HEAVIEST.items()}
