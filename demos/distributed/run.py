"""Run one demo under torchrun and write the page's result file (JSON):

    torchrun --nproc-per-node 2 -m demos.distributed.run --demo collectives --param length=4 --out result.json

The demos keep their tensors on the CPU. With --backend auto on a machine with a GPU for every local rank the
group is created as "cpu:gloo,cuda:nccl" (both backends; these CPU tensors travel over gloo) and each rank picks
cuda:LOCAL_RANK; with fewer GPUs than ranks (two ranks on a one-GPU laptop) it is plain gloo and no rank touches
a GPU. Rank 0 prints what the page's tab shows for the run; load result.json on the page to see it drawn.
"""

import argparse
import os
import sys

from demos.distributed import workers
from demos.distributed.params import DEMO_PARAMS, validate_params
from demos.distributed.results import DEMOS, MAX_FILE_WORLD
from demos.errors import InputError

_DEFAULTS = {
    "length": 4, "ring_numel": 100_000, "seed": 0, "layers": 3, "width": 64, "per_rank": 8, "bucket_cap_mb": 0.02,
    "micro_batches": 4, "head_first": True, "dataset": 10, "shuffle": True, "drop_last": False, "d_in": 8,
    "d_out": 8, "batch": 2,
}


def _parse_param(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise InputError(f"--param takes name=value, not '{text}'.")
    name, value = text.split("=", 1)
    return name.strip(), value.strip()


def _as_bool(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", choices=DEMOS, required=True)
    parser.add_argument("--param", action="append", default=[], help="name=value, repeatable")
    parser.add_argument("--out", default="result.json")
    parser.add_argument("--backend", choices=("auto", "gloo", "cpu:gloo,cuda:nccl"), default="auto")
    args = parser.parse_args(argv)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > MAX_FILE_WORLD:
        print(f"The page loads result files of up to {MAX_FILE_WORLD} ranks; this run has {world}.", file=sys.stderr)
        return 2
    raw = {k: v for k, v in _DEFAULTS.items() if k in DEMO_PARAMS[args.demo]}
    raw.update(dict(_parse_param(p) for p in args.param))
    for flag in ("head_first", "shuffle", "drop_last"):
        if flag in raw:
            raw[flag] = _as_bool(raw[flag])
    try:
        params = validate_params(args.demo, world, raw)
    except InputError as err:
        print(err, file=sys.stderr)
        return 2
    record = workers.run_rank(args.demo, params, args.out, backend=args.backend)
    if record is not None:  # rank 0: what the page's tab shows, as text
        print("\n".join(record["report"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
