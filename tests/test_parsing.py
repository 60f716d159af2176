"""The shared grammars: exact on good input; on any other text, InputError and nothing else."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from demos.errors import InputError
from demos.parsing import format_shape, parse_int, parse_number, parse_numbers, parse_shape


@pytest.mark.parametrize(
    "text, shape",
    [("8,1,6,1", (8, 1, 6, 1)), ("(8, 1, 6, 1)", (8, 1, 6, 1)), ("[]", ()), ("()", ()), ("", ()),
     ("(3,)", (3,)), ("[2 3]", (2, 3)), (" 5 ", (5,)), ("0, 4", (0, 4))],
)
def test_parse_shape_accepts_the_usual_spellings(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize(
    "text, words",
    [("(2, 3", "never closed"), ("2, 3]", "never opened"), ("2, x", "Dimension 1"), ("1,2,3,4,5,6,7", "at most 6"),
     ("5000", "limit is 4096"), ("-1", "Dimension 0"), ("2.5", "Dimension 0"), ("9" * 300, "too long")],
)
def test_parse_shape_names_the_problem(text, words):
    with pytest.raises(InputError, match=words):
        parse_shape(text)


@given(st.text(max_size=60))
def test_parse_shape_raises_only_input_error(text):
    try:
        shape = parse_shape(text)
    except InputError:
        return
    assert all(isinstance(d, int) and 0 <= d <= 4096 for d in shape) and len(shape) <= 6


@given(st.lists(st.integers(0, 4096), max_size=6))
def test_format_then_parse_round_trips_and_matches_torch_size(dims):
    assert parse_shape(format_shape(dims)) == tuple(dims)
    assert format_shape(torch.Size(dims)) == format_shape(tuple(dims))


@given(st.text(max_size=40))
def test_number_parsers_raise_only_input_error(text):
    for parse in (lambda t: parse_number(t, "x"), lambda t: parse_int(t, "n", -5, 5), lambda t: parse_numbers(t, "L")):
        try:
            parse(text)
        except InputError:
            pass


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parse_number_reads_python_float_repr(x):
    assert parse_number(repr(x), "x") == x


def test_parse_number_specials_and_limits():
    assert math.isnan(parse_number("nan", "x")) and parse_number("-inf", "x") == -math.inf
    with pytest.raises(InputError, match="too large"):
        parse_number("1e999", "x")
    with pytest.raises(InputError, match="between -5 and 5"):
        parse_int("6", "n", -5, 5)
    with pytest.raises(InputError, match="finite"):
        parse_numbers("1, inf", "Logits")
