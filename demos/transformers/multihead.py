"""Multi-head attention: the head split done right and wrong, nn.MultiheadAttention rebuilt from its own weights,
its batch_first=False default fed a (B, T, E) tensor, need_weights' average over heads, and its parameter count."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from demos.errors import InputError
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script

IMPORTS = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
MODULE_IMPORTS = IMPORTS + "\nfrom torch.utils._python_dispatch import TorchDispatchMode"
EMBED_CHOICES = (8, 16, 24, 32, 48, 64)  # every one is divisible by every head count offered
HEAD_CHOICES = (1, 2, 4, 8)
MAX_TOKENS, MAX_BATCH, MAX_SEED = 16, 4, 9999


# ---- the torch core (shown in the snippets) -------------------------------------------------------------------


def split_heads(x, heads):
    """(B, T, E) -> (B, H, T, d): head h gets features h*d .. h*d+d-1 of every token."""
    B, T, E = x.shape
    return x.view(B, T, heads, E // heads).transpose(1, 2)


def merge_heads(y):
    """(B, H, T, d) -> (B, T, H*d): the inverse of split_heads."""
    B, H, T, d = y.shape
    return y.transpose(1, 2).reshape(B, T, H * d)


def split_heads_wrong(x, heads):
    """The trap: the same numbers read straight as (B, H, T, d). No error, since the sizes multiply out, but a
    head's row t holds d numbers from wherever they lie in memory, mostly another token's features."""
    B, T, E = x.shape
    return x.view(B, heads, T, E // heads)


def merge_heads_wrong(y):
    """The trap's inverse: (B, H, T, d) read straight back as (B, T, H*d)."""
    B, H, T, d = y.shape
    return y.reshape(B, T, H * d)


def attend(q, k, v):
    """Scaled dot-product attention per head: softmax(q kᵀ / √d) v, and the weights."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


def multihead_by_hand(x, mha, split, merge):
    """nn.MultiheadAttention's forward from its own parameters: q, k and v from the three E×E blocks of
    in_proj_weight (and in_proj_bias), a head split, attention per head, the merge, and out_proj."""
    biases = mha.in_proj_bias.chunk(3) if mha.in_proj_bias is not None else (None, None, None)
    q, k, v = (F.linear(x, w, b) for w, b in zip(mha.in_proj_weight.chunk(3), biases, strict=True))
    out, weights = attend(split(q, mha.num_heads), split(k, mha.num_heads), split(v, mha.num_heads))
    return mha.out_proj(merge(out)), weights


class OpLog(TorchDispatchMode):
    """Records every aten op that runs inside it: a fused fast path is one op, the Python path dozens."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def inputs_and_module(embed, heads, tokens, batch, seed, bias=True):
    """A seeded (B, T, E) input and a batch_first nn.MultiheadAttention with seeded weights."""
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(embed, heads, bias=bias, batch_first=True)
    return torch.randn(batch, tokens, embed), mha


def head_of_each_number(tokens, embed, heads, split):
    """For each (token, feature) of a (1, T, E) input: the head that reads it and the row of that head it lands in.
    The input holds each number's own position, so the split shows where every number went."""
    position = torch.arange(tokens * embed).view(1, tokens, embed)
    where = split(position, heads)[0]  # (H, T, d): position of the number each head reads at (row, column)
    head, row = torch.empty(tokens * embed, dtype=torch.long), torch.empty(tokens * embed, dtype=torch.long)
    head[where.flatten()] = torch.arange(heads).view(heads, 1, 1).expand_as(where).flatten()
    row[where.flatten()] = torch.arange(tokens).view(1, tokens, 1).expand_as(where).flatten()
    return head.view(tokens, embed), row.view(tokens, embed)


