"""Memory-layout demo against torch: shape, stride, offset, contiguity and sharing for every op in the menu."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tensors import layout as lay

# (base shape, chain, the same chain written directly in torch)
CHAINS = [
    ("3, 4", ".view(4, 3)", lambda x: [x.view(4, 3)]),
    ("3, 4", ".view(-1)", lambda x: [x.view(-1)]),
    ("3, 4", ".reshape(2, 6)", lambda x: [x.reshape(2, 6)]),
    ("3, 4", ".T.reshape(12)", lambda x: [x.T, x.T.reshape(12)]),
    ("3, 4", ".transpose(0, 1).contiguous()", lambda x: [x.transpose(0, 1), x.transpose(0, 1).contiguous()]),
    ("2, 3, 4", ".permute(2, 0, 1)", lambda x: [x.permute(2, 0, 1)]),
    ("3, 4", ".t()", lambda x: [x.t()]),
    ("3, 4", "[:, ::2]", lambda x: [x[:, ::2]]),
    ("3, 4", "[1:, 1:3]", lambda x: [x[1:, 1:3]]),
    ("3, 4", "[1]", lambda x: [x[1]]),
    ("3, 4", "[::2, -1]", lambda x: [x[::2, -1]]),
    ("4", ".unsqueeze(0).expand(3, 4)", lambda x: [x.unsqueeze(0), x.unsqueeze(0).expand(3, 4)]),
    ("3, 1", ".expand(-1, 5)", lambda x: [x.expand(-1, 5)]),
    ("3, 4", ".narrow(1, 1, 2)", lambda x: [x.narrow(1, 1, 2)]),
    ("2, 3, 4", ".flatten()", lambda x: [x.flatten()]),
    ("2, 3, 4", ".flatten(1)", lambda x: [x.flatten(1)]),
    ("2, 3, 4", ".flatten(0, 1)", lambda x: [x.flatten(0, 1)]),
    ("3, 1", ".squeeze(1)", lambda x: [x.squeeze(1)]),
    ("3, 4", ".contiguous()", lambda x: [x.contiguous()]),
    ("3, 4", ".clone()", lambda x: [x.clone()]),
    ("3, 4", ".T[::2].contiguous().view(6)",
     lambda x: [x.T, x.T[::2], x.T[::2].contiguous(), x.T[::2].contiguous().view(6)]),
    ("2, 6", "x.view(3, 4)[:, 1:].T", lambda x: [x.view(3, 4), x.view(3, 4)[:, 1:], x.view(3, 4)[:, 1:].T]),
]


def _assert_view_matches(v, t, x):
    assert v.shape == tuple(t.shape)
    assert v.stride == tuple(t.stride())
    assert v.offset == t.storage_offset()
    assert v.contiguous == t.is_contiguous()
    assert v.shares == (t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
    assert list(v.values) == t.reshape(-1).tolist()
    if v.shares:  # x holds arange, so each value is the storage position it is read from
        assert v.positions == v.values


@pytest.mark.parametrize("base, chain, direct", CHAINS, ids=[c[1] for c in CHAINS])
def test_every_menu_op_reports_what_torch_reports(base, chain, direct):
    r = lay.layout(base, chain)
    assert r.error is None
    x = torch.arange(torch.Size(r.base_shape).numel()).reshape(r.base_shape)
    expected = [x, *direct(x)]
    assert len(r.views) == len(expected)
    for v, t in zip(r.views, expected, strict=True):
        _assert_view_matches(v, t, x)
    lay.layout_figure(r, len(r.views) - 1, x.numel())
    printed = []
    exec(compile(r.code, "<layout>", "exec"), {"print": lambda *a: printed.append(a)})
    assert [p[1]["shape"] for p in printed] == [v.shape for v in r.views]
    assert [p[1]["stride"] for p in printed] == [v.stride for v in r.views]


def test_reshape_copies_only_when_it_must():
    views = lay.layout("3, 4", ".reshape(12).reshape(4, 3).T.reshape(12)").views
    assert [v.shares for v in views] == [True, True, True, True, False]


def test_view_on_non_contiguous_shows_torchs_message():
    r = lay.layout("3, 4", ".T.view(12)")
    assert r.failed == "step 2: .view(12)"
    with pytest.raises(RuntimeError) as err:
        torch.arange(12).reshape(3, 4).T.view(12)
    assert r.error == f"RuntimeError: {str(err.value).splitlines()[0]}"
    assert len(r.views) == 2


def test_expand_has_zero_stride_and_keeps_storage():
    v = lay.layout("1, 4", ".expand(3, 4)").views[-1]
    assert v.stride == (0, 1) and v.shares and len(v.storage) == 4


# A random chain built from the menu; torch may refuse a step, which must match a direct run.
step = st.one_of(
    st.tuples(st.just("view"), st.lists(st.integers(-1, 6), min_size=1, max_size=3)),
    st.tuples(st.just("reshape"), st.lists(st.integers(-1, 6), min_size=1, max_size=3)),
    st.tuples(st.just("transpose"), st.lists(st.integers(-2, 2), min_size=2, max_size=2)),
    st.tuples(st.just("unsqueeze"), st.lists(st.integers(-2, 2), min_size=1, max_size=1)),
    st.tuples(st.just("narrow"), st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 2)).map(list)),
    st.tuples(st.just("flatten"), st.just([])),
    st.tuples(st.just("contiguous"), st.just([])),
    st.tuples(st.just("T"), st.just([])),
    st.tuples(st.just("index"), st.lists(st.integers(1, 3), min_size=1, max_size=2)),
)


def _direct(t, name, args):
    if name == "T":
        return t.T
    if name == "index":
        return t[tuple(slice(None, None, a) for a in args)]
    return getattr(t, name)(*args)


def _text(name, args):
    if name == "T":
        return ".T"
    if name == "index":
        return "[" + ", ".join(f"::{a}" for a in args) + "]"
    return f".{name}({', '.join(map(str, args))})"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["3, 4", "2, 3, 2", "12", "4, 1"]), st.lists(step, min_size=1, max_size=5))
def test_random_chains_match_torch(base, steps):
    r = lay.layout(base, "".join(_text(n, a) for n, a in steps))
    x = torch.arange(torch.Size(r.base_shape).numel()).reshape(r.base_shape)
    t = x
    _assert_view_matches(r.views[0], x, x)
    for i, (name, args) in enumerate(steps):
        try:
            t = _direct(t, name, args)
        except (RuntimeError, IndexError, ValueError, TypeError) as err:
            assert r.failed.startswith(f"step {i + 1}:") and r.error.startswith(type(err).__name__)
            assert len(r.views) == i + 1
            return
        _assert_view_matches(r.views[i + 1], t, x)
    assert r.error is None


typed = st.one_of(st.text(max_size=60), st.text(alphabet="x.Tviewrshapnq()[]:,0123456789- ", max_size=60))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), st.sampled_from(["3, 4", "2,3,4", "64"])), typed)
def test_any_text_is_parsed_or_refused_with_input_error(base, chain):
    try:
        lay.layout(base, chain)
    except InputError as err:
        assert str(err).strip()


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["", ".T", "[::2]"]), st.sampled_from(list(lay.MENU)), st.text(max_size=20))
def test_menu_step_is_valid_chain_or_input_error(chain, label, args):
    try:
        text = lay.menu_step(chain, label, args)
    except InputError:
        return
    assert lay.parse_chain(text)


def test_limits_are_named():
    with pytest.raises(InputError, match="x must have 1 to 8,388,608"):
        lay.layout("4096, 4096", "")
    with pytest.raises(InputError, match="the limit is 4096"):
        lay.layout("9000", "")
    with pytest.raises(InputError, match="draws at most 512"):
        lay.layout("3, 4", ".expand(100, 3, 4)")
    with pytest.raises(InputError, match="limit is 10"):
        lay.layout("3, 4", ".T" * 11)
    with pytest.raises(InputError, match="is not one of the ops here"):
        lay.layout("3, 4", ".numpy()")


def test_four_dims_and_channels_last_strides_as_torch_reports():
    chain = ".to(memory_format=torch.channels_last).permute(0, 2, 3, 1)"
    big = lay.layout("32, 3, 64, 64", chain)
    x = torch.empty(32, 3, 64, 64)
    expected = [x, x.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last).permute(0, 2, 3, 1)]
    assert not big.drawn and [v.stride for v in big.views] == [t.stride() for t in expected]
    assert [v.contiguous for v in big.views] == [t.is_contiguous() for t in expected] == [True, False, True]
    assert [v.shares for v in big.views] == [True, False, False] and big.views[1].values == ()
    assert "shape = (32, 3, 64, 64)\ndrawn = False\n" in big.code  # x is uninitialised bytes: layout only
    small = lay.layout("2, 2, 2, 2", ".contiguous(memory_format=torch.channels_last)")
    assert small.drawn and small.views[1].stride == (8, 1, 4, 2)
    assert small.views[1].values == tuple(torch.arange(16).reshape(2, 2, 2, 2).reshape(-1).tolist())
    assert lay.layout_figure(small, 1, 16).data
    assert lay.parse_chain(lay.menu_step("", "channels_last", ""))[0].code == MENU_CL


MENU_CL = ".to(memory_format=torch.channels_last)"


def test_traps_against_torch():
    view, expand, write = (pair() for pair in lay.TRAPS)
    x = torch.arange(12).reshape(3, 4)
    with pytest.raises(RuntimeError) as err:
        x.T.view(12)
    assert view.trap == {"x.T.stride()": [1, 4], "x.T.view(12)": f"RuntimeError: {err.value}"}
    assert view.correct == {"x.T.reshape(12)": x.T.reshape(12).tolist(), "shares x's memory": False}
    item = torch.arange(3).element_size()
    assert expand.trap["stride"] == [0, 1] and expand.trap["bytes"] == 3 * item and expand.trap["x[999, 0]"] == 7
    assert expand.trap["x.add_(1)"].startswith("RuntimeError") and "raised a RuntimeError" in expand.sentence
    assert expand.correct == {"stride": [3, 1], "bytes": 1000 * 3 * item, "x[999, 0]": 1, "x.add_(1)": "done"}
    assert write.trap["x"] == [[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]] and write.correct["x"] == torch.zeros(2, 3).tolist()
