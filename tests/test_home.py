"""The home page's worked example equals torch, and its snippet alone reproduces the figure's numbers."""

import pytest
import torch

from demos.errors import InputError
from demos.home import softmax_chart, softmax_temperature
from demos.quiz import format_answer


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
    bars = softmax_chart(r)["data"]["values"]
    at_t = [b["probability"] for b in bars if b["series"] == f"T = {t:g}"]
    assert at_t == list(r.probs)
    assert [b["probability"] for b in bars if b["series"] == "T = 1"] == list(r.probs_t1)
    assert len(bars) == len(r.logits) * (1 if t == 1.0 else 2), "at T = 1 both series are the same bars"


@pytest.mark.parametrize("t", [0.0, 11.0, -1.0])
def test_temperature_limits(t):
    with pytest.raises(InputError, match="Temperature"):
        softmax_temperature("1, 2", t)


def test_format_answer_canonical_texts():
    assert format_answer(torch.Size([2, 3])) == "(2, 3)"
    assert format_answer(torch.float32) == "torch.float32"
    assert format_answer(torch.tensor(0.5)) == "0.5"
    assert format_answer(True) == "True"
    assert format_answer(ValueError) == "ValueError"
