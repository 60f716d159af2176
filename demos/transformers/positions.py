"""Positions: self-attention without positions is permutation-equivariant; sinusoidal, learned and rotary (RoPE)
encodings break that symmetry, and RoPE makes q·k depend only on the offset between two positions."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script
from demos.transformers.checks import check_choice, check_range

POS_IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
TABLE_IMPORTS = "import torch\nimport torch.nn as nn"  # the tables and RoPE's scores call no torch.nn.functional
ENCODINGS = ("none", "sinusoidal", "learned", "rope")
ENCODING_LABELS = {"none": "no positions", "sinusoidal": "sinusoidal, added", "learned": "learned, added",
                   "rope": "RoPE on q and k"}
PERMUTATIONS = ("reverse", "roll", "random")
PERMUTATION_LABELS = {"reverse": "reverse the order", "roll": "move the last token first",
                      "random": "a random shuffle"}
MIN_TOKENS, MAX_TOKENS = 2, 16
MIN_DIM, MAX_DIM = 2, 64
MAX_TABLE_POSITIONS, MAX_TABLE_DIM = 64, 64
BASES = (100.0, 1000.0, 10000.0, 100000.0)
ROUNDING = 1e-4  # float32 differences below this are rounding (the values themselves are of order 1)
FEW_ULPS = 8  # a non-zero difference is called float32 rounding only when it is this many ulps or fewer


# ---- the torch core: the code each snippet shows -----------------------------------------------------------------


def sinusoidal(positions, dim):
    """The Transformer's table: PE[p, 2i] = sin(p / 10000^(2i/dim)), PE[p, 2i+1] = cos(p / 10000^(2i/dim))."""
    p = torch.arange(positions, dtype=torch.float32)[:, None]
    angle = p * 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    pe = torch.zeros(positions, dim)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()
    return pe


def rope(x, base=10000.0):
    """Rotate each pair of dims (2i, 2i+1) of row p by the angle p * base^(-2i/d): x is (..., positions, d)."""
    positions, d = x.shape[-2:]
    p = torch.arange(positions, dtype=torch.float32)[:, None]
    angle = p * base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class PositionalAttention(nn.Module):
    """One attention head over a sequence, with the positions told one of four ways (or not at all)."""

    def __init__(self, tokens, dim, encoding="none", causal=False):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.encoding, self.causal = encoding, causal
        self.learned = nn.Embedding(tokens, dim)  # a learned table: N(0, 1) at init
        self.register_buffer("table", sinusoidal(tokens, dim))

    def forward(self, x):  # x: (batch, tokens, dim)
        if self.encoding == "sinusoidal":
            x = x + self.table[: x.shape[1]]
        if self.encoding == "learned":
            x = x + self.learned(torch.arange(x.shape[1]))
        q, k, v = self.q(x), self.k(x), self.v(x)
        if self.encoding == "rope":
            q, k = rope(q), rope(k)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def permutation(tokens, kind, seed):
    """The order the tokens are shuffled into (never the identity: every kind moves some token)."""
    if kind == "reverse":
        return torch.arange(tokens - 1, -1, -1)
    if kind == "roll":
        return torch.roll(torch.arange(tokens), 1)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(tokens, generator=g)
    while bool((perm == torch.arange(tokens)).all()):
        perm = torch.randperm(tokens, generator=g)
    return perm


def equivariance_gap(model, x, perm):
    """max |f(P x) - P f(x)|: zero (up to rounding) when permuting the tokens permutes the outputs the same way."""
    with torch.no_grad():
        return float((model(x[:, perm]) - model(x)[:, perm]).abs().max())


def rounded(t, digits=4):
    """A tensor as nested lists of floats rounded for printing (the figure's hover shows as many digits)."""
    return torch.round(t, decimals=digits).tolist()


