"""Attention & transformers, Positions and Norms & residuals: every number the two views draw equals what torch (or
plain arithmetic) computes directly, every sentence says what its numbers say, and bad settings are sentences."""

import cmath
import math
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.transformers import norms, positions

pytestmark = pytest.mark.usefixtures("one_thread")


def array(nested) -> np.ndarray:
    return np.array(nested, dtype=np.float64)


def diagonal_spread(matrix: np.ndarray) -> float:
    """max - min along each diagonal m - n = const, by walking the cells (independent of torch.diagonal)."""
    groups: dict[int, list[float]] = {}
    for m in range(matrix.shape[0]):
        for n in range(matrix.shape[1]):
            groups.setdefault(m - n, []).append(matrix[m, n])
    return max(max(v) - min(v) for v in groups.values())


# ---- Positions: the torch core ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count, dim", [(5, 2), (9, 8), (33, 64)])
def test_sinusoidal_table_is_the_transformer_formula(count, dim):
    table = positions.sinusoidal(count, dim)
    for p in range(count):
        for i in range(dim // 2):
            angle = p / 10000 ** (2 * i / dim)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=2e-5)
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=2e-5)


@pytest.mark.parametrize("dim, base", [(2, 10000.0), (8, 100.0), (16, 10000.0)])
def test_rope_is_complex_multiplication_by_the_position_phase(dim, base):
    torch.manual_seed(dim)
    x = torch.randn(7, dim)
    rotated = positions.rope(x, base)
    for p in range(7):
        for i in range(dim // 2):
            z = complex(x[p, 2 * i].item(), x[p, 2 * i + 1].item()) * cmath.exp(1j * p * base ** (-2 * i / dim))
            assert rotated[p, 2 * i].item() == pytest.approx(z.real, abs=1e-5)
            assert rotated[p, 2 * i + 1].item() == pytest.approx(z.imag, abs=1e-5)


def test_rope_scores_depend_on_the_offset_only():
    torch.manual_seed(1)
    q, k = torch.randn(16), torch.randn(16)
    rows_q, rows_k = positions.rope(q.expand(20, 16)), positions.rope(k.expand(20, 16))
    assert torch.dot(rows_q[3], rows_k[1]).item() == pytest.approx(torch.dot(rows_q[15], rows_k[13]).item(), abs=1e-5)
    assert torch.dot(rows_q[3], rows_k[1]).item() != pytest.approx(torch.dot(rows_q[3], rows_k[2]).item(), abs=1e-3)


@pytest.mark.parametrize("encoding", positions.ENCODINGS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_head_is_softmax_attention_written_out(encoding, causal):
    torch.manual_seed(4)
    head = positions.PositionalAttention(6, 8, encoding, causal)
    x = torch.randn(1, 6, 8)
    h = x[0].clone()
    if encoding == "sinusoidal":
        h = h + positions.sinusoidal(6, 8)
    if encoding == "learned":
        h = h + head.learned.weight
    q, k, v = (h @ layer.weight.T + layer.bias for layer in (head.q, head.k, head.v))
    if encoding == "rope":
        q, k = positions.rope(q), positions.rope(k)
    scores = q @ k.T / math.sqrt(8)
    if causal:
        scores = scores.masked_fill(torch.ones(6, 6).triu(1).bool(), float("-inf"))
    with torch.no_grad():
        assert torch.allclose(head(x)[0], scores.softmax(-1) @ v, atol=1e-5)


@pytest.mark.parametrize("tokens", [2, 3, 7])
def test_every_permutation_moves_some_token(tokens):
    for kind in positions.PERMUTATIONS:
        for seed in range(20):
            perm = positions.permutation(tokens, kind, seed).tolist()
            assert sorted(perm) == list(range(tokens)) and perm != list(range(tokens)), (kind, seed)
    assert positions.permutation(4, "reverse", 0).tolist() == [3, 2, 1, 0]
    assert positions.permutation(4, "roll", 0).tolist() == [3, 0, 1, 2]


# ---- Positions: the entries --------------------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, dim, encoding, causal, order, seed", [
    (6, 16, "none", False, "reverse", 0), (2, 2, "sinusoidal", True, "random", 3), (16, 64, "rope", False, "roll", 9),
    (9, 4, "learned", False, "random", 11)])
