"""dtype demo against torch: the promotion matrix is torch.result_type; finfo and traps come from torch."""

import itertools
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tensors import dtypes as dt
from pages.ui.quiz import model_answers


def _operand(label: str):
    """Rebuild an operand from its label, independently of the demo."""
    if label.startswith("Python "):
        return {"int": 7, "float": 0.5, "bool": False, "complex": 2j}[label.split()[1]]
    name, kind = label.split()
    dtype = getattr(torch, name)
    return torch.zeros(3, dtype=dtype) if kind == "tensor" else torch.zeros((), dtype=dtype)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(list(dt.DTYPES)), min_size=1, max_size=8, unique=True), st.booleans(),
       st.lists(st.sampled_from(list(dt.SCALARS)), max_size=4, unique=True))
def test_matrix_equals_torch_result_type(dtypes, zero_dim, scalars):
    r = dt.promotion(tuple(dtypes), zero_dim, tuple(scalars))
    assert len(r.labels) == len(dtypes) * (2 if zero_dim else 1) + len(scalars)
    for (i, a), (j, b) in itertools.product(enumerate(r.labels), repeat=2):
        assert r.results[i][j] == str(torch.result_type(_operand(a), _operand(b))).removeprefix("torch.")


def test_known_rules_show_up():
    r = dt.promotion(("uint8", "int64", "float16", "float64"), True, ("int", "float"))
    cell = {(a, b): r.results[i][j] for i, a in enumerate(r.labels) for j, b in enumerate(r.labels)}
    assert cell[("int64 tensor", "Python float")] == "float32"
    assert cell[("uint8 tensor", "int64 0-dim")] == "uint8"
    assert cell[("float16 tensor", "float64 0-dim")] == "float16"
    assert cell[("int64 tensor", "float64 0-dim")] == "float64"
    dt.promotion_figure(r)


def test_bad_choices_are_input_errors():
    with pytest.raises(InputError, match="at least one"):
        dt.promotion((), True, ("int",))
    with pytest.raises(InputError, match="Unknown dtype or scalar `float8`"):
        dt.promotion(("float8",), False, ())


def test_finfo_table_is_torch_finfo():
    table = dt.finfo_table()
    for row in table.to_dict("records"):
        info = torch.finfo(getattr(torch, row["dtype"]))
        assert row["max"] == info.max and row["eps (gap after 1.0)"] == info.eps


def test_traps_show_the_silent_results():
    traps = {pair.key: pair for pair in (fn() for fn in dt.TRAPS)}
    assert traps["uint8"].trap["pixels + 10"] == (torch.tensor([250, 100], dtype=torch.uint8) + 10).tolist()
    assert traps["uint8"].correct["pixels + 10"] == [255, 110]
    assert math.inf in traps["fp16"].trap["x * x"] and all(map(math.isfinite, traps["fp16"].correct["x * x"]))
    assert traps["bf16"].trap["1 + 1e-3"] == 1.0 and traps["bf16"].correct["1 + 1e-3"] > 1.0
    assert traps["to_self"].trap == {"y is x": True, "x": [1.0, 0.0, 0.0]}
    assert traps["to_self"].correct == {"y is x": False, "x": [0.0, 0.0, 0.0]}
    assert traps["floordiv"].trap["x // 2"] == (torch.tensor([7, -7]) // 2).tolist() == [3, -4]
    assert traps["sum"].trap["x.sum()"] == torch.tensor([1e8, 1.0, -1e8]).sum().item()
    assert traps["default"].trap["w.dtype"] == "torch.int64" and traps["default"].correct["w.requires_grad"] is True


def test_bf16_lesson_names_the_step_torch_rounds_away():
    bits, eps, step = dt.rounding_step(torch.bfloat16)
    assert eps == torch.finfo(torch.bfloat16).eps == 2.0 ** -7 and bits == 8
    assert step == torch.finfo(torch.bfloat16).eps / 2
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    assert (one + step).item() == 1.0 and (one + 2 * step).item() > 1.0
    assert (one + step * 1.01).item() > 1.0  # anything above the half gap rounds up
    lesson = dt.bfloat16_precision().sentence
    assert f"{bits} significant bits" in lesson and f"1/{round(1 / step)} or less" in lesson
    assert f"gap after 1.0 is 1/{round(1 / eps)}" in lesson and "1/256" in lesson


def test_fp16_lesson_names_the_values_torch_rounds_to_inf():
    lesson = dt.float16_overflow().sentence
    largest, to_inf = (float(n) for n in re.findall(r"largest value is (\d+)\. A value below (\d+)", lesson)[0])
    half = torch.float16
    assert largest == torch.finfo(half).max
    assert torch.tensor(to_inf - 0.01, dtype=half).item() == largest  # just below: rounds down, finite
    assert torch.tensor(to_inf, dtype=half).item() == float("inf")
    assert f"from {to_inf:.0f} up it is inf" in lesson


def test_interview_answers_give_the_overflow_and_the_atomics():
    answers = dict(model_answers("tensors"))
    largest, to_inf = dt.overflow_threshold()
    mixed = answers["float16 or bfloat16 for mixed precision?"]
    assert f"maximum is {largest:.0f} (anything from {to_inf:.0f}" in mixed
    traps = answers["Which integer and dtype traps raise no error?"]
    assert "index_add_" in traps and "scatter_add_" in traps and "GPU sums differ" not in traps
