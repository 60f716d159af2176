"""The caching allocator model: rounding, pools, reuse, splitting, empty_cache, OOM; the script grammar fuzzed."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.memory.allocator import CachingAllocator, MiB, OutOfMemory, round_size, segment_size, torch_size
from demos.memory.cache_demo import MAX_ACTIONS, PRESETS, parse_script, run_script


def test_rounding_and_segment_sizes():
    assert [round_size(n) for n in (1, 511, 512, 513, 1001)] == [512, 512, 512, 1024, 1024]
    assert segment_size(512) == 2 * MiB and segment_size(1 * MiB) == 2 * MiB
    assert segment_size(1 * MiB + 512) == 20 * MiB and segment_size(10 * MiB) == 10 * MiB
    assert segment_size(11 * MiB - 512) == 12 * MiB


def test_freed_block_is_reused_from_the_cache():
    a = CachingAllocator()
    a.malloc("x", 8 * MiB)
    assert (a.allocated, a.reserved) == (8 * MiB, 20 * MiB)
    a.free("x")
    assert (a.allocated, a.reserved) == (0, 20 * MiB)
    a.malloc("y", 6 * MiB)
    assert a.reserved == 20 * MiB, "served from the cached segment, no new cudaMalloc"
    assert a.empty_cache() == 0, "a segment with a live block cannot be released"
    a.free("y")
    assert a.empty_cache() == 20 * MiB and a.reserved == 0


def test_small_and_large_pools_do_not_share_segments():
    a = CachingAllocator()
    a.malloc("small", 1 * MiB)
    a.malloc("large", 1 * MiB + 1)
    assert {b.small for b in a.blocks() if b.owner} == {True, False}
    assert a.reserved == 2 * MiB + 20 * MiB


def test_large_pool_keeps_a_remainder_of_at_most_1mib_unsplit():
    a = CachingAllocator()
    a.malloc("x", 19 * MiB + 512)  # 20 MiB segment, 1 MiB - 512 left: not split
    assert a.allocated == 20 * MiB
    b = CachingAllocator()
    b.malloc("x", 2 * MiB)  # 18 MiB left: split
    assert b.allocated == 2 * MiB


def test_free_neighbours_merge():
    a = CachingAllocator()
    for name in "abc":
        a.malloc(name, 4 * MiB)
    a.free("a")
    a.free("b")
    free = [b.size for b in a.blocks() if b.owner is None]
    assert 8 * MiB in free


def test_fragmentation_ooms_classic_and_fits_with_expandable_segments():
    classic = run_script(PRESETS["Fragmentation"], 128, False)
    assert classic.oom and "reserved by PyTorch but unallocated" in classic.oom
    assert "60.00 MiB is reserved by PyTorch but unallocated" in classic.oom
    grown = run_script(PRESETS["Fragmentation"], 128, True)
    assert grown.oom is None and grown.allocated[-1] == 90 * MiB


def test_sizes_are_written_as_torchs_format_size_writes_them():
    """c10's format_size: '<= 1024' is bytes, '<= 1 MiB' KiB, '<= 1 GiB' MiB, else GiB (so 1 MiB is 1024.00 KiB)."""
    assert [torch_size(n) for n in (0, 1024, 1025, MiB, MiB + 1, 1024 * MiB, 1024 * MiB + 1)] == [
        "0 bytes", "1024 bytes", "1.00 KiB", "1024.00 KiB", "1.00 MiB", "1024.00 MiB", "1.00 GiB"]


OOM_PATTERN = re.compile(
    r"CUDA out of memory\. Tried to allocate (.+?)\. GPU 0 has a total capacity of (.+?) of which (.+?) is free\. "
    r"Including non-PyTorch memory, this process has (.+?) memory in use\. Of the allocated memory (.+?) is "
    r"allocated by PyTorch, and (.+?) is reserved by PyTorch but unallocated\. If reserved but unallocated memory is "
    r"large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation\.  See documentation "
    r"for Memory Management  \(https://docs\.pytorch\.org/docs/stable/notes/cuda\.html#optimizing-memory-usage-with-"
    r"pytorch-cuda-alloc-conf\)")


