"""The Memory page's 'why' callouts: present only when the surprise is in the data, every number from the runs."""

import pytest

from demos.memory import surprises as su
from demos.memory.allocator import fmt_bytes
from demos.memory.training import RunSpec, peak_phase, simulate, sweep_variants, variant_spec

TINY = RunSpec(model="Transformer tiny (2 x 128)", batch=1, seq_len=8, steps=1)


def test_peak_groups_account_for_every_byte_at_the_peak():
    t = simulate(TINY)
    assert sum(g.nbytes for g in t.peak_groups) == t.peak
    for category, nbytes in t.peak_by_category.items():
        assert sum(g.nbytes for g in t.peak_groups if g.category == category) == nbytes


def check_optimizer_callout(t, unfused):
    assert peak_phase(t).startswith("optimizer")
    text = su.optimizer_peak(t, unfused)
    params, grads, state = (t.peak_by_category[c] for c in ("parameter", "gradient", "optimizer_state"))
    temps = [g for g in t.peak_groups if g.category == "temporary"]
    assert sum(g.nbytes for g in temps) == t.peak_by_category["temporary"]
    assert temps[0].op.startswith("_foreach_"), "the largest temporaries come from the foreach update"
    assert f"parameters {fmt_bytes(params)}, gradients {fmt_bytes(grads)}" in text
    assert f"add up to {fmt_bytes(params + grads + state)}" in text
    assert f"on top of them are {fmt_bytes(t.peak_by_category['temporary'])} of temporaries" in text
    assert f"{temps[0].count} `{temps[0].op}` outputs ({fmt_bytes(temps[0].nbytes)}" in text
    assert unfused.spec.foreach is False and unfused.peak < t.peak, "foreach=False measured lower"
    assert f"the peak is {fmt_bytes(unfused.peak)}, {fmt_bytes(t.peak - unfused.peak)} lower" in text
    return text


def test_optimizer_peak_callout_from_the_tracker():
    t = simulate(TINY)
    check_optimizer_callout(t, simulate(su.unfused_spec(TINY)))
    assert "Measured with" not in su.optimizer_peak(t), "no foreach=False claim without its measurement"


def test_gpt2_xl_peaks_in_adam_step_by_the_foreach_temporaries():
    spec = RunSpec(model="GPT-2 XL (1.5B)", batch=1, seq_len=1024, steps=1)
    t = simulate(spec)
    text = check_optimizer_callout(t, simulate(su.unfused_spec(spec)))
    params = t.peak_by_category["parameter"]
    # the foreach temporaries are one full list the size of the parameter group
    assert t.peak_by_category["temporary"] == pytest.approx(params, rel=0.01)
    assert "one per parameter tensor" in text


def test_no_optimizer_callout_when_the_peak_is_elsewhere():
    t = simulate(RunSpec(model="Transformer tiny (2 x 128)", batch=64, seq_len=256, steps=1))
    assert not peak_phase(t).startswith("optimizer")
    assert su.optimizer_peak(t) is None


def test_default_sweep_has_bf16_autocast_with_checkpointing_below_fp32_and_no_callout():
    # the simulated autocast once saved cross_entropy's log_softmax in float32 and drew this pair the other way round
    spec = RunSpec()
    names = list(sweep_variants(spec))
    plain, auto = (simulate(variant_spec(spec, n, 64)) for n in (names[1], names[3]))
    drawn = (plain.predicted_peak_allocated, auto.predicted_peak_allocated)
    assert drawn[1] < drawn[0]
    assert su.autocast_above(names[1], names[3], 64, plain, auto, drawn) is None


def reserved_pair(spec: RunSpec, plain_name: str, auto_name: str, batch: int):
    """The two sweep runs and the peaks the sweep chart draws for them: reserved bytes of the allocator model."""
    plain, auto = (simulate(variant_spec(spec, n, batch)) for n in (plain_name, auto_name))
    return plain, auto, (max(plain.reserved), max(auto.reserved))


def test_autocast_above_names_the_weight_copies_of_a_one_image_cnn_batch():
    spec = RunSpec(model="Small CNN (CIFAR 32x32)", optimizer="SGD", steps=1)
    names = list(sweep_variants(spec))
    plain_name, auto_name = names[0], names[2]
    plain, auto, drawn = reserved_pair(spec, plain_name, auto_name, 1)
    assert drawn[1] > drawn[0] and auto.peak > plain.peak, "the surprise is in the tensors"
    text = su.autocast_above(plain_name, auto_name, 1, plain, auto, drawn)
    casts = [g for g in auto.peak_groups if g.op == "_to_copy" and g.dtype == "bfloat16"]
    cast_bytes = sum(g.nbytes for g in casts)
    assert cast_bytes > 0
    rest = auto.peak - cast_bytes
    assert cast_bytes > plain.peak - rest, "the copies outweigh what half precision saved, so the peak is higher"
    assert f"{fmt_bytes(drawn[1])} against {fmt_bytes(drawn[0])} reserved, as drawn" in text
    assert f"Its tensors peak higher: at its peak ({peak_phase(auto)}) autocast's casts hold" in text
    assert f"hold {fmt_bytes(cast_bytes)} of bfloat16 copies" in text
    assert f"only {fmt_bytes(plain.peak - rest)} less than the {fmt_bytes(plain.peak)}" in text
    assert "allocator model's cache" not in text
    assert su.surprising_pairs(names, (32, 64), {names[0]: [2, 1], names[1]: [1, drawn[0]],
                                                 names[2]: [1, 2], names[3]: [1, drawn[1]]}) == [
        (names[0], names[2], 64), (names[1], names[3], 64)]


