"""Where a measured memory result surprises an expert, the 'why', built from the same measurement.

Each function returns None unless the surprise is in the data, and every number in its sentence comes from the
tracked runs: the bytes alive at each peak, grouped by category, the op that made them and dtype.
"""

from dataclasses import replace

from demos.memory.allocator import fmt_bytes
from demos.memory.training import Group, RunSpec, Timeline, peak_phase

LOW_PRECISION = ("bfloat16", "float16")
KEPT = ("parameter", "gradient", "optimizer_state")


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def _groups(t: Timeline, **match) -> list[Group]:
    return [g for g in t.peak_groups if all(getattr(g, k) == v for k, v in match.items())]


def unfused_spec(spec: RunSpec) -> RunSpec:
    """The same steps with the optimizer's per-parameter loop (foreach=False)."""
    return replace(spec, foreach=False)


def optimizer_peak(t: Timeline, unfused: Timeline | None = None) -> str | None:
    """Why the peak is inside optimizer.step(): the foreach update's temporaries on top of params, grads, state."""
    phase = peak_phase(t)
    temps = _groups(t, category="temporary")
    temp_bytes = sum(g.nbytes for g in temps)
    if not phase.startswith("optimizer") or not temps:
        return None
    params, grads, state = (t.peak_by_category[c] for c in KEPT)
    top = temps[0]
    tensors = sum(g.count for g in _groups(t, category="parameter"))
    per_param = f", one per parameter tensor ({tensors})" if top.count == tensors else ""
    text = (f"Why the peak ({fmt_bytes(t.peak)}) is inside `optimizer.step()` ({phase}): parameters "
            f"{fmt_bytes(params)}, gradients {fmt_bytes(grads)} and {t.spec.optimizer} state {fmt_bytes(state)} "
            f"add up to {fmt_bytes(params + grads + state)}; on top of them are {fmt_bytes(temp_bytes)} of "
            f"temporaries, {temp_bytes / max(params, 1):.2f}x the parameters' bytes. The largest group is "
            f"{top.count} `{top.op}` outputs ({fmt_bytes(top.nbytes)}{per_param}): with `foreach=True` each update "
            "op runs over the whole parameter group at once, so its intermediate is a list as large as the group.")
    if unfused is not None:
        if unfused.peak < t.peak:
            text += (f" Measured with `foreach=False` (one parameter at a time), the peak is "
                     f"{fmt_bytes(unfused.peak)}, {fmt_bytes(t.peak - unfused.peak)} lower, and falls in "
                     f"{peak_phase(unfused)}.")
        else:
            text += f" Measured with `foreach=False`, the peak is {fmt_bytes(unfused.peak)}: no lower here."
    return text


def autocast_above(plain_name: str, auto_name: str, batch: int, plain: Timeline, auto: Timeline,
                   drawn: tuple[int, int]) -> str | None:
    """Why an autocast run's drawn peak (reserved bytes, allocator model) is above its full-precision twin's.

    `drawn` is the pair the chart shows (plain, then autocast). Either autocast's tensors peak higher (the
    low-precision copies its casts keep alive outweigh what half precision saved), or they peak lower and the
    allocator model's cache makes the difference; the sentence says which, from the two runs' own numbers.
    """
    if drawn[1] <= drawn[0]:
        return None
    above, below = _distinct(drawn[1], drawn[0])
    head = f"Why {auto_name} peaks above {plain_name} at batch {batch}: {above} against {below} reserved, as drawn."
    casts = [g for g in auto.peak_groups if g.op == "_to_copy" and g.dtype in LOW_PRECISION]
    if auto.peak > plain.peak:
        return head + (_cast_copies(plain_name, plain, auto, casts) if casts else
                       f" Its tensors peak higher too: {fmt_bytes(auto.peak)} against {fmt_bytes(plain.peak)}.")
    return head + _tensors_lower(plain_name, plain, auto, casts) + _allocator_cache(plain_name, plain, auto)


