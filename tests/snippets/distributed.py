"""Distributed: each demo's rank script, linted and run under torchrun as a reader would, prints what rank 0 reported
in the live run the page drew (the sampler's indices of every rank among them); a loaded file of that run shows the
same script; the pipeline schedule's snippet prints its measurements."""

import json
import re

from demos.distributed import pipeline, runs
from demos.distributed.results import FORMAT
from tests.provenance import assert_shows_what_ran
from tests.snippets import checks, linted

# The other demos' rank scripts, each at small settings: the page shows one per tab.
OTHER_DEMOS = {
    "env": {},
    "collectives": {"length": 3, "ring_numel": 1000, "seed": 0},
    "ddp": {"layers": 2, "width": 8, "per_rank": 4, "bucket_cap_mb": 0.001, "micro_batches": 2, "head_first": True,
            "seed": 0},
    "fsdp": {"layers": 2, "width": 6, "per_rank": 2, "seed": 0},
    "tensor_parallel": {"d_in": 8, "d_out": 6, "batch": 3, "seed": 1},
}



def untimed(lines) -> list[str]:
    """Report lines with what differs from launch to launch blanked: each wall-clock time (a number of ms) and the
    rendezvous address (the page's launcher sets 127.0.0.1, torchrun --standalone localhost)."""
    return [re.sub(r"-?\d[\d,.]*(e[-+]\d+)? ms", "… ms", re.sub(r"MASTER_ADDR=\S+", "MASTER_ADDR=…", line))
            for line in lines]


def result_file(run: runs.DistRun) -> bytes:
    """The run as the result file `python -m demos.distributed.run --out` writes."""
    return json.dumps({"format": FORMAT, "version": 1, "demo": run.demo, "params": run.params,
                       "world_size": run.world_size, "backend": run.backend, "ranks": list(run.ranks)}).encode()


@checks(runs.run_demo)
def rank_scripts(r, run):
    """The ranks run in their own processes and report what they ran (tests/provenance.py); under torchrun the
    sampler's script prints every rank's indices the live run returned, and each demo's script prints rank 0's
    report of its live run, timings apart."""
    out = run(linted(r.code))
    for rank, result in enumerate(r.ranks):
        for indices in (*result["epochs"], result["epoch1_without_set_epoch"]):
            assert f"  rank {rank}: {indices}" in out
    assert out.splitlines() == list(r.report) and r.report
    loaded = runs.from_file(result_file(r))
    assert loaded.code == r.code and loaded.code.entry == r.code.entry and loaded.code.origins == r.code.origins
    for demo, settings in OTHER_DEMOS.items():
        live = assert_shows_what_ran(runs.run_demo, demo, 2, settings)
        assert untimed(run(linted(live.code)).splitlines()) == untimed(live.report), demo


@checks(pipeline.pipeline_schedule)
def pipeline_schedule(r, run):
    shown = dict(line.split(": ", 1) for line in run(linted(r.code)).splitlines() if re.match(r"^\w+: ", line))
    for name in ("tasks", "makespan", "bubble", "formula", "peak_in_flight"):
        assert shown[name] == str(getattr(r, name)), name