def test_permutation_test_matches_torch(tokens, dim, encoding, causal, order, seed):
    r = positions.permutation_test(tokens, dim, encoding, causal, order, seed)
    torch.manual_seed(seed)
    x = torch.randn(1, tokens, dim)
    head = positions.PositionalAttention(tokens, dim, encoding, causal)
    perm = positions.permutation(tokens, order, seed)
    assert list(r.perm) == perm.tolist()
    with torch.no_grad():
        expected_p_f, expected_f_p = head(x)[0, perm], head(x[:, perm])[0]
    assert np.allclose(array(r.permuted_outputs), expected_p_f.numpy(), atol=6e-5)
    assert np.allclose(array(r.outputs_of_permuted), expected_f_p.numpy(), atol=6e-5)
    assert r.gap == pytest.approx(float((expected_f_p - expected_p_f).abs().max()), abs=1e-6)
    gaps = {(kind, mask): gap for kind, mask, gap in r.gaps}
    assert len(gaps) == 8 and gaps[(encoding, causal)] == r.gap


@pytest.mark.parametrize("tokens, dim, order, seed", [(6, 16, "reverse", 0), (16, 64, "random", 5), (3, 2, "roll", 2)])
def test_only_no_positions_and_no_mask_stays_equivariant(tokens, dim, order, seed):
    r = positions.permutation_test(tokens, dim, "none", False, order, seed)
    gaps = {(kind, mask): gap for kind, mask, gap in r.gaps}
    assert gaps.pop(("none", False)) < 1e-5 and r.equivariant
    assert min(gaps.values()) > 1e-3, gaps


@pytest.mark.parametrize("count, dim, seed", [(32, 32, 0), (2, 2, 7), (64, 64, 3), (10, 6, 1)])
def test_encoding_tables_match_torch(count, dim, seed):
    t = positions.encoding_tables(count, dim, seed)
    torch.manual_seed(seed)
    learned = nn.Embedding(count, dim).weight.detach().double().numpy()
    sinusoid = np.array([[math.sin(p / 10000 ** (i / dim)) if i % 2 == 0 else math.cos(p / 10000 ** ((i - 1) / dim))
                          for i in range(dim)] for p in range(count)])
    assert np.allclose(array(t.sinusoidal), sinusoid, atol=1e-4)
    assert np.allclose(array(t.learned), learned, atol=6e-5)
    for name, table in (("sinusoidal", sinusoid), ("learned", learned)):
        dots = table @ table.T / dim
        assert np.allclose(array(getattr(t, f"{name}_dots")), dots, atol=1e-4)
        assert getattr(t, f"{name}_diagonal_spread") == pytest.approx(diagonal_spread(dots), abs=1e-4)
    assert t.sinusoidal_diagonal_spread < 1e-5 and (count == 2 or t.learned_diagonal_spread > 0.05)