def _cast_copies(plain_name: str, plain: Timeline, auto: Timeline, casts: list[Group]) -> str:
    """The tensors' side: autocast's low-precision copies outweigh what half precision saved at the peak."""
    cast_bytes = sum(g.nbytes for g in casts)
    biggest = max(casts, key=lambda g: max(g.largest or (0,)))
    rest_auto, rest_plain = auto.peak - cast_bytes, plain.peak
    text = (f" Its tensors peak higher: at its peak ({peak_phase(auto)}) autocast's casts hold "
            f"{fmt_bytes(cast_bytes)} of {casts[0].dtype} copies ({sum(g.count for g in casts)} tensors, the largest "
            f"{_shape(biggest.largest)}) that the {plain_name} run never makes, while everything else at its peak "
            f"takes {fmt_bytes(rest_auto)}, "
            + (f"only {fmt_bytes(rest_plain - rest_auto)} less than" if rest_plain > rest_auto else "no less than")
            + f" the {fmt_bytes(rest_plain)} at {plain_name}'s peak ({peak_phase(plain)}).")
    top_auto, top_plain = auto.peak_groups[0], plain.peak_groups[0]
    same = (top_auto.category, top_auto.op, top_auto.dtype) == (top_plain.category, top_plain.op, top_plain.dtype)
    if same and top_auto.dtype == "float32":
        text += (f" The largest tensors at both peaks stay float32 under autocast: {top_auto.count} `{top_auto.op}` "
                 + (f"output of {_shape(top_auto.largest)}, " if top_auto.count == 1
                    else f"outputs, the largest {_shape(top_auto.largest)}, together ")
                 + f"{fmt_bytes(top_auto.nbytes)}.")
    return text


def _tensors_lower(plain_name: str, plain: Timeline, auto: Timeline, casts: list[Group]) -> str:
    """The tensors' side when they are not the reason: autocast's peak of live tensors is the lower one."""
    copies = (f", its {fmt_bytes(sum(g.nbytes for g in casts))} of {casts[0].dtype} copies included"
              if casts else "")
    less = f"{fmt_bytes(plain.peak - auto.peak)} less than" if plain.peak > auto.peak else "as much as"
    return (f" Its tensors do not: at its peak ({peak_phase(auto)}) they take {fmt_bytes(auto.peak)}{copies}, "
            f"{less} the {fmt_bytes(plain.peak)} at {plain_name}'s peak ({peak_phase(plain)}).")


def cache_growth(t: Timeline) -> tuple[int, int, int]:
    """(op, request bytes, bytes free in cached blocks just before it) for the request that last grew reserved:
    the allocator model reserves a new segment only when no cached free block fits the request."""
    i = t.reserved.index(max(t.reserved))
    before = (t.reserved[i - 1] - t.allocated[i - 1]) if i else 0
    request = t.total[i] - (t.total[i - 1] if i else 0)
    return t.op_index[i], request, before


def _allocator_cache(plain_name: str, plain: Timeline, auto: Timeline) -> str:
    """The allocator's side: reserved minus allocated at the peaks, and the request that last grew the segments."""
    cache_auto = max(auto.reserved) - auto.predicted_peak_allocated
    cache_plain = max(plain.reserved) - plain.predicted_peak_allocated
    op, request, free = cache_growth(auto)
    return (f" The difference is the allocator model's cache: its peak reserved exceeds its peak allocated by "
            f"{fmt_bytes(cache_auto)}, against {fmt_bytes(cache_plain)} for {plain_name}. When its reserved bytes "
            f"last grew (op {op}), a request of {fmt_bytes(request)} found no cached free block to fit it although "
            f"{fmt_bytes(free)} were free in cached blocks it could not use (too small, or in the other pool), so a "
            "new segment was reserved.")


def _distinct(a: int, b: int) -> tuple[str, str]:
    """Two sizes written so that they read as different: in bytes where fmt_bytes rounds them alike."""
    if fmt_bytes(a) != fmt_bytes(b):
        return fmt_bytes(a), fmt_bytes(b)
    return f"{a:,} B", f"{b:,} B"


def surprising_pairs(names: list[str], batches: tuple[int, ...], peaks: dict[str, list[int]]):
    """(plain name, autocast name, batch) for each sweep pair whose autocast line is above, at the largest such batch.

    The sweep's names come in pairs: plain, plain + checkpointing, autocast, autocast + checkpointing.
    """
    plain, plain_ckpt, auto, auto_ckpt = names
    out = []
    for p, a in ((plain, auto), (plain_ckpt, auto_ckpt)):
        above = [b for b, x, y in zip(batches, peaks[p], peaks[a], strict=True) if y > x]
        if above:
            out.append((p, a, above[-1]))
    return out
