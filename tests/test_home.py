"""The home page's worked example equals torch, and its snippet alone reproduces the figure's numbers."""

import re

import pytest
import torch

from demos.errors import InputError
from demos.home import softmax_chart, softmax_temperature
from demos.quiz import format_answer
from tests.conftest import open_page


def run_code(code: str):
    printed = []
    exec(compile(code, "<snippet>", "exec"), {"print": printed.append})
    return printed[0]


@pytest.mark.parametrize("logits, t", [("2, 1, 0.1", 0.5), ("[-3 0 3 9]", 4.0), ("1,1", 1.0)])
def test_softmax_matches_torch_and_snippet(logits, t):
    r = softmax_temperature(logits, t)
    expected = torch.softmax(torch.tensor(r.logits) / t, dim=0)
    assert torch.allclose(torch.tensor(r.probs), expected)
    assert torch.allclose(torch.tensor(r.probs_t1), torch.softmax(torch.tensor(r.logits), dim=0))
    assert run_code(r.code) == list(r.probs)
    bars = softmax_chart(r)["layer"][0]["data"]["values"]
    at_t = [b["probability"] for b in bars if b["series"] == f"T = {t:g}"]
    assert at_t == list(r.probs)
    assert [b["probability"] for b in bars if b["series"] == "T = 1"] == list(r.probs_t1)
    assert len(bars) == len(r.logits) * (1 if t == 1.0 else 2), "at T = 1 both series are the same bars"


@pytest.mark.parametrize("t", [0.0, 11.0, -1.0])
def test_temperature_limits(t):
    with pytest.raises(InputError, match="Temperature"):
        softmax_temperature("1, 2", t)


@pytest.mark.parametrize("logits, t, words", [
    ("1e39, 1", 1.0, "entry 1 (1e+39) is outside float32's range"),
    ("1, -1e39", 1.0, "stores it as -inf"),
    ("3e38, 1", 0.05, "entry 1 becomes 6e+39"),
    ("-3e38, -3e38", 0.05, "softmax returns nan"),
])
def test_float32_overflow_is_explained(logits, t, words):
    """The typed logits fit a Python float but not float32, or logits / T overflows: torch would give nan."""
    with pytest.raises(InputError, match=re.escape(words)):
        softmax_temperature(logits, t)
    if "becomes" in words or "nan" in words:
        x = torch.tensor(softmax_temperature(logits, 1.0).logits)
        assert torch.softmax(x / t, dim=0).isnan().all()


def test_a_large_negative_scaled_logit_is_drawn_as_torch_gives_it():
    r = softmax_temperature("-3e38, 1", 0.05)  # -6e39 overflows to -inf: its probability is exactly 0
    assert r.probs == (0.0, 1.0)


def test_format_answer_canonical_texts():
    assert format_answer(torch.Size([2, 3])) == "(2, 3)"
    assert format_answer(torch.float32) == "torch.float32"
    assert format_answer(torch.tensor(0.5)) == "0.5"
    assert format_answer(True) == "True"
    assert format_answer(ValueError) == "ValueError"


def test_markup_in_the_logits_field_is_answered_with_its_real_reason():
    at = open_page("pages/home.py")
    at.text_input(key="home_logits").input("<img src=x onerror=alert(1)>").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "Logits `<img src=x onerror=alert(1)>`: `<` (character 1) has no place in a list of numbers; type them "
        "separated by commas, as in 2, 1, 0.1."]
