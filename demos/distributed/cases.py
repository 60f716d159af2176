"""The heaviest settings of each distributed demo, timed by `python -m bench` (BENCH_CASES).

The first case's first call includes starting the forkserver (torch's import): that is the cold 2-rank run.
"""

from demos.distributed.runs import run_demo

BENCH_CASES = {
    "env, 2 ranks (first call: cold start)": lambda: run_demo("env", 2),
    "collectives, 4 ranks, 1M-element ring": lambda: run_demo("collectives", 4, length=6, ring_numel=1_000_000, seed=0),
    "DDP, 4 ranks, 6x256, 32 per rank, 0.001 MB buckets, 8 micro-batches": lambda: run_demo(
        "ddp", 4, layers=6, width=256, per_rank=32, bucket_cap_mb="0.001", micro_batches=8, head_first=True, seed=0),
    "FSDP, 4 ranks, 6x256, 32 per rank": lambda: run_demo("fsdp", 4, layers=6, width=256, per_rank=32, seed=0),
    "tensor parallel, 4 ranks, 256x256, batch 16": lambda: run_demo("tensor_parallel", 4, d_in=256, d_out=256,
                                                                     batch=16, seed=0),
    "sampler, 4 ranks, 64 samples": lambda: run_demo("sampler", 4, dataset=64, shuffle=True, drop_last=False, seed=0),
}