def equivariance_facts(tokens, dim, encoding, causal, order, seed):
    """One head with the chosen encoding and mask: P f(x) beside f(P x), and the gap for every encoding and mask
    (one set of weights throughout: only how positions are told, and the mask, change)."""
    torch.manual_seed(seed)
    x = torch.randn(1, tokens, dim)
    perm = permutation(tokens, order, seed)
    model = PositionalAttention(tokens, dim)
    gaps = {}
    for kind in ("none", "sinusoidal", "learned", "rope"):
        for mask in (False, True):
            model.encoding, model.causal = kind, mask
            gaps[(kind, mask)] = equivariance_gap(model, x, perm)
    model.encoding, model.causal = encoding, causal
    with torch.no_grad():
        permuted_outputs, outputs_of_permuted = model(x)[0, perm], model(x[:, perm])[0]
    return dict(perm=perm.tolist(), permuted_outputs=rounded(permuted_outputs),
                outputs_of_permuted=rounded(outputs_of_permuted), gap=gaps[(encoding, causal)], gaps=gaps)


def table_facts(positions, dim, seed):
    """The sinusoidal table and a learned table at init (position x dim), and each table's dot products
    PE[m]·PE[n] / dim with how far they stray from depending on m - n alone."""
    torch.manual_seed(seed)
    tables = {"sinusoidal": sinusoidal(positions, dim), "learned": nn.Embedding(positions, dim).weight.detach()}
    facts = {}
    for name, table in tables.items():
        dots = table @ table.T / dim
        facts[name] = rounded(table)
        facts[f"{name}_dots"] = rounded(dots)
        facts[f"{name}_diagonal_spread"] = diagonal_spread(dots)
    return facts


def diagonal_spread(scores):
    """The largest (max - min) along any diagonal m - n = const: 0 when scores depend on the offset alone."""
    n = scores.shape[0]
    return max(float(d.max() - d.min()) for d in (scores.diagonal(offset) for offset in range(-n + 1, n)))


def offset_scores(positions, head_dim, base, seed):
    """The same token at every position: RoPE scores (R_m q)·(R_n k) beside added-sinusoid scores
    W_q(x + PE[m])·W_k(x + PE[n]), each over sqrt(head_dim), and how far each strays from depending on m - n."""
    torch.manual_seed(seed)
    x = torch.randn(head_dim)
    w_q, w_k = nn.Linear(head_dim, head_dim), nn.Linear(head_dim, head_dim)
    with torch.no_grad():
        same_everywhere = x.expand(positions, head_dim)
        q, k = rope(w_q(same_everywhere), base), rope(w_k(same_everywhere), base)
        rotary = q @ k.T / head_dim**0.5
        placed = same_everywhere + sinusoidal(positions, head_dim)
        added = w_q(placed) @ w_k(placed).T / head_dim**0.5
        norms_kept = float((q.norm(dim=1) - w_q(x).norm()).abs().max())
        bound = float(w_q(x).norm() * w_k(x).norm()) / head_dim**0.5  # no score can be larger: |q|·|k| / sqrt(d)
    return dict(rope_scores=rounded(rotary), added_scores=rounded(added), rope_spread=diagonal_spread(rotary),
                added_spread=diagonal_spread(added), rope_range=float(rotary.max() - rotary.min()),
                added_range=float(added.max() - added.min()), rope_norm_change=norms_kept, rope_bound=bound)


# ---- validation ---------------------------------------------------------------------------------------------------


def check_even(label, value, low, high):
    check_range(label, value, low, high)
    if value % 2:
        raise InputError(f"{label} must be even (dimensions are rotated and tabled in pairs); got {value}.")


# ---- entries: what the page computes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Equivariance:
    tokens: int
    dim: int
    encoding: str
    causal: bool
    order: str
    perm: tuple[int, ...]
    permuted_outputs: tuple[tuple[float, ...], ...]  # P f(x), rows = tokens
    outputs_of_permuted: tuple[tuple[float, ...], ...]  # f(P x)
    gap: float  # max |f(P x) - P f(x)| for the chosen encoding and mask
    gaps: tuple[tuple[str, bool, float], ...]  # (encoding, causal, gap) for all eight
    code: Script

    @property
    def equivariant(self) -> bool:
        return self.gap < ROUNDING


def nested(rows) -> tuple:
    return tuple(tuple(r) for r in rows)