@pytest.mark.parametrize("script, capacity, expandable, asked", [
    (PRESETS["Fragmentation"], 128, False, 50 * MiB),  # the page's default: a 50 MiB tensor after fragmentation
    ("a = 100 MiB\nb = 5 MiB", 110, False, 5 * MiB),  # a 5 MiB request asks the device for a 20 MiB segment
    ("a = 100 MiB\nb = 5 MiB", 110, True, 5 * MiB),
], ids=["fragmentation", "small-request", "small-request-expandable"])
def test_the_oom_message_is_torchs_format_filled_from_the_model(script, capacity, expandable, asked):
    """The message lacked torch's 'Including non-PyTorch memory, this process has ...' clause and wrote the request
    where torch writes the segment it asked the device for."""
    r = run_script(script, capacity, expandable)
    said = OOM_PATTERN.fullmatch(r.oom)
    assert said, r.oom
    reserved, allocated = r.reserved[-1], r.allocated[-1]  # the model's state when it raised
    assert said.groups() == (torch_size(segment_size(round_size(asked))), torch_size(capacity * MiB),
                             torch_size(capacity * MiB - reserved), torch_size(reserved), torch_size(allocated),
                             torch_size(reserved - allocated))


def test_oom_is_raised_when_the_device_is_full():
    a = CachingAllocator(capacity=32 * MiB)
    a.malloc("x", 20 * MiB)
    with pytest.raises(OutOfMemory, match="Tried to allocate 20.00 MiB"):
        a.malloc("y", 20 * MiB)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40 * MiB)), max_size=30), st.booleans())
def test_invariants_under_random_sequences(ops, expandable):
    a = CachingAllocator(capacity=256 * MiB, expandable=expandable)
    live = []
    for i, (alloc, n) in enumerate(ops):
        if alloc or not live:
            try:
                a.malloc(f"t{i}", n)
                live.append(f"t{i}")
            except OutOfMemory:
                pass
        else:
            a.free(live.pop(0))
        assert a.reserved <= 256 * MiB
        assert a.allocated <= a.reserved
        assert a.allocated == sum(b.size for b in a.blocks() if b.owner)
    for name in live:
        a.free(name)
    a.empty_cache()
    assert a.allocated == 0 and a.reserved == 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_script_text_parses_or_raises_input_error(text):
    try:
        actions = parse_script(text)
    except InputError as err:
        assert str(err).endswith(".")
    else:
        assert 1 <= len(actions) <= MAX_ACTIONS


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a = 3 MiB", "b = 100 KB", "del a", "del b", "empty_cache()", "c = 2.5 GiB",
                                 "x == 1", "free z"]), max_size=12))
def test_scripts_built_from_lines_run_or_raise_input_error(lines):
    try:
        run = run_script("\n".join(lines), 1024, False)
    except InputError:
        return
    assert len(run.labels) == len(run.allocated) == len(run.reserved) == len(run.snapshots)


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("a = 3 parsecs", "Line 1"),
    ("del a", "not allocated"),
    ("a = 1 MiB\na = 2 MiB", "already allocated"),
    ("a = 65 GiB", "64 GiB"),
    ("\n".join(f"t{i} = 1 KiB" for i in range(41)), "limit is 40"),
])
def test_bad_scripts_say_what_is_wrong(text, message):
    with pytest.raises(InputError, match=message):
        parse_script(text)


def test_capacity_is_bounded():
    with pytest.raises(InputError, match="Capacity must be between"):
        run_script("a = 1 MiB", 1, False)


def test_units_are_decimal_or_binary_as_written():
    a, b = parse_script("a = 1 MB; b = 1 MiB")
    assert (a.nbytes, b.nbytes) == (10**6, 2**20)


def test_the_blocks_legend_sits_below_the_plot_away_from_its_title():
    from demos.memory.figures import LEGEND_BELOW_MARGIN, blocks_figure
    run = run_script(PRESETS["Fragmentation"], 128, True)
    fig = blocks_figure(run.snapshots[-1], capacity=128 * MiB)
    assert "mapped of the 128.00 MiB capacity" in fig.layout.title.text
    legend = fig.layout.legend
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")  # the title is at the top edge
    assert fig.layout.margin.b == LEGEND_BELOW_MARGIN
    assert len({t.name for t in fig.data if t.showlegend}) == 3, "the three kinds that wrap to two rows"
