"""The code a distributed run shows: a standalone torchrun script made of the worker code that ran."""

import ast
import functools
from pathlib import Path

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