@entry(5, 8, "rope", False, "reverse", 0)
def permutation_test(tokens: int = 6, dim: int = 16, encoding: str = "none", causal: bool = False,
                     order: str = "reverse", seed: int = 0) -> Equivariance:
    """Permute the tokens of one attention head's input and compare with permuting its output."""
    check_range("Tokens", tokens, MIN_TOKENS, MAX_TOKENS)
    check_even("Model width", dim, MIN_DIM, MAX_DIM)
    check_choice("Positions", encoding, ENCODINGS)
    check_choice("Permutation", order, PERMUTATIONS)
    check_range("Seed", seed, 0, 9999)
    settings = {"tokens": tokens, "dim": dim, "encoding": encoding, "causal": causal, "order": order, "seed": seed}
    code = script(sinusoidal, rope, PositionalAttention, permutation, equivariance_gap, rounded, equivariance_facts,
                  imports=POS_IMPORTS, settings=settings,
                  run=print_each("equivariance_facts(tokens, dim, encoding, causal, order, seed)"))
    f = equivariance_facts(tokens, dim, encoding, causal, order, seed)
    return Equivariance(tokens, dim, encoding, bool(causal), order, tuple(f["perm"]), nested(f["permuted_outputs"]),
                        nested(f["outputs_of_permuted"]), f["gap"],
                        tuple((kind, mask, gap) for (kind, mask), gap in f["gaps"].items()), code)


@dataclass(frozen=True)
class Tables:
    positions: int
    dim: int
    sinusoidal: tuple[tuple[float, ...], ...]  # position x dim
    learned: tuple[tuple[float, ...], ...]
    sinusoidal_dots: tuple[tuple[float, ...], ...]  # position x position
    learned_dots: tuple[tuple[float, ...], ...]
    sinusoidal_diagonal_spread: float
    learned_diagonal_spread: float
    code: Script


@entry(8, 6, 0)
def encoding_tables(positions: int = 32, dim: int = 32, seed: int = 0) -> Tables:
    """The sinusoidal table and a freshly initialized learned table, with their position-by-position dot products."""
    check_range("Positions", positions, MIN_TOKENS, MAX_TABLE_POSITIONS)
    check_even("Dimensions", dim, MIN_DIM, MAX_TABLE_DIM)
    check_range("Seed", seed, 0, 9999)
    code = script(sinusoidal, rounded, diagonal_spread, table_facts, imports=TABLE_IMPORTS,
                  settings={"positions": positions, "dim": dim, "seed": seed},
                  run=print_each("table_facts(positions, dim, seed)"))
    f = table_facts(positions, dim, seed)
    return Tables(positions, dim, nested(f["sinusoidal"]), nested(f["learned"]), nested(f["sinusoidal_dots"]),
                  nested(f["learned_dots"]), f["sinusoidal_diagonal_spread"], f["learned_diagonal_spread"], code)


@dataclass(frozen=True)
class OffsetScores:
    positions: int
    head_dim: int
    base: float
    rope_scores: tuple[tuple[float, ...], ...]  # [m][n] = q_m·k_n / sqrt(d)
    added_scores: tuple[tuple[float, ...], ...]
    rope_spread: float
    added_spread: float
    rope_range: float
    added_range: float
    rope_norm_change: float  # max | |R_m q| - |q| |: a rotation keeps lengths
    rope_bound: float  # |q|·|k| / sqrt(d): the largest |score| any two positions can give
    code: Script

    @property
    def rope_relative(self) -> bool:
        return self.rope_spread < ROUNDING * max(1.0, self.rope_range)


@entry(6, 8, 10000.0, 0)
def rope_offsets(positions: int = 12, head_dim: int = 16, base: float = 10000.0, seed: int = 0) -> OffsetScores:
    """One q and one k at every position: RoPE's score matrix against the added sinusoidal encoding's."""
    check_range("Positions", positions, MIN_TOKENS, MAX_TOKENS * 2)
    check_even("Head dimension", head_dim, MIN_DIM, MAX_DIM)
    if base not in BASES:
        raise InputError(f"RoPE base must be one of {', '.join(f'{b:g}' for b in BASES)}; got {base:g}.")
    check_range("Seed", seed, 0, 9999)
    code = script(sinusoidal, rope, rounded, diagonal_spread, offset_scores, imports=TABLE_IMPORTS,
                  settings={"positions": positions, "head_dim": head_dim, "base": base, "seed": seed},
                  run=print_each("offset_scores(positions, head_dim, base, seed)"))
    return OffsetScores(positions, head_dim, base, **{k: nested(v) if isinstance(v, list) else v
                                                      for k, v in offset_scores(positions, head_dim, base,
                                                                                seed).items()}, code=code)


