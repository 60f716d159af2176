"""Result files of distributed runs: plain JSON, checked before anything reads them (never pickle).

An uploaded file is visitor input, treated like a live run's settings: its parameters must pass the live
limits, every field a view or figure reads is checked for its type and range, and every list's length is
bounded by those parameters, so the largest file that passes draws no more than the largest live run.
"""

import json
import math
import re

from demos.errors import InputError, quoted

FORMAT = "pytorch-whiteboard/distributed"
DEMOS = ("env", "collectives", "ddp", "fsdp", "tensor_parallel", "sampler")
MAX_BYTES = 1024 * 1024  # the largest real file (16 ranks, every demo at its limits) is under 200 KiB
MAX_FILE_WORLD = 16
MAX_DEPTH = 12
MAX_VALUES = 100_000  # numbers, strings and containers in the whole file
MAX_DIGITS = 18  # a whole number in a result file is a count, a size or a pid
MAX_TEXT = 2000
MAX_ABS = 1e15  # larger magnitudes are no timing, byte count or difference a run can record
COLLECTIVE_OPS = ("broadcast", "all_reduce_sum", "all_reduce_avg", "all_reduce_max", "reduce", "all_gather",
                  "reduce_scatter", "scatter", "gather", "all_to_all", "barrier")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,80}")
_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON can spell them; UTF-8 cannot carry them to a page


def _reject_constant(name: str):
    raise InputError(f"The result file contains {name}; only finite numbers are allowed.")