@pytest.mark.parametrize("count, head_dim, base, seed", [(12, 16, 10000.0, 0), (32, 64, 100.0, 4), (2, 2, 1000.0, 1)])
def test_rope_offsets_match_a_complex_rotation(count, head_dim, base, seed):
    o = positions.rope_offsets(count, head_dim, base, seed)
    torch.manual_seed(seed)
    x = torch.randn(head_dim)
    w_q, w_k = nn.Linear(head_dim, head_dim), nn.Linear(head_dim, head_dim)
    with torch.no_grad():
        q, k = w_q(x).double().numpy(), w_k(x).double().numpy()
        pe = positions.sinusoidal(count, head_dim)
        added = (w_q(x + pe) @ w_k(x + pe).T).double().numpy() / math.sqrt(head_dim)
    phases = np.array([[cmath.exp(1j * p * base ** (-2 * i / head_dim)) for i in range(head_dim // 2)]
                       for p in range(count)])
    zq, zk = q[0::2] + 1j * q[1::2], k[0::2] + 1j * k[1::2]
    rope = np.array([[np.real(np.sum((zq * phases[m]) * np.conj(zk * phases[n]))) for n in range(count)]
                     for m in range(count)]) / math.sqrt(head_dim)
    assert np.allclose(array(o.rope_scores), rope, atol=1e-4)
    assert np.allclose(array(o.added_scores), added, atol=1e-4)
    assert o.rope_spread < 1e-5 and o.rope_relative
    assert o.added_spread == pytest.approx(diagonal_spread(added), abs=1e-4)
    assert o.rope_range == pytest.approx(rope.max() - rope.min(), abs=1e-4)
    assert o.rope_norm_change < 1e-5
    if count > 2:
        assert o.added_spread > 1e-3, "the added table makes the score depend on where the pair sits"


# ---- Positions: sentences ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", positions.ENCODINGS)
@pytest.mark.parametrize("causal", [False, True])
def test_gap_sentence_reads_its_numbers(encoding, causal):
    r = positions.permutation_test(6, 16, encoding, causal, "reverse", 0)
    text = positions.gap_sentence(r)
    assert positions.ENCODING_LABELS[encoding] in text
    assert ("rounding" in text) == (r.gap > 0 and r.equivariant) == (encoding == "none" and not causal)
    assert f"is {r.gap:.1e} (" in text if r.equivariant else f"= {r.gap:.2g}" in text
    assert ("causal mask lets" in text) == causal
    assert ("the mask alone breaks" in text) == (causal and encoding == "none")
    assert ("rotated" in text) == (encoding == "rope")
    assert ("encoding of the position" in text) == (encoding in ("sinusoidal", "learned"))


def test_gaps_summary_names_the_settings_within_rounding():
    r = positions.permutation_test(6, 16, "learned", True, "reverse", 0)
    broken = min(gap for kind, mask, gap in r.gaps if (kind, mask) != ("none", False))
    kept = dict(((kind, mask), gap) for kind, mask, gap in r.gaps)[("none", False)]
    assert positions.gaps_summary(r) == (
        f"Gap below 1e-04: no positions, no mask (gap {kept:.1e}). Every other setting broke the symmetry, by "
        f"{broken:.2g} or more: any positional encoding, and the causal mask on its own.")


@pytest.mark.parametrize("tokens, dim", [(6, 16), (2, 2)])
def test_an_exact_zero_gap_reads_exactly_and_a_small_one_counts_its_ulps(tokens, dim):
    r = positions.permutation_test(tokens, dim, "none", False, "reverse", 0)
    text, summary = positions.gap_sentence(r), positions.gaps_summary(r)
    scale = max(abs(v) for row in r.permuted_outputs for v in row)
    if r.gap == 0:
        assert "is exactly 0; the same numbers came out" in text and "rounding" not in text
        assert "(gap exactly 0)" in summary
    else:
        units = r.gap / 2.0 ** (math.floor(math.log2(scale)) - 23)
        assert units <= 8 and f"({units:.2g} float32 ulp" in text
        assert f"the largest output, {scale:.3g}: rounding" in text
    assert "rounding" not in summary


@pytest.mark.parametrize("count, dim", [(32, 32), (2, 2), (32, 2), (64, 2), (4, 8), (64, 8), (12, 64), (64, 64)])
def test_table_sentences_read_their_numbers(count, dim):
    t = positions.encoding_tables(count, dim, 0)
    sinusoid, learned = positions.table_sentences(t)
    periods = [2 * math.pi * 10000 ** (i / dim) for i in range(0, dim, 2)]
    full = sum(1 for p in periods if p <= count - 1)
    turned = [2 * math.pi * (count - 1) / p for p in periods]
    if dim == 2:  # one pair: no slow digit, and no "1 of the 1 pairs"
        assert f"single pair, sin and cos of p, which repeats every {periods[0]:.3g} positions" in sinusoid
        assert f"turns by {turned[0]:.2g} rad, " in sinusoid
        assert (f"{turned[0] / (2 * math.pi):.2g} full turns" in sinusoid) == (full == 1)
        assert ("less than one full turn" in sinusoid) == (full == 0)
        assert "digit" not in sinusoid and " of the " not in sinusoid
    else:
        assert f"every {periods[0]:.3g} positions, the last every {periods[-1]:.3g}" in sinusoid
        if full == 0:
            assert f"none of the {dim // 2} pairs completes a full turn: the fastest turns by {turned[0]:.2g} rad" \
                in sinusoid and "digit" not in sinusoid
        else:
            verb = "completes" if full == 1 else "complete"
            assert f"{full} of the {dim // 2} pairs {verb} a full turn" in sinusoid
            assert f"slowest turns by {turned[-1]:.2g} rad, less than one full turn, like the fast and slow digits" \
                in sinusoid and turned[-1] < 2 * math.pi
    values = torch.tensor(t.learned)
    assert f"mean {values.mean():.2f}, std {values.std():.2f}" in learned
    assert f"nn.Embedding({count}, {dim})" in learned and f"positions 0 to {count - 1}" in learned
    dots = positions.dots_sentence(t)
    spread, scale = t.sinusoidal_diagonal_spread, max(abs(v) for row in t.sinusoidal_dots for v in row)
    if spread == 0:
        assert "along any diagonal is exactly 0." in dots and "rounding" not in dots
    else:
        units = spread / 2.0 ** (math.floor(math.log2(scale)) - 23)
        assert units <= 8, "the sinusoidal diagonals differ by a few float32 ulps at most"
        assert f"is {spread:.1e} ({units:.2g} float32 ulp" in dots and f"largest value, {scale:.3g}: rounding)" in dots
    assert f"spread {t.learned_diagonal_spread:.2g}" in dots


@pytest.mark.parametrize("count, head_dim, base, seed", [(12, 16, 10000.0, 2), (32, 64, 100.0, 2),
                                                         (5, 2, 100000.0, 2), (2, 2, 100.0, 0)])
def test_offset_sentences_read_their_numbers(count, head_dim, base, seed):
    o = positions.rope_offsets(count, head_dim, base, seed)
    rope, added = positions.offset_sentences(o)
    assert f"range over {o.rope_range:.3g}" in rope
    if o.rope_spread == 0:
        assert "holds one value, exactly, in scores" in rope and "rounding" not in rope
    else:
        units = o.rope_spread / 2.0 ** (math.floor(math.log2(o.rope_bound)) - 23)
        assert units <= 8 and f"to within {o.rope_spread:.1e} ({units:.2g} float32 ulp" in rope
        assert f"|q|·|k|/√d = {o.rope_bound:.3g}, the largest a score can be: rounding)" in rope
    assert max(abs(v) for row in o.rope_scores for v in row) <= o.rope_bound * (1 + 1e-5)
    if o.rope_norm_change == 0:
        assert "(exactly: every rotated q has the same norm as q)" in rope
    else:
        assert f"at most {o.rope_norm_change:.1e}" in rope
    assert f"spread up to {o.added_spread:.3g}" in added and f"range over {o.added_range:.3g}" in added


def test_rope_family_explanation_keeps_norms_and_lets_the_score_move_with_the_offset():
    """Practice family rope: the norm-ratio question's explanation says what torch prints (1) and that the score
    q·k still changes with position through m − n, which torch confirms on the family's own rope()."""
    import random

    from demos.practice import gen_transformers

    namespace: dict = {"torch": torch}
    exec(gen_transformers.ROPE, namespace)
    rope = namespace["rope"]
    for seed in range(300):
        question = gen_transformers.rope_question(random.Random(seed))
        if "norm divided by" not in question.prompt:
            continue
        assert "the ratio is 1" in question.explain and question.run() == 1.0
        assert "not its norm" in question.explain and "depends on the offset m − n" in question.explain
        assert "not changed by position" not in question.explain
        break
    else:
        pytest.fail("no norm-ratio question in 300 seeds")
    torch.manual_seed(0)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    assert torch.isclose(rope(q, 5).norm(), q.norm())
    assert not torch.isclose(rope(q, 5) @ rope(k, 2), rope(q, 5) @ rope(k, 4)), "another offset, another score"
    assert torch.isclose(rope(q, 5) @ rope(k, 2), rope(q, 9) @ rope(k, 6)), "the same offset, the same score"


def test_rms_norm_constant_explanation_reads_its_numbers():
    """RMSNorm keeps the sign and does not subtract the mean, but rescales it: −3 becomes about −1."""
    from demos.transformers import scratch

    question = next(q for q in scratch.QUESTIONS if q.key == "rms_norm_constant")
    x = torch.full((1, 4), -3.0)
    out = F.rms_norm(x, (4,), eps=1e-6)
    answer = out[0, 0].item()
    assert answer == question.run() and answer < 0, "the sign is kept"
    assert f"float32 gives {answer:.8f}".replace("-", "−") in question.explain
    assert x.mean().item() == -3 and out.mean().item() == pytest.approx(-1, abs=1e-6)
    assert "from −3 to about −1" in question.explain and "without subtracting the mean" in question.explain
    assert "keeps the sign and the mean" not in question.explain
    assert F.layer_norm(x, (4,)).abs().max().item() == 0 and "LayerNorm would give 0" in question.explain


# ---- Norms: the torch core ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, tokens, channels, cell", [
    (3, 4, 6, (0, 1, 2)), (1, 2, 2, (0, 1, 1)), (4, 8, 8, (3, 7, 0)), (2, 1, 5, (1, 0, 4))])
