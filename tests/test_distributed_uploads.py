"""Uploaded result files are visitor input: generated hostile files are each refused with one sentence, in
bounded time and memory, and every file that is accepted draws without an error."""

import copy
import json
import pickle
import time
import tracemalloc

import pytest

from demos.distributed import figures as figs
from demos.distributed import runs, views
from demos.distributed.launcher import run_ranks
from demos.distributed.params import DEMO_PARAMS, validate_params
from demos.distributed.results import MAX_BYTES
from demos.distributed.run import _DEFAULTS
from demos.errors import InputError
from tests.conftest import open_page

PAGE = "pages/distributed.py"


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    """One real record per demo, from 2 real gloo ranks at the CLI's defaults."""
    out = {}
    for demo, names in DEMO_PARAMS.items():
        params = validate_params(demo, 2, {k: v for k, v in _DEFAULTS.items() if k in names})
        out[demo], _ = run_ranks(demo, 2, params)
    return out


def draw(run: runs.DistRun) -> None:
    """Build every figure the page draws for a run, and read the other fields the page shows."""
    figs.run_figures(run)
    if run.demo == "ddp":
        view = views.ddp_view(run)
        views.overlap_ms(view["iterations"][-1])
        acc, unused = view["accumulation"], view["unused"]
        assert acc["all_reduces"]["every_step"] - acc["all_reduces"]["no_sync"] is not None
        assert {unused["True"]["ok"], unused["False"]["ok"]} <= {True, False}
    elif run.demo == "tensor_parallel":
        first = views.tp_view(run)["ranks"][0]
        f"{first['weight_bytes_local']} {first['weight_bytes_full']} {first['mlp']['collectives']:d}"
    elif run.demo == "env":
        views.env_view(run)


def load(record) -> runs.DistRun:
    return runs.from_file(json.dumps(record).encode(), "result.json")


def refused(data: bytes) -> str:
    """The one sentence a hostile file gets; fails if it is accepted or ends in another exception."""
    with pytest.raises(InputError) as err:
        runs.from_file(data, "hostile.json")
    message = str(err.value)
    assert message.endswith(".") and "\n" not in message, message
    return message


def test_real_files_load_and_draw(records):
    for record in records.values():
        run = load(record)
        assert run.source.startswith("loaded file `result.json`: 2 ranks, backend `gloo`")
        draw(run)


def paths(value, prefix=()):
    """Every key path inside a JSON value, through the first item of each list (the others are alike)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = list(enumerate(value))[:1]
    else:
        return
    for key, child in items:
        yield prefix + (key,)
        yield from paths(child, prefix + (key,))


def mutated(record: dict, path: tuple, replacement) -> dict:
    """A copy of the record with the value at `path` replaced (or deleted, for the DELETE marker)."""
    out = copy.deepcopy(record)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return out


DELETE = object()
WRONG_VALUES = (DELETE, None, "x", -1, 10**15, 1e300, [], {}, True, [1e300] * 3)


@pytest.mark.parametrize("demo", list(DEMO_PARAMS))
def test_every_missing_or_wrong_typed_field_is_refused_or_drawn(records, demo):
    """Each field of rank 0's entry and of params, deleted or replaced: one sentence, or a file that draws."""
    record = records[demo]
    targets = [("params",) + p for p in paths(record["params"])]
    targets += [("ranks", 0) + p for p in paths(record["ranks"][0])]
    accepted = 0
    for path in targets:
        drawn = False
        for value in WRONG_VALUES:
            try:
                run = load(mutated(record, path, value))
            except InputError as err:
                assert str(err).endswith("."), str(err)
                continue
            accepted += 1
            if not drawn or isinstance(value, float):  # the largest number once more; others draw alike
                draw(run)
                drawn = True
    assert accepted < len(targets) * len(WRONG_VALUES) / 2, "most broken files are refused"


ISSUE_CRASHES = {  # the files that crashed the page before their fields were checked
    "sampler with a dataset of 10**9": ("sampler", ("params", "dataset"), 10**9),
    "DDP with accumulation {}": ("ddp", ("ranks", 0, "accumulation"), {}),
    "DDP with iterations []": ("ddp", ("ranks", 0, "iterations"), []),
    "tensor parallel without weight_bytes_local": ("tensor_parallel", ("ranks", 0, "weight_bytes_local"), DELETE),
    "collectives with length 0": ("collectives", ("params", "length"), 0),
    "FSDP with junk memory": ("fsdp", ("ranks", 1, "memory"), {"fsdp": "junk", "ddp": [1, 2]}),
    "FSDP whose rank 1 names other parameters": ("fsdp", ("ranks", 1, "shards", 0, "name"), "other.weight"),
    "sampler index outside the dataset": ("sampler", ("ranks", 0, "epochs", 0, 0), 10**6),
    "DDP with 5000 buckets": ("ddp", ("ranks", 0, "iterations", 0, "buckets"), [{"index": 0}] * 5000),
}