def split_facts(embed, heads, tokens, batch, seed):
    """Where each number goes under both splits, how many land in a row of another token, and how far the two
    multi-head outputs are apart on the same weights."""
    x, mha = inputs_and_module(embed, heads, tokens, batch, seed)
    with torch.no_grad():
        right, _ = multihead_by_hand(x, mha, split_heads, merge_heads)
        wrong, _ = multihead_by_hand(x, mha, split_heads_wrong, merge_heads_wrong)
    head_right, row_right = head_of_each_number(tokens, embed, heads, split_heads)
    head_wrong, row_wrong = head_of_each_number(tokens, embed, heads, split_heads_wrong)
    own_token = torch.arange(tokens).view(tokens, 1)
    return dict(
        head_right=head_right.tolist(), row_right=row_right.tolist(),
        head_wrong=head_wrong.tolist(), row_wrong=row_wrong.tolist(),
        misplaced_right=int((row_right != own_token).sum()), misplaced_wrong=int((row_wrong != own_token).sum()),
        max_abs_diff=float((right - wrong).abs().max()), output_max_abs=float(right.abs().max()),
    )


def module_facts(embed, heads, tokens, batch, bias, seed):
    """nn.MultiheadAttention against the same forward written by hand, its need_weights output per head and
    averaged, and its parameters read from the module."""
    x, mha = inputs_and_module(embed, heads, tokens, batch, seed, bias)
    with torch.no_grad():
        mine, per_head = multihead_by_hand(x, mha, split_heads, merge_heads)
        out, averaged = mha(x, x, x)  # need_weights=True and average_attn_weights=True by default
        _, each_head = mha(x, x, x, average_attn_weights=False)
        with OpLog() as log:  # eval, no_grad, no weights: the fused fast path, if the module allows it
            fast, _ = mha.eval()(x, x, x, need_weights=False)
    return dict(
        output_diff=float((out - mine).abs().max()), fast_output_diff=float((fast - mine).abs().max()),
        fused="aten._native_multi_head_attention.default" in log.ops,
        averaged_shape=tuple(averaged.shape), each_head_shape=tuple(each_head.shape),
        each_head_diff=float((each_head - per_head).abs().max()),
        average_diff=float((averaged - per_head.mean(dim=1)).abs().max()),
        weights_item0=per_head[0].tolist(), averaged_item0=averaged[0].tolist(),
        parameters=[(name, tuple(p.shape), p.numel()) for name, p in mha.named_parameters()],
        parameter_count=sum(p.numel() for p in mha.parameters()),
    )


