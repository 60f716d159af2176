"""From scratch, checked: attention, multi-head attention, LayerNorm, RMSNorm, dropout and cross-entropy written in
plain tensor ops, each run beside torch's own op on the same tensors (outputs and gradients compared), and each
passed through torch.autograd.gradcheck in float64."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.quiz import Question
from demos.shown import Script, entry, script

IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
PIECE_IMPORTS = {"multi-head attention": "import torch\nimport torch.nn as nn"}  # the others: torch and F
PIECES = ("attention", "multi-head attention", "LayerNorm", "RMSNorm", "dropout", "cross-entropy")
DTYPES = ("float32", "float64", "bfloat16")
MIN_ROWS, MAX_ROWS = 1, 16
MIN_WIDTH, MAX_WIDTH = 2, 32
MAX_HEADS = 8
MAX_P = 0.9
MAX_SEED = 9999
EXPECTATION_SAMPLES = 100_000  # ones through dropout: the zeroed fraction and the mean
TABLE_SIZE = dict(rows=3, width=4, heads=2, p=0.5, causal=True)  # gradcheck's instance: small, float64


# ---- the pieces, in plain tensor ops -----------------------------------------------------------------------------


def softmax(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()  # minus the row's max: exp never overflows, the ratio is the same
    return e / e.sum(dim, keepdim=True)


def attention(q, k, v, causal=False):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T_q, T_k)
    if causal:
        t_q, t_k = scores.shape[-2:]
        later = torch.ones(t_q, t_k, dtype=torch.bool, device=q.device).triu(1)  # key after query
        scores = scores.masked_fill(later, float("-inf"))
    return softmax(scores) @ v  # (..., T_q, d_v)


def multi_head_attention(x, w_in, b_in, w_out, b_out, heads):
    b, t, e = x.shape
    q, k, v = (x @ w_in.T + b_in).chunk(3, dim=-1)  # one projection, cut in three: (B, T, E) each
    q, k, v = (y.view(b, t, heads, e // heads).transpose(1, 2) for y in (q, k, v))  # (B, H, T, E / H)
    out = attention(q, k, v).transpose(1, 2).reshape(b, t, e)  # the heads side by side again: (B, T, E)
    return out @ w_out.T + b_out


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased (divides by n), as nn.LayerNorm does
    return (x - mean) / (var + eps).sqrt() * weight + bias


def rms_norm(x, weight, eps=1e-6):
    return x / ((x**2).mean(-1, keepdim=True) + eps).sqrt() * weight  # no mean subtracted, no bias


def dropout(x, p):
    keep = torch.empty_like(x).bernoulli_(1 - p)  # 1 with probability 1 - p, else 0
    return x * (keep / (1 - p))  # kept values scaled up: the expected output is x


def cross_entropy(logits, target):
    shifted = logits - logits.amax(-1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(-1, keepdim=True).log()  # log_softmax, stable
    return -log_probs.gather(-1, target[:, None]).squeeze(-1)  # one loss per row; .mean() is the usual reduction


# ---- each piece beside torch's op: the same tensors in, a function for each side ---------------------------------


def randn(g, *shape, dtype, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def case_attention(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (randn(g, 2, 2, rows, width, dtype=dtype) for _ in range(3))  # (B, H, T, d)

    def theirs(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return dict(q=q, k=k, v=v), lambda q, k, v: attention(q, k, v, causal), theirs


def case_multi_head_attention(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    scale = width**-0.5
    tensors = dict(x=randn(g, 2, rows, width, dtype=dtype),
                   w_in=randn(g, 3 * width, width, dtype=dtype, scale=scale),
                   b_in=randn(g, 3 * width, dtype=dtype, scale=0.1),
                   w_out=randn(g, width, width, dtype=dtype, scale=scale),
                   b_out=randn(g, width, dtype=dtype, scale=0.1))
    module = nn.MultiheadAttention(width, heads, batch_first=True, dtype=dtype)

    def theirs(x, w_in, b_in, w_out, b_out):  # the module run with these tensors as its parameters
        params = {"in_proj_weight": w_in, "in_proj_bias": b_in, "out_proj.weight": w_out, "out_proj.bias": b_out}
        return torch.func.functional_call(module, params, (x, x, x), {"need_weights": False})[0]

    def ours(x, w_in, b_in, w_out, b_out):
        return multi_head_attention(x, w_in, b_in, w_out, b_out, heads)
    return tensors, ours, theirs


def case_layer_norm(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    tensors = dict(x=randn(g, 2, rows, width, dtype=dtype, scale=3.0) + 1,
                   weight=randn(g, width, dtype=dtype), bias=randn(g, width, dtype=dtype))
    return tensors, layer_norm, lambda x, weight, bias: F.layer_norm(x, (width,), weight, bias, eps=1e-5)


def case_rms_norm(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    tensors = dict(x=randn(g, 2, rows, width, dtype=dtype, scale=3.0) + 1, weight=randn(g, width, dtype=dtype))
    return tensors, rms_norm, lambda x, weight: F.rms_norm(x, (width,), weight, eps=1e-6)


def case_dropout(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)

    def ours(x):
        torch.manual_seed(seed)  # the same seed before each side: the same random stream
        return dropout(x, p)

    def theirs(x):
        torch.manual_seed(seed)
        return F.dropout(x, p, training=True)
    return dict(x=randn(g, 2, rows, width, dtype=dtype)), ours, theirs


def case_cross_entropy(rows, width, heads, p, causal, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    logits = randn(g, 2 * rows, width, dtype=dtype, scale=3.0)  # 2·rows samples over `width` classes
    target = torch.randint(0, width, (2 * rows,), generator=g)

    def theirs(logits):
        return F.cross_entropy(logits, target, reduction="none")
    return dict(logits=logits), lambda logits: cross_entropy(logits, target), theirs


def all_cases():
    """Each piece's case: its tensors, the from-scratch side and torch's side."""
    return {"attention": case_attention, "multi-head attention": case_multi_head_attention,
            "LayerNorm": case_layer_norm, "RMSNorm": case_rms_norm, "dropout": case_dropout,
            "cross-entropy": case_cross_entropy}


SOURCES = {"attention": (softmax, attention), "multi-head attention": (softmax, attention, multi_head_attention),
           "LayerNorm": (layer_norm,), "RMSNorm": (rms_norm,), "dropout": (dropout,),
           "cross-entropy": (cross_entropy,)}


def compare(ours, theirs, tensors, seed):
    """Both sides on the same tensors: their outputs, and the gradients each sends back for one random upstream
    gradient; returns the outputs, the max |difference| of outputs and of gradients, and torch's largest |gradient|
    (the scale the gradients' difference is read against)."""
    runs = []
    for side in (ours, theirs):
        leaves = {n: t.detach().clone().requires_grad_() for n, t in tensors.items()}
        out = side(**leaves)
        upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1)).to(out.dtype)
        (out * upstream).sum().backward()
        runs.append((out.detach(), [t.grad for t in leaves.values()]))
    (out_a, grads_a), (out_b, grads_b) = runs
    grad_diff = max((a - b).abs().max().item() for a, b in zip(grads_a, grads_b, strict=True))
    grad_scale = max(b.abs().max().item() for b in grads_b)
    return out_a, out_b, (out_a - out_b).abs().max().item(), grad_diff, grad_scale