# ---- the sentences the page shows, built from the numbers ----------------------------------------------------------


def setting_label(encoding: str, causal: bool) -> str:
    return f"{ENCODING_LABELS[encoding]}, {'causal mask' if causal else 'no mask'}"


def float32_ulp(scale: float) -> float:
    """The spacing of float32 numbers at the size of scale (its unit in the last place)."""
    return 2.0 ** (math.floor(math.log2(scale)) - 23) if scale > 0 else 2.0**-149


def ulps(value: float, scale: float) -> float:
    return value / float32_ulp(scale)


def difference(value: float, scale: float, scale_text: str) -> str:
    """A measured difference: 'exactly 0', or its size with how many float32 ulps of scale it is, called rounding
    only when that is FEW_ULPS or fewer."""
    if value == 0:
        return "exactly 0"
    n = ulps(value, scale)
    tail = ": rounding" if n <= FEW_ULPS else ""
    return f"{value:.1e} ({n:.2g} float32 ulp{'' if n == 1 else 's'} of {scale_text}{tail})"


def largest(rows) -> float:
    return max(abs(v) for row in rows for v in row)


def gap_sentence(r: Equivariance) -> str:
    """The measured gap for the chosen setting, and what broke the symmetry when it is more than rounding."""
    if r.equivariant:
        scale = largest(r.permuted_outputs)
        measured = difference(r.gap, scale, f"the largest output, {scale:.3g}")
        why = ("the same numbers came out, in the permuted order" if r.gap == 0 else
               "the same products summed in another order")
        return (f"With {setting_label(r.encoding, r.causal)}: max |f(P·x) − P·f(x)| is {measured}; {why}. "
                "Permuting the tokens permuted the outputs the same way and changed nothing else: this head cannot "
                "tell one order of its tokens from another.")
    head = f"With {setting_label(r.encoding, r.causal)}: max |f(P·x) − P·f(x)| = {r.gap:.2g}"
    causes = []
    if r.encoding in ("sinusoidal", "learned"):
        causes.append("each token gets the encoding of the position it lands in, so a moved token enters as a "
                      "different vector")
    if r.encoding == "rope":
        causes.append("q and k are rotated by the position each token lands in, so a moved token scores "
                      "differently")
    if r.causal:
        alone = " (no encoding here: the mask alone breaks the symmetry)" if r.encoding == "none" else ""
        causes.append(f"the causal mask lets position i attend only to positions 0 to i, so where a token stands "
                      f"decides which tokens it sees{alone}")
    if not causes:
        return f"{head}: more than float32 rounding."
    return f"{head}: permuting the input did more than permute the output, because " + "; and ".join(causes) + "."


def gaps_summary(r: Equivariance) -> str:
    """Which of the eight settings stayed equivariant on this input, each with its gap."""
    kept = [f"{setting_label(kind, mask)} (gap {'exactly 0' if gap == 0 else f'{gap:.1e}'})"
            for kind, mask, gap in r.gaps if gap < ROUNDING]
    broken = [gap for _, _, gap in r.gaps if gap >= ROUNDING]
    if not broken:
        return f"All eight settings kept the gap below {ROUNDING:.0e} on this input."
    low = f"{min(broken):.2g}"
    if not kept:
        return f"Every setting broke the symmetry on this input (smallest gap {low})."
    tail = (": any positional encoding, and the causal mask on its own"
            if [(kind, mask) for kind, mask, gap in r.gaps if gap < ROUNDING] == [("none", False)] else "")
    return (f"Gap below {ROUNDING:.0e}: {'; '.join(kept)}. Every other setting broke the symmetry, by {low} or "
            f"more{tail}.")


