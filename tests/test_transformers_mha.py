"""Multi-head and The block (Attention & transformers): the demos' numbers against torch asked directly, each
sentence the views show against its numbers at several settings, and bad settings answered in a sentence."""

import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from demos.errors import InputError
from demos.transformers import block, multihead
from demos.transformers.figures import block as block_figs
from demos.transformers.figures import multihead as multihead_figs
from tests.conftest import assert_clean, open_page

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "pages/transformers.py"
# (E, H, T, B): defaults, one head, one token, B = T, the largest, one sequence, one sequence of one token
SETTINGS = [(16, 4, 6, 2), (8, 1, 5, 2), (16, 4, 1, 3), (16, 2, 4, 4), (64, 8, 16, 4), (32, 4, 7, 1), (8, 2, 1, 1)]


def seeded_mha(E, H, T, B, seed=0, bias=True):
    """The demo's input and module, rebuilt here: the same seed, the same order of draws."""
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, bias=bias, batch_first=True)
    return torch.randn(B, T, E), mha


def attention_heads_by_reshape(x, mha, wrong: bool):
    """Multi-head attention written independently of the demo (separate q, k, v matmuls, einsum), with either
    head split."""
    B, T, E = x.shape
    H, d = mha.num_heads, E // mha.num_heads
    w, b = mha.in_proj_weight, mha.in_proj_bias
    q, k, v = (x @ w[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E] for i in range(3))
    if wrong:
        q, k, v = (t.reshape(B, H, T, d) for t in (q, k, v))
    else:
        q, k, v = (t.reshape(B, T, H, d).permute(0, 2, 1, 3) for t in (q, k, v))
    p = torch.einsum("bhqd,bhkd->bhqk", q, k).div(d ** 0.5).softmax(-1)
    out = torch.einsum("bhqk,bhkd->bhqd", p, v)
    merged = out.reshape(B, T, E) if wrong else out.permute(0, 2, 1, 3).reshape(B, T, E)
    return merged @ mha.out_proj.weight.T + mha.out_proj.bias, p