def piece_facts(case, rows, width, heads, p, causal, seed, dtype):
    """One piece at the visitor's sizes and precision: the output's shape, both outputs (2-D: the last dim as
    columns) and the max |difference| of outputs and of gradients."""
    tensors, ours, theirs = case(rows, width, heads, p, causal, seed, getattr(torch, dtype))
    out_ours, out_theirs, max_diff, grad_diff, grad_scale = compare(ours, theirs, tensors, seed)
    columns = out_ours.shape[-1] if out_ours.dim() > 1 else 1

    def as_rows(t):  # 2-D for the figure, every value exact in float64
        return t.double().reshape(-1, columns).tolist()
    return dict(shape=tuple(out_ours.shape), max_abs_diff=max_diff, max_grad_diff=grad_diff,
                out_scale=out_theirs.abs().max().item(), grad_scale=grad_scale, ours=as_rows(out_ours),
                theirs=as_rows(out_theirs), diffs=as_rows((out_ours - out_theirs).abs()))


def dropout_expectation(p, seed):
    """Dropout of many ones: the fraction zeroed (about p), the value of a kept one (1 / (1 - p)), the mean (about
    1)."""
    torch.manual_seed(seed)
    out = dropout(torch.ones(EXPECTATION_SAMPLES, dtype=torch.float64), p)
    return dict(zeroed=(out == 0).double().mean().item(), kept_values=sorted(set(out[out != 0].tolist())),
                mean=out.mean().item())