def _bounded_int(text: str) -> int:
    """json's hook for whole numbers: refuse thousands of digits before Python converts them."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise InputError(f"The result file contains a number with {len(text)} digits; the limit is {MAX_DIGITS}.")
    return int(text)


def _check_tree(record) -> None:
    """Only JSON types, finite numbers, bounded depth, text length and value count (iteratively: no recursion)."""
    stack, count = [(record, 0)], 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise InputError(f"The result file holds more than {MAX_VALUES:,} values.")
        if depth > MAX_DEPTH:
            raise InputError(f"The result file is nested deeper than {MAX_DEPTH} levels.")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth + 1) for k in value)
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, float) and not (math.isfinite(value) and abs(value) <= MAX_ABS):
            raise InputError("The result file contains a number that is not finite or is far too large.")
        elif isinstance(value, str) and len(value) > MAX_TEXT:
            raise InputError(f"The result file contains a text of {len(value):,} characters; the limit is {MAX_TEXT}.")
        elif isinstance(value, str) and _SURROGATE.search(value):
            raise InputError("The result file contains a text with a lone surrogate (an escape such as \\ud800 "
                             "that stands for no character).")


def load_result(data: bytes) -> dict:
    """Parse and check a result file's envelope; raise InputError with the first problem."""
    if not isinstance(data, bytes | bytearray):
        raise InputError("The result file must be bytes read from a file.")
    if len(data) > MAX_BYTES:
        raise InputError(f"The result file is {len(data) / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"The result file is not UTF-8 text (byte {err.start + 1:,} is not valid there), so it "
                         "cannot be JSON.") from None
    try:
        record = json.loads(text, parse_constant=_reject_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as err:
        raise InputError(f"The result file is not valid JSON: {err.msg.lower()} at line {err.lineno}, column "
                         f"{err.colno}.") from None
    except RecursionError:
        raise InputError(f"The result file is nested too deeply to read (this page's limit is {MAX_DEPTH} "
                         "levels).") from None
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
    backend = record.setdefault("backend", "unknown")
    if not isinstance(backend, str) or len(backend) > 40:
        raise InputError(f"The result file's backend must be a short text, not {quoted(backend)}.")
    return record


# ---- field checks: each takes (value, where) and raises InputError naming the field -------------------------

def _fail(where: str, what: str):
    raise InputError(f"The result file's {where} must be {what}.")


def number(value, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(where, "a number")


def whole(low: int = 0, high: int = 2**53):
    def check(value, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            _fail(where, f"a whole number from {low:,} to {high:,}")
    return check


def flag(value, where: str) -> None:
    if not isinstance(value, bool):
        _fail(where, "true or false")


def text(value, where: str) -> None:
    if not isinstance(value, str):
        _fail(where, "text")


def name(value, where: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        _fail(where, "a parameter or op name (letters, digits, '_', '.', '-')")


def span(value, where: str) -> None:
    """[start, end] in ms: the start is always recorded; the end is missing when a hook never fired."""
    if not isinstance(value, list) or len(value) != 2:
        _fail(where, "a [start, end] pair")
    number(value[0], f"{where}[0]")
    optional(number)(value[1], f"{where}[1]")


def param_row(value, where: str) -> None:
    """[name, shape, numel] of one parameter."""
    if not isinstance(value, list) or len(value) != 3:
        _fail(where, "a [name, shape, numel] triple")
    name(value[0], f"{where}[0]")
    list_of(SIZE, 4)(value[1], f"{where}[1]")
    SIZE(value[2], f"{where}[2]")


def optional(check):
    def run(value, where: str) -> None:
        if value is not None:
            check(value, where)
    return run


def list_of(item, max_len: int, min_len: int = 0):
    def check(value, where: str) -> None:
        if not isinstance(value, list) or not min_len <= len(value) <= max_len:
            _fail(where, f"a list of {min_len} to {max_len} items" if min_len else f"a list of at most {max_len} items")
        for i, v in enumerate(value):
            item(v, f"{where}[{i}]")
    return check


def fields(**checks):
    """An object with (at least) these keys, each passing its check."""
    def check(value, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, "an object")
        for key, item in checks.items():
            if key not in value:
                raise InputError(f"The result file's {where} has no '{key}'.")
            item(value[key], f"{where}.{key}")
    return check


def keyed(item, max_len: int):
    """An object with up to max_len name keys, each value passing its check."""
    def check(value, where: str) -> None:
        if not isinstance(value, dict) or len(value) > max_len:
            _fail(where, f"an object of at most {max_len} entries")
        for i, (key, v) in enumerate(value.items()):
            name(key, f"{where} key {i}")
            item(v, f"{where}.{key}")
    return check


# ---- what each demo's rank entry must hold, given the validated parameters ----------------------------------

BYTES = whole(0, 2**50)
SIZE = whole(0, 2**31)


def _collectives(world: int, p: dict):
    longest = world * p["length"]
    op = fields(before=list_of(number, longest), after=optional(list_of(number, longest)), error=text)
    ring = fields(bytes=BYTES, sent_bytes=BYTES, max_diff_vs_all_reduce=number, ring_ms=number,
                  all_reduce_ms=number)
    return fields(ops=fields(**{o: op for o in COLLECTIVE_OPS}), ring=ring)


def _ddp(world: int, p: dict):
    modules = p["layers"] + 1
    bucket = fields(index=SIZE, bytes=BYTES, params=list_of(name, 2 * modules), start=number, end=optional(number))
    iteration = fields(layers=keyed(span, modules), buckets=list_of(bucket, 2 * modules), backward_end=number)
    outcome = fields(ok=flag, error=text)
    accumulation = fields(micro_batches=SIZE, all_reduces=fields(no_sync=SIZE, every_step=SIZE, never_synced=SIZE),
                          max_grad_diff=number, rank_spread=fields(no_sync=number, never_synced=number))
    return fields(params=list_of(param_row, 2 * modules), iterations=list_of(iteration, p["iterations"], 1),
                  max_diff_vs_single=number,
                  max_diff_across_ranks=number, accumulation=accumulation,
                  unused=fields(**{"True": outcome, "False": outcome}))


def _fsdp(world: int, p: dict):
    params = 2 * (p["layers"] + 1)
    shard = fields(name=name, full=list_of(SIZE, 2, 1), local=list_of(SIZE, 2), matches_full_rows=flag)
    event = fields(op=name, phase=name, bytes=BYTES, t_ms=number)
    usage = fields(parameters=BYTES, gradients=BYTES, optimizer_state=BYTES)
    return fields(shards=list_of(shard, params, 1), collectives=list_of(event, 16 * params),
                  memory=fields(fsdp=usage, ddp=usage), param_count=BYTES)


def _tensor_parallel(world: int, p: dict):
    part = fields(weight_local=list_of(SIZE, 2, 2), max_diff=number)
    return fields(column=part, row=part, mlp=fields(max_diff=number, collectives=SIZE), weight_bytes_local=BYTES,
                  weight_bytes_full=BYTES)


def _sampler(world: int, p: dict):
    index = whole(0, p["dataset"] - 1)
    per_rank = -(-p["dataset"] // world)
    order = list_of(index, per_rank)
    return fields(epochs=list_of(order, 2, 2), epoch1_without_set_epoch=order, num_samples=SIZE, total_size=SIZE)


def _env(world: int, p: dict):
    return fields(seen=fields(env=keyed(text, 16), pid=SIZE, dist_rank=whole(0, MAX_FILE_WORLD),
                              dist_world=whole(1, MAX_FILE_WORLD), backend=text))


RANK_SCHEMAS = {"collectives": _collectives, "ddp": _ddp, "fsdp": _fsdp, "tensor_parallel": _tensor_parallel,
                "sampler": _sampler, "env": _env}


def check_ranks(demo: str, world: int, params: dict, ranks: list) -> None:
    """Every field of every rank entry that the page's views and figures read, checked against the parameters."""
    schema = RANK_SCHEMAS[demo](world, params)
    for rank, entry in enumerate(ranks):
        schema(entry, f"ranks[{rank}]")
    if demo == "fsdp":
        names = [s["name"] for s in ranks[0]["shards"]]
        for rank, entry in enumerate(ranks):
            if sorted(s["name"] for s in entry["shards"]) != sorted(names):
                raise InputError(f"The result file's ranks[{rank}].shards do not name the same parameters as rank 0.")