def test_the_moved_outputs_are_each_norms_reduction_group(batch, tokens, channels, cell):
    a = norms.reduction_axes(batch, tokens, channels, *cell, seed=1)
    b0, t0, c0 = cell
    row = [[[int(b == b0 and t == t0) for _ in range(channels)] for t in range(tokens)] for b in range(batch)]
    channel = [[[int(c == c0) for c in range(channels)] for _ in range(tokens)] for _ in range(batch)]
    moved = dict(a.moved)
    assert moved["LayerNorm"] == nested_tuple(row) and moved["RMSNorm"] == nested_tuple(row)
    assert moved["BatchNorm"] == nested_tuple(channel)
    assert dict(a.counts) == {"LayerNorm": channels, "BatchNorm": batch * tokens, "RMSNorm": channels}


def nested_tuple(values):
    return tuple(nested_tuple(v) for v in values) if isinstance(values, list) else values


def test_batchnorm_over_tokens_uses_one_mean_per_channel():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 4)
    out = norms.batch_norm_over_tokens(nn.BatchNorm1d(4), x)
    mean, var = x.mean(dim=(0, 1)), x.var(dim=(0, 1), unbiased=False)
    assert torch.allclose(out, (x - mean) / torch.sqrt(var + 1e-5), atol=1e-5)