def gradcheck_ours(case, seed):
    """torch.autograd.gradcheck of the from-scratch side in float64 on a small instance: the gradients autograd
    computes through the plain ops against finite differences. fast_mode (as torch's own op tests run it) compares
    a random projection of the Jacobian instead of every entry."""
    tensors, ours, _ = case(**TABLE_SIZE, seed=seed, dtype=torch.float64)
    names = list(tensors)

    def by_position(*ts):
        return ours(**dict(zip(names, ts, strict=True)))
    inputs = tuple(t.requires_grad_() for t in tensors.values())
    return torch.autograd.gradcheck(by_position, inputs, raise_exception=False, fast_mode=True)


def table_facts(seed):
    """Every piece on the small instance: max |difference| from torch's op in float32 and float64, of the float64
    gradients, and gradcheck's verdict."""
    rows = []
    for piece, case in all_cases().items():
        diffs = {dtype: piece_facts(case, **TABLE_SIZE, seed=seed, dtype=dtype) for dtype in ("float32", "float64")}
        rows.append(dict(piece=piece, float32=diffs["float32"]["max_abs_diff"],
                         float64=diffs["float64"]["max_abs_diff"], grad_float64=diffs["float64"]["max_grad_diff"],
                         gradcheck=gradcheck_ours(case, seed)))
    return rows


# ---- the entries -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PieceResult:
    piece: str
    dtype: str
    rows: int
    width: int
    heads: int
    p: float
    causal: bool
    shape: tuple[int, ...]
    max_abs_diff: float
    max_grad_diff: float
    out_scale: float  # torch's largest |output|
    grad_scale: float  # torch's largest |gradient|, over every input tensor
    ours: tuple[tuple[float, ...], ...]  # the output, 2-D: (everything before the last dim, the last dim)
    theirs: tuple[tuple[float, ...], ...]
    diffs: tuple[tuple[float, ...], ...]  # |ours - theirs|, computed in the piece's dtype
    expectation: dict | None  # dropout only
    code: Script


def validate(piece, dtype, rows, width, heads, p, seed) -> None:
    if piece not in PIECES:
        raise InputError(f"Piece must be one of {', '.join(PIECES)}; got {piece!r}.")
    if dtype not in DTYPES:
        raise InputError(f"Precision must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    for value, low, high, label in ((rows, MIN_ROWS, MAX_ROWS, "Rows T"), (width, MIN_WIDTH, MAX_WIDTH, "Width"),
                                    (heads, 1, MAX_HEADS, "Heads"), (seed, 0, MAX_SEED, "Seed")):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InputError(f"{label} must be a whole number from {low} to {high}; got {value}.")
    if width % heads:
        raise InputError(f"Heads must divide the width {width}; {heads} does not.")
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= MAX_P:
        raise InputError(f"Dropout p must be from 0 to {MAX_P}; got {p}.")


def piece_run(piece: str) -> str:
    """The snippet's last lines: run the piece's case, print what the page shows."""
    lines = [f"facts = piece_facts({all_cases()[piece].__name__}, rows, width, heads, p, causal, seed, dtype)",
             'for name in ("shape", "max_abs_diff", "max_grad_diff", "out_scale", "grad_scale"):',
             '    print(f"{name}: {facts[name]}")']
    if piece == "dropout":
        lines.append('print(f"expectation: {dropout_expectation(p, seed)}")')
    return "\n".join(lines)


