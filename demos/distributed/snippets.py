"""The code a distributed run shows: a standalone torchrun script made of the source of what the ranks ran.

The script holds the worker the ranks ran, the functions and classes it calls, and the report rank 0 made of every
rank's result (reports.py), each as its own source (demos.shown.script), then a main block that joins the process
group torchrun sets up, runs the worker, gathers the results on rank 0 and prints the report.
"""

from demos.distributed import reports, workers
from demos.distributed.models import ENV_KEYS, Tower
from demos.shown import Script, script

# What each demo's ranks run, in the order the script defines it; the worker comes last.
PARTS = {
    "env": (workers.env_seen,),
    "collectives": (workers.barrier_times, workers.ring_all_reduce, workers.collectives),
    "ddp": (Tower, workers.global_batch, workers._ddp_recorder, workers._time_layers, workers._rank_spread,
            workers._accumulation, workers.whole_sentences, workers._unused_branch, workers.ddp),
    "fsdp": (Tower, workers.global_batch, workers._CommLog, workers._tensors_in, workers._tensor_bytes,
             workers._local, workers._memory, workers.fsdp),
    "tensor_parallel": (workers.tensor_parallel,),
    "sampler": (workers.sampler,),
}
# The imports those parts use (this repository's own are the parts themselves).
IMPORTS = {
    "env": "import os\n\nimport torch\nimport torch.distributed as dist",
    "collectives": "import time\n\nimport torch\nimport torch.distributed as dist",
    "ddp": ("import re\nimport time\nimport warnings\n\nimport torch\nimport torch.distributed as dist\n"
            "import torch.nn as nn\nimport torch.nn.functional as F\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP"),
    "fsdp": ("import time\nimport warnings\n\nimport torch\nimport torch.distributed as dist\nimport torch.nn as nn\n"
             "import torch.nn.functional as F\nfrom torch.distributed.device_mesh import init_device_mesh\n"
             "from torch.utils._python_dispatch import TorchDispatchMode"),
    "tensor_parallel": "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F",
    "sampler": "import torch.distributed as dist\nfrom torch.utils.data import DistributedSampler",
}
MAIN = """if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    result = {worker}(rank, world, p)
    results = [None] * world if rank == 0 else None
    dist.gather_object(result, results, dst=0)  # every rank's result, in rank order, on rank 0
    if rank == 0:
        print(*{report}(results, p), sep="\\n")
    dist.destroy_process_group()"""


def launch_lines(demo: str, world: int, params: dict) -> str:
    """How to run the script with torchrun, and the same run from this repository (it writes a result file)."""
    words = [f"torchrun --nproc-per-node {world} -m demos.distributed.run --demo {demo} --out result.json",
             *(f"--param {k}={v}" for k, v in params.items() if k != "iterations")]
    lines = [""]
    for word in words:  # a line of the command ends before 108 characters, never inside a --param
        lines[-1:] = [f"{lines[-1]} {word}".strip()] if len(lines[-1]) + len(word) < 108 else [lines[-1], word]
    return (f"# Run with: torchrun --nproc-per-node {world} this_file.py\n"
            "# or, in this repository (it writes the result file the page loads):\n"
            + " \\\n".join(f"#   {line}" for line in lines))


def rank_script(demo: str, world: int, params: dict) -> Script:
    """The standalone script of one demo at these settings: what each rank ran, then rank 0's report."""
    report = reports.REPORTS[demo]
    settings = {"ENV_KEYS": ENV_KEYS, "p": params} if demo == "env" else {"p": params}
    return script(*PARTS[demo], report, imports=f"{launch_lines(demo, world, params)}\n{IMPORTS[demo]}",
                  settings=settings, run=MAIN.format(worker=PARTS[demo][-1].__name__, report=report.__name__))
