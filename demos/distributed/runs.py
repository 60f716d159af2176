"""Distributed runs: validate plain parameters, run real ranks (or read a torchrun result file), return a DistRun.

`run_demo` starts gloo ranks through the launcher; `from_file` reads a result file written by the same workers
under torchrun. Both return a `DistRun`; demos/distributed/views.py turns one into what a figure needs.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import torch

from demos import guests
from demos.distributed.launcher import MIN_WORLD, run_ranks
from demos.distributed.params import params_from_file, validate_params, validate_world
from demos.distributed.results import check_ranks, load_result
from demos.distributed.snippets import rank_script
from demos.errors import quoted
from demos.shown import Script, entry


@dataclass(frozen=True)
class DistRun:
    """One distributed run: every rank's raw result, where it came from, and the code that reproduces it."""

    demo: str
    world_size: int
    backend: str
    params: dict = field(hash=False)
    ranks: tuple = field(hash=False)
    source: str
    wall_s: float | None
    code: Script
    scaled: str = ""  # what the server's memory limit changed, said on the page
    report: tuple[str, ...] = field(default=(), hash=False)  # what rank 0 reported (reports.py); () for a file


def backend_note() -> str:
    """Why the page's ranks use gloo, said as it is on this machine."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        return ("No GPU here, so gloo (the CPU backend) carries everything; under torchrun on a machine with a GPU "
                "per rank, `--backend auto` gives the same worker code a group that also has nccl.")
    return (f"This machine has {gpus} GPU{'s' * (gpus != 1)}, but the demos' tensors live on the CPU, so gloo "
            "carries them here too; under torchrun with a GPU per rank, `--backend auto` adds nccl for CUDA tensors.")


# A run's settings as the page passes them: (name, value) pairs, hashable so the page's cache keys on them.
Settings = tuple[tuple[str, object], ...] | Mapping


@entry("sampler", 2, (("dataset", 10), ("shuffle", True), ("drop_last", False), ("seed", 3)), entries=48)
def run_demo(demo: str, world_size: int, settings: Settings = ()) -> DistRun:
    """Run one demo on real gloo ranks (2-4 processes on this machine) and return every rank's result.

    Under a container memory limit too small for `world_size` processes, fewer ranks run and the result says so.
    """
    world, note = guests.scaled(validate_world(world_size), "ranks", low=MIN_WORLD)
    params = validate_params(demo, world, dict(settings))
    record, info = run_ranks(demo, world, params)
    source = f"live run: {world} gloo ranks on 127.0.0.1 (pids {', '.join(map(str, info.pids))}), {info.wall_s:.2f} s"
    return replace(_to_run(record, source, info.wall_s), scaled=note)


def from_file(data: bytes, name: str = "result.json") -> DistRun:
    """A result file from `torchrun -m demos.distributed.run --out FILE`, checked like live input before drawing.

    Its parameters must pass the live run's limits, and every field the views and figures read is checked
    (results.check_ranks), so a file draws nothing a live run could not.
    """
    record = load_result(data)
    demo, world = record["demo"], record["world_size"]
    params = params_from_file(demo, world, record["params"])
    check_ranks(demo, world, params, record["ranks"])
    source = f"loaded file {quoted(name, 60)}: {world} ranks, backend {quoted(record['backend'])}"
    return DistRun(demo, world, record["backend"], params, tuple(record["ranks"]), source, None,
                   _live_run_script(demo, world, params))


from_file.cache_entries = 8  # results pages.ui.compute keeps: each holds its file's bytes (up to 1 MiB) as its key


def _live_run_script(demo: str, world: int, params: dict) -> Script:
    """A file's script: the one a live run at the file's settings shows, made by the same function. The ranks that
    wrote a file ran elsewhere, so nothing here can check what ran; the live run's entry point is where the script
    is tested (its ranks report what they ran), so the script is shown under that entry's name."""
    code = rank_script(demo, world, params)
    code.entry = f"{run_demo.__module__}.{run_demo.__qualname__}"
    return code


def _to_run(record: dict, source: str, wall_s: float | None) -> DistRun:
    demo, world = record["demo"], record["world_size"]
    return DistRun(demo, world, str(record["backend"]), record["params"], tuple(record["ranks"]), source, wall_s,
                   rank_script(demo, world, record["params"]), report=tuple(record["report"]))