def batch_first_facts(embed, heads, tokens, batch, seed):
    """One set of weights in a batch_first=True and a batch_first=False module, both fed the same (B, T, E)
    tensor: what each returns, and what the second one attended over."""
    x, right_module = inputs_and_module(embed, heads, tokens, batch, seed)
    default_module = nn.MultiheadAttention(embed, heads)  # batch_first=False: expects (T, B, E)
    default_module.load_state_dict(right_module.state_dict())
    with torch.no_grad():
        right, right_weights = right_module(x, x, x)
        trap, trap_weights = default_module(x, x, x)  # no error: (B, T, E) is read as (T=B, B=T, E)
        swapped, _ = right_module(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    return dict(
        right_shape=tuple(right.shape), trap_shape=tuple(trap.shape),
        right_weights_shape=tuple(right_weights.shape), trap_weights_shape=tuple(trap_weights.shape),
        max_abs_diff=float((right - trap).abs().max()), output_max_abs=float(right.abs().max()),
        across_batch_diff=float((trap - swapped.transpose(0, 1)).abs().max()),
        right_weights=right_weights.tolist(), trap_weights=trap_weights.tolist(),
    )


# ---- validation and the entries a page computes -------------------------------------------------------------


def validate(embed: int, heads: int, tokens: int, batch: int, seed: int = 0) -> None:
    if embed not in EMBED_CHOICES:
        raise InputError(f"Embedding size E must be one of {', '.join(map(str, EMBED_CHOICES))}; got {embed}.")
    if heads not in HEAD_CHOICES:
        raise InputError(f"Heads H must be one of {', '.join(map(str, HEAD_CHOICES))}; got {heads}.")
    if not 1 <= tokens <= MAX_TOKENS:
        raise InputError(f"Tokens T must be between 1 and {MAX_TOKENS}; got {tokens}.")
    if not 1 <= batch <= MAX_BATCH:
        raise InputError(f"Batch B must be between 1 and {MAX_BATCH}; got {batch}.")
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be between 0 and {MAX_SEED}; got {seed}.")


def _settings(embed, heads, tokens, batch, seed, **more) -> dict:
    return {"embed": embed, "heads": heads, "tokens": tokens, "batch": batch, **more, "seed": seed}


@dataclass(frozen=True)
class HeadSplit:
    embed: int
    heads: int
    tokens: int
    head_right: list  # (T, E): the head that reads each number under view(B, T, H, d).transpose(1, 2)
    row_right: list  # (T, E): the row (token) of that head it lands in
    head_wrong: list  # the same under view(B, H, T, d)
    row_wrong: list
    misplaced_right: int  # numbers that land in a head row of another token
    misplaced_wrong: int
    max_abs_diff: float  # max |output(right split) - output(wrong split)|, same weights and input
    output_max_abs: float
    code: Script


@entry(16, 4, 6, 2, 0)
def head_split(embed: int = 16, heads: int = 4, tokens: int = 6, batch: int = 2, seed: int = 0) -> HeadSplit:
    """Both head splits of one input: where every number goes, and the outputs they lead to."""
    validate(embed, heads, tokens, batch, seed)
    code = script(split_heads, merge_heads, split_heads_wrong, merge_heads_wrong, attend, multihead_by_hand,
                  inputs_and_module, head_of_each_number, split_facts, imports=IMPORTS,
                  settings=_settings(embed, heads, tokens, batch, seed),
                  run=print_each("split_facts(embed, heads, tokens, batch, seed)"))
    return HeadSplit(embed, heads, tokens, **split_facts(embed, heads, tokens, batch, seed), code=code)


@dataclass(frozen=True)
class ModuleCheck:
    embed: int
    heads: int
    tokens: int
    bias: bool
    output_diff: float  # max |nn.MultiheadAttention - by hand|, need_weights=True (the default)
    fast_output_diff: float  # the same in eval under no_grad with need_weights=False
    fused: bool  # whether that call ran the fused torch._native_multi_head_attention
    averaged_shape: tuple[int, ...]
    each_head_shape: tuple[int, ...]
    each_head_diff: float  # average_attn_weights=False against the weights computed by hand
    average_diff: float  # the default weights against the mean over heads of the weights by hand
    weights_item0: list  # (H, T, T) weights of batch item 0, by hand
    averaged_item0: list  # (T, T) what need_weights returns for item 0
    parameters: list  # (name, shape, numel) per parameter
    parameter_count: int
    code: Script

    @property
    def formula_count(self) -> int:
        """4E² (the q, k, v and output projections) plus 4E biases when bias=True."""
        return 4 * self.embed**2 + (4 * self.embed if self.bias else 0)


@entry(16, 4, 6, 2, True, 0)
def module_check(embed: int = 16, heads: int = 4, tokens: int = 6, batch: int = 2, bias: bool = True,
                 seed: int = 0) -> ModuleCheck:
    """nn.MultiheadAttention rebuilt from in_proj_weight and out_proj, its weights per head and averaged."""
    validate(embed, heads, tokens, batch, seed)
    code = script(split_heads, merge_heads, attend, multihead_by_hand, OpLog, inputs_and_module, module_facts,
                  imports=MODULE_IMPORTS, settings=_settings(embed, heads, tokens, batch, seed, bias=bias),
                  run=print_each("module_facts(embed, heads, tokens, batch, bias, seed)"))
    return ModuleCheck(embed, heads, tokens, bias, **module_facts(embed, heads, tokens, batch, bias, seed), code=code)


@dataclass(frozen=True)
class BatchFirstTrap:
    embed: int
    heads: int
    tokens: int
    batch: int
    right_shape: tuple[int, ...]
    trap_shape: tuple[int, ...]
    right_weights_shape: tuple[int, ...]  # (B, T, T): each token over its own sequence
    trap_weights_shape: tuple[int, ...]  # (T, B, B): each position over the batch
    max_abs_diff: float
    output_max_abs: float
    across_batch_diff: float  # max |trap - the batch_first=True module on x.transpose(0, 1), transposed back|
    right_weights: list
    trap_weights: list
    code: Script


@entry(16, 4, 6, 3, 0)
def batch_first_trap(embed: int = 16, heads: int = 4, tokens: int = 6, batch: int = 2,
                     seed: int = 0) -> BatchFirstTrap:
    """The default batch_first=False fed a (B, T, E) tensor, against batch_first=True on the same weights."""
    validate(embed, heads, tokens, batch, seed)
    code = script(inputs_and_module, batch_first_facts, imports="import torch\nimport torch.nn as nn",
                  settings=_settings(embed, heads, tokens, batch, seed),
                  run=print_each("batch_first_facts(embed, heads, tokens, batch, seed)"))
    return BatchFirstTrap(embed, heads, tokens, batch, **batch_first_facts(embed, heads, tokens, batch, seed),
                          code=code)


# ---- sentences the page shows, read from the numbers ----------------------------------------------------------


def short(value: float) -> str:
    """A difference as the page prints it: 0 when exactly zero, else 3 significant digits."""
    return "0" if value == 0 else f"{value:.3g}"


def apart(value: float) -> str:
    """How far two results are apart, as a phrase: bit for bit equal, or the largest difference."""
    return "are equal bit for bit (difference 0)" if value == 0 else f"differ by at most {short(value)}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def split_sentence(s: HeadSplit) -> str:
    """What the wrong split did to this input, from where its numbers went and how far the outputs moved."""
    total = s.tokens * s.embed
    if s.misplaced_wrong == 0:
        why = "one head" if s.heads == 1 else "one token"
        return (f"With {why} the two views put every number in the same place: 0 of {total} numbers change row, "
                f"and the outputs differ by {short(s.max_abs_diff)}. The trap only shows with H > 1 and T > 1.")
    d = s.embed // s.heads
    head, row = s.head_wrong[0][d], s.row_wrong[0][d]  # token 0's second chunk of d features
    return (f"`view(B, H, T, d)` raises nothing, yet {s.misplaced_wrong} of the {total} numbers land in a head row "
            f"of another token: features {d}–{2 * d - 1} of token 0 become row {row} of head {head}, so that head "
            f"attends with a \"token {row}\" made of token 0's features. On the same weights the outputs differ by "
            f"up to {short(s.max_abs_diff)} (largest |output| {short(s.output_max_abs)}). " + run_clause(s) + " "
            + right_split_clause(s))


def head_run(tokens: int, embed: int, heads: int) -> tuple[int, int]:
    """What head 0 reads under `view(B, H, T, d)`: the first T·d numbers in memory, as (whole tokens, features of
    the next token). Whole tokens only (no features left over) exactly when H divides T."""
    return divmod(tokens * (embed // heads), embed)


def run_clause(s: HeadSplit) -> str:
    """Head 0's run of numbers under the trap, in tokens and features, read from the sizes."""
    d, (whole, rest) = s.embed // s.heads, head_run(s.tokens, s.embed, s.heads)
    parts = (["token 0 whole" if whole == 1 else f"tokens 0–{whole - 1} whole"] if whole else []) + \
        ([f"features 0–{rest - 1} of token {whole}"] if rest else [])
    why = (f", since H = {s.heads} divides T = {s.tokens}" if not rest else
           f": a run that ends inside a token, since H = {s.heads} does not divide T = {s.tokens}")
    return (f"Each head of `view(B, H, T, d)` reads the next T·d = {s.tokens}·{d} = {s.tokens * d} numbers in "
            f"memory, where a token has E = {s.embed}: head 0 gets {' and '.join(parts)}{why}.")


def right_split_clause(s: HeadSplit) -> str:
    if s.misplaced_right == 0:
        return (f"The correct split keeps every number in its own token's row: each head sees all {s.tokens} "
                f"tokens, {s.embed // s.heads} features each.")
    return f"The correct split moved {s.misplaced_right} numbers to another token's row too."


def module_sentence(m: ModuleCheck) -> str:
    head = (f"`nn.MultiheadAttention` and the forward written by hand from its `in_proj_weight` and `out_proj` "
            f"{apart(m.output_diff)} with need_weights=True (the default). ")
    if m.fused:
        return head + ("In eval() under no_grad with need_weights=False the module calls one fused op, "
                       f"`torch._native_multi_head_attention`, and the two {apart(m.fast_output_diff)}.")
    blocked = [why for why, applies in ((f"H = {m.heads} (odd)", m.heads % 2 == 1), ("bias=False", not m.bias))
               if applies]
    return head + ("In eval() under no_grad with need_weights=False the module would call the fused "
                   "`torch._native_multi_head_attention`, which needs an even number of heads and the biases: "
                   f"with {' and '.join(blocked) or 'these settings'} it ran its Python code again, and the two "
                   f"{apart(m.fast_output_diff)}.")


def weights_sentence(m: ModuleCheck) -> str:
    return (f"`need_weights=True` returns shape {m.averaged_shape}: the mean over the {plural(m.heads, 'head')} "
            f"(max |difference| from the mean of the per-head weights by hand: {short(m.average_diff)}). "
            f"`average_attn_weights=False` returns {m.each_head_shape}, one map per head (max |difference| from "
            f"the maps by hand: {short(m.each_head_diff)}).")


def parameters_sentence(m: ModuleCheck) -> str:
    parts = " + ".join(f"`{name}` {'×'.join(map(str, shape))}" for name, shape, _ in m.parameters)
    formula = f"4·{m.embed}² + 4·{m.embed}" if m.bias else f"4·{m.embed}²"
    verdict = "equal to" if m.parameter_count == m.formula_count else "not"
    what = "q, k, v and the output projection, each E×E" + (", plus a bias of E each" if m.bias else "")
    return (f"parameters(): {parts} = **{m.parameter_count:,}** numbers, {verdict} {formula} = {m.formula_count:,} "
            f"({what}). " + ("The 1 head adds none: it works on all E features." if m.heads == 1 else
                             f"The {m.heads} heads add none: they split E."))


def who_attends_caption(t: BatchFirstTrap) -> str:
    """What the two grids show, true for one sequence as for several."""
    trap = (f"the default one, fed (B, T, E), has token t of each sequence attend to token t of all {t.batch} "
            "sequences and to nothing else" if t.batch > 1 else
            "the default one, fed (B, T, E) with one sequence, has each token attend only to itself")
    return (f"**Who attends to whom** (sequence s, token t): the right module keeps each token's weights within "
            f"its own sequence; {trap}.")


def who_attends_clause(batch: int, tokens: int) -> str:
    """Whom a position attends to in the trap, against the right module, in words right for one as for many."""
    if batch == 1 and tokens == 1:
        return "each position attends to itself alone in both modules: one sequence of one token has nothing else"
    over = (f"over the {batch} sequences of the batch" if batch > 1 else
            "over the batch's one sequence, that is, to itself alone,")
    own = f"over the {tokens} tokens of its own sequence" if tokens > 1 else "over its own sequence's one token, itself"
    return f"each position attends {over} instead of {own}"


def batch_first_sentence(t: BatchFirstTrap) -> str:
    """What the default module did with a (B, T, E) tensor, read from its shapes and the measured difference."""
    across = (f"It matches the batch_first=True module run on `x.transpose(0, 1)` (max |difference| "
              f"{short(t.across_batch_diff)}): {who_attends_clause(t.batch, t.tokens)}.")
    if t.max_abs_diff == 0:
        return f"With B = {t.batch} and T = {t.tokens} both modules return the same numbers (difference 0). {across}"
    same = "the same shape" if t.trap_shape == t.right_shape else "another shape"
    weights = (f"its weights come back as {t.trap_weights_shape} instead of {t.right_weights_shape}"
               if t.trap_weights_shape != t.right_weights_shape else
               f"its weights even keep the shape {t.trap_weights_shape}, since B = T, but they mean something else")
    return (f"No error and {same}, {t.trap_shape}: the default module reads (B, T, E) as (T={t.batch}, "
            f"B={t.tokens}, E), and {weights}. {across} The outputs differ by up to {short(t.max_abs_diff)} "
            f"(largest |output| {short(t.output_max_abs)}).")


# ---- predict-then-run questions ----------------------------------------------------------------------------------


def _mha_parameter_count():
    mha = nn.MultiheadAttention(embed_dim=32, num_heads=4)
    return sum(p.numel() for p in mha.parameters())


def _batch_first_default_shape():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(embed_dim=8, num_heads=2)  # batch_first defaults to False
    x = torch.randn(3, 5, 8)  # meant as (batch=3, tokens=5, embed=8)
    _, weights = mha(x, x, x)
    return tuple(weights.shape)


def _wrong_split_difference():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 8)  # (B, T, E), 2 heads of d=4
    right = x.view(1, 4, 2, 4).transpose(1, 2)
    wrong = x.view(1, 2, 4, 4)
    return torch.equal(right, wrong)


def _need_weights_shape():
    mha = nn.MultiheadAttention(embed_dim=16, num_heads=4, batch_first=True)
    x = torch.randn(2, 6, 16)
    _, weights = mha(x, x, x)
    return tuple(weights.shape)


QUESTIONS = (
    Question("tf_mha_params", "How many numbers does parameters() count for nn.MultiheadAttention(32, 4)?",
             _mha_parameter_count,
             "in_proj_weight is 3E×E and out_proj.weight E×E: 4E² = 4,096; in_proj_bias (3E) and out_proj.bias (E) "
             "add 4E = 128: 4,224. The number of heads changes nothing: heads split E, they add no weights.",
             kind="number", imports="import torch.nn as nn"),
    Question("tf_mha_batch_first", "x is (batch=3, tokens=5, embed=8). What shape are the attention weights?",
             _batch_first_default_shape,
             "batch_first defaults to False, so (3, 5, 8) is read as (tokens=3, batch=5, embed=8): no error, and "
             "the weights are (5, 3, 3), each of 5 'sequences' attending over 3 'tokens', which are really the "
             "3 sequences of the batch at one position. Pass batch_first=True or feed (T, B, E).",
             kind="shape", imports="import torch\nimport torch.nn as nn"),
    Question("tf_mha_split", "Are view(B, T, H, d).transpose(1, 2) and view(B, H, T, d) the same heads?",
             _wrong_split_difference,
             "Both have shape (1, 2, 4, 4), but view(B, H, T, d) reads memory in order: head 0 gets tokens 0 and 1 "
             "whole (rows of 4 numbers), not features 0–3 of every token. The values differ, so torch.equal is "
             "False.", choices=("True", "False")),
    Question("tf_mha_need_weights", "need_weights is left at its default. What shape are the returned weights?",
             _need_weights_shape,
             "By default need_weights=True and average_attn_weights=True: the weights are averaged over the 4 "
             "heads, (B, T, T) = (2, 6, 6). average_attn_weights=False gives (2, 4, 6, 6).",
             kind="shape", imports="import torch\nimport torch.nn as nn"),
)