@pytest.mark.parametrize("features, batch, batches, seed", [(8, 4, 5, 0), (2, 2, 2, 3), (32, 64, 8, 1)])
def test_batch_dependence_matches_the_formulas(features, batch, batches, seed):
    d = norms.batch_dependence(features, batch, batches, seed)
    torch.manual_seed(seed)
    sample = torch.randn(1, features)
    full = [torch.cat([sample, torch.randn(batch - 1, features)]) for _ in range(batches)]
    running_mean, running_var = torch.zeros(features), torch.ones(features)
    train = []
    for x in full:
        train.append((x[0] - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5))
        running_mean = 0.9 * running_mean + 0.1 * x.mean(0)
        running_var = 0.9 * running_var + 0.1 * x.var(0, unbiased=True)
    evaluated = (sample[0] - running_mean) / torch.sqrt(running_var + 1e-5)
    layer = (sample[0] - sample[0].mean()) / torch.sqrt(sample[0].var(unbiased=False) + 1e-5)
    outputs = dict(d.outputs)
    assert np.allclose(array(outputs["BatchNorm train()"]), torch.stack(train).numpy(), atol=2e-4)
    assert np.allclose(array(outputs["BatchNorm eval()"]), evaluated.expand(batches, -1).numpy(), atol=2e-4)
    assert np.allclose(array(outputs["LayerNorm"]), layer.expand(batches, -1).numpy(), atol=2e-4)
    stacked = torch.stack(train)
    assert d.spread("BatchNorm train()") == pytest.approx(float((stacked.max(0).values - stacked.min(0).values).max()),
                                                          abs=2e-4)
    if batch > 2:  # two values always normalize to ±1: only the other sample's side of it can change
        assert d.spread("BatchNorm train()") > 1e-3
    assert all(abs(abs(v) - 1) < 1e-3 for row in outputs["BatchNorm train()"] for v in row) == (batch == 2)
    assert d.spread("BatchNorm eval()") < 1e-6 and d.spread("LayerNorm") < 1e-6
    assert [size for size, _ in d.train_spread_by_size] == list(norms.BN_BATCHES)
    assert dict(d.train_spread_by_size)[batch] == d.spread("BatchNorm train()")