@entry("multi-head attention", "float32", 3, 8, 2)
def from_scratch(piece: str = "attention", dtype: str = "float32", rows: int = 6, width: int = 8, heads: int = 2,
                 p: float = 0.5, causal: bool = True, seed: int = 0) -> PieceResult:
    """One piece written in plain tensor ops beside torch's op on the same tensors: outputs and gradients."""
    validate(piece, dtype, rows, width, heads, p, seed)
    p, case = float(p), all_cases()[piece]
    extra = (dropout_expectation,) if piece == "dropout" else ()
    code = script(*SOURCES[piece], randn, case, compare, piece_facts, *extra, run=piece_run(piece),
                  imports=PIECE_IMPORTS.get(piece, "import torch\nimport torch.nn.functional as F"),
                  settings=dict(EXPECTATION_SAMPLES=EXPECTATION_SAMPLES, rows=rows, width=width, heads=heads, p=p,
                                causal=causal, seed=seed, dtype=dtype))
    facts = piece_facts(case, rows, width, heads, p, causal, seed, dtype)
    return PieceResult(piece, dtype, rows, width, heads, p, causal, facts["shape"], facts["max_abs_diff"],
                       facts["max_grad_diff"], facts["out_scale"], facts["grad_scale"],
                       *(tuple(map(tuple, facts[k])) for k in ("ours", "theirs", "diffs")),
                       dropout_expectation(p, seed) if piece == "dropout" else None, code)


@dataclass(frozen=True)
class TableResult:
    seed: int
    rows: tuple[dict, ...]
    code: Script

    def row(self, piece: str) -> dict:
        return next(r for r in self.rows if r["piece"] == piece)


TABLE_RUN = """for row in table_facts(seed):
    print(row)"""


@entry(1)
def scratch_table(seed: int = 0) -> TableResult:
    """Every piece against torch on the small instance, with gradcheck."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be a whole number from 0 to {MAX_SEED}; got {seed}.")
    pieces = (softmax, attention, multi_head_attention, layer_norm, rms_norm, dropout, cross_entropy)
    cases = tuple(all_cases().values())
    code = script(*pieces, randn, *cases, all_cases, compare, piece_facts, gradcheck_ours, table_facts,
                  imports=IMPORTS, run=TABLE_RUN, settings=dict(TABLE_SIZE=TABLE_SIZE, seed=seed))
    return TableResult(seed, tuple(table_facts(seed)), code)


TORCH_OPS = {"attention": "F.scaled_dot_product_attention", "multi-head attention": "nn.MultiheadAttention",
             "LayerNorm": "F.layer_norm", "RMSNorm": "F.rms_norm", "dropout": "F.dropout, same seed",
             "cross-entropy": "F.cross_entropy(reduction='none')"}


def fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def ulp(x: float, dtype: str) -> float:
    """The spacing of `dtype`'s numbers at |x|: machine epsilon times the power of two at or below |x|."""
    info = torch.finfo(getattr(torch, dtype))
    if x == 0:
        return info.tiny * info.eps
    return info.eps * 2.0 ** max(math.floor(math.log2(abs(x))), math.log2(info.tiny))


def _against_ulp(x: float, scale: float, dtype: str) -> str:
    """A max |difference| read against the values it is a difference of: in units of the dtype's spacing at the
    largest |value|, and as a fraction of that value."""
    if x == 0:
        return "exactly 0"
    step = ulp(scale, dtype)
    return (f"{fmt(x)}, where the largest |value| is {fmt(scale)} and {dtype}'s spacing there is {fmt(step)}: "
            f"{fmt(x / step)} of those steps, {fmt(x / scale)} of the largest value")


def piece_sentence(r: PieceResult) -> str:
    """What was compared and how far apart the two sides are, read from the run."""
    text = (f"From scratch vs `{TORCH_OPS[r.piece]}` on the same {r.dtype} tensors, output {r.shape}: max "
            f"|difference| {_against_ulp(r.max_abs_diff, r.out_scale, r.dtype)}. Their gradients for the same "
            "random upstream gradient, over every input tensor: max |difference| "
            f"{_against_ulp(r.max_grad_diff, r.grad_scale, r.dtype)}.")
    if r.expectation is not None:
        e = r.expectation
        kept = (f"every kept one is {e['kept_values'][0]:.6g} (1/(1 − p) = {1 / (1 - r.p):.6g})"
                if len(e["kept_values"]) == 1 else f"the kept values are {e['kept_values']}")
        text += (" Compared: `F.dropout(x, p, training=True)` and `x · bernoulli(1 − p) / (1 − p)`, each after "
                 "`torch.manual_seed(seed)`: the same random stream draws the same mask"
                 + (", so the outputs agree bit for bit." if r.max_abs_diff == 0 else
                    f"; the outputs still differ by {fmt(r.max_abs_diff)}.")
                 + f" Over {EXPECTATION_SAMPLES:,} ones through the from-scratch dropout: {e['zeroed']:.2%} are "
                 f"zeroed (p = {r.p:.0%}), {kept}, and the mean is {e['mean']:.4g} (expected 1).")
    return text


