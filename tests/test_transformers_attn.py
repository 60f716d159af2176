"""The Attention and From scratch views: every number equals what torch computes when asked directly, every shown
sentence says what its numbers say, and bad values are sentences."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from demos.errors import InputError
from demos.transformers import attention, scratch
from demos.transformers.figures import attention as attention_figs
from demos.transformers.figures import scratch as scratch_figs

pytestmark = pytest.mark.usefixtures("one_thread")

STEP_SETTINGS = [(6, 16, 8, "causal", 2, 0), (4, 3, 1, "none", 2, 5), (9, 12, 16, "key padding", 3, 7),
                 (2, 1, 64, "key padding", 1, 1), (16, 64, 5, "causal", 2, 9)]


def tensor(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


# ---- attention, step by step -----------------------------------------------------------------------------------


@pytest.mark.parametrize("settings", STEP_SETTINGS)
def test_every_step_equals_softmax_of_scaled_masked_scores_computed_directly(settings):
    tokens, width, d_k, mask, pad, seed = settings
    r = attention.attention_steps(*settings)
    q, k, v = (tensor(r.matrices[n]) for n in ("q", "k", "v"))
    assert q.shape == (tokens, d_k) and r.shapes["scores"] == (1, 1, tokens, tokens)
    allowed = torch.ones(tokens, tokens, dtype=torch.bool)
    if mask == "causal":
        allowed = torch.ones(tokens, tokens).tril().bool()
    elif mask == "key padding":
        allowed[:, tokens - pad:] = False
    scores = q @ k.T
    weights = torch.softmax((scores / d_k**0.5).masked_fill(~allowed, -math.inf), dim=-1)
    torch.testing.assert_close(tensor(r.matrices["scores"]), scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tensor(r.matrices["weights"]), weights, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tensor(r.matrices["out"]), weights @ v, rtol=1e-5, atol=1e-5)
    masked = tensor(r.matrices["masked"])
    assert torch.equal(masked == -math.inf, ~allowed) and r.masked_keys == int((~allowed).sum())
    direct = F.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], attn_mask=allowed)
    assert (direct[0, 0] - tensor(r.matrices["out"])).abs().max() <= 1e-5
    assert 0 <= r.max_abs_diff < 1e-5


def test_the_projections_are_three_seeded_linear_layers_of_the_input():
    r = attention.attention_steps(5, 7, 3, "none", 2, 4)
    torch.manual_seed(4)
    x = torch.randn(1, 1, 5, 7)
    layers = [torch.nn.Linear(7, 3, bias=False) for _ in range(3)]
    assert torch.equal(tensor(r.matrices["x"]), x[0, 0])
    for name, layer in zip("qkv", layers, strict=True):
        torch.testing.assert_close(tensor(r.matrices[name]), layer(x)[0, 0].detach())


def test_the_backend_named_is_the_one_the_profiler_sees():
    r = attention.attention_steps(6, 16, 8, "causal", 2, 0)
    q = torch.randn(1, 1, 6, 8)
    with torch.profiler.profile() as prof:
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(6, 6, dtype=torch.bool).tril())
    names = {e.name for e in prof.events()}
    kernel = {"FLASH_ATTENTION": "aten::_scaled_dot_product_flash_attention_for_cpu",
              "MATH": "aten::_scaled_dot_product_attention_math"}[r.kernel]
    assert kernel in names


def test_is_causal_is_compared_only_for_the_causal_mask_and_agrees():
    assert attention.attention_steps(6, 16, 8, "causal", 2, 0).is_causal_diff <= 1e-6
    assert attention.attention_steps(6, 16, 8, "none", 2, 0).is_causal_diff is None


@pytest.mark.parametrize("settings", STEP_SETTINGS)
def test_step_sentences_read_the_run(settings):
    r = attention.attention_steps(*settings)
    items = attention.steps_sentences(r)
    assert str(r.shapes["q"]) in items[0] and f"nn.Linear({r.width}, {r.d_k}" in items[0]
    assert f"√{r.d_k} = {math.sqrt(r.d_k):.3g}" in items[2]
    if r.masked_keys:
        assert f"{r.masked_keys} of the {r.tokens**2} scores" in items[3]
    else:
        assert "None" in items[3] and r.mask == "none"
    last = re.search(r"row is \[(.*)\]", items[4]).group(1).split(", ")
    assert [float(x) for x in last] == pytest.approx([round(w, 3) for w in r.matrices["weights"][-1]], abs=1e-3)
    assert sum(float(x) for x in last) == pytest.approx(1, abs=0.01)
    check = attention.check_sentence(r)
    assert f"the {r.kernel} backend ran" in check and attention.fmt(r.max_abs_diff) in check
    assert ("agree exactly" in check) == (r.is_causal_diff == 0)
    assert ("is_causal" in check) == (r.mask == "causal")


def test_the_steps_figure_draws_every_step_with_its_shape_and_blanks_the_masked_scores():
    r = attention.attention_steps(6, 16, 8, "causal", 2, 0)
    fig = attention_figs.steps_figure(r)
    titles = [a.text for a in fig.layout.annotations]
    assert len(fig.data) == 8 and all(str(r.shapes[n]) in " ".join(titles) for n in ("x", "q", "scores", "out"))
    masked = fig.data[5].z
    assert sum(v is None for row in masked for v in row) == r.masked_keys == 15


# ---- why divide by √d_k --------------------------------------------------------------------------------------------


def test_scaling_statistics_equal_a_direct_computation():
    r = attention.scaling_curves(12, 256, 3)
    for i, d in enumerate(r.d_k):
        for label, scale in (("scaled", True), ("unscaled", False)):
            g = torch.Generator().manual_seed(3)
            q, k = torch.randn(attention.QUERIES, d, generator=g), torch.randn(12, d, generator=g)
            upstream = torch.randn(attention.QUERIES, 12, generator=g)
            s = q @ k.T / (d**0.5 if scale else 1)
            p = torch.softmax(s, -1)
            grad = p * (upstream - (p * upstream).sum(-1, keepdim=True))  # softmax's Jacobian applied by hand
            grad_q = grad @ k / (d**0.5 if scale else 1)  # the chain rule through q·k (/√d_k), by hand
            jacobian = torch.stack([torch.autograd.functional.jacobian(lambda row: torch.softmax(row, -1), row)
                                    for row in s[:4]])
            stats = getattr(r, label)[i]
            assert stats["entropy"] == pytest.approx(torch.distributions.Categorical(probs=p).entropy().mean().item(),
                                                     rel=1e-4, abs=1e-6)
            assert stats["top_weight"] == pytest.approx(p.max(-1).values.mean().item(), rel=1e-5)
            assert stats["grad_input"] == pytest.approx(grad.norm(dim=-1).mean().item(), rel=1e-4)
            assert stats["grad_q"] == pytest.approx(grad_q.norm(dim=-1).mean().item(), rel=1e-4)
            pairs = attention.QUERIES * 12  # a few pairs sit at the threshold, within float32 rounding of it
            assert stats["starved"] == pytest.approx(
                (grad.abs() < 1e-3 * grad.abs().amax(-1, keepdim=True)).double().mean().item(), abs=4 / pairs)
            by_hand = (torch.diag_embed(p) - p[:, :, None] * p[:, None, :]).norm(dim=(-2, -1))
            torch.testing.assert_close(jacobian.norm(dim=(-2, -1)), by_hand[:4], rtol=1e-5, atol=1e-7)
            assert stats["jacobian"] == pytest.approx(by_hand.mean().item(), rel=1e-4)
            assert stats["score_std"] == pytest.approx(s.std().item(), rel=1e-5)


def test_scaling_keeps_the_softmax_spread_and_its_gradient_while_unscaled_collapses():
    r = attention.scaling_curves(16, 4096, 0)
    assert r.d_k == tuple(2**p for p in range(13))
    assert all(0.8 < s["score_std"] < 1.2 for s in r.scaled)
    assert r.unscaled[-1]["score_std"] == pytest.approx(64, rel=0.1)  # √4096
    assert r.unscaled[-1]["top_weight"] > 0.9 and r.scaled[-1]["top_weight"] < 0.4
    # the gradient at the softmax's input shrinks, but q itself gets more of it unscaled: the unscaled scores move
    # √d_k = 64 times as far per unit of q
    assert r.unscaled[-1]["grad_input"] < r.scaled[-1]["grad_input"] / 4
    assert r.unscaled[-1]["grad_q"] > r.scaled[-1]["grad_q"]
    assert r.unscaled[-1]["jacobian"] < r.scaled[-1]["jacobian"] / 4
    assert r.unscaled[-1]["starved"] > 0.8 > 0.1 > r.scaled[-1]["starved"]


@pytest.mark.parametrize("keys, largest", [(16, 1024), (2, 16), (64, 4096)])
def test_scaling_sentence_reads_the_largest_d_k(keys, largest):
    r = attention.scaling_curves(keys, largest, 0)
    text = attention.scaling_sentence(r)
    s, u = r.scaled[-1], r.unscaled[-1]
    for number in (u["score_std"], s["score_std"], u["top_weight"], u["entropy"], s["top_weight"], s["entropy"],
                   1 / keys, math.log(keys)):
        assert attention.fmt(number) in text
    assert f"d_k = {largest}" in text and f"over {keys} keys" in text
    assert "gradient" not in text, "the gradients have their own sentence, which says which tensor each is at"


@pytest.mark.parametrize("keys, largest, seed", [(16, 1024, 0), (16, 16, 0), (2, 16, 0), (64, 4096, 3),
                                                 (8, 64, 5), (2, 4096, 0), (64, 16, 0)])
def test_gradient_sentence_says_which_tensor_and_reads_the_numbers(keys, largest, seed):
    r = attention.scaling_curves(keys, largest, seed)
    text = attention.gradient_sentence(r)
    s, u = r.scaled[-1], r.unscaled[-1]
    q_ratio = u["grad_q"] / s["grad_q"]
    assert (f"unscaled is {attention.fmt(u['grad_q'])} against scaled {attention.fmt(s['grad_q'])}, "
            f"{attention.fmt(q_ratio)}× as much: q gets {'more' if q_ratio > 1 else 'less'} gradient") in text
    input_ratio = u["grad_input"] / s["grad_input"]
    assert f"√{largest} = {attention.fmt(math.sqrt(largest))} times as far" in text
    if q_ratio > 1 and input_ratio < 1:  # the reason given: √d_k per unit of q outweighs the shrink at the input
        assert f"outweighs the {attention.fmt(input_ratio)}× at the softmax's input" in text
    elif q_ratio > 1:
        assert f"the gradient is also {attention.fmt(input_ratio)}× at the softmax's input" in text
    else:
        assert f"does not make up for the {attention.fmt(input_ratio)}× at the softmax's input" in text
    assert (f"it is {attention.fmt(u['grad_input'])} against {attention.fmt(s['grad_input'])}" in text
            and "different tensors" in text)
    assert f"norm {attention.fmt(u['jacobian'])} unscaled against {attention.fmt(s['jacobian'])} scaled" in text
    assert f"{u['starved']:.0%} of the (query, key)" in text and f"({s['starved']:.0%} scaled)" in text
    saturated = "the unscaled softmax is saturated" in text
    assert saturated == (u["top_weight"] > max(0.5, s["top_weight"]) and u["jacobian"] < s["jacobian"]
                         and u["starved"] > s["starved"])
    if saturated:
        assert f"({attention.fmt(u['top_weight'])} on average)" in text
        assert ("not a small gradient at q" in text) == (q_ratio > 1)
    assert ("q gets less gradient" in text) == (q_ratio < 1)


def test_the_scaling_figure_draws_what_each_panel_title_names():
    r = attention.scaling_curves(16, 1024, 0)
    fig = attention_figs.scaling_figure(r)
    titles = [a.text for a in fig.layout.annotations]
    assert "‖∂loss/∂q‖ per query (same q both ways)" in titles
    by_axis = {(t.name, t.yaxis): list(t.y) for t in fig.data if t.legendgroup in ("scaled", "unscaled")}
    assert by_axis[("QKᵀ", "y3")] == list(r.series("unscaled", "grad_q"))
    assert by_axis[("QKᵀ/√d_k", "y4")] == list(r.series("scaled", "starved"))


# ---- the fully masked row ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, pad, seed", [(5, 2, 0), (3, 1, 4), (8, 7, 2)])
def test_fully_masked_rows_against_direct_calls(tokens, pad, seed):
    r = attention.fully_masked_rows(tokens, pad, seed)
    torch.manual_seed(seed)
    q, k, v = (torch.randn(1, 1, tokens, 4) for _ in range(3))
    allowed = torch.ones(tokens, tokens).tril().bool()
    allowed[:, :pad] = False
    assert [list(row) for row in r.allowed] == allowed.tolist()
    hand = r.row("by hand, masked_fill(-inf)")
    assert hand["nan_output"] and hand["nan_grads"] == ["v"] and all(math.isnan(x) for x in hand["masked_rows"][0])
    # finfo.min makes a masked row's scores all equal: softmax is uniform, the output V's mean over every key
    fmin = r.row("by hand, masked_fill(finfo.min)")
    assert fmin["masked_rows"][0] == pytest.approx(v[0, 0].mean(0).tolist(), abs=1e-5)
    itself = r.row("by hand, padding queries see themselves")
    torch.testing.assert_close(torch.tensor(itself["masked_rows"]), v[0, 0, :pad])
    assert itself["real_rows_diff"] == 0
    for backend in attention.BACKENDS:
        additive = torch.zeros(tokens, tokens).masked_fill(~allowed, -math.inf)
        for kind, mask in (("bool", allowed), ("-inf float", additive)):
            row = r.row(f"SDPA {backend}, {kind} mask")
            try:
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    direct = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            except RuntimeError as err:
                assert not row["ran"] and row["refusal"] in str(err)
                continue
            assert row["ran"] and row["kernel"] == backend
            assert row["masked_rows"] == direct[0, 0, :pad].tolist()
            assert row["real_rows_diff"] < 1e-5 and not row["nan_grads"]


def test_on_this_build_math_and_flash_run_and_return_zeros_the_others_refuse():
    r = attention.fully_masked_rows(5, 2, 0)
    ran = {x["method"] for x in r.ran if x["method"].startswith("SDPA ")}
    assert {m.split()[1].rstrip(",") for m in ran} >= {"MATH", "FLASH_ATTENTION"}
    assert r.row("SDPA, bool mask (SDPA picks)")["kernel"] == "FLASH_ATTENTION"


@pytest.mark.parametrize("tokens, pad", [(5, 2), (3, 1), (8, 7)])
def test_masked_row_sentences_read_the_rows(tokens, pad):
    r = attention.fully_masked_rows(tokens, pad, 0)
    items = attention.masked_rows_sentences(r)
    assert attention.rows_label(pad) in items[0]
    assert ("the gradient of V holds NaN" in items[0]) == (r.row("by hand, masked_fill(-inf)")["nan_grads"] == ["v"])
    for row in r.ran:
        if row["method"].startswith("SDPA ") and "picks" not in row["method"]:
            backend, kind = row["method"].removeprefix("SDPA ").removesuffix(" mask").split(", ")
            said = re.search(re.escape(backend) + r" \(([^)]*) masks?\)[^;]*? returned ([^;]+?)[;.]", items[2])
            assert said and said.group(2) == attention.said(row) and kind.replace("-inf", "−∞") in said.group(1)
    for row in r.rows:
        if not row["ran"]:
            assert row["method"].split()[1].rstrip(",") in items[2] and "refused" in items[2]
    assert f"SDPA ran {r.row('SDPA, bool mask (SDPA picks)')['kernel']}" in items[2]
    fixed = r.row("by hand, padding queries see themselves")
    assert f"by {attention.fmt(fixed['real_rows_diff'])})" in items[3] and "the gradients stay finite" in items[3]
    # dropping the padding rows from the loss (what every method here does) does not clear the −∞ version's NaN
    assert "drop the padding queries' outputs" not in items[3]
    nan = [x for x in r.ran if x["nan_grads"]]
    assert nan == [r.row("by hand, masked_fill(-inf)")]
    assert "is not enough where the row comes out NaN" in items[3] and "“by hand, masked_fill(-inf)”: V" in items[3]
    clean = [x for x in r.ran if not x["nan_grads"] and x is not fixed]
    assert f"({len(clean)} of the methods that ran, SDPA's zeros among them), dropping it is enough" in items[3]
    assert all(attention.outcome(x) != "NaN" for x in clean)
    assert attention.outcome(r.row("by hand, masked_fill(finfo.min)")) == "numbers"
    table = attention.masked_rows_table(r)
    assert [t["method"] for t in table] == [x["method"] for x in r.rows]
    assert all((t["NaN in output"] == "yes") == x["nan_output"] for t, x in zip(table, r.rows, strict=True)
               if x["ran"])
    column = "inputs with NaN in their gradient (loss on the real rows only)"
    assert all(t[column] == (", ".join(x["nan_grads"]) or "none") for t, x in zip(table, r.rows, strict=True)
               if x["ran"])


def test_the_masked_rows_figure_colours_each_row_by_what_came_out():
    r = attention.fully_masked_rows(5, 2, 0)
    fig = attention_figs.masked_rows_figure(r)
    mask, outputs = fig.data[0], fig.data[1]
    assert mask.z[0] == [2] * 5 and mask.z[4] == [1, 1, 0, 0, 0]  # no key / masked / may attend
    kinds = list(attention_figs.OUTCOME_CELLS)
    assert [kinds[row[0]] for row in outputs.z] == [attention.outcome(x) for x in r.ran]
    assert len(set(outputs.y)) == len(r.ran), "the short labels stay distinct"


# ---- memory ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, heads, head_dim", [(1, 32, 128), (4, 8, 64), (64, 128, 256)])
def test_memory_bytes_equal_the_shapes_arithmetic(batch, heads, head_dim):
    r = attention.score_memory(batch, heads, head_dim)
    for name, size in (("float32", 4), ("bfloat16", 2)):
        for t, row in zip(r.lengths, r.by_dtype[name], strict=True):
            assert row["scores"] == batch * heads * t * t * size
            assert row["fused"] == batch * heads * t * head_dim * size + batch * heads * t * 4  # logsumexp: float32
    assert r.lengths[-1] == 32768


def test_saved_tensors_math_keeps_t_by_t_flash_does_not():
    r = attention.score_memory(1, 32, 128)
    t = attention.SAVED_SHAPE[2]
    math_saved = r.saved["MATH"]["saved"]
    flash_saved = r.saved["FLASH_ATTENTION"]["saved"]
    assert any(shape[-2:] == (t, t) for shape, *_ in math_saved)
    assert not any(shape[-2:] == (t, t) for shape, *_ in flash_saved)
    assert r.saved["FLASH_ATTENTION"]["kernel"] == "FLASH_ATTENTION" and r.saved["MATH"]["kernel"] == "MATH"


@pytest.mark.parametrize("shape", [attention.SAVED_SHAPE, (2, 3, 8, 4)])
def test_the_saved_sentence_counts_storages_not_handles(monkeypatch, shape):
    monkeypatch.setattr(attention, "SAVED_SHAPE", shape)
    facts = attention.saved_for_backward("MATH")
    q, k, v = (torch.randn(shape, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    ptrs = []

    def keep(x):
        ptrs.append((tuple(x.shape), x.untyped_storage().data_ptr(), x.untyped_storage().nbytes()))
        return x
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda x: x), sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(q, k, v)
    assert [s[0] for s in facts["saved"]] == [s[0] for s in ptrs]
    # the storage numbers group the tensors exactly as their data pointers do
    assert [[a[2] == b[2] for b in facts["saved"]] for a in facts["saved"]] == \
        [[a[1] == b[1] for b in ptrs] for a in ptrs]
    t = shape[2]
    square = {p: n for sh, p, n in ptrs if sh[-2:] == (t, t)}
    assert len(square) == 1 and next(iter(square.values())) == math.prod(shape[:2]) * t * t * 4  # float32
    r = attention.MemoryResult(1, 1, 8, attention.LENGTHS, {}, {"MATH": facts}, None)
    text = attention.saved_sentence(r)
    handles = sum(sh[-2:] == (t, t) for sh, _, _ in ptrs)
    assert handles == 2, "the softmax output and its bmm view"
    assert (f"saved {len(ptrs)} tensors in {len({p for _, p, _ in ptrs})} storages" in text
            and f"{handles} of the tensors are T×T" in text
            and f"share storage: 1 T×T buffer of {next(iter(square.values())):,} bytes is kept" in text)


@pytest.mark.parametrize("batch, heads, head_dim", [(1, 32, 128), (3, 5, 8)])
def test_memory_sentences_read_the_bytes(batch, heads, head_dim):
    r = attention.score_memory(batch, heads, head_dim)
    text = attention.memory_sentence(r)
    last = {name: rows[-1] for name, rows in r.by_dtype.items()}
    for name in ("float32", "bfloat16"):
        assert attention.fmt_bytes(last[name]["scores"]) in text and attention.fmt_bytes(last[name]["fused"]) in text
    assert "by 4 and the fused kernel's bytes by 2" in text
    saved = attention.saved_sentence(r)
    for backend, facts in r.saved.items():
        storages = len({n for _, _, n, _ in facts["saved"]})
        node = f"{backend} (autograd node {facts['grad_fn']})"
        assert f"{node} saved {len(facts['saved'])} tensors in {storages} " in saved
    assert attention.fmt_bytes(2**30 * 3 // 2) == "1.5 GiB" and attention.fmt_bytes(5) == "5 B"


# ---- from scratch ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("piece", scratch.PIECES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_from_scratch_piece_matches_torch_called_directly(piece, dtype):
    r = scratch.from_scratch(piece, dtype, 5, 8, 4, 0.3, True, 2)
    tensors, ours, theirs = scratch.all_cases()[piece](5, 8, 4, 0.3, True, 2, getattr(torch, dtype))
    mine = ours(**tensors)
    if piece == "attention":
        direct = F.scaled_dot_product_attention(*tensors.values(), is_causal=True)
    elif piece == "multi-head attention":
        module = torch.nn.MultiheadAttention(8, 4, batch_first=True, dtype=getattr(torch, dtype))
        with torch.no_grad():
            module.in_proj_weight.copy_(tensors["w_in"])
            module.in_proj_bias.copy_(tensors["b_in"])
            module.out_proj.weight.copy_(tensors["w_out"])
            module.out_proj.bias.copy_(tensors["b_out"])
        module.train()  # the reference path, not the inference fast path
        direct = module(tensors["x"], tensors["x"], tensors["x"], need_weights=False)[0].detach()
    elif piece == "LayerNorm":
        direct = F.layer_norm(tensors["x"], (8,), tensors["weight"], tensors["bias"], eps=1e-5)
    elif piece == "RMSNorm":
        norm = torch.nn.RMSNorm(8, eps=1e-6, dtype=getattr(torch, dtype))
        with torch.no_grad():
            norm.weight.copy_(tensors["weight"])
        direct = norm(tensors["x"]).detach()
    elif piece == "dropout":
        torch.manual_seed(2)
        direct = F.dropout(tensors["x"], 0.3, training=True)
    else:
        g = torch.Generator().manual_seed(2)
        torch.randn(10, 8, generator=g, dtype=torch.float64)  # the logits, drawn first
        target = torch.randint(0, 8, (10,), generator=g)
        direct = F.cross_entropy(tensors["logits"], target, reduction="none")
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    assert (mine - direct).abs().max().item() <= tolerance
    assert r.max_abs_diff <= tolerance and r.max_grad_diff <= 10 * tolerance
    shown = torch.tensor(r.ours, dtype=torch.float64).flatten()
    assert shown.tolist() == pytest.approx(mine.double().flatten().tolist(), abs=tolerance)
    assert max(max(row) for row in r.diffs) == r.max_abs_diff


def test_dropout_matches_f_dropout_bit_for_bit_and_keeps_the_expectation():
    for p in (0.0, 0.1, 0.5, 0.9):
        r = scratch.from_scratch("dropout", "float32", 6, 8, 2, p, True, 3)
        assert r.max_abs_diff == 0 and r.max_grad_diff == 0
        e = r.expectation
        assert e["zeroed"] == pytest.approx(p, abs=0.01) and e["mean"] == pytest.approx(1, abs=0.03)
        assert e["kept_values"] == [1 / (1 - p)] or e["kept_values"] == pytest.approx([1 / (1 - p)])


def test_compare_sees_a_wrong_implementation():
    tensors, _, theirs = scratch.case_layer_norm(3, 4, 1, 0.5, False, 0, torch.float64)

    def unbiased(x, weight, bias):  # the classic mistake: LayerNorm's variance divides by n, not n - 1
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt() * weight + bias
    _, _, diff, grad_diff, _ = scratch.compare(unbiased, theirs, tensors, 0)
    assert diff > 1e-2 and grad_diff > 1e-3


def test_gradcheck_passes_for_every_piece_and_fails_for_a_wrong_backward():
    t = scratch.scratch_table(0)
    assert [row["piece"] for row in t.rows] == list(scratch.PIECES)
    assert all(row["gradcheck"] for row in t.rows)
    assert all(row["float64"] < 1e-12 and row["float32"] < 1e-5 and row["grad_float64"] < 1e-12 for row in t.rows)

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradcheck(WrongGrad.apply, (x,), raise_exception=False, fast_mode=True)


@pytest.mark.parametrize("piece, dtype", [("attention", "float32"), ("LayerNorm", "bfloat16"),
                                          ("dropout", "float64"), ("cross-entropy", "float32")])
def test_piece_sentence_reads_the_run(piece, dtype):
    r = scratch.from_scratch(piece, dtype, 4, 6, 2, 0.25, False, 1)
    text = scratch.piece_sentence(r)
    eps = torch.finfo(getattr(torch, dtype)).eps
    assert scratch.TORCH_OPS[piece] in text and str(r.shape) in text
    theirs = torch.tensor(r.theirs, dtype=torch.float64)
    assert r.out_scale == theirs.abs().max().item()
    for diff, scale in ((r.max_abs_diff, r.out_scale), (r.max_grad_diff, r.grad_scale)):
        if diff:  # read against the dtype's spacing at the largest |value|: torch.nextafter gives it
            big = torch.tensor(scale, dtype=getattr(torch, dtype))
            step = (torch.nextafter(big, torch.tensor(math.inf, dtype=big.dtype)) - big).item()
            step = min(step, (big - torch.nextafter(big, torch.tensor(0.0, dtype=big.dtype))).item() * 2)
            assert step == pytest.approx(scratch.ulp(scale, dtype))
            assert (f"{scratch.fmt(diff)}, where the largest |value| is {scratch.fmt(scale)} and {dtype}'s spacing "
                    f"there is {scratch.fmt(step)}: {scratch.fmt(diff / step)} of those steps, "
                    f"{scratch.fmt(diff / scale)} of the largest value") in text
            assert step >= eps * 2 ** math.floor(math.log2(scale)) / 1.0001
        else:
            assert "exactly 0" in text
    assert "machine epsilon" not in text
    if piece == "dropout":
        assert "bit for bit" in text and f"{r.expectation['zeroed']:.2%}" in text and "(p = 25%)" in text
    caption = scratch.table_caption(scratch.scratch_table(1))
    assert "6 of 6 passed" in caption and "seed 1" in caption
    # only the attention case reads `causal`; multi-head attention runs nn.MultiheadAttention without a mask
    assert "the attention row causal" in caption and "multi-head attention unmasked" in caption
    assert caption.count("causal") == 1


def test_the_scratch_figure_draws_every_element_and_its_difference():
    r = scratch.from_scratch("multi-head attention", "float32", 3, 8, 2, 0.5, True, 0)
    fig = scratch_figs.scratch_figure(r)
    assert len(fig.data[1].x) == 2 * 3 * 8
    assert len(fig.data[2].z) == 6 and len(fig.data[2].z[0]) == 8
    assert f"{r.max_abs_diff:.3g}" in fig.layout.annotations[1].text


# ---- bad values ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: attention.attention_steps(1, 16, 8, "causal", 2, 0), "Tokens T must be a whole number from 2 to 16"),
    (lambda: attention.attention_steps(6, 16, 0, "causal", 2, 0), "Head size d_k must be a whole number from 1"),
    (lambda: attention.attention_steps(6, 65, 8, "causal", 2, 0), "Input width E must be a whole number from 1"),
    (lambda: attention.attention_steps(6, 16, 8, "diagonal", 2, 0), "Mask must be one of none, causal"),
    (lambda: attention.attention_steps(6, 16, 8, "key padding", 6, 0),
     "Padding tokens must be a whole number from 1 to 5"),
    (lambda: attention.attention_steps(6, 16, 8, "causal", 2, -1), "Seed must be a whole number from 0"),
    (lambda: attention.scaling_curves(1, 1024, 0), "Keys per query must be a whole number from 2 to 64"),
    (lambda: attention.scaling_curves(16, 100, 0), "Largest d_k must be one of 16, 64, 256, 1024, 4096; got 100."),
    (lambda: attention.fully_masked_rows(9, 2, 0), "Tokens T must be a whole number from 3 to 8"),
    (lambda: attention.fully_masked_rows(5, 5, 0), "Padding tokens must be a whole number from 1 to 4"),
    (lambda: attention.score_memory(0, 32, 128), "Batch B must be a whole number from 1 to 64"),
    (lambda: attention.score_memory(1, 129, 128), "Heads H must be a whole number from 1 to 128"),
    (lambda: attention.score_memory(1, 32, 4), "Head size d must be a whole number from 8 to 256"),
    (lambda: scratch.from_scratch("softmax"), "Piece must be one of attention"),
    (lambda: scratch.from_scratch("attention", "float16"), "Precision must be one of float32"),
    (lambda: scratch.from_scratch("attention", "float32", 17), "Rows T must be a whole number from 1 to 16"),
    (lambda: scratch.from_scratch("attention", "float32", 4, 33), "Width must be a whole number from 2 to 32"),
    (lambda: scratch.from_scratch("multi-head attention", "float32", 4, 6, 4), "Heads must divide the width 6; 4"),
    (lambda: scratch.from_scratch("dropout", "float32", 4, 8, 2, 1.0), "Dropout p must be from 0 to 0.9; got 1.0."),
    (lambda: scratch.from_scratch("dropout", "float32", 4, 8, 2, 0.5, True, True), "Seed must be a whole number"),
    (lambda: scratch.scratch_table(10_000), "Seed must be a whole number from 0 to 9999"),
])
def test_bad_values_are_sentences(call, message):
    with pytest.raises(InputError, match=re.escape(message)):
        call()


def test_the_interview_answer_on_fully_masked_rows_says_what_each_path_returns():
    text = " ".join(open("assets/interview/transformers.md", encoding="utf-8").read().split())
    tokens, pad, width = 5, 2, 8
    allowed = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    allowed[:, :pad] = False
    torch.manual_seed(0)
    x = torch.randn(1, tokens, width)
    said = {}
    for mode, need_weights in (("train", True), ("train", False), ("eval", True)):
        mha = torch.nn.MultiheadAttention(width, 2, batch_first=True).train(mode == "train")
        leaf = x.clone().requires_grad_(mode == "train")
        with torch.set_grad_enabled(mode == "train"):
            out = mha(leaf, leaf, leaf, attn_mask=~allowed, need_weights=need_weights)[0]
        said[mode, need_weights] = "NaN" if out[0, :pad].isnan().any() else "zeros" if (out[0, :pad] == 0).all() \
            else "numbers"
        if mode == "train":
            out[:, pad:].sum().backward()  # the padding rows left out of the loss
            nan = leaf.grad.isnan().any().item() and mha.in_proj_weight.grad.isnan().any().item()
            assert nan == (said[mode, need_weights] == "NaN")
    assert said == {("train", True): "NaN", ("train", False): "zeros", ("eval", True): "NaN"}
    assert ("`nn.MultiheadAttention` returns NaN when training with `need_weights=True` (its own softmax), zeros "
            "with `need_weights=False` (it calls SDPA), and NaN in eval on its fast path") in text
    assert "still holds NaN" in text and "Give every query at least one key" in text
    r = attention.fully_masked_rows(5, 2, 0)
    assert r.row("by hand, masked_fill(-inf)")["nan_grads"] == ["v"] and "V's gradient" in text
