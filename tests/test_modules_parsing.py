"""Property tests for the Modules page's text grammars: any text is parsed or raises InputError, nothing else."""

import pytest
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.modules.inputs import (
    MAX_CHANNELS,
    MAX_CONV_BLOCKS,
    MAX_HEADS,
    parse_channels,
    parse_head_names,
    parse_hook_value,
    parse_lrs,
)

TEXT = st.text(max_size=60) | st.from_regex(r"[\d\s,.\-+e()\[\]a-z_]{0,40}", fullmatch=True)
PARSERS = [parse_channels, parse_head_names, parse_lrs,
           lambda t: parse_hook_value(t, "scale"), lambda t: parse_hook_value(t, "clip")]


@settings(max_examples=150, deadline=None)
@given(text=TEXT, which=st.integers(0, len(PARSERS) - 1))
def test_any_text_is_parsed_or_input_error(text, which):
    try:
        PARSERS[which](text)
    except InputError as err:
        assert str(err).endswith("."), "the message is one sentence"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, MAX_CHANNELS), min_size=1, max_size=MAX_CONV_BLOCKS))
def test_valid_channel_lists_round_trip(values):
    assert parse_channels(", ".join(map(str, values))) == tuple(values)


@pytest.mark.parametrize("text", ["0", "17", "4, 8, 8, 8", "2.5", "x", "", "inf"])
def test_bad_channels_are_refused(text):
    with pytest.raises(InputError):
        parse_channels(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True), min_size=1, max_size=MAX_HEADS,
                unique=True))
def test_accepted_head_names_build_a_module_dict(names):
    try:
        parsed = parse_head_names(", ".join(names))
    except InputError:
        return  # a name nn.Module already uses, such as 'cuda' or 'training'
    heads = nn.ModuleDict({n: nn.Identity() for n in parsed})
    assert list(heads.keys()) == list(parsed)


@pytest.mark.parametrize("text, fragment", [("forward", "already an attribute"), ("a, a", "`a` appears twice"),
                                            ("a.b", "not a Python identifier"), ("1x", "not a Python identifier"),
                                            ("", "give 1 to 6 names; got 0"),
                                            ("a b c d e f g", "give 1 to 6 names; got 7")])
def test_bad_head_names_are_explained(text, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_head_names(text)


def test_what_module_dict_refuses_matches_the_grammar():
    for name in ("forward", "training", "cuda"):
        with pytest.raises(KeyError):
            nn.ModuleDict({name: nn.Identity()})
        with pytest.raises(InputError):
            parse_head_names(name)


@pytest.mark.parametrize("text", ["0, 0.1", "0.1", "0.1, 11", "-1, 1", "nan, 1", "inf, 1"])
def test_bad_learning_rates_are_refused(text):
    with pytest.raises(InputError):
        parse_lrs(text)


def test_hook_value_limits():
    assert parse_hook_value("-2", "scale") == -2.0
    assert parse_hook_value("1e-3", "clip") == 1e-3
    for text, mode in (("0", "clip"), ("-1", "clip"), ("101", "scale"), ("inf", "scale"), ("nan", "clip")):
        with pytest.raises(InputError):
            parse_hook_value(text, mode)