def table_caption(t: TableResult) -> str:
    passed = sum(row["gradcheck"] for row in t.rows)
    size = TABLE_SIZE
    return (f"**Every piece, checked** on a small instance (batch 2, {size['rows']} rows, width {size['width']}; "
            f"the attention row {'causal' if size['causal'] else 'unmasked'} with 2 heads, multi-head attention "
            f"unmasked with {size['heads']} heads, dropout with p = {size['p']}; seed {t.seed}): max |difference| from "
            "torch's op in float32 and float64, of the float64 gradients, and `torch.autograd.gradcheck` (float64, "
            f"fast mode) of the from-scratch version: {passed} of {len(t.rows)} passed.")


def table_frame(t: TableResult) -> list[dict]:
    return [{"piece": row["piece"], "torch's op": TORCH_OPS[row["piece"]], "max |diff| float32": fmt(row["float32"]),
             "max |diff| float64": fmt(row["float64"]), "max |grad diff| float64": fmt(row["grad_float64"]),
             "gradcheck": "passed" if row["gradcheck"] else "failed"} for row in t.rows]


# ---- predict, then run -------------------------------------------------------------------------------------------


def _dropout_kept():
    torch.manual_seed(0)
    out = torch.nn.functional.dropout(torch.ones(1000), p=0.2, training=True)
    return out.max().item()


def _uniform_cross_entropy():
    logits = torch.zeros(4, 10)  # every class equally likely
    target = torch.tensor([0, 3, 7, 9])
    return torch.nn.functional.cross_entropy(logits, target).item()


def _layer_norm_constant():
    x = torch.full((1, 4), 3.0)
    return torch.nn.functional.layer_norm(x, (4,)).abs().max().item()


def _rms_norm_constant():
    x = torch.full((1, 4), -3.0)
    return torch.nn.functional.rms_norm(x, (4,), eps=1e-6)[0, 0].item()


def _split_heads_shape():
    x = torch.randn(2, 10, 64)  # (B, T, E)
    b, t, e = x.shape
    return x.view(b, t, 8, e // 8).transpose(1, 2).shape


QUESTIONS = (
    Question("dropout_kept", "F.dropout(torch.ones(1000), p=0.2, training=True): what value does a kept element "
             "have?", _dropout_kept, "Kept values are divided by 1 − p = 0.8, so the expected output stays 1: "
             "1/0.8 = 1.25. eval() skips dropout instead.", kind="number"),
    Question("uniform_cross_entropy", "Cross-entropy of all-zero logits over 10 classes (mean over 4 samples)?",
             _uniform_cross_entropy, "Equal logits give probability 1/10 to every class: the loss is −log(1/10) = "
             "ln 10 ≈ 2.303, whatever the targets.", kind="number"),
    Question("layer_norm_constant", "LayerNorm (no affine) of the row [3, 3, 3, 3]: what is the largest |value| it "
             "returns?", _layer_norm_constant, "The row minus its mean is all zeros, and 0 / √(0 + eps) is 0: "
             "LayerNorm removes the mean.", kind="number"),
    Question("rms_norm_constant", "RMSNorm of the row [−3, −3, −3, −3] (weight 1): what is the first value?",
             _rms_norm_constant, "RMS is √(9 + eps) ≈ 3, so each value is −3/3 ≈ −1 (float32 gives −0.99999994, "
             "eps = 1e-6 under the root): RMSNorm divides by the RMS without subtracting the mean, so it keeps the "
             "sign, and the mean is rescaled with the values, from −3 to about −1 (LayerNorm would give 0).",
             kind="number"),
    Question("split_heads_shape", "x is (2, 10, 64). What shape is x.view(2, 10, 8, 8).transpose(1, 2), the heads "
             "split out?", _split_heads_shape, "(B, T, H, E/H) with heads moved in front of time: (B, H, T, E/H), "
             "so each head attends over its own (T, 8) slice.", kind="shape"),
)
