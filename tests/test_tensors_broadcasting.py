"""Broadcasting demo against torch: result shapes and errors, roles, which element is read, the traps."""

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tensors import broadcasting as bc

dims = st.lists(st.integers(0, 5), min_size=0, max_size=6).map(tuple)
typed = st.one_of(st.text(max_size=40), st.text(alphabet="0123456789,()[] -+x.", max_size=30))


@st.composite
def compatible(draw):
    """A result shape, and 2-3 operands made from it by dropping leading dims and setting some dims to 1."""
    result = draw(st.lists(st.integers(0, 5), min_size=0, max_size=6))
    shapes = []
    for _ in range(draw(st.integers(2, 3))):
        keep = draw(st.integers(0, len(result)))
        tail = result[len(result) - keep:]
        shapes.append(tuple(1 if draw(st.booleans()) else d for d in tail))
    return tuple(shapes)


def text_of(shape, style: int) -> str:
    body = ", ".join(map(str, shape)) + ("," if len(shape) == 1 and style == 1 else "")
    return (f"({body})", f"[{body}]", body if shape else "[]")[style % 3]


def _texts(shapes, style=0):
    texts = [text_of(s, style) for s in shapes]
    return tuple(texts + [""] * (3 - len(texts)))


def _check_against_torch(shapes, style=0):
    r = bc.broadcast(_texts(shapes, style))
    assert r.shapes == tuple(shapes)
    try:
        expected, error = tuple(torch.broadcast_shapes(*shapes)), None
    except RuntimeError as err:
        expected, error = None, str(err).splitlines()[0]
    assert r.result == expected
    assert (r.conflict is None) == (expected is not None)
    assert (r.torch_error is None) == (error is None)
    if error:
        assert r.torch_error.endswith(error)
        _check_conflict_sentence(shapes, r, error)
        return
    for shape, roles in zip(shapes, r.roles, strict=True):
        padded = (None,) * (r.ndim - len(shape)) + tuple(shape)
        for d, role, out in zip(padded, roles, expected, strict=True):
            if role == "prepended":
                assert d is None
            elif role == "stretched":
                assert d == 1 and out != 1
            else:
                assert role == "kept" and d == out


def _check_conflict_sentence(shapes, r, error):
    """The sentence names exactly the dims where two sizes differ and neither is 1, torch's among them."""
    ndim = max(len(s) for s in shapes)
    expected = []
    for k in range(-ndim, 0):
        sizes = {s[k] for s in shapes if len(s) >= -k and s[k] != 1}
        if len(sizes) > 1:
            expected.append(k)
    assert r.conflict_dims == tuple(expected)
    torch_dim = int(re.search(r" at (-\d+)!", error).group(1))
    assert torch_dim in r.conflict_dims
    named = [int(d) for d in re.findall(r"(?:at|Dimension) (-\d+)", r.conflict)]
    if len(expected) > 1:
        head = r.conflict.split(" (counting")[0]
        named = [int(d) for d in re.findall(r"-\d+", head)]
    assert named == expected
    for k in expected:
        for name, shape in zip(bc.NAMES, shapes, strict=False):
            if len(shape) >= -k and shape[k] != 1:
                assert f"{name}'s dim {len(shape) + k} is {shape[k]}" in r.conflict


@settings(max_examples=150, deadline=None)
@given(compatible(), st.integers(0, 2))
def test_compatible_shapes_match_torch(shapes, style):
    _check_against_torch(shapes, style)


@settings(max_examples=150, deadline=None)
@given(st.lists(dims, min_size=2, max_size=3))
def test_random_shapes_match_torch_or_name_the_conflict(shapes):
    _check_against_torch(shapes)


def test_conflict_names_the_dimension_and_shows_torchs_message():
    r = bc.broadcast(("2, 3", "4", ""))
    assert r.result is None
    assert "Dimension -1" in r.conflict and "A's dim 1 is 3" in r.conflict and "B's dim 0 is 4" in r.conflict
    assert r.torch_error.startswith("RuntimeError: Attempting to broadcast a dimension of length 4")


def test_every_conflicting_dimension_is_named_including_the_one_torch_names():
    r = bc.broadcast(("2, 3", "4, 5", ""))
    assert r.conflict_dims == (-2, -1)
    assert r.conflict.startswith("Dimensions -2 and -1 (counting from the right) conflict")
    assert "at -2, A's dim 0 is 2, B's dim 0 is 4" in r.conflict
    assert "at -1, A's dim 1 is 3, B's dim 1 is 5" in r.conflict
    assert " at -1!" in r.torch_error  # torch names the rightmost; the sentence names it too
    three = bc.broadcast(("2, 1, 4", "3, 1", "5, 6, 1"))
    assert three.conflict_dims == (-3, -2)
    assert "at -3, A's dim 0 is 2, C's dim 0 is 5" in three.conflict