@pytest.mark.parametrize("spec, batch", [
    (RunSpec(), 32),  # the default sweep's batch 32: 7.38 GiB against 7.29 GiB reserved, tensors 5.61 vs 6.32 GiB
    (RunSpec(model="Transformer tiny (2 x 128)", seq_len=64), 16),
], ids=["gpt2-small-b32", "tiny-b16"])
def test_autocast_above_with_lower_tensors_blames_the_allocator_cache_not_the_casts(spec, batch):
    names = list(sweep_variants(spec))
    plain, auto, drawn = reserved_pair(spec, names[1], names[3], batch)
    assert drawn[1] > drawn[0] and auto.peak < plain.peak, "reserved above, tensors below: the case being read"
    text = su.autocast_above(names[1], names[3], batch, plain, auto, drawn)
    assert f"{fmt_bytes(drawn[1])} against {fmt_bytes(drawn[0])} reserved, as drawn" in text
    assert f"Its tensors do not: at its peak ({peak_phase(auto)}) they take {fmt_bytes(auto.peak)}" in text
    assert f"{fmt_bytes(plain.peak - auto.peak)} less than the {fmt_bytes(plain.peak)}" in text
    cache_auto = max(auto.reserved) - auto.predicted_peak_allocated
    cache_plain = max(plain.reserved) - plain.predicted_peak_allocated
    assert cache_auto - cache_plain == drawn[1] - drawn[0] - (auto.predicted_peak_allocated -
                                                              plain.predicted_peak_allocated)
    assert cache_auto > cache_plain, "the cache is what is higher"
    assert (f"peak reserved exceeds its peak allocated by {fmt_bytes(cache_auto)}, against {fmt_bytes(cache_plain)}"
            in text)
    i = auto.reserved.index(max(auto.reserved))  # the request that last grew the segments
    free, request = auto.reserved[i - 1] - auto.allocated[i - 1], auto.total[i] - auto.total[i - 1]
    assert auto.reserved[i] > auto.reserved[i - 1] and 0 < request < free, "it fitted in the free bytes' total"
    assert (f"(op {auto.op_index[i]}), a request of {fmt_bytes(request)} found no cached free block to fit it "
            f"although {fmt_bytes(free)} were free") in text
    assert "Its tensors peak higher" not in text


def test_no_autocast_callout_when_autocast_is_lower():
    spec = RunSpec(model="Transformer tiny (2 x 128)", seq_len=256, steps=1)
    names = list(sweep_variants(spec))
    plain, auto = (simulate(variant_spec(spec, n, 64)) for n in (names[1], names[3]))
    drawn = (plain.predicted_peak_allocated, auto.predicted_peak_allocated)
    assert drawn[1] <= drawn[0]
    assert su.autocast_above(names[1], names[3], 64, plain, auto, drawn) is None
    assert su.surprising_pairs(names, (64,), {n: [drawn[0]] for n in names}) == []


def test_autocast_above_writes_peaks_equal_at_two_decimals_in_bytes_and_groups_by_largest_shape():
    spec = RunSpec(model="Small CNN (CIFAR 32x32)", optimizer="SGD", steps=1)
    names = list(sweep_variants(spec))
    plain, auto = (simulate(variant_spec(spec, n, 1)) for n in (names[0], names[2]))
    low = plain.predicted_peak_allocated
    drawn = (low, low + 512)  # one allocator block apart: the same at fmt_bytes' two decimals
    assert fmt_bytes(drawn[0]) == fmt_bytes(drawn[1])
    text = su.autocast_above(names[0], names[2], 1, plain, auto, drawn)
    assert f"{drawn[1]:,} B against {drawn[0]:,} B reserved, as drawn" in text
    top = auto.peak_groups[0]
    if top.count > 1 and top.dtype == "float32":
        assert f"outputs, the largest {su._shape(top.largest)}" in text
        assert f"outputs of {su._shape(top.largest)}" not in text


def test_sweep_draws_a_linear_batch_axis_under_its_affine_caption():
    from demos.memory.figures import sweep_figure
    fig = sweep_figure((1, 2, 4), {"fp32": [10, 20, 40]}, 100, "card", {"fp32": float("inf")})
    assert fig.layout.xaxis.type == "linear"  # the caption says affine: the line must draw straight
