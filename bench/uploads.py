"""The upload worst case: time and memory to load (and draw) the costliest result file, accepted or refused.

Accepted: real 4-rank records of the heaviest demos at their live limits, their rank entries repeated to the
16 ranks a file may hold. Refused: the hostile files that cost the most before they are refused.
"""

import json
import sys
import time
import tracemalloc

from demos.distributed import figures as figs
from demos.distributed import params, runs
from demos.distributed.launcher import run_ranks
from demos.distributed.results import MAX_BYTES, MAX_FILE_WORLD
from demos.errors import InputError

HEAVIEST = {
    "collectives": {"length": 6, "ring_numel": 1_000_000, "seed": 0},
    "ddp": {"layers": 6, "width": 256, "per_rank": 32, "bucket_cap_mb": 0.001, "micro_batches": 8,
            "head_first": True, "seed": 0},
    "fsdp": {"layers": 6, "width": 256, "per_rank": 32, "seed": 0},
}


def widened(record: dict, world: int = MAX_FILE_WORLD) -> dict:
    """The record with its rank entries repeated to `world` ranks (each renumbered)."""
    ranks = [{**record["ranks"][r % len(record["ranks"])], "rank": r} for r in range(world)]
    return {**record, "world_size": world, "ranks": ranks}


def accepted_files() -> dict[str, bytes]:
    files = {}
    for demo, raw in HEAVIEST.items():
        record, _ = run_ranks(demo, 4, params.validate_params(demo, 4, raw))
        files[f"{demo}, 16 ranks at the live limits"] = json.dumps(widened(record)).encode()
    return files


def refused_files() -> dict[str, bytes]:
    header = '{"format": "pytorch-whiteboard/distributed", "demo": "env", "x": '
    numbers = ", ".join(["0.5"] * ((MAX_BYTES - 200) // 5))
    return {
        "1 MiB of numbers in one list": f"{header}[{numbers}]}}".encode(),
        "1 MiB of nested brackets": (header + "[" * (MAX_BYTES // 2 - 100) + "]" * (MAX_BYTES // 2 - 100) + "}")
        .encode(),
        "a 1 MiB text": (header + '"' + "x" * (MAX_BYTES - 200) + '"}').encode(),
    }


def load_and_draw(data: bytes) -> str:
    try:
        figs.run_figures(runs.from_file(data, "bench.json"))
        return "drawn"
    except InputError as err:
        return f"refused: {err}"


def measure(label: str, data: bytes) -> dict:
    """Seconds to load the file and build its figures (or to refuse it), then the peak Python allocation of the
    same work in a second pass (tracing allocations slows it down, so it is not timed)."""
    start = time.perf_counter()
    outcome = load_and_draw(data)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    load_and_draw(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  upload {label}: {seconds:.2f} s, peak {peak / 2**20:.1f} MiB, {outcome[:80]}", file=sys.stderr)
    return {"label": label, "bytes": len(data), "seconds": seconds, "peak_mib": peak / 2**20, "outcome": outcome}


def run() -> list[dict]:
    files = {**accepted_files(), **refused_files()}
    return [measure(label, data) for label, data in files.items()]


def report(rows: list[dict]) -> str:
    lines = ["| uploaded result file | size | load + draw time | peak allocation | outcome |",
             "| --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        outcome = "drawn" if r["outcome"] == "drawn" else "refused (one sentence)"
        lines.append(f"| {r['label']} | {r['bytes'] / 1024:.0f} KiB | {r['seconds']:.2f} s | {r['peak_mib']:.1f} MiB "
                     f"| {outcome} |")
    worst_s = max(rows, key=lambda r: r["seconds"])
    worst_m = max(rows, key=lambda r: r["peak_mib"])
    lines.append(f"| **worst case** | | {worst_s['seconds']:.2f} s ({worst_s['label']}) "
                 f"| {worst_m['peak_mib']:.1f} MiB ({worst_m['label']}) | |")
    return "\n".join(lines)