# ---- Multi-head: oracles ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_head_maps_follow_the_memory_order_of_each_view(E, H, T, B):
    s = multihead.head_split(E, H, T, B, 0)
    d = E // H
    for t in range(T):
        for e in range(E):
            flat = t * E + e
            assert (s.head_right[t][e], s.row_right[t][e]) == (e // d, t)
            assert (s.head_wrong[t][e], s.row_wrong[t][e]) == (flat // (T * d), flat % (T * d) // d)
    assert s.misplaced_right == 0
    assert s.misplaced_wrong == sum(s.row_wrong[t][e] != t for t in range(T) for e in range(E))
    assert (s.misplaced_wrong == 0) == (H == 1 or T == 1)


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_split_difference_is_the_two_attentions_apart(E, H, T, B):
    s = multihead.head_split(E, H, T, B, 0)
    x, mha = seeded_mha(E, H, T, B)
    with torch.no_grad():
        right, _ = attention_heads_by_reshape(x, mha, wrong=False)
        wrong, _ = attention_heads_by_reshape(x, mha, wrong=True)
        torch_out, _ = mha(x, x, x)
    assert torch.allclose(right, torch_out, atol=1e-6)
    assert s.max_abs_diff == pytest.approx(float((right - wrong).abs().max()), abs=1e-6)
    assert s.output_max_abs == pytest.approx(float(torch_out.abs().max()), abs=1e-6)
    assert (s.max_abs_diff == 0) == (s.misplaced_wrong == 0)


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
@pytest.mark.parametrize("bias", [True, False])
def test_module_check_matches_torch(E, H, T, B, bias):
    m = multihead.module_check(E, H, T, B, bias, 0)
    fresh = nn.MultiheadAttention(E, H, bias=bias)
    assert m.parameter_count == sum(p.numel() for p in fresh.parameters()) == m.formula_count
    assert m.formula_count == 4 * E * E + (4 * E if bias else 0)
    assert [(n, s) for n, s, _ in m.parameters] == [(n, tuple(p.shape)) for n, p in fresh.named_parameters()]
    x, mha = seeded_mha(E, H, T, B, bias=bias)
    with torch.no_grad():
        _, averaged = mha(x, x, x)
        _, each = mha(x, x, x, average_attn_weights=False)
    assert m.averaged_shape == (B, T, T) and m.each_head_shape == (B, H, T, T)
    assert torch.allclose(torch.tensor(m.averaged_item0), averaged[0], atol=1e-7)
    assert torch.allclose(torch.tensor(m.weights_item0), each[0], atol=1e-6)
    assert torch.allclose(each.mean(dim=1), averaged, atol=1e-6), "need_weights averages the heads"
    assert max(m.output_diff, m.fast_output_diff, m.each_head_diff, m.average_diff) < 1e-6


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_batch_first_trap_attends_across_the_batch(E, H, T, B):
    t = multihead.batch_first_trap(E, H, T, B, 0)
    x, right_module = seeded_mha(E, H, T, B)
    default = nn.MultiheadAttention(E, H)
    default.load_state_dict(right_module.state_dict())
    with torch.no_grad():
        right, right_w = right_module(x, x, x)
        trap, trap_w = default(x, x, x)
        # the trap, written out: the batch is the sequence and each position is a "sequence" of B tokens
        by_position, _ = right_module(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    assert t.right_shape == t.trap_shape == (B, T, E)
    assert t.right_weights_shape == (B, T, T) and t.trap_weights_shape == (T, B, B)
    assert t.max_abs_diff == pytest.approx(float((right - trap).abs().max()), abs=1e-6)
    assert torch.allclose(trap, by_position.transpose(0, 1), atol=1e-6) and t.across_batch_diff < 1e-6
    assert torch.allclose(torch.tensor(t.trap_weights), trap_w, atol=1e-7)
    if B == T == 1:
        assert t.max_abs_diff < 1e-6, "one sequence of one token: both readings are the same"
    else:
        assert t.max_abs_diff > 1e-3


def test_figures_draw_each_number_once_with_its_head():
    s = multihead.head_split(16, 4, 6, 2, 0)
    fig = multihead_figs.split_figure(s)
    assert [trace.z.tolist() for trace in fig.data] == [s.head_right, s.head_wrong]
    assert [trace.customdata.tolist() for trace in fig.data] == [s.row_right, s.row_wrong]
    t = multihead.batch_first_trap(16, 4, 3, 2, 0)
    right, trap = (torch.tensor(trace.z) for trace in multihead_figs.batch_first_figure(t).data)
    for grid in (right, trap):
        assert torch.allclose(grid.sum(dim=1), torch.ones(6, dtype=grid.dtype), atol=2e-3), "each query's weights"
    assert trap[0, 3] == pytest.approx(t.trap_weights[0][0][1], abs=1e-3), "s0 t0 attends to s1 t0 in the trap"
    assert trap[4, 1] == pytest.approx(t.trap_weights[1][1][0], abs=1e-3), "s1 t1 attends to s0 t1 in the trap"
    assert right[0, 3] == 0 and trap[0, 1] == 0
    m = multihead.module_check(16, 4, 6, 2, True, 0)
    (weights,) = multihead_figs.weights_figure(m).data
    panels = [weights.z[:, i * 7:i * 7 + 6] for i in range(5)]  # T = 6 columns, then one empty
    assert all(abs(panels[h] - m.weights_item0[h]).max() < 1e-4 for h in range(4))
    assert abs(panels[4] - m.averaged_item0).max() < 1e-4
    assert all(math.isnan(v) for v in weights.z[:, 6]) and len(set(weights.x)) == len(weights.x)


# ---- Multi-head: sentences ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_split_sentence_reads_its_numbers(E, H, T, B):
    s = multihead.head_split(E, H, T, B, 0)
    said = multihead.split_sentence(s)
    if H == 1 or T == 1:
        assert said.startswith(f"With {'one head' if H == 1 else 'one token'}") and f"0 of {T * E}" in said
        assert f"differ by {multihead.short(s.max_abs_diff)}" in said
        return
    d = E // H
    assert f"{s.misplaced_wrong} of the {T * E} numbers" in said
    assert f"features {d}–{2 * d - 1} of token 0 become row 1 of head 0" in said  # T > 1: flat index d is row 1
    assert f"up to {multihead.short(s.max_abs_diff)}" in said and f"all {T} tokens, {d} features each" in said
    # head 0's run under the trap, read against where its numbers went: whole tokens only when H divides T
    mine = [(t, f) for t in range(T) for f in range(E) if s.head_wrong[t][f] == 0]
    assert mine == [(i // E, i % E) for i in range(T * d)]
    whole, rest = divmod(T * d, E)
    assert (rest == 0) == (T % H == 0)
    assert f"reads the next T·d = {T}·{d} = {T * d} numbers" in said
    if rest == 0:
        got = "token 0 whole" if whole == 1 else f"tokens 0–{whole - 1} whole"
        assert f"head 0 gets {got}, since H = {H} divides T = {T}." in said
    else:
        got = " and ".join((["token 0 whole" if whole == 1 else f"tokens 0–{whole - 1} whole"] if whole else [])
                           + [f"features 0–{rest - 1} of token {whole}"])
        assert f"head 0 gets {got}: a run that ends inside a token, since H = {H} does not divide T = {T}." in said
        assert {f for t, f in mine if t == whole} == set(range(rest))


def test_the_run_clause_at_the_edges():
    """H = 4, T = 6 (the defaults): token 0 and half of token 1, not whole tokens; H = 4, T = 3: less than a
    token; H = 2, T = 4: two whole tokens."""
    said = multihead.split_sentence(multihead.head_split(16, 4, 6, 2, 0))
    assert "head 0 gets token 0 whole and features 0–7 of token 1: a run that ends inside a token" in said
    short = multihead.split_sentence(multihead.head_split(16, 4, 3, 1, 0))
    assert "head 0 gets features 0–11 of token 0: a run that ends inside a token" in short
    assert "head 0 gets tokens 0–1 whole, since H = 2 divides T = 4." in multihead.split_sentence(
        multihead.head_split(16, 2, 4, 1, 0))


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_module_sentences_read_their_numbers(E, H, T, B):
    m = multihead.module_check(E, H, T, B, True, 0)
    said = multihead.module_sentence(m)
    for diff in (m.output_diff, m.fast_output_diff):
        assert ("equal bit for bit" if diff == 0 else f"at most {multihead.short(diff)}") in said
    assert m.fused == (H % 2 == 0), "the fast path needs even heads (and the biases, on here)"
    if m.fused:
        assert "the module calls one fused op, `torch._native_multi_head_attention`" in said
    else:
        assert f"with H = {H} (odd) it ran its Python code again" in said
    no_bias = multihead.module_check(E, H, T, B, False, 0)
    assert not no_bias.fused and "bias=False it ran its Python code again" in multihead.module_sentence(no_bias)
    weights = multihead.weights_sentence(m)
    assert str((B, T, T)) in weights and str((B, H, T, T)) in weights
    assert f"the {H} head{'s' if H > 1 else ''} " in weights
    params = multihead.parameters_sentence(m)
    assert f"**{4 * E * E + 4 * E:,}** numbers, equal to 4·{E}² + 4·{E}" in params
    assert params.endswith("The 1 head adds none: it works on all E features." if H == 1 else
                           f"The {H} heads add none: they split E.")
    no_bias = multihead.parameters_sentence(multihead.module_check(E, H, T, B, False, 0))
    assert f"**{4 * E * E:,}** numbers, equal to 4·{E}² =" in no_bias and "plus a bias" not in no_bias


@pytest.mark.parametrize("E, H, T, B", SETTINGS)
def test_batch_first_sentence_reads_its_shapes(E, H, T, B):
    t = multihead.batch_first_trap(E, H, T, B, 0)
    said = multihead.batch_first_sentence(t)
    if B == T == 1:
        assert "each position attends to itself alone in both modules" in said
    else:
        assert (f"attends over the {B} sequences of the batch" if B > 1 else
                "attends over the batch's one sequence, that is, to itself alone,") in said
        assert (f"instead of over the {T} tokens of its own sequence" if T > 1 else
                "instead of over its own sequence's one token, itself") in said
    assert not re.search(r"\b1 (sequences|tokens|heads)\b", said)
    if t.max_abs_diff == 0:
        assert said.startswith(f"With B = {B} and T = {T} both modules return the same numbers (difference 0).")
        return
    assert f"(T={B}, B={T}, E)" in said
    if B == T:
        assert f"keep the shape {(T, B, B)}, since B = T" in said
    else:
        assert f"come back as {(T, B, B)} instead of {(B, T, T)}" in said
    assert f"up to {multihead.short(t.max_abs_diff)}" in said
    right, trap = multihead_figs.attention_grids(t)
    caption = multihead.who_attends_caption(t)
    for q in range(B * T):  # the trap's nonzero weights: the same position t in every sequence
        assert {k % T for k in trap[q].nonzero()[0]} <= {q % T}
        assert {k // T for k in right[q].nonzero()[0]} == {q // T}
    if B > 1:
        assert f"token t of all {B} sequences" in caption
        assert all(len(trap[q].nonzero()[0]) == B for q in range(B * T))
    else:
        assert "attend only to itself" in caption and (trap.diagonal() > 0.999).all()


# ---- The block: oracles ------------------------------------------------------------------------------------------

BLOCK_SETTINGS = [(32, 4, 8, 2, "relu"), (16, 4, 6, 2, "gelu"), (8, 1, 1, 1, "relu"), (64, 8, 16, 4, "gelu"),
                  (24, 2, 5, 3, "relu")]


def reference_block(x, layer, gelu: bool):
    """A transformer encoder block written independently of the demo: nn.functional's own attention forward."""
    attn = layer.self_attn
    E = x.shape[-1]

    def sa(t):
        out, _ = F.multi_head_attention_forward(
            t.transpose(0, 1), t.transpose(0, 1), t.transpose(0, 1), E, attn.num_heads, attn.in_proj_weight,
            attn.in_proj_bias, None, None, False, 0.0, attn.out_proj.weight, attn.out_proj.bias,
            training=False, need_weights=False)
        return out.transpose(0, 1)

    def ff(t):
        return layer.linear2((F.gelu if gelu else F.relu)(layer.linear1(t)))

    n1, n2 = layer.norm1, layer.norm2
    if layer.norm_first:
        x = x + sa(n1(x))
        return x + ff(n2(x))
    x = n1(x + sa(x))
    return n2(x + ff(x))


@pytest.mark.parametrize("E, H, T, B, act", BLOCK_SETTINGS)
def test_block_equals_the_layer_and_names_the_path(E, H, T, B, act):
    e = block.block_equivalence(E, H, T, B, act, 1e-6, 0)
    assert [(r[0], r[1]) for r in e.rows] == [(nf, run) for nf in (False, True) for run in block.RUNS]
    x = torch.randn(B, T, E, generator=torch.Generator().manual_seed(1))
    for norm_first in (False, True):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(E, H, 4 * E, 0.0, act, 1e-6, batch_first=True, norm_first=norm_first)
        with torch.no_grad():
            ours = reference_block(x, layer, act == "gelu")
            assert torch.allclose(layer.eval()(x), ours, atol=1e-5)
        for run in block.RUNS[:2]:
            assert e.row(norm_first, run)[2] < 1e-5
        assert e.row(norm_first, block.RUNS[2])[2] > 1e-3, "dropout=0.1 in train() changes the output"
        eval_path = e.row(norm_first, block.RUNS[0])[3]
        assert (eval_path == "fused fast path") == (H % 2 == 0)
        assert all(e.row(norm_first, run)[3].startswith("Python path") for run in block.RUNS[1:])


@pytest.mark.parametrize("E, H, T, B, act", BLOCK_SETTINGS)
def test_costs_match_torch_and_their_formulas(E, H, T, B, act):
    c = block.block_costs(E, H, T, B, act, 0)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, 4 * E, 0.0, act, batch_first=True)
    assert c.parameter_count == sum(p.numel() for p in layer.parameters()) == 12 * E * E + 13 * E
    assert c.parameter_parts == c.parameter_formula
    x = torch.randn(B, T, E)
    with FlopCounterMode(display=False) as counter:
        reference_block(x, layer, act == "gelu")
    # nn.functional's attention runs the same CPU kernel as the layer: the weights' matmuls only
    assert counter.get_total_flops() == B * T * 24 * E * E == c.flops_layer * B * T
    assert c.flops_by_hand == c.formula_flops == 24 * E * E + 4 * T * E
    assert c.attention_kernels == ["aten._scaled_dot_product_flash_attention_for_cpu.default"]
    k = 12 if act == "relu" else 16
    assert c.bytes_layer == c.formula_bytes_layer == 4 * (k * E + H + 4)
    assert c.bytes_by_hand == c.formula_bytes_by_hand == 4 * (k * E + H * T + 4)
    assert c.layer_bytes == B * T * c.bytes_layer


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("E, H, T, B, act", BLOCK_SETTINGS[:3])
def test_saved_bytes_formula_holds_for_pre_norm_too(E, H, T, B, act, norm_first):
    layer = block.make_block(E, H, act, norm_first, 1e-5, 0.0, 0).train()
    x = torch.randn(B, T, E)
    seen = {}
    params = {p.data_ptr() for p in layer.parameters()}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    assert sum(seen.values()) == B * T * 4 * sum(block.memory_formula(E, H, T, act, kept_weights=False).values())


def test_block_figure_draws_the_formula_and_the_measurements():
    e = block.block_equivalence(16, 4, 6, 2, "relu", 1e-5, 0)
    c = block.block_costs(16, 4, 6, 2, "relu", 0)
    fig = block_figs.block_figure(e, c)
    diffs = [t for t in fig.data if t.name and t.name.startswith("norm_first")]
    assert [list(t.y) for t in diffs] == [[max(e.row(nf, run)[2], block_figs.ZERO_FLOOR) for run in block.RUNS]
                                          for nf in (False, True)]
    measured = [list(t.y) for t in fig.data if t.name == "measured by torch"]
    assert measured == [[c.parameter_count], [c.flops_by_hand, c.flops_layer], [c.bytes_by_hand, c.bytes_layer]]
    flops_bars = [t for t in fig.data if t.type == "bar" and t.xaxis == "x3"]
    assert sum(t.y[0] for t in flops_bars) == c.formula_flops
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert len(legend) == len(set(legend)), "each part is named once"


# ---- The block: sentences ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("E, H, T, B, act", BLOCK_SETTINGS)
def test_block_sentences_read_their_numbers(E, H, T, B, act):
    e = block.block_equivalence(E, H, T, B, act, 1e-5, 0)
    for norm_first in (False, True):
        said = block.equivalence_sentence(e, norm_first)
        assert ("Pre-norm" if norm_first else "Post-norm") in said
        for run in block.RUNS[:2]:
            _, _, diff, path = e.row(norm_first, run)
            assert f"{block.short(diff)} in" in said and f"({path})" in said
    path = block.path_sentence(e)
    if H % 2:
        assert f"needs an even number of heads and H = {H}" in path
    else:
        assert "calls one fused op" in path
    assert "matches the block written by hand to float32 rounding (at most" in path
    dropout = block.dropout_sentence(e)
    assert all(f"{block.short(e.row(nf, block.RUNS[2])[2])} ({name})" in dropout
               for nf, name in ((False, "post-norm"), (True, "pre-norm")))

    c = block.block_costs(E, H, T, B, act, 0)
    params = block.parameters_sentence(c)
    assert f"**{12 * E * E + 13 * E:,}**" in params and f"equal to 12E² + 13E = 12·{E}² + 13·{E}" in params
    flops = block.flops_sentence(c)
    assert f"24·{E}² + 4·{T}·{E} = {24 * E * E:,} + {4 * T * E:,} = **{24 * E * E + 4 * T * E:,}**" in flops
    assert f"counts {24 * E * E + 4 * T * E:,} per token on the block by hand (equal)" in flops
    assert f"it counts {24 * E * E:,}, exactly the 4·T·E term ({4 * T * E:,}) fewer" in flops
    assert f"T > 6E = {6 * E}" in flops
    memory = block.memory_sentence(c)
    k = 12 if act == "relu" else 16
    assert f"**{4 * (k * E + H + 4):,} bytes per token**" in memory
    assert f"equal to 4·({k}E + H + 4) = 4·({k}·{E} + {H} + 4) = {4 * (k * E + H + 4):,}" in memory
    assert f"keeps {4 * (k * E + H * T + 4):,}, equal to" in memory
    assert f"{B}×{T} tokens keeps {B * T * 4 * (k * E + H + 4):,} bytes" in memory
    assert "(/memory?mem_tab=Training+step)" in memory


# ---- validation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    ((12, 4, 6, 2, 0), "Embedding size E must be one of 8, 16, 24, 32, 48, 64; got 12."),
    ((16, 3, 6, 2, 0), "Heads H must be one of 1, 2, 4, 8; got 3."),
    ((16, 4, 0, 2, 0), "Tokens T must be between 1 and 16; got 0."),
    ((16, 4, 17, 2, 0), "Tokens T must be between 1 and 16; got 17."),
    ((16, 4, 6, 5, 0), "Batch B must be between 1 and 4; got 5."),
    ((16, 4, 6, 2, -1), "Seed must be between 0 and 9999; got -1."),
])
def test_multihead_refuses_bad_settings_in_a_sentence(args, message):
    for fn in (multihead.head_split, multihead.batch_first_trap):
        with pytest.raises(InputError, match=re.escape(message)):
            fn(*args)
    with pytest.raises(InputError, match=re.escape(message)):
        multihead.module_check(*args[:4], True, args[4])


@pytest.mark.parametrize("args, message", [
    ((12, 4, 6, 2, "relu"), "Model width E must be one of 8, 16, 24, 32, 48, 64; got 12."),
    ((16, 6, 6, 2, "relu"), "Heads H must be one of 1, 2, 4, 8; got 6."),
    ((16, 4, 99, 2, "relu"), "Tokens T must be between 1 and 16; got 99."),
    ((16, 4, 6, 0, "relu"), "Batch B must be between 1 and 4; got 0."),
    ((16, 4, 6, 2, "tanh"), "Activation must be relu or gelu; got `tanh`."),
])
def test_block_refuses_bad_settings_in_a_sentence(args, message):
    with pytest.raises(InputError, match=re.escape(message)):
        block.block_costs(*args, 0)
    with pytest.raises(InputError, match=re.escape(message)):
        block.block_equivalence(*args, 1e-5, 0)
    with pytest.raises(InputError, match=re.escape("layer_norm_eps must be one of 1e-05, 1e-06, 1e-12; got `0.1`.")):
        block.block_equivalence(16, 4, 6, 2, "relu", 0.1, 0)


# ---- the page shows these sentences ------------------------------------------------------------------------------


def shown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.parametrize("query, args", [
    ({}, (16, 4, 6, 2, True, 0)),
    ({"tf_mha_heads": "1", "tf_mha_tokens": "3", "tf_mha_bias": "false", "tf_mha_batch": "3"}, (16, 1, 3, 3, False, 0)),
])
def test_multihead_view_shows_the_sentences_of_its_settings(query, args):
    at = open_page(PAGE, query={"tf_tab": "Multi-head", **query})
    assert_clean(at)
    E, H, T, B, bias, seed = args
    text = shown_text(at)
    assert "the next T·d numbers, T/H tokens' worth, which are whole tokens only when H divides T" in text
    assert "a run of whole tokens' features" not in text  # untrue at the defaults: T·d = 24 of E = 16
    assert multihead.split_sentence(multihead.head_split(E, H, T, B, seed)) in text
    check = multihead.module_check(E, H, T, B, bias, seed)
    for sentence in (multihead.module_sentence(check), multihead.parameters_sentence(check),
                     multihead.weights_sentence(check)):
        assert sentence in text
    trap = multihead.batch_first_trap(E, H, T, B, seed)
    assert multihead.batch_first_sentence(trap) in text and multihead.who_attends_caption(trap) in text
    assert len(at.get("plotly_chart")) == 3


@pytest.mark.parametrize("query, args", [
    ({}, (32, 4, 8, 2, "relu", 1e-5, 0)),
    ({"tf_block_heads": "1", "tf_block_act": "gelu", "tf_block_embed": "16", "tf_block_eps": "1e-06"},
     (16, 1, 8, 2, "gelu", 1e-6, 0)),
])
def test_block_view_shows_the_sentences_of_its_settings(query, args):
    at = open_page(PAGE, query={"tf_tab": "The block", **query})
    assert_clean(at)
    E, H, T, B, act, eps, seed = args
    text = shown_text(at)
    e = block.block_equivalence(E, H, T, B, act, eps, seed)
    c = block.block_costs(E, H, T, B, act, seed)
    for sentence in (block.equivalence_sentence(e, False), block.equivalence_sentence(e, True),
                     block.path_sentence(e), block.dropout_sentence(e), block.parameters_sentence(c),
                     block.flops_sentence(c), block.memory_sentence(c)):
        assert sentence in text
    assert len(at.get("plotly_chart")) == 1


def test_questions_answer_what_their_explanations_say():
    answers = {q.key: q.run() for q in (*multihead.QUESTIONS, *block.QUESTIONS)}
    assert answers["tf_mha_params"] == 4 * 32 * 32 + 4 * 32 and answers["tf_mha_batch_first"] == (5, 3, 3)
    assert answers["tf_mha_split"] is False and answers["tf_mha_need_weights"] == (2, 6, 6)
    assert answers["tf_block_params"] == 12 * 16 * 16 + 13 * 16 and answers["tf_block_dropout"] is False
    assert answers["tf_block_flops"] == 4 * 24 * 16 * 16 and answers["tf_block_saved"] == 4 * (12 * 8 + 2 + 4)
