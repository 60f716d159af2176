"""A scripted sequence of allocations and frees through the caching allocator model.

Script grammar, one action per line (or separated by ';'):
    a = 40 MiB        allocate (units: B, KB, MB, GB = powers of 1000; KiB, MiB, GiB = powers of 1024)
    del a             free (also: free a)
    empty_cache()     release cached segments to the device
"""

import re
from dataclasses import dataclass

from demos.errors import InputError, quoted
from demos.memory.allocator import BlockView, CachingAllocator, OutOfMemory, fmt_bytes
from demos.parsing import MAX_TEXT
from demos.shown import entry, script

MAX_ACTIONS = 40
MAX_SCRIPT = 40 * MAX_TEXT // 10
MAX_ALLOC = 64 * 2**30
MIN_CAPACITY_MIB, MAX_CAPACITY_MIB = 16, 81920
UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_ALLOC = re.compile(r"([A-Za-z_]\w{0,15})\s*=\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)", re.IGNORECASE)
_FREE = re.compile(r"(?:del|free)\s+([A-Za-z_]\w{0,15})")
_EMPTY = re.compile(r"(?:torch\.cuda\.)?empty_cache(?:\(\))?")

PRESETS = {
    "Fragmentation": "a = 100 MiB\ndel a\nb = 40 MiB\nc = 40 MiB\ndel b\nd = 50 MiB",
    "Reuse from the cache": "x = 8 MiB\ndel x\ny = 6 MiB\nz = 300 KiB\nw = 1 KB\ndel y\nempty_cache()",
    "Small pool": "s1 = 1 KiB\ns2 = 100 B\ns3 = 600 KiB\ns4 = 1 MiB\nl1 = 1.5 MiB\ndel s1\ndel s3\nempty_cache()",
}


@dataclass(frozen=True)
class Action:
    kind: str  # "alloc", "free" or "empty"
    name: str = ""
    nbytes: int = 0


@dataclass(frozen=True)
class AllocatorRun:
    actions: tuple[Action, ...]
    labels: tuple[str, ...]
    allocated: tuple[int, ...]
    reserved: tuple[int, ...]
    snapshots: tuple[tuple[BlockView, ...], ...]
    released: tuple[int, ...]  # bytes each action released to the device (empty_cache and retries)
    capacity: int
    expandable: bool
    oom: str | None  # the OOM message if the script ran out of memory (the run stops there)
    code: str


def parse_script(text: str) -> tuple[Action, ...]:
    """Parse the script; an InputError names the line and what is wrong with it."""
    if not isinstance(text, str):
        raise InputError("The script must be text.")
    if len(text) > MAX_SCRIPT:
        raise InputError(f"The script is too long: at most {MAX_SCRIPT} characters.")
    lines = [ln.strip() for ln in re.split(r"[\n;]", text) if ln.strip() and not ln.strip().startswith("#")]
    if not lines:
        raise InputError("The script is empty: write at least one line such as 'a = 40 MiB'.")
    if len(lines) > MAX_ACTIONS:
        raise InputError(f"The script has {len(lines)} actions; the limit is {MAX_ACTIONS}.")
    actions, live = [], set()
    for i, line in enumerate(lines, 1):
        actions.append(_parse_line(line, i, live))
    return tuple(actions)


def _parse_line(line: str, i: int, live: set) -> Action:
    if m := _ALLOC.fullmatch(line):
        name, number, unit = m.group(1), float(m.group(2)), m.group(3).lower()
        nbytes = int(number * UNITS[unit])
        if name in live:
            raise InputError(f"Line {i}: {quoted(name)} is already allocated; free it first or use another name.")
        if not 1 <= nbytes <= MAX_ALLOC:
            raise InputError(f"Line {i}: a tensor must be between 1 B and 64 GiB; got {fmt_bytes(nbytes)}.")
        live.add(name)
        return Action("alloc", name, nbytes)
    if m := _FREE.fullmatch(line):
        if m.group(1) not in live:
            raise InputError(f"Line {i}: {quoted(m.group(1))} is not allocated at this point.")
        live.discard(m.group(1))
        return Action("free", m.group(1))
    if _EMPTY.fullmatch(line):
        return Action("empty")
    raise InputError(f"Line {i} ({quoted(line)}) is not `name = 40 MiB`, `del name` or `empty_cache()`.")


def play(actions: tuple[Action, ...], capacity_mib: int, expandable: bool) -> dict:
    """Play the actions through the allocator model, recording memory after each; an OOM stops the run."""
    alloc = CachingAllocator(capacity=capacity_mib * 2**20, expandable=expandable)
    labels, allocated, reserved, snaps, released = ["start"], [0], [0], [()], [0]
    oom = None
    for a in actions:
        before = alloc.reserved
        try:
            if a.kind == "alloc":
                alloc.malloc(a.name, a.nbytes)
                labels.append(f"{a.name} = {fmt_bytes(a.nbytes)}")
            elif a.kind == "free":
                alloc.free(a.name)
                labels.append(f"del {a.name}")
            else:
                alloc.empty_cache()
                labels.append("empty_cache()")
        except OutOfMemory as err:
            oom = str(err)
            labels.append(f"{a.name} = {fmt_bytes(a.nbytes)}: OOM")
        allocated.append(alloc.allocated)
        reserved.append(alloc.reserved)
        snaps.append(alloc.blocks())
        released.append(max(before - alloc.reserved, 0) if a.kind != "free" else 0)
        if oom:
            break
    return {"labels": tuple(labels), "allocated": tuple(allocated), "reserved": tuple(reserved),
            "snapshots": tuple(snaps), "released": tuple(released), "oom": oom}


@entry(PRESETS["Fragmentation"], 128, False)
def run_script(text: str, capacity_mib: int, expandable: bool) -> AllocatorRun:
    """Parse the visitor's script and play it through the allocator model, with the code that ran."""
    actions = parse_script(text)
    if not MIN_CAPACITY_MIB <= capacity_mib <= MAX_CAPACITY_MIB:
        raise InputError(f"Capacity must be between {MIN_CAPACITY_MIB} and {MAX_CAPACITY_MIB} MiB; got {capacity_mib}.")
    settings = {"text": text, "capacity_mib": capacity_mib, "expandable": expandable}
    code = script(play, imports=IMPORTS, settings=settings, run=RUN)
    return AllocatorRun(actions, **play(actions, capacity_mib, expandable), capacity=capacity_mib * 2**20,
                        expandable=expandable, code=code)


IMPORTS = """# Run from the repository root: it plays the script through this app's model of the CUDA caching allocator.
from demos.memory.allocator import CachingAllocator, OutOfMemory, fmt_bytes
from demos.memory.cache_demo import Action, parse_script"""

RUN = """run = play(parse_script(text), capacity_mib, expandable)
for label, allocated, reserved, released in zip(run["labels"], run["allocated"], run["reserved"], run["released"],
                                               strict=True):
    print(f"{label:24s} allocated {allocated:>12,}  reserved {reserved:>12,}  released {released:>12,}")
if run["oom"]:
    print(run["oom"])"""