@pytest.mark.parametrize("features, offset, seed", [(8, 1.0, 0), (2, -3.5, 4), (32, 0.0, 2), (5, 5.0, 9)])
def test_rms_vs_layer_matches_the_formulas(features, offset, seed):
    r = norms.rms_vs_layer(features, offset, seed)
    torch.manual_seed(seed)
    row = torch.randn(features).double()
    centered = row - row.mean()

    def layer(v):
        return (v - v.mean()) / torch.sqrt(((v - v.mean()) ** 2).mean() + 1e-5)

    def rms(v):
        return v / torch.sqrt((v**2).mean() + 1e-5)

    shifted = centered + offset
    assert np.allclose(array(r.shifted), shifted.numpy(), atol=1e-4)
    assert np.allclose(array(r.layer), layer(shifted).numpy(), atol=2e-4)
    assert np.allclose(array(r.rms), rms(shifted).numpy(), atol=2e-4)
    assert r.gap_centered < 1e-5 and r.layer_moved < 1e-5
    assert r.gap_shifted == pytest.approx(float((layer(shifted) - rms(shifted)).abs().max()), abs=1e-5)
    assert r.rms_moved == pytest.approx(float((rms(shifted) - rms(centered)).abs().max()), abs=1e-5)
    curve = dict(zip(r.offsets, r.curve, strict=True))
    assert curve[0.0] < 1e-5 and curve[offset] == pytest.approx(r.gap_shifted, abs=1e-6)
    assert all(gap > 1e-3 for o, gap in curve.items() if o != 0)


def test_torch_rmsnorm_is_the_formula():
    x = torch.randn(3, 7)
    assert torch.allclose(nn.RMSNorm(7, eps=1e-5)(x), x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5),
                          atol=1e-6)


def by_hand(layer: nn.TransformerEncoderLayer, x: torch.Tensor, norm_first: bool) -> torch.Tensor:
    """One encoder layer written out from its submodules (dropout 0, ReLU)."""
    def attend(y):
        return layer.self_attn(y, y, y, need_weights=False)[0]

    def feed_forward(y):
        return layer.linear2(F.relu(layer.linear1(y)))

    if norm_first:
        x = x + attend(layer.norm1(x))
        return x + feed_forward(layer.norm2(x))
    x = layer.norm1(x + attend(x))
    return layer.norm2(x + feed_forward(x))


@pytest.mark.parametrize("depth, width, heads, seed", [(12, 32, 4, 0), (1, 16, 1, 3), (6, 64, 2, 5)])
def test_pre_vs_post_matches_stacks_written_out(depth, width, heads, seed):
    p = norms.pre_vs_post(depth, width, heads, seed)
    for run, norm_first in ((p.pre, True), (p.post, False)):
        torch.manual_seed(seed)
        stack, readout = norms.Stack(depth, width, heads, norm_first), nn.Linear(width, 1)
        x, target = torch.randn(4, 8, width), torch.randn(4, 8, 1)
        h, sizes = x, [float(x.pow(2).mean().sqrt())]
        for layer in stack.layers:
            h = by_hand(layer, h, norm_first)
            sizes.append(float(h.detach().pow(2).mean().sqrt()))
        if norm_first:
            h = F.layer_norm(h, (width,), stack.final.weight, stack.final.bias)
        loss = ((readout(h) - target) ** 2).mean()
        grads = torch.autograd.grad(loss, [q for layer in stack.layers for q in layer.parameters()])
        per_layer = len(list(stack.layers[0].parameters()))
        norms_by_hand = [math.sqrt(sum(float(g.pow(2).sum()) for g in grads[i:i + per_layer]))
                         for i in range(0, len(grads), per_layer)]
        assert run.grad_norms == pytest.approx(norms_by_hand, rel=1e-4)
        assert run.stream_rms == pytest.approx(sizes, rel=1e-5)
    assert all(abs(v - 1) < 1e-3 for v in p.post.stream_rms[1:]), "every post-norm layer ends in LayerNorm"
    if depth > 1:
        assert p.pre.stream_rms[-1] > p.pre.stream_rms[0], "the pre-norm stream grows"