@pytest.mark.parametrize("case", list(ISSUE_CRASHES))
def test_files_that_crashed_the_page_get_one_sentence(records, case):
    demo, path, value = ISSUE_CRASHES[case]
    refused(json.dumps(mutated(records[demo], path, value)).encode())


def hostile_files(records) -> dict[str, bytes]:
    env = records["env"]
    coll = records["collectives"]
    long_lists = mutated(coll, ("ranks", 0, "ops", "broadcast", "before"), [1.5] * 120_000)
    wide = {**coll, "world_size": 16, "ranks": [{**coll["ranks"][0], "rank": r} for r in range(16)]}
    return {
        "5,000-digit number": json.dumps(env).replace('"pid": ', '"pid": ' + "9" * 5000 + ", \"x\": ", 1).encode(),
        "1e999": json.dumps(env).replace('"version": 1', '"version": 1e999').encode(),
        "NaN": json.dumps(env).replace('"version": 1', '"version": NaN').encode(),
        "deep nesting": b'{"format": "pytorch-whiteboard/distributed", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        "moderate nesting": json.dumps({**env, "x": json.loads("[" * 500 + "]" * 500)}).encode(),
        "invalid UTF-8": b'{"format": "\xff\xfe"}',
        "a pickle": pickle.dumps(env),
        "120,000-element list": json.dumps(long_lists).encode(),
        "17 ranks": json.dumps({**wide, "world_size": 17, "ranks": wide["ranks"] + [wide["ranks"][0]]}).encode(),
        "16 ranks of collectives over the live length limit": json.dumps(
            mutated(wide, ("params", "length"), 7)).encode(),
        "over the size limit": b" " * (MAX_BYTES + 1),
        "a million small values": json.dumps({**env, "x": [0] * 400_000}).encode(),
        "a huge text": json.dumps({**env, "backend": "x" * 500_000}).encode(),
        "bool world_size": json.dumps({**env, "world_size": True}).encode(),
        "text parameters": json.dumps(mutated(coll, ("params", "length"), "3")).encode(),
        "empty": b"",
        "a list": b"[]",
    }


def test_hostile_files_get_one_sentence_in_bounded_time_and_memory(records):
    for label, data in hostile_files(records).items():
        tracemalloc.start()
        start = time.perf_counter()
        message = refused(data)
        seconds = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert seconds < 2.0, (label, seconds)
        assert peak < 64 * 2**20, (label, peak / 2**20)
        assert "http://" not in message or "`" in message, (label, message)


def test_visitor_text_in_a_file_is_quoted_literally(records):
    run = runs.from_file(json.dumps({**records["env"], "backend": "![t](http://attacker/p.png)"}).encode(),
                         "[Log in again](http://attacker/phish).json")
    assert run.source == ("loaded file `[Log in again](http://attacker/phish).json`: 2 ranks, "
                          "backend `![t](http://attacker/p.png)`")


def test_a_files_environment_values_stay_inside_their_launch_node(records):
    """A quote or backslash in a loaded rank's environment is shown as text, never closing the DOT label."""
    record = copy.deepcopy(records["env"])
    record["ranks"][1]["seen"]["env"]["MASTER_ADDR"] = 'h"]; x [label="pwned\\'
    dot = figs.run_figures(load(record))[0]
    assert 'MASTER_ADDR=h\\"]; x [label=\\"pwned\\\\\\l' in dot
    nodes = [line.split(" ")[0] for line in dot.splitlines() if " [label=" in line]
    assert nodes == ["launcher", "r0", "r1", "pg"] and "the launcher of the loaded run" in dot


def test_the_page_answers_a_hostile_upload_with_one_sentence_and_draws_a_good_one(records):
    at = open_page(PAGE, query={"dist_tab": "Launch"})
    uploader = at.file_uploader(key="dist_upload")
    uploader.set_value(("![t](http://attacker/p.png).json", json.dumps(mutated(
        records["ddp"], ("ranks", 0, "accumulation"), {})).encode(), "application/json")).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "accumulation" in errors[0], errors
    at.file_uploader(key="dist_upload").set_value(
        ("![t](http://attacker/p.png).json", json.dumps(records["ddp"]).encode(), "application/json")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    sources = [c.value for c in at.caption if c.value.startswith("Source: loaded file")]
    assert sources == ["Source: loaded file `![t](http://attacker/p.png).json`: 2 ranks, backend `gloo`"], sources
