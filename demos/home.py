"""The home page's worked example: softmax with a temperature, computed by torch.

Its chart is a Vega-Lite spec, not plotly: the landing page is every visitor's first, and plotly.js (a bundle
of several MB the browser loads on first use) took 1-1.5 s to draw there against ~0.3 s for Vega-Lite.
"""

import math
from dataclasses import dataclass

import torch

from demos.errors import InputError
from demos.parsing import parse_numbers
from demos.quiz import Question
from demos.shown import Script, entry, script
from demos.style import COLORS

MIN_T, MAX_T = 0.05, 10.0
F32_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True)
class SoftmaxResult:
    logits: tuple[float, ...]
    temperature: float
    probs: tuple[float, ...]
    probs_t1: tuple[float, ...]
    code: Script


@entry("2, 1, 0.1", 0.5)
def softmax_temperature(logits_text: str, temperature: float) -> SoftmaxResult:
    """softmax(logits / T) next to softmax(logits), both from torch.softmax."""
    logits = parse_numbers(logits_text, "Logits", min_count=2, max_count=12)
    if not MIN_T <= temperature <= MAX_T:
        raise InputError(f"Temperature must be between {MIN_T} and {MAX_T}; got {temperature}.")
    x, probs, probs_t1 = softmax_with_temperature(logits, temperature)
    _check_float32(logits, x)
    _check_scaled(logits, temperature, probs)
    code = script(softmax_with_temperature, settings={"logits": list(logits), "temperature": temperature}, run="""
x, probs, probs_t1 = softmax_with_temperature(logits, temperature)
print(probs.tolist())""")
    return SoftmaxResult(logits, temperature, tuple(probs.tolist()), tuple(probs_t1.tolist()), code)


def softmax_with_temperature(logits, temperature):
    """The logits as a float32 tensor, softmax(logits / T), and softmax(logits) beside it (T = 1)."""
    x = torch.tensor(logits, dtype=torch.float32)
    return x, torch.softmax(x / temperature, dim=0), torch.softmax(x, dim=0)


def _check_float32(logits: tuple[float, ...], x: torch.Tensor) -> None:
    """A logit beyond float32's range is stored as ±inf: say which one, rather than draw a chart of nan."""
    for i, (typed, stored) in enumerate(zip(logits, x.tolist(), strict=True)):
        if not math.isfinite(stored):
            raise InputError(f"Logits: entry {i + 1} ({typed:g}) is outside float32's range (±{F32_MAX:.4g}), so "
                             f"torch.tensor stores it as {stored}; use logits within that range.")


def _check_scaled(logits: tuple[float, ...], temperature: float, probs: torch.Tensor) -> None:
    """logits / T can overflow even when every logit fits: then softmax returns nan, and the message says why."""
    if bool(torch.isfinite(probs).all()):
        return
    big = [i for i, v in enumerate(logits) if abs(v / temperature) > F32_MAX]
    shown = ", ".join(f"entry {i + 1} becomes {logits[i] / temperature:.4g}" for i in big[:3])
    raise InputError(f"Logits: divided by T = {temperature:g}, {shown}, outside float32's range "
                     f"(±{F32_MAX:.4g}); logits / T then holds ±inf and softmax returns nan (inf − inf). Use smaller "
                     "logits or a larger T.")


def softmax_chart(r: SoftmaxResult) -> dict:
    """A Vega-Lite spec: grouped bars of the probabilities at T = 1 (grey) and at temperature T (green)."""
    probs = {"T = 1": r.probs_t1, f"T = {r.temperature:g}": r.probs}  # one series when T = 1
    series = list(probs)
    values = [
        {"class": f"{i}: {logit:g}", "order": i, "series": name, "probability": p}
        for name, ps in probs.items()
        for i, (logit, p) in enumerate(zip(r.logits, ps, strict=True))
    ]
    # The values sit in the one layer, not at the top: Streamlit turns top-level values into an Arrow table through
    # pandas, whose import (about 0.4 s) would otherwise fall on the first page of a fresh server.
    return {"height": 320, "layer": [{
        "data": {"values": values},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "x": {"field": "class", "type": "nominal", "sort": {"field": "order"}, "title": "class: logit",
                  "axis": {"labelAngle": 0}},
            "xOffset": {"field": "series", "sort": series},
            "y": {"field": "probability", "type": "quantitative", "scale": {"domain": [0, 1]}},
            "color": {"field": "series", "title": None, "sort": series,
                      "scale": {"domain": series, "range": [COLORS["idle"], COLORS["activation"]][: len(series)]},
                      "legend": {"orient": "top"}},
        },
    }]}


def _broadcast_sum_shape():
    a = torch.ones(3, 1)
    b = torch.ones(4)
    return (a + b).shape


def _int_plus_half_dtype():
    x = torch.tensor([1, 2, 3])
    return (x + 0.5).dtype


HOME_QUESTIONS = (
    Question(
        "broadcast", "What is the shape of a + b?", _broadcast_sum_shape,
        "Shapes align from the right: (3, 1) and (4,) become (3, 1) and (1, 4); each 1 stretches, giving (3, 4).",
        kind="shape",
    ),
    Question(
        "promotion", "What dtype does an int64 tensor plus 0.5 have?", _int_plus_half_dtype,
        "A Python float promotes an integer tensor to the default float dtype (float32), not float64.",
        choices=("torch.int64", "torch.float32", "torch.float64"),
    ),
)