def test_pre_and_post_share_their_weights():
    torch.manual_seed(2)
    pre = norms.Stack(3, 16, 2, True)
    torch.manual_seed(2)
    post = norms.Stack(3, 16, 2, False)
    assert all(torch.equal(a, b) for a, b in zip(pre.layers.parameters(), post.layers.parameters(), strict=True))


# ---- Norms: sentences ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, tokens, channels, cell", [(3, 4, 6, (0, 1, 2)), (1, 2, 2, (0, 1, 1)),
                                                           (4, 8, 8, (2, 5, 7))])
def test_axes_sentences_read_the_moved_cells(batch, tokens, channels, cell):
    a = norms.reduction_axes(batch, tokens, channels, *cell)
    layer, batchnorm, rms = norms.axes_sentences(a)
    b, t, c = cell
    sample_part = "the only sample" if batch == 1 else f"sample {b} only"
    assert layer.startswith(f"**LayerNorm**: {channels} outputs moved ({sample_part}, token {t} only, all "
                            f"{channels} channels)")
    assert f"{batch * tokens} of them" in layer and f"C = {channels}" in layer
    samples = "the only sample" if batch == 1 else f"all {batch} samples"
    assert batchnorm.startswith(f"**BatchNorm**: {batch * tokens} outputs moved ({samples}, all {tokens} tokens, "
                                f"channel {c} only)")
    assert f"{channels} of them" in batchnorm
    assert rms.startswith(f"**RMSNorm**: {channels} outputs moved") and "no mean is subtracted" in rms


@pytest.mark.parametrize("batch", norms.BN_BATCHES)
def test_batch_sentences_read_their_numbers(batch):
    d = norms.batch_dependence(8, batch, 5, 0)
    train, evaluated, layer = norms.batch_sentences(d)
    assert f"up to {d.spread('BatchNorm train()'):.3g} across the 5 batches of {batch}" in train
    for size, value in d.train_spread_by_size:
        assert f"{size} → {value:.2g}" in train
    assert evaluated.endswith("spread 0 (bit for bit).") == (d.spread("BatchNorm eval()") == 0)
    assert layer.endswith("spread 0 (bit for bit).") == (d.spread("LayerNorm") == 0)
    assert "8 features" in layer
    assert ("can only output ±1" in train) == (batch == 2)


def test_measured_tells_exact_rounding_and_real_differences():
    assert norms.measured(0.0) == "0 (bit for bit)"
    assert norms.measured(1.5e-8) == "1.5e-08 (float32 rounding)"
    assert norms.measured(0.25) == "0.25"


@pytest.mark.parametrize("offset", [0.0, 1.0, -2.5])
def test_rms_sentences_read_their_numbers(offset):
    r = norms.rms_vs_layer(8, offset, 0)
    lines = norms.rms_sentences(r)
    assert f"at most {norms.measured(r.gap_centered)}" in lines[0]
    if offset == 0:
        assert "choose a nonzero mean" in lines[1]
    else:
        assert f"With {offset:g} added" in lines[1]
        assert f"moved by {norms.measured(r.layer_moved)}; RMSNorm moved by {norms.measured(r.rms_moved)}" in lines[1]
        assert f"differ by up to {norms.measured(r.gap_shifted)}" in lines[1]
        assert "rounding" not in norms.measured(r.rms_moved)


