"""Pipeline schedules (GPipe, 1F1B) simulated with unit-time tasks: the bubble and the activations held."""

from dataclasses import dataclass

from demos.errors import InputError, quoted
from demos.parsing import parse_int
from demos.shown import Script, entry, print_each, script


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule: (stage, start slot, 'F' or 'B', micro-batch) for every task, and its measurements."""

    kind: str
    stages: int
    micro: int
    tasks: tuple
    makespan: int
    bubble: float
    formula: float
    peak_in_flight: tuple[int, ...]
    code: Script


def _stage_order(kind: str, p: int, m: int, s: int) -> list[tuple[str, int]]:
    """The order in which stage s runs its forwards and backwards."""
    if kind == "GPipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(p - s - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


def simulate_schedule(kind: str, p: int, m: int) -> dict:
    """Simulate a schedule with unit-time forward and backward; measure the idle fraction of every stage."""
    tasks = run_schedule([_stage_order(kind, p, m, s) for s in range(p)])
    makespan = max(start + 1 for _, start, _, _ in tasks)
    return {"tasks": tuple(sorted(tasks, key=lambda t: (t[1], t[0]))), "makespan": makespan,
            "bubble": 1 - (2 * m) / makespan, "formula": (p - 1) / (m + p - 1),
            "peak_in_flight": tuple(peak_in_flight(tasks, p))}


@entry(4, 6, "1F1B")
def pipeline_schedule(stages: int, micro: int, kind: str) -> Schedule:
    """simulate_schedule for the visitor's pipeline, with the code that ran."""
    p = parse_int(str(stages), "Stages", 2, 8)
    m = parse_int(str(micro), "Micro-batches", 1, 16)
    if kind not in ("GPipe", "1F1B"):
        raise InputError(f"Unknown schedule {quoted(kind)}; choose GPipe or 1F1B.")
    code = script(_stage_order, run_schedule, peak_in_flight, simulate_schedule, imports="",
                  settings={"kind": kind, "p": p, "m": m}, run=print_each("simulate_schedule(kind, p, m)"))
    return Schedule(kind, p, m, **simulate_schedule(kind, p, m), code=code)


def run_schedule(orders: list) -> list[tuple[int, int, str, int]]:
    """(stage, start, F or B, micro-batch) for every task: unit-time tasks, each as early as its dependencies allow."""
    p = len(orders)
    done, free, pos, tasks = {}, [0] * p, [0] * p, []
    while any(pos[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if pos[s] == len(orders[s]):
                continue
            what, i = orders[s][pos[s]]
            deps = [("F", s - 1, i)] if what == "F" and s > 0 else []
            if what == "B":
                deps = [("F", s, i)] + ([("B", s + 1, i)] if s < p - 1 else [])
            if all(d in done for d in deps):
                start = max([free[s]] + [done[d] for d in deps])
                done[(what, s, i)] = start + 1
                free[s] = start + 1
                tasks.append((s, start, what, i))
                pos[s] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlocked")  # a bug in the orders, never user input
    return tasks


def peak_in_flight(tasks: list, p: int) -> tuple[int, ...]:
    """Per stage, the most micro-batches forwarded but not yet backwarded (their activations are held)."""
    peak = []
    for s in range(p):
        live, best = 0, 0
        for _, _, what, _ in sorted(t for t in tasks if t[0] == s):
            live += 1 if what == "F" else -1
            best = max(best, live)
        peak.append(best)
    return tuple(peak)
