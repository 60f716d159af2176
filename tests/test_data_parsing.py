"""Property tests: any text or number given to the data page's parsers is accepted or an InputError."""

from hypothesis import given, settings
from hypothesis import strategies as st

from demos.data.collate import parse_lengths
from demos.data.samplers import parse_class_sizes
from demos.data.timeline import LoaderConfig, Workload, validate
from demos.errors import InputError


def accepts_or_input_error(fn, *args):
    try:
        return fn(*args)
    except InputError as err:
        assert str(err).endswith(".") and "\n" not in str(err)
        return None


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.integers(-5, 20_000), max_size=14).map(
    lambda xs: ", ".join(map(str, xs)))))
def test_class_sizes_parse_or_raise_input_error(text):
    sizes = accepts_or_input_error(parse_class_sizes, text)
    if sizes is not None:
        assert 2 <= len(sizes) <= 8 and all(1 <= s <= 10_000 for s in sizes)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.integers(-5, 60), max_size=14).map(
    lambda xs: ", ".join(map(str, xs)))))
def test_lengths_parse_or_raise_input_error(text):
    lengths = accepts_or_input_error(parse_lengths, text)
    if lengths is not None:
        assert 2 <= len(lengths) <= 12 and all(1 <= n <= 48 for n in lengths)


@settings(max_examples=200, deadline=None)
@given(st.integers(-10, 100), st.floats(-10, 300), st.floats(-10, 50), st.floats(-10, 400),
       st.integers(-2, 8), st.integers(-2, 20), st.integers(-2, 6))
def test_loader_settings_validate_or_raise_input_error(samples, io_ms, transform_ms, step_ms, workers, batch, prefetch):
    accepts_or_input_error(validate, Workload(samples, io_ms, transform_ms, step_ms),
                           LoaderConfig(workers, batch, prefetch))
