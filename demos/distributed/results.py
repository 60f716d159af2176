"""Result files of distributed runs: plain JSON, checked before anything reads them (never pickle)."""

import json
import math

from demos.errors import InputError

FORMAT = "pytorch-whiteboard/distributed"
DEMOS = ("env", "collectives", "ddp", "fsdp", "tensor_parallel", "sampler")
MAX_BYTES = 4 * 1024 * 1024
MAX_FILE_WORLD = 16
MAX_DEPTH = 12


def _reject_constant(name: str):
    raise InputError(f"The result file contains {name}; only finite numbers are allowed.")


def _check_tree(value, depth: int = 0) -> None:
    """Only JSON types, finite numbers and a bounded depth."""
    if depth > MAX_DEPTH:
        raise InputError(f"The result file is nested deeper than {MAX_DEPTH} levels.")
    if isinstance(value, dict):
        for _k, v in value.items():
            _check_tree(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_tree(v, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InputError("The result file contains a number that is not finite.")


def load_result(data: bytes) -> dict:
    """Parse and check a result file written by `workers.run_rank`; raise InputError with the first problem."""
    if not isinstance(data, bytes | bytearray):
        raise InputError("The result file must be bytes read from a file.")
    if len(data) > MAX_BYTES:
        raise InputError(f"The result file is {len(data) / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB.")
    try:
        record = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise InputError(f"The result file is not valid JSON ({type(err).__name__}).") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"This is not a result file of this page: its 'format' must be '{FORMAT}'.")
    _check_tree(record)
    if record.get("demo") not in DEMOS:
        raise InputError(f"The result file's demo must be one of {', '.join(DEMOS)}.")
    world, ranks = record.get("world_size"), record.get("ranks")
    if not isinstance(world, int) or isinstance(world, bool) or not 1 <= world <= MAX_FILE_WORLD:
        raise InputError(f"The result file's world_size must be a whole number from 1 to {MAX_FILE_WORLD}.")
    if not isinstance(ranks, list) or len(ranks) != world:
        raise InputError(f"The result file must hold one entry per rank ({world}).")
    for i, entry in enumerate(ranks):
        if not isinstance(entry, dict) or entry.get("rank") != i:
            raise InputError(f"Entry {i} of the result file's ranks is not rank {i}'s result.")
    if not isinstance(record.get("params"), dict):
        raise InputError("The result file has no 'params' object.")
    record.setdefault("backend", "unknown")
    return record