@settings(max_examples=300, deadline=None)
@given(typed, typed, typed)
def test_any_text_is_parsed_or_refused_with_input_error(a, b, c):
    try:
        bc.broadcast((a, b, c))
    except InputError as err:
        assert str(err).strip()


def test_limits_are_named():
    with pytest.raises(InputError, match="at most 6 dimensions"):
        bc.broadcast(("1,1,1,1,1,1,1", "2", ""))
    with pytest.raises(InputError, match="Shape B.*limit is 4096"):
        bc.broadcast(("2", "5000", ""))


@st.composite
def small_case(draw):
    shapes = draw(compatible())
    result = torch.broadcast_shapes(*shapes)
    if not (len(result) <= 3 and all(1 <= d <= 8 for d in result)):
        shapes = ((2, 1, 3), (4, 1))
        result = torch.broadcast_shapes(*shapes)
    index = tuple(draw(st.integers(0, d - 1)) for d in result)
    return shapes, index


@settings(max_examples=80, deadline=None)
@given(small_case())
def test_grid_reads_the_element_torch_broadcasting_reads(case):
    shapes, index = case
    g = bc.grid(_texts(shapes), ", ".join(map(str, index)))
    assert g.index == index
    operands = [torch.randn(s) for s in shapes]
    for op, big, read in zip(operands, torch.broadcast_tensors(*operands), g.reads, strict=True):
        assert big[index] == op[read]
    bc.grid_figure(g)


def test_grid_index_errors_name_the_dim_and_limit():
    with pytest.raises(InputError, match="`7` is out of range for dim 1, which has size 3"):
        bc.grid(("2, 1", "3", ""), "0, 7")
    with pytest.raises(InputError, match="needs 2 numbers; got 1"):
        bc.grid(("2, 1", "3", ""), "1")
    assert bc.grid(("2, 1", "3", ""), "").index == (1, 2)


def test_alignment_figure_builds_for_a_three_way_broadcast():
    """Three operands right-aligned in one table: each row's sizes (a missing leading dim shown as a grey 1), each
    cell coloured by its role, and torch's result in the last row."""
    shapes = ((8, 1, 6, 1), (7, 1, 5), (6, 1))
    fig = bc.alignment_figure(bc.broadcast(tuple(", ".join(map(str, s)) for s in shapes)))
    grid, labels = fig.data
    assert list(grid.y) == ["result", "C", "B", "A"] and list(grid.x) == ["dim -4", "dim -3", "dim -2", "dim -1"]
    cells = {(row, column): (text, fill) for column, row, text, fill in
             zip(labels.x, labels.y, labels.text, labels.meta["fills"], strict=True)}

    def row(name):
        return [cells[name, column] for column in grid.x]

    kept, stretched, prepended = (bc.ROLE_COLORS[k] for k in ("kept", "stretched", "prepended"))
    assert row("A") == [("8", kept), ("1", stretched), ("6", kept), ("1", stretched)]
    assert row("B") == [("1", prepended), ("7", kept), ("1", stretched), ("5", kept)]
    assert row("C") == [("1", prepended), ("1", prepended), ("6", kept), ("1", stretched)]
    result = tuple(torch.broadcast_tensors(*(torch.zeros(s) for s in shapes))[0].shape)
    assert result == (8, 7, 6, 5)
    assert row("result") == [(str(d), bc.ROLE_COLORS["result"]) for d in result]


def test_loss_trap_makes_b_by_b_and_torch_refuses_inplace_broadcast():
    loss, inplace = (pair() for pair in bc.TRAPS)
    torch.manual_seed(0)
    pred, target = torch.randn(4), torch.randn(4, 1)
    assert loss.trap == {"diff.shape": [4, 4], "loss": round(((pred - target) ** 2).mean().item(), 4)}
    assert loss.correct == {"diff.shape": [4], "loss": round(((pred - target.squeeze(1)) ** 2).mean().item(), 4)}
    assert "to a (4, 4) difference" in loss.sentence and f"the loss {loss.trap['loss']:g}" in loss.sentence
    assert inplace.trap["raised"].startswith("RuntimeError: output with shape [3]")
    assert inplace.correct == {"b.shape": [2, 3], "c.shape": [2, 3]} and "raised a RuntimeError" in inplace.sentence
