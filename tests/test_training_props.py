"""Property tests: whatever a visitor types or sets, the training demos answer with a result or an InputError."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.training import amp, losses, schedulers, step
from demos.training.common import check_int, check_range

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
numbers = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=5))
logit_text = st.one_of(st.text(max_size=60), st.lists(st.floats(allow_nan=True), max_size=12).map(
    lambda xs: ", ".join(map(str, xs))))


@FAST
@given(logit_text)
def test_parse_logits_accepts_or_explains(text):
    try:
        values = losses.parse_logits(text)
    except InputError as err:
        assert str(err)
    else:
        assert 2 <= len(values) <= 10 and all(abs(v) <= losses.MAX_LOGIT for v in values)


@FAST
@given(st.text(max_size=40), st.integers(10, 200))
def test_parse_spikes_accepts_or_explains(text, steps):
    try:
        spikes = amp.parse_spikes(text, steps)
    except InputError:
        return
    assert all(0 <= s < steps for s in spikes)


@FAST
@given(logit_text)
def test_dtype_ranges_accepts_or_explains(text):
    try:
        r = amp.dtype_ranges(text)
    except InputError:
        return
    assert len(r.rows) == 3


@FAST
@given(logit_text, numbers, numbers)
def test_cross_entropy_accepts_or_explains(text, target, smoothing):
    try:
        r = losses.cross_entropy(text, target, smoothing)
    except InputError:
        return
    assert r.loss >= 0 or r.loss != r.loss


@FAST
@given(numbers, st.sampled_from(["x", "y"]))
def test_validators_accept_or_explain(value, _):
    for check in (lambda v: check_int(v, "N", 0, 10), lambda v: check_range(v, "R", 0.0, 1.0)):
        try:
            out = check(value)
        except InputError:
            continue
        assert 0 <= out <= 10


@SLOW
@given(numbers, st.sampled_from(step.WALK_OPTIMIZERS + ("Lion",)), numbers, numbers)
def test_walk_accepts_or_explains(index, optimizer, lr, max_norm):
    try:
        r = step.walk(index if isinstance(index, int) and not isinstance(index, bool) and index < 60 else index,
                      optimizer, lr, max_norm)
    except InputError:
        return
    assert r.substep in step.SUBSTEPS


@SLOW
@given(numbers, numbers, numbers, numbers, numbers)
def test_schedules_accept_or_explain(total, base_lr, step_size, gamma, warmup):
    try:
        r = schedulers.schedules(total, base_lr, step_size, gamma, warmup)
    except InputError:
        return
    assert all(len(c) == total for c in r.curves.values())
