"""The shared grammars: exact on good input; on any other text, InputError and nothing else."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from demos.errors import InputError
from demos.parsing import format_shape, parse_int, parse_number, parse_numbers, parse_shape
from tests.messages import check_message


@pytest.mark.parametrize(
    "text, shape",
    [("8,1,6,1", (8, 1, 6, 1)), ("(8, 1, 6, 1)", (8, 1, 6, 1)), ("[]", ()), ("()", ()), ("", ()),
     ("(3,)", (3,)), ("[2 3]", (2, 3)), (" 5 ", (5,)), ("0, 4", (0, 4))],
)
def test_parse_shape_accepts_the_usual_spellings(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize(
    "text, message",
    [("(2, 3", "Shape `(2, 3`: the bracket `(` at position 1 is never closed."),
     ("2, 3]", "Shape `2, 3]`: the bracket `]` at position 5 was never opened."),
     ("2, (3, 4)", "Shape `2, (3, 4)`: brackets may only wrap the whole list, as in (3, 4)."),
     ("(2, 3]", "Shape `(2, 3]`: the bracket `(` at position 1 is closed by `]`."),
     ("3,,4", "Shape `3,,4`: an entry between commas is empty; write each value once, as in 3, 4."),
     (",3", "Shape `,3`: an entry between commas is empty; write each value once, as in 3, 4."),
     ("2, x", "Shape `2, x`: dim 1 (`x`) is not a whole number ≥ 0."),
     ("1,2,3,4,5,6,7", "Shape `1,2,3,4,5,6,7`: at most 6 dimensions; this has 7."),
     ("5000", "Shape `5000`: dim 0 is `5000`; the limit is 4096."),
     ("-1", "Shape `-1`: dim 0 (`-1`) is not a whole number ≥ 0."),
     ("9" * 300, "Shape: at most 200 characters; this has 300.")],
)
def test_parse_shape_names_the_field_and_the_real_reason(text, message):
    with pytest.raises(InputError) as err:
        parse_shape(text)
    assert str(err.value) == message


@pytest.mark.parametrize("call, message", [
    (lambda: parse_int("99999999999", "Seed", 0, 2**32 - 1),
     "Seed: `99999999999` is out of range; it must be from 0 to 4294967295."),
    (lambda: parse_int("abc", "Seed", 0, 9), "Seed: `abc` is not a whole number; type one from 0 to 9."),
    (lambda: parse_int("", "Seed", 0, 9), "Seed: empty; type a whole number from 0 to 9."),
    (lambda: parse_int("9" * 201, "Seed", 0, 9), "Seed: at most 200 characters; this has 201."),
    (lambda: parse_numbers("1", "Learning rates", 2, 2), "Learning rates: needs exactly 2 numbers; got 1."),
    (lambda: parse_numbers("1", "Logits", 2, 12), "Logits: needs 2 to 12 numbers; got 1."),
    (lambda: parse_numbers("1, x", "Logits", 2, 12),
     "Logits, entry 2: `x` is not a number such as 3, -0.5 or 1e-3."),
    (lambda: parse_numbers("1" * 201, "Logits", 2, 12), "Logits: at most 200 characters; this has 201."),
    (lambda: parse_number("__import__('os')", "Factor"),
     "Factor: `__import__('os')` is not a number such as 3, -0.5 or 1e-3."),
])
def test_number_messages_name_the_field_and_quote_the_text(call, message):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value) == message


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


@given(st.text(max_size=40) | st.from_regex(r"[\d\s,()\[\]_*`x.e+-]{0,30}", fullmatch=True))
def test_number_parsers_raise_only_input_error_with_a_clean_message(text):
    for parse in (lambda t: parse_number(t, "Factor"), lambda t: parse_int(t, "Seed", -5, 5),
                  lambda t: parse_numbers(t, "Logits"), lambda t: parse_shape(t, field="Shape A")):
        try:
            parse(text)
        except InputError as err:
            check_message(str(err), text)


@given(st.text(alphabet="0123456789, ()[]", max_size=20))
def test_shape_text_with_an_empty_entry_is_never_accepted(text):
    try:
        shape = parse_shape(text)
    except InputError:
        return
    body = text.strip().strip("()[]")
    assert ",," not in body.replace(" ", "") and not body.replace(" ", "").startswith(",")
    assert len(shape) == len([p for p in body.replace(",", " ").split() if p])


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parse_number_reads_python_float_repr(x):
    assert parse_number(repr(x), "x") == x


def test_parse_number_specials_and_limits():
    assert math.isnan(parse_number("nan", "x")) and parse_number("-inf", "x") == -math.inf
    with pytest.raises(InputError, match="too large"):
        parse_number("1e999", "x")
    with pytest.raises(InputError, match="from -5 to 5"):
        parse_int("6", "n", -5, 5)
    with pytest.raises(InputError, match="finite"):
        parse_numbers("1, inf", "Logits")


@pytest.mark.parametrize("call, message", [
    (lambda: parse_numbers("<img src=x onerror=alert(1)>", "Logits", 2, 12),
     "Logits `<img src=x onerror=alert(1)>`: `<` (character 1) has no place in a list of numbers; type them "
     "separated by commas, as in 2, 1, 0.1."),
    (lambda: parse_shape("3; 4"),
     "Shape `3; 4`: `;` (character 2) has no place in a list of numbers; type them separated by commas, as in 3, 4."),
])
def test_a_foreign_character_is_named_not_blamed_on_brackets(call, message):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value) == message
