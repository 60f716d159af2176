"""einsum demo against torch: results equal torch.einsum and the named standard op; validation agrees with torch."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tensors import einsum as es

LETTERS = "ijkbhqdX"


@st.composite
def valid_case(draw):
    """An explicit or implicit equation over 1-3 operands, with consistent sizes (size 1 may broadcast)."""
    letters = draw(st.lists(st.sampled_from(LETTERS), min_size=1, max_size=5, unique=True))
    sizes = {ch: draw(st.integers(1, 4)) for ch in letters}
    terms = [draw(st.lists(st.sampled_from(letters), min_size=0, max_size=4)) for _ in range(draw(st.integers(1, 3)))]
    used = [ch for ch in letters if any(ch in t for t in terms)]
    output = draw(st.permutations(used).flatmap(lambda p: st.integers(0, len(p)).map(lambda n: p[:n])))
    shapes = [tuple(1 if draw(st.integers(0, 5)) == 0 and t.count(ch) == 1 else sizes[ch] for ch in t) for t in terms]
    explicit = draw(st.booleans()) or not any(terms)  # an empty text is "nothing typed" on the page
    equation = ",".join("".join(t) for t in terms) + ("->" + "".join(output) if explicit else "")
    return equation, shapes


def _shapes_text(shapes):
    return "; ".join("(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")" for s in shapes)


@settings(max_examples=200, deadline=None)
@given(valid_case())
def test_result_equals_torch_einsum_or_both_refuse(case):
    equation, shapes = case
    operands = [torch.randn(s, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) for s in shapes]
    try:
        expected = torch.einsum(equation, *operands)
    except RuntimeError:
        with pytest.raises(InputError):
            es.einsum(equation, _shapes_text(shapes))
        return
    r = es.einsum(equation, _shapes_text(shapes))
    assert r.out_shape == tuple(expected.shape)
    gen = torch.Generator().manual_seed(0)
    same_inputs = [torch.randn(s, dtype=torch.float64, generator=gen) for s in shapes]
    direct = torch.einsum(equation, *same_inputs).reshape(-1)[:64]
    assert torch.allclose(torch.tensor(r.values, dtype=torch.float64), direct)
    assert r.python_loop_diff is not None and r.python_loop_diff < 1e-9
    if r.equivalent_ok is not None:
        assert r.equivalent_ok
    es.network_dot(r)


@pytest.mark.parametrize("name", list(es.PRESETS))
def test_presets_equal_their_standard_op(name):
    equation, shapes = es.PRESETS[name]
    r = es.einsum(equation, shapes)
    assert r.equivalent_ok is True, r.equivalent_note
    _, _, fn = es._find_equivalent(es.parse_equation(equation))
    gen = torch.Generator().manual_seed(3)
    operands = [torch.randn(s, dtype=torch.float64, generator=gen) for s in r.shapes]
    assert torch.allclose(fn(*operands), torch.einsum(equation, *operands))
    printed = []
    exec(compile(r.code, "<es>", "exec"), {"print": printed.append})
    assert tuple(printed[0]) == r.out_shape and printed[1] is True


@pytest.mark.parametrize("canon", list(es.EQUIVALENTS))
def test_every_named_equivalent_equals_einsum(canon):
    name, _, fn = es.EQUIVALENTS[canon]
    eq = es.parse_equation(canon)
    sizes = {ch: 2 + i for i, ch in enumerate(dict.fromkeys(canon.replace(",", "").replace("->", "")))}
    gen = torch.Generator().manual_seed(0)
    operands = [torch.randn([sizes[c] for c in t], dtype=torch.float64, generator=gen) for t in eq.inputs]
    assert torch.allclose(fn(*operands), torch.einsum(canon, *operands)), name


def test_roles_counts_and_loop_nest():
    r = es.einsum("bhqd,bhkd->bhqk", "(1, 2, 3, 4); (1, 2, 5, 4)")
    assert {i.name: i.role for i in r.indices} == {"b": "batch", "h": "batch", "q": "free", "k": "free",
                                                   "d": "contracted"}
    assert r.iterations == 1 * 2 * 3 * 4 * 5 and r.multiplies == r.iterations
    assert "for d in range(4):  # contracted" in r.loop_code
    assert es.einsum("ij->ji", "2, 3").equivalent == "transpose"
    assert es.einsum("ij", "2, 3").equation == "ij->ij"


def test_errors_name_index_operand_and_limit():
    cases = {
        ("ij,jk->ik", "(2, 3); (4, 5)"): "Index `j` has size 3",
        ("ij,jk->ik", "(2, 3)"): "2 operands but Operand shapes lists 1",
        ("ijk,jk->i", "(2, 3); (3, 4)"): "Operand A (`ijk`) has 3 indices",
        ("ii->", "(3, 4)"): "Index `i` repeats in operand A",
        ("ij->iz", "2, 3"): "Output index `z`",
        ("...ij->ij", "2, 3"): "Ellipsis",
        ("i,i,i,i->", "(2,); (2,); (2,); (2,)"): "limit is 3",
        ("abcdefghi->", "1,1,1,1,1,1"): "limit is 8",
        ("ij,jk->ik", "(512, 512); (512, 512)"): "limit is 5,000,000",
        ("i->i", "(600,)"): "limit is 512",
    }
    for (equation, shapes), message in cases.items():
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            es.einsum(equation, shapes)


typed = st.one_of(st.text(max_size=40), st.text(alphabet="ijk,->.() ;0123456789", max_size=30))


@settings(max_examples=300, deadline=None)
@given(typed, typed)
def test_any_text_is_parsed_or_refused_with_input_error(equation, shapes):
    try:
        es.einsum(equation, shapes)
    except InputError as err:
        assert str(err).strip()


COUNT_CASES = [*es.PRESETS.values(), ("ij,jk->ik", "(2, 1); (1, 3)"), ("ij,jk->ik", "(2, 0); (0, 3)"),
               ("ijk->kji", "2, 3, 4"), ("iij->ij", "3, 3, 2"), ("i,i->i", "(5,); (5,)")]


@pytest.mark.parametrize("equation, shapes", COUNT_CASES)
def test_multiplies_and_adds_count_terms_per_output_element(equation, shapes):
    """einsum of all-ones operands counts the terms each output element sums: t terms take t - 1 adds."""
    r = es.einsum(equation, shapes)
    terms = torch.einsum(r.equation, *[torch.ones(s, dtype=torch.float64) for s in r.shapes]).reshape(-1)
    assert r.adds == int((terms - 1).clamp(min=0).sum())
    assert r.multiplies == (len(r.shapes) - 1) * int(terms.sum())
    assert (f"{r.adds:,} adds" in r.arithmetic) == (r.adds > 0)
    assert ("no adds" in r.arithmetic) == (r.adds == 0 and r.iterations > 0)
    assert ("no multiplies" in r.arithmetic) == (r.multiplies == 0 and r.iterations > 0)


@pytest.mark.parametrize("equation", ["ij->ji", "ii->i"])
def test_transpose_and_diagonal_are_copies_with_no_adds(equation):
    r = es.einsum(equation, "4, 4")
    assert r.adds == 0 and r.multiplies == 0
    assert r.arithmetic.startswith("no multiplies and no adds:") and "is a copy of one input element" in r.arithmetic
