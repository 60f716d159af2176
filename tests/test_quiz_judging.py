"""How a prediction is read and judged: every way torch prints an answer, 2 significant figures, exact counts."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from demos.errors import InputError
from demos.quiz import Question, check, judge_number, read_dtype, read_number, read_shape, validate_prediction


@pytest.mark.parametrize("text", ["torch.Size([3, 4])", "(3, 4)", "[3, 4]", "3, 4", "3 4", " torch.Size([3,4]) "])
def test_every_way_torch_prints_a_shape_is_read(text):
    assert read_shape(text) == (3, 4)


@pytest.mark.parametrize("text", ["torch.float32", "float32", "torch.float", "float"])
def test_every_way_to_name_float32_is_read(text):
    assert read_dtype(text) is torch.float32


@pytest.mark.parametrize(
    "text, value",
    [("tensor(6.)", 6.0), ("tensor([6.])", 6.0), ("tensor(6., grad_fn=<MulBackward0>)", 6.0),
     ("tensor(1., dtype=torch.bfloat16)", 1.0), ("1,572,864", 1572864.0), ("9.5e-7", 9.5e-7), ("-inf", -float("inf"))],
)
def test_numbers_as_torch_prints_them_are_read(text, value):
    assert read_number(text) == value


@pytest.mark.parametrize("text", ["os", "torch.Size", "__import__", "dtype", "float32x", "torch.nn"])
def test_a_dtype_must_be_a_torch_dtype(text):
    with pytest.raises(InputError, match="must name a dtype"):
        read_dtype(text)


@pytest.mark.parametrize(
    "guess, truth, exact, outcome",
    [
        (9.5e-7, 9.5367e-7, False, "correct"),  # right to 2 significant figures
        (1e-6, 9.5367e-7, False, "close"),  # the order of magnitude
        (1e-5, 9.5367e-7, False, "wrong"),
        (-1e-6, 9.5367e-7, False, "wrong"),  # a sign is never close
        (0.31, 0.3133, False, "correct"),
        (0.2350, 0.235004, False, "correct"),  # what torch prints, on a rounding boundary of the 2nd figure
        (8e6, 8008000, True, "close"),  # a byte count must be exact; 2 figures right is close
        (8008000, 8008000, True, "correct"),
        (4, 5, True, "wrong"),
        (1.001, 1.0, True, "close"),  # a rounding trap: the digits are the point
        (float("nan"), float("nan"), False, "correct"),
        (float("inf"), float("inf"), True, "correct"),
        (1e38, float("inf"), False, "wrong"),
        (0.0, 1e-9, False, "wrong"),
    ],
)
def test_judge_number(guess, truth, exact, outcome):
    assert judge_number(guess, truth, exact) == outcome


def _grad_sum():
    x = torch.tensor(2.0, requires_grad=True)
    (x**3).backward()
    return x.grad


def _count():
    return torch.ones(3, 4).numel()


def test_check_whole_number_answers_are_exact_and_floats_are_two_figures():
    grad = Question("g", "x.grad?", _grad_sum, "3x².", kind="number")
    assert check(grad, "tensor(12.)").outcome == "correct"
    assert check(grad, "12.04").outcome == "correct"
    assert check(grad, "10").outcome == "close"
    count = Question("c", "numel?", _count, "12.", kind="number")
    assert check(count, "12").outcome == "correct"
    assert check(count, "12.04").outcome == "close"
    assert check(count, "13").outcome == "wrong"


def test_a_generated_question_runs_its_text_and_may_answer_with_torch_raising():
    code = "import torch\n\nprint((torch.ones(2, 3) + torch.ones(4)).shape)\n"
    q = Question.from_code("b", "Shape or error?", code, "3 vs 4.", raises=(RuntimeError,),
                           choices=("(2, 4)", "RuntimeError"))
    assert q.snippet == code
    assert check(q, "RuntimeError").correct and not check(q, "(2, 4)").correct
    with pytest.raises(InputError, match="not one of them"):
        validate_prediction(q, "(2, 3)")


def test_a_verdict_remembers_the_prediction_it_judged():
    q = Question("c", "numel?", _count, "12.", kind="number")
    assert check(q, " 12 ".strip()).typed == "12"


@given(st.text(max_size=300))
def test_any_text_is_read_or_refused_with_a_sentence(text):
    for read in (read_shape, read_number, read_dtype):
        try:
            read(text)
        except InputError:
            pass


def test_fractions_percentages_and_times_shapes_are_read_as_torch_prints_them():
    ratio = Question("r", "Share?", lambda: 1 - 1 / 4, "Because.", kind="number")
    for typed in ("0.75", "75%", "3/4", " 3 / 4 ", "75 %"):
        assert check(ratio, typed).outcome == "correct", typed
    assert check(ratio, "3/40").outcome == "wrong"
    shape = Question("s", "Shape?", lambda: torch.ones(3, 4).shape, "Because.", kind="shape")
    for typed in ("3x4", "3 × 4", "(3, 4)"):
        assert check(shape, typed).outcome == "correct", typed
    with pytest.raises(InputError, match="divides by zero"):
        check(ratio, "3/0")