def pair_periods(dim: int) -> list[float]:
    """Positions per full turn of each sinusoidal pair: 2π · 10000^(2i/dim)."""
    return [2 * math.pi * 10000.0 ** (2 * i / dim) for i in range(dim // 2)]


def turns_text(angle: float) -> str:
    turns = angle / (2 * math.pi)
    return (f"{angle:.2g} rad, {turns:.2g} full turns" if turns >= 1 else
            f"{angle:.2g} rad, less than one full turn")


def table_sentences(t: Tables) -> list[str]:
    periods = pair_periods(t.dim)
    last = t.positions - 1
    full = sum(period <= last for period in periods)
    slowest_turn = 2 * math.pi * last / periods[-1]
    values = [v for row in t.learned for v in row]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    if len(periods) == 1:
        sinusoid = (f"**Sinusoidal**: with {t.dim} dimensions there is a single pair, sin and cos of p, which "
                    f"repeats every {periods[0]:.3g} positions: over positions 0 to {last} it turns by "
                    f"{turns_text(2 * math.pi * last / periods[0])}. One pair is one frequency; more dimensions add "
                    "slower pairs. Nothing is trained; any position has a row.")
    else:
        fastest_turn = 2 * math.pi * last / periods[0]
        if full == 0:
            turning = (f"none of the {len(periods)} pairs completes a full turn: the fastest turns by "
                       f"{fastest_turn:.2g} rad and the slowest by {slowest_turn:.2g} rad")
        else:
            some = f"{full} of the {len(periods)} pairs {'completes' if full == 1 else 'complete'} a full turn"
            turning = (f"{some} and the slowest turns by {turns_text(slowest_turn)}"
                       + (", like the fast and slow digits of a counter" if full < len(periods) else ""))
        sinusoid = (f"**Sinusoidal**: pair i holds sin and cos of p · 10000^(−2i/{t.dim}). The first pair repeats "
                    f"every {periods[0]:.3g} positions, the last every {periods[-1]:.3g}: over positions 0 to "
                    f"{last}, {turning}. Nothing is trained; any position has a row.")
    return [
        sinusoid,
        f"**Learned**: `nn.Embedding({t.positions}, {t.dim})` as built, every entry drawn from N(0, 1) (here mean "
        f"{mean:.2f}, std {std:.2f}). No training ran, so it says nothing about order yet: what it encodes is "
        f"learned, and it has rows only for positions 0 to {last}.",
    ]


def dots_sentence(t: Tables) -> str:
    scale = largest(t.sinusoidal_dots)
    spread = difference(t.sinusoidal_diagonal_spread, scale, f"the largest value, {scale:.3g}")
    return (f"Sinusoidal: PE[m]·PE[n] / d = Σ cos(ω_i (m − n)) / d, a function of the offset alone: the largest "
            f"spread along any diagonal is {spread}. Learned at init: spread "
            f"{t.learned_diagonal_spread:.2g}, random rows with no such structure.")


def offset_sentences(o: OffsetScores) -> list[str]:
    if o.rope_relative:
        if o.rope_spread == 0:
            within = "exactly"
        else:
            within = "to within " + difference(o.rope_spread, o.rope_bound,
                                               f"|q|·|k|/√d = {o.rope_bound:.3g}, the largest a score can be")
        rope_text = (f"every diagonal (one offset n − m) holds one value, {within}, in scores that range over "
                     f"{o.rope_range:.3g}: (R_m q)·(R_n k) = q·R_(n−m) k, a function of the offset alone")
    else:
        rope_text = (f"the largest spread along a diagonal is {o.rope_spread:.2g} in scores that range over "
                     f"{o.rope_range:.3g}")
    added_relative = o.added_spread < ROUNDING * max(1.0, o.added_range)
    added_text = (f"spread {o.added_spread:.2g} along a diagonal, within rounding for this token"
                  if added_relative else
                  f"the same offset scores differently at different places: spread up to {o.added_spread:.3g} "
                  f"along a diagonal, in scores that range over {o.added_range:.3g}. (W_q(x + PE[m]) + b_q)·(W_k(x + "
                  "PE[n]) + b_k) has terms in PE[m] and in PE[n] on their own, not only in their offset")
    kept = ("exactly: every rotated q has the same norm as q" if o.rope_norm_change == 0 else
            f"changed by at most {o.rope_norm_change:.1e}")
    return [f"**RoPE**: {rope_text}. The rotation keeps q's length ({kept}).",
            f"**Sinusoidal added to the input**: {added_text}."]


# ---- predict-then-run questions -------------------------------------------------------------------------------------


def _no_positions_permuted():
    torch.manual_seed(0)
    attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 5, 8)
    perm = torch.tensor([4, 3, 2, 1, 0])
    out, _ = attn(x, x, x)
    out_perm, _ = attn(x[:, perm], x[:, perm], x[:, perm])
    return torch.allclose(out_perm, out[:, perm], atol=1e-6)


def _causal_permuted():
    torch.manual_seed(0)
    q = k = v = torch.randn(1, 5, 8)
    perm = torch.tensor([4, 3, 2, 1, 0])
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out_perm = torch.nn.functional.scaled_dot_product_attention(q[:, perm], k[:, perm], v[:, perm], is_causal=True)
    return torch.allclose(out_perm, out[:, perm], atol=1e-6)


def _rope_relative():
    def rotate(x, p):  # RoPE on one 2-d pair: rotate by the angle p (the slowest pair of a real head)
        c, s = torch.cos(torch.tensor(p * 0.5)), torch.sin(torch.tensor(p * 0.5))
        return torch.stack([x[0] * c - x[1] * s, x[0] * s + x[1] * c])

    q, k = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
    near = rotate(q, 3) @ rotate(k, 1)  # positions 3 and 1
    far = rotate(q, 10) @ rotate(k, 8)  # positions 10 and 8: the same offset
    if torch.isclose(near, far):
        return "equal"
    return "score(3, 1)" if near > far else "score(10, 8)"


def _sinusoid_norm():
    pos = torch.arange(50.0)[:, None]
    angle = pos * 10000 ** (-torch.arange(0, 16, 2) / 16)
    pe = torch.cat([angle.sin(), angle.cos()], dim=1)  # 8 sines and 8 cosines per position
    return round(float(pe[37].norm() ** 2), 3)


QUESTIONS = (
    Question("tf_pos_permute",
             "Self-attention with no positional encoding: does permuting the 5 input tokens just permute the "
             "5 outputs the same way?", _no_positions_permuted,
             "Every output is a weighted sum over all tokens, with weights from dot products that ignore order: "
             "attention without positions is permutation-equivariant, so it cannot tell 'dog bites man' from "
             "'man bites dog'. Positional information is what breaks the symmetry.",
             choices=("True", "False")),
    Question("tf_pos_causal",
             "Still no positional encoding, but now with a causal mask (is_causal=True). Does permuting the tokens "
             "still just permute the outputs?", _causal_permuted,
             "A causal mask lets token i see only tokens 0..i, so the order decides who sees whom: after "
             "reversing, the first token sees only itself where before it saw all five. The mask itself carries "
             "position information, one reason decoder-only models can learn positions even without an encoding.",
             choices=("True", "False")),
    Question("tf_pos_rope_offset",
             "RoPE rotates q at position m by angle m·θ and k at position n by n·θ. Which score is larger: q at "
             "position 3 with k at 1, or q at 10 with k at 8?", _rope_relative,
             "Rotations compose: (R_m q)·(R_n k) = q·(R_(n-m) k), so the score depends only on the offset n - m. "
             "Positions (3, 1) and (10, 8) share the offset, so the two scores are equal up to float rounding.",
             choices=("score(3, 1)", "score(10, 8)", "equal")),
    Question("tf_pos_sinusoid_norm",
             "A sinusoidal table with 16 dimensions (8 sine and 8 cosine columns). What is the squared norm of the "
             "row for position 37?", _sinusoid_norm,
             "Each frequency contributes sin² + cos² = 1, so every row has squared norm 8 (dim / 2), whatever its "
             "position: the table tells positions apart by direction, not length.",
             kind="number"),
)