@pytest.mark.parametrize("depth", [1, 2, 12, 24])
def test_depth_sentences_read_their_numbers(depth):
    p = norms.pre_vs_post(depth, 16, 2, 0)
    stream, grads, _ = norms.depth_sentences(p)
    pre = p.pre.stream_rms
    assert f"from {pre[0]:.3g} to {pre[-1]:.3g} over {depth} layer" in stream
    assert f"({pre[-1] / pre[0]:.2f}×)" in stream
    assert "after each layer the RMS is 1." in stream
    for run, name in ((p.pre, "pre-norm"), (p.post, "post-norm")):
        assert f"{name} {run.grad_norms[0]:.3g}" in grads
        if depth > 1:
            word = "larger" if run.grad_norms[0] > run.grad_norms[-1] else "smaller"
            assert f"{run.grad_norms[-1]:.3g} at layer {depth} (layer 1 {word}" in grads
            assert f"largest / smallest {max(run.grad_norms) / min(run.grad_norms):.2f}×" in grads
    assert f"{p.post.grad_norms[0] / p.pre.grad_norms[0]:.2f}× pre-norm's at layer 1" in grads
    assert (f"× at layer {depth}" in grads) == (depth > 1)


# ---- validation: bad settings are one sentence ------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: positions.permutation_test(1, 16), "Tokens must be between 2 and 16; got 1."),
    (lambda: positions.permutation_test(6, 15), "Model width must be even"),
    (lambda: positions.permutation_test(6, 128), "Model width must be between 2 and 64; got 128."),
    (lambda: positions.permutation_test(6, 16, "alibi"), "Positions must be one of none, sinusoidal, learned, rope"),
    (lambda: positions.permutation_test(6, 16, "none", False, "sort"), "Permutation must be one of"),
    (lambda: positions.permutation_test(6, 16, seed=-1), "Seed must be between 0 and 9999; got -1."),
    (lambda: positions.encoding_tables(65, 32), "Positions must be between 2 and 64; got 65."),
    (lambda: positions.encoding_tables(8, 7), "Dimensions must be even"),
    (lambda: positions.rope_offsets(33, 16), "Positions must be between 2 and 32; got 33."),
    (lambda: positions.rope_offsets(8, 0), "Head dimension must be between 2 and 64; got 0."),
    (lambda: positions.rope_offsets(8, 16, 5.0), "RoPE base must be one of 100, 1000, 10000, 100000; got 5."),
    (lambda: norms.reduction_axes(5, 4, 6), "Batch size B must be between 1 and 4; got 5."),
    (lambda: norms.reduction_axes(3, 9, 6), "Tokens T must be between 1 and 8; got 9."),
    (lambda: norms.reduction_axes(3, 4, 1), "Channels C must be between 2 and 8; got 1."),
    (lambda: norms.reduction_axes(3, 4, 6, b=3), "Sample b must be between 0 and 2; got 3."),
    (lambda: norms.reduction_axes(3, 4, 6, t=-1), "Position t must be between 0 and 3; got -1."),
    (lambda: norms.reduction_axes(3, 4, 6, c=6), "Channel c must be between 0 and 5; got 6."),
    (lambda: norms.reduction_axes(1, 1, 6, 0, 0, 0), "B × T at least 2"),
    (lambda: norms.batch_dependence(8, 5), "Batch size must be one of 2, 4, 8, 16, 32, 64; got 5."),
    (lambda: norms.batch_dependence(1, 4), "Features must be between 2 and 32; got 1."),
    (lambda: norms.batch_dependence(8, 4, 9), "Batches must be between 2 and 8; got 9."),
    (lambda: norms.rms_vs_layer(8, 5.5), "Mean added must be between -5 and 5; got 5.5."),
    (lambda: norms.rms_vs_layer(33, 1.0), "Features must be between 2 and 32; got 33."),
    (lambda: norms.pre_vs_post(25), "Depth must be between 1 and 24; got 25."),
    (lambda: norms.pre_vs_post(12, 48), "Width must be one of 16, 32, 64; got 48."),
    (lambda: norms.pre_vs_post(12, 32, 3), "Heads must be one of 1, 2, 4; got 3."),
])
def test_bad_settings_are_sentences(call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call()
