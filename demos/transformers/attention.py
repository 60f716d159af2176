"""Attention, step by step: Q, K, V from real weights, each step of softmax(QKᵀ/√d_k + mask)·V checked against
F.scaled_dot_product_attention; why the scores are divided by √d_k, measured; what a fully masked row turns into
under each SDPA backend that runs here; and the memory of the T×T matrix, from meta tensors."""

import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from demos.errors import InputError
from demos.quiz import Question
from demos.shown import Script, entry, script

_IMPORT_LINES = {"math": "import math", "warnings": "import warnings", "torch": "import torch",
                 "nn": "import torch.nn as nn", "F": "import torch.nn.functional as F",
                 "sdpa_kernel": "from torch.nn.attention import SDPBackend, sdpa_kernel"}


def imports(*names: str) -> str:
    """A snippet's import block with only the modules it uses: the standard library first, then torch."""
    stdlib = [_IMPORT_LINES[n] for n in ("math", "warnings") if n in names]
    third = [_IMPORT_LINES[n] for n in ("torch", "nn", "F", "sdpa_kernel") if n in names]
    return "\n\n".join(block for block in ("\n".join(stdlib), "\n".join(third)) if block)

MIN_TOKENS, MAX_TOKENS = 2, 16
MIN_D_K, MAX_D_K = 1, 64
MIN_WIDTH, MAX_WIDTH = 1, 64
MAX_SEED = 9999
MASKS = ("none", "causal", "key padding")

MIN_KEYS, MAX_KEYS = 2, 64
LARGEST_D_K = (16, 64, 256, 1024, 4096)  # the choices for the scaling curves' last d_k
QUERIES = 256  # queries per d_k: enough that the averages are steady

MIN_ROW_TOKENS, MAX_ROW_TOKENS = 3, 8
ROW_D = 4  # the head size of the fully-masked-row demo: the output rows stay readable

MAX_BATCH, MAX_HEADS = 64, 128
MIN_HEAD_DIM, MAX_HEAD_DIM = 8, 256
LENGTHS = tuple(2**p for p in range(9, 16))  # 512 ... 32768
MEMORY_DTYPES = ("float32", "bfloat16")
SAVED_SHAPE = (1, 2, 64, 16)  # small real tensors: what each backend saves for backward


def fmt(x: float) -> str:
    """A number as the page prints it: 3 significant digits, 0 as 0."""
    return "0" if x == 0 else f"{x:.3g}"


def fmt_bytes(n: int) -> str:
    """Bytes in binary units (GiB = 2³⁰ bytes), 3 significant digits."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _check_int(value: int, low: int, high: int, label: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{label} must be a whole number from {low} to {high}; got {value}.")


# ---- step by step ------------------------------------------------------------------------------------------------


def projections(x, d_k):
    """Q, K, V: three learned linear maps of the same input (nn.Linear weights, seeded by the caller)."""
    to_q, to_k, to_v = (nn.Linear(x.shape[-1], d_k, bias=False) for _ in range(3))
    return to_q(x), to_k(x), to_v(x)


def allowed_keys(tokens, mask, pad):
    """(T, T) booleans: True where query i may attend to key j (SDPA's boolean attn_mask convention)."""
    allowed = torch.ones(tokens, tokens, dtype=torch.bool)
    if mask == "causal":
        allowed = allowed.tril()  # key j <= query i: no peeking at later tokens
    if mask == "key padding":
        allowed[:, tokens - pad:] = False  # the last `pad` tokens are padding: no query reads them
    return allowed


def attention_by_hand(q, k, v, allowed):
    """softmax(QKᵀ / √d_k, masked) V, every intermediate kept."""
    scores = q @ k.transpose(-2, -1)  # (B, H, T, T): every query against every key
    scaled = scores / math.sqrt(q.shape[-1])  # variance d_k -> 1 for unit-variance q, k
    masked = scaled.masked_fill(~allowed, float("-inf"))  # exp(-inf) = 0: masked keys get no weight
    weights = torch.softmax(masked, dim=-1)  # each row sums to 1
    return scores, scaled, masked, weights, weights @ v


def kernel_that_ran(out) -> str:
    """The SDPA backend that produced `out`, read from the autograd node it recorded: a fused kernel records its
    own backward node; the math backend is composite ops, and its last op is what shows."""
    name = out.grad_fn.name()
    fused = {"Flash": "FLASH_ATTENTION", "Efficient": "EFFICIENT_ATTENTION", "Cudnn": "CUDNN_ATTENTION"}
    return next((backend for part, backend in fused.items() if part in name), "MATH")


def attention_steps_facts(tokens, width, d_k, mask, pad, seed):
    """Every step of one head's attention on one sequence, and its difference from SDPA's result."""
    torch.manual_seed(seed)
    x = torch.randn(1, 1, tokens, width)  # (B, H, T, E): a batch of one sequence, one head
    q, k, v = projections(x, d_k)  # each (B, H, T, d_k)
    allowed = allowed_keys(tokens, mask, pad)
    scores, scaled, masked, weights, out = attention_by_hand(q, k, v, allowed)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    facts = dict(
        shapes={name: tuple(t.shape) for name, t in (("x", x), ("q", q), ("k", k), ("v", v), ("scores", scores),
                                                      ("weights", weights), ("out", out))},
        kernel=kernel_that_ran(fused),
        max_abs_diff=(out - fused).abs().max().item(),
        is_causal_diff=None,
    )
    if mask == "causal":  # the flag and the explicit lower-triangular mask must agree
        flagged = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        facts["is_causal_diff"] = (flagged - fused).abs().max().item()
    steps = dict(x=x, q=q, k=k, v=v, scores=scores, scaled=scaled, masked=masked, weights=weights, out=out)
    return facts, {name: t[0, 0].tolist() for name, t in steps.items()}


@dataclass(frozen=True)
class StepsResult:
    tokens: int
    width: int
    d_k: int
    mask: str
    pad: int
    shapes: dict
    kernel: str  # the SDPA backend that ran for the check
    max_abs_diff: float  # by hand vs F.scaled_dot_product_attention
    is_causal_diff: float | None  # is_causal=True vs the explicit causal mask (causal only)
    matrices: dict  # step name -> rows of the (T, ·) matrix of the one sequence and head
    code: Script

    @property
    def masked_keys(self) -> int:
        return sum(1 for row in self.matrices["masked"] for s in row if s == float("-inf"))


def validate_steps(tokens, width, d_k, mask, pad, seed) -> None:
    _check_int(tokens, MIN_TOKENS, MAX_TOKENS, "Tokens T")
    _check_int(d_k, MIN_D_K, MAX_D_K, "Head size d_k")
    _check_int(width, MIN_WIDTH, MAX_WIDTH, "Input width E")
    _check_int(seed, 0, MAX_SEED, "Seed")
    if mask not in MASKS:
        raise InputError(f"Mask must be one of {', '.join(MASKS)}; got {mask!r}.")
    if mask == "key padding":
        _check_int(pad, 1, tokens - 1, "Padding tokens")


STEPS_RUN = """facts, matrices = attention_steps_facts(tokens, width, d_k, mask, pad, seed)
for name, value in facts.items():
    print(f"{name}: {value}")
print("weights:", [[round(w, 4) for w in row] for row in matrices["weights"]])"""


@entry(5, 8, 4, "causal", 1, 3)
def attention_steps(tokens: int = 6, width: int = 16, d_k: int = 8, mask: str = "causal", pad: int = 2,
                    seed: int = 0) -> StepsResult:
    """One head's attention on one sequence, step by step, checked against F.scaled_dot_product_attention."""
    validate_steps(tokens, width, d_k, mask, pad, seed)
    code = script(projections, allowed_keys, attention_by_hand, kernel_that_ran, attention_steps_facts,
                  imports=imports("math", "torch", "nn", "F"), run=STEPS_RUN,
                  settings=dict(tokens=tokens, width=width, d_k=d_k, mask=mask, pad=pad, seed=seed))
    facts, matrices = attention_steps_facts(tokens, width, d_k, mask, pad, seed)
    return StepsResult(tokens, width, d_k, mask, pad, **facts, matrices=matrices, code=code)


def steps_sentences(r: StepsResult) -> list[str]:
    """The explanation, one step per item, read from the run's shapes and numbers."""
    s, w = r.shapes, r.matrices["weights"]
    last = w[-1]
    items = [
        f"**Q, K, V.** The input x {s['x']} goes through three `nn.Linear({r.width}, {r.d_k}, bias=False)`: "
        f"Q, K and V are each {s['q']}.",
        f"**QKᵀ.** Every query against every key: {s['q']} @ {s['k'][:-2] + (s['k'][-1], s['k'][-2])} → "
        f"{s['scores']}, one score per (query, key) pair.",
        f"**÷ √d_k.** All scores divided by √{r.d_k} = {math.sqrt(r.d_k):.3g}.",
    ]
    if r.masked_keys:
        items.append(f"**Mask.** {r.masked_keys} of the {r.tokens * r.tokens} scores are set to −∞ "
                     f"({mask_reason(r)}); drawn blank.")
    else:
        items.append("**Mask.** None: every query may attend to every key.")
    items += [
        f"**softmax** over the keys (the last dim): each row of the weights sums to 1; the last query's row is "
        f"[{', '.join(fmt(round(x, 3)) for x in last)}].",
        f"**weights @ V** {s['weights']} @ {s['v']} → out {s['out']}: each output row is a weighted average of "
        "the rows of V.",
    ]
    return items


def mask_reason(r: StepsResult) -> str:
    if r.mask == "causal":
        return "key after query: the causal mask"
    return f"the last {r.pad} key{'s are' if r.pad > 1 else ' is'} padding"


def check_sentence(r: StepsResult) -> str:
    text = (f"By hand vs `F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)` (the {r.kernel} backend "
            f"ran): max |difference| = {fmt(r.max_abs_diff)} in float32.")
    if r.is_causal_diff is not None:
        agree = "agree exactly" if r.is_causal_diff == 0 else f"differ by at most {fmt(r.is_causal_diff)}"
        text += f" `is_causal=True` and the explicit lower-triangular mask {agree}."
    return text


# ---- why divide by √d_k ------------------------------------------------------------------------------------------


def softmax_stats(d_k, keys, scale, seed):
    """How peaked softmax(q·k) is for random unit-variance q and k, and what gradient gets through it: at the
    softmax's input (the scaled scores when scaled, the raw q·k when not), and at q itself, the same tensor both
    ways; the softmax's Jacobian diag(p) − ppᵀ; and the share of keys left with almost no gradient."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(QUERIES, d_k, generator=g), torch.randn(keys, d_k, generator=g)
    upstream = torch.randn(QUERIES, keys, generator=g)  # a fixed gradient arriving from above
    q.requires_grad_()
    scores = q @ k.T / (math.sqrt(d_k) if scale else 1.0)  # the softmax's input
    scores.retain_grad()
    weights = torch.softmax(scores, dim=-1)
    (weights * upstream).sum().backward()
    jacobian = torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)  # ∂p/∂s per query
    largest = scores.grad.abs().amax(-1, keepdim=True)
    return dict(score_std=scores.std().item(),
                entropy=torch.special.entr(weights).sum(-1).mean().item(),  # nats; entr(0) = 0
                top_weight=weights.max(-1).values.mean().item(),
                grad_input=scores.grad.norm(dim=-1).mean().item(),  # ‖∂loss/∂(softmax input)‖ per query
                grad_q=q.grad.norm(dim=-1).mean().item(),  # ‖∂loss/∂q‖ per query
                jacobian=jacobian.norm(dim=(-2, -1)).mean().item(),  # ‖diag(p) − ppᵀ‖ (Frobenius) per query
                starved=(scores.grad.abs() < 1e-3 * largest).double().mean().item())  # share of (query, key)
    # score gradients under a thousandth of their query's largest: keys that hardly learn


def scaling_facts(keys, largest_d_k, seed):
    """softmax_stats for d_k = 1, 2, 4, ... largest_d_k, with and without the 1/√d_k."""
    sizes = [2**p for p in range(int(math.log2(largest_d_k)) + 1)]
    return {"d_k": sizes, **{label: [softmax_stats(d, keys, scale, seed) for d in sizes]
                             for label, scale in (("scaled", True), ("unscaled", False))}}


@dataclass(frozen=True)
class ScalingResult:
    keys: int
    largest_d_k: int
    d_k: tuple[int, ...]
    scaled: tuple[dict, ...]
    unscaled: tuple[dict, ...]
    code: Script

    def series(self, label: str, stat: str) -> tuple[float, ...]:
        return tuple(row[stat] for row in getattr(self, label))


def validate_scaling(keys, largest_d_k, seed) -> None:
    _check_int(keys, MIN_KEYS, MAX_KEYS, "Keys per query")
    if largest_d_k not in LARGEST_D_K:
        raise InputError(f"Largest d_k must be one of {', '.join(map(str, LARGEST_D_K))}; got {largest_d_k}.")
    _check_int(seed, 0, MAX_SEED, "Seed")


SCALING_RUN = """facts = scaling_facts(keys, largest_d_k, seed)
for label in ("scaled", "unscaled"):
    for d_k, stats in zip(facts["d_k"], facts[label], strict=True):
        print(label, d_k, stats)"""


@entry(8, 64, 1)
def scaling_curves(keys: int = 16, largest_d_k: int = 1024, seed: int = 0) -> ScalingResult:
    """Entropy, largest weight and gradient through the softmax as d_k grows, scaled and unscaled."""
    validate_scaling(keys, largest_d_k, seed)
    code = script(softmax_stats, scaling_facts, imports="import math\n\nimport torch", run=SCALING_RUN,
                  settings=dict(QUERIES=QUERIES, keys=keys, largest_d_k=largest_d_k, seed=seed))
    facts = scaling_facts(keys, largest_d_k, seed)
    return ScalingResult(keys, largest_d_k, tuple(facts["d_k"]), tuple(facts["scaled"]), tuple(facts["unscaled"]),
                         code)


def scaling_sentence(r: ScalingResult) -> str:
    """The largest d_k's numbers, unscaled against scaled, and what a uniform softmax would give."""
    s, u = r.scaled[-1], r.unscaled[-1]
    return (f"At d_k = {r.largest_d_k}, the unscaled scores have standard deviation {fmt(u['score_std'])} "
            f"(scaled: {fmt(s['score_std'])}). Unscaled, softmax gives its largest key {fmt(u['top_weight'])} of "
            f"the weight on average and its entropy is {fmt(u['entropy'])} nats; scaled, {fmt(s['top_weight'])} "
            f"and {fmt(s['entropy'])} nats (a uniform spread over {r.keys} keys: {fmt(1 / r.keys)} and "
            f"{fmt(math.log(r.keys))} nats).")


def gradient_sentence(r: ScalingResult) -> str:
    """What each measured gradient is, unscaled against scaled at the largest d_k, and why scaling matters, read
    from the numbers: q's gradient compared on q itself; the softmax's Jacobian and the keys it leaves out."""
    s, u = r.scaled[-1], r.unscaled[-1]
    q_ratio, input_ratio = u["grad_q"] / s["grad_q"], u["grad_input"] / s["grad_input"]
    more = q_ratio > 1
    step = f"each unit of q moves the unscaled scores √{r.largest_d_k} = {fmt(math.sqrt(r.largest_d_k))} times as far"
    if more and input_ratio < 1:
        why = f", because {step}, which outweighs the {fmt(input_ratio)}×"
    elif more:
        why = f", because {step} and the gradient is also {fmt(input_ratio)}×"
    else:
        why = f": {step}, which does not make up for the {fmt(input_ratio)}×"
    text = (f"Gradients at d_k = {r.largest_d_k}, mean per query: with respect to **q** (the same tensor both "
            f"ways), unscaled is {fmt(u['grad_q'])} against scaled {fmt(s['grad_q'])}, {fmt(q_ratio)}× as much: q "
            f"gets {'more' if more else 'less'} gradient without the 1/√d_k{why} at the softmax's input. There (the "
            f"raw q·k unscaled, q·k/√d_k scaled: different tensors) it is {fmt(u['grad_input'])} against "
            f"{fmt(s['grad_input'])}. The softmax's Jacobian diag(p) − ppᵀ has norm {fmt(u['jacobian'])} unscaled "
            f"against {fmt(s['jacobian'])} scaled, and {u['starved']:.0%} of the (query, key) score gradients are "
            f"under a thousandth of their query's largest unscaled ({s['starved']:.0%} scaled).")
    if (u["top_weight"] > max(0.5, s["top_weight"]) and u["jacobian"] < s["jacobian"]
            and u["starved"] > s["starved"]):
        text += (f" So the unscaled softmax is saturated: most of the weight sits on one key ({fmt(u['top_weight'])} "
                 "on average), diag(p) − ppᵀ shrinks toward zero as p nears one-hot, and the gradient reaches only "
                 "the few keys whose weight is not negligible. "
                 + ("That saturation, not a small gradient at q, is what the scaling prevents." if more else
                    "The scaling prevents both the saturation and the smaller gradient at q."))
    return text


# ---- fully masked rows -------------------------------------------------------------------------------------------


BACKENDS = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def left_padded_causal(tokens, pad):
    """A causal mask over a left-padded sequence: the first `pad` tokens are padding. The padding queries may only
    look back at padding keys, so their rows allow nothing."""
    allowed = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    allowed[:, :pad] = False
    return allowed


def by_hand(q, k, v, allowed, fill):
    """Hand-written attention whose masked scores are `fill` (-inf, or the dtype's most negative number)."""
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, fill)
    return torch.softmax(scores, dim=-1) @ v


def run_method(method, q, k, v, pad):
    """Run one way of attending; backward from the real (non-padding) rows only, as a loss that ignores padding
    would. Returns the output, the names of the inputs whose gradient holds NaN, and the backend that ran."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = method(q, k, v)
    out[..., pad:, :].sum().backward()
    nan_grads = [name for name, t in zip("qkv", (q, k, v), strict=True) if t.grad.isnan().any().item()]
    return out.detach(), nan_grads, kernel_that_ran(out)


def sdpa_under(backend, mask):
    """SDPA allowed only `backend` (None: SDPA picks)."""
    def method(q, k, v):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return method


def masked_row_facts(tokens, pad, seed):
    """Each way of attending over a left-padded causal mask: what the fully masked rows become, whether NaN reaches
    the gradients, how far the real rows are from the hand-written -inf version's (correct) real rows."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(1, 1, tokens, 4) for _ in range(3))  # (B, H, T, d)
    allowed = left_padded_causal(tokens, pad)
    as_float = torch.zeros(tokens, tokens).masked_fill(~allowed, float("-inf"))  # additive mask, same meaning
    methods = {
        "by hand, masked_fill(-inf)": lambda q, k, v: by_hand(q, k, v, allowed, float("-inf")),
        "by hand, masked_fill(finfo.min)": lambda q, k, v: by_hand(q, k, v, allowed, torch.finfo(q.dtype).min),
        "by hand, padding queries see themselves": lambda q, k, v: by_hand(
            q, k, v, allowed | torch.eye(tokens, dtype=torch.bool), float("-inf")),
        "SDPA, bool mask (SDPA picks)": sdpa_under(None, allowed),
        **{f"SDPA {b}, {kind} mask": sdpa_under(b, m) for b in BACKENDS
           for kind, m in (("bool", allowed), ("-inf float", as_float))},
    }
    reference = by_hand(q, k, v, allowed, float("-inf"))[..., pad:, :]
    rows = []
    for name, method in methods.items():
        try:
            with warnings.catch_warnings():  # a backend that cannot run may warn why before it refuses
                warnings.simplefilter("ignore")
                out, nan_grads, kernel = run_method(method, q, k, v, pad)
        except RuntimeError as err:
            rows.append(dict(method=name, ran=False, refusal=str(err).split(". ")[0] + "."))
            continue
        rows.append(dict(method=name, ran=True, kernel=kernel if name.startswith("SDPA") else "by hand",
                         masked_rows=out[0, 0, :pad].tolist(),
                         nan_output=out[..., :pad, :].isnan().any().item(), nan_grads=nan_grads,
                         real_rows_diff=(out[..., pad:, :] - reference).abs().max().item()))
    return dict(allowed=allowed.tolist(), rows=rows)


@dataclass(frozen=True)
class MaskedRowsResult:
    tokens: int
    pad: int
    allowed: tuple[tuple[bool, ...], ...]
    rows: tuple[dict, ...]
    code: Script

    def row(self, method: str) -> dict:
        return next(r for r in self.rows if r["method"] == method)

    @property
    def ran(self) -> tuple[dict, ...]:
        return tuple(r for r in self.rows if r["ran"])


def validate_rows(tokens, pad, seed) -> None:
    _check_int(tokens, MIN_ROW_TOKENS, MAX_ROW_TOKENS, "Tokens T")
    _check_int(pad, 1, tokens - 1, "Padding tokens")
    _check_int(seed, 0, MAX_SEED, "Seed")


ROWS_RUN = """facts = masked_row_facts(tokens, pad, seed)
for row in facts["rows"]:
    print(row)"""


@entry(4, 1, 2)
def fully_masked_rows(tokens: int = 5, pad: int = 2, seed: int = 0) -> MaskedRowsResult:
    """A left-padded causal mask leaves the padding queries no key: what each way of attending returns there."""
    validate_rows(tokens, pad, seed)
    code = script(kernel_that_ran, left_padded_causal, by_hand, run_method, sdpa_under, masked_row_facts,
                  imports=imports("math", "warnings", "torch", "F", "sdpa_kernel"), run=ROWS_RUN,
                  settings=dict(BACKENDS=BACKENDS, tokens=tokens, pad=pad, seed=seed))
    facts = masked_row_facts(tokens, pad, seed)
    return MaskedRowsResult(tokens, pad, tuple(map(tuple, facts["allowed"])), tuple(facts["rows"]), code)


def outcome(row: dict) -> str:
    """What a method made of the fully masked rows: NaN, zeros or other numbers."""
    values = [x for r in row["masked_rows"] for x in r]
    if any(math.isnan(x) for x in values):
        return "NaN"
    return "zeros" if all(x == 0 for x in values) else "numbers"


OUTCOME_WORDS = {"NaN": "NaN", "zeros": "zeros", "numbers": "finite numbers, not all zero"}


def said(row: dict) -> str:
    """A method's outcome as a sentence says it."""
    return OUTCOME_WORDS[outcome(row)]


def rows_label(pad: int) -> str:
    return "query row 0" if pad == 1 else f"query rows 0–{pad - 1}"


def _grads(row: dict) -> str:
    names = " and ".join(n.upper() for n in row["nan_grads"])
    return f"the gradient of {names} holds NaN" if names else "the gradients stay finite"


def masked_rows_sentences(r: MaskedRowsResult) -> list[str]:
    """What each method did, read from the rows it returned; the backends that ran named, the refusals quoted."""
    hand, fmin, fixed = (r.row(m) for m in ("by hand, masked_fill(-inf)", "by hand, masked_fill(finfo.min)",
                                            "by hand, padding queries see themselves"))
    rows = rows_label(r.pad)
    picked = r.row("SDPA, bool mask (SDPA picks)")
    by_outcome: dict[str, dict[str, list[str]]] = {}  # outcome -> backend -> mask kinds
    for x in r.ran:
        if x["method"].startswith("SDPA ") and "picks" not in x["method"]:
            backend, kind = x["method"].removeprefix("SDPA ").removesuffix(" mask").split(", ")
            by_outcome.setdefault(outcome(x), {}).setdefault(backend, []).append(kind.replace("-inf", "−∞"))
    refused = sorted({x["method"].split()[1].rstrip(",") for x in r.rows if not x["ran"]})
    sdpa = "; ".join(" and ".join(f"{b} ({' and '.join(kinds)} mask{'s' if len(kinds) > 1 else ''})"
                                  for b, kinds in backends.items()) + f" returned {OUTCOME_WORDS[kind]}"
                     for kind, backends in by_outcome.items())
    if refused:
        sdpa += f"; {' and '.join(refused)} refused (“{next(x['refusal'] for x in r.rows if not x['ran'])}”)"
    return [
        f"**By hand with −∞:** every score of {rows} is −∞, so softmax has no finite score to normalise and "
        f"returns {said(hand)} there; {_grads(hand)}"
        + (", although the loss reads only the real rows (NaN·0 is NaN)." if hand["nan_grads"] else "."),
        f"**By hand with `finfo.min`:** {said(fmin)} there, and {_grads(fmin)}: a masked row's scores are all "
        "equal, so softmax spreads its weight evenly over keys the query was not allowed to see.",
        f"**SDPA here:** {sdpa}. Left to pick, SDPA ran {picked['kernel']} on these (B, H, T, d) tensors.",
        "**Avoid the row:** give every query at least one key (here each padding query may also attend to itself: "
        f"{said(fixed)} in its rows, {_grads(fixed)}, and the real rows differ from the −∞ version's by "
        f"{fmt(fixed['real_rows_diff'])}). " + _dropping_is_not_enough(r),
    ]


def _dropping_is_not_enough(r: MaskedRowsResult) -> str:
    """Whether leaving the padding rows out of the loss is enough, read from the rows: every method here already
    backpropagates from the real rows only."""
    nan = [x for x in r.ran if x["nan_grads"]]
    clean = [x["method"] for x in r.ran if not x["nan_grads"] and outcome(x) != "NaN"
             and x["method"] != "by hand, padding queries see themselves"]
    text = "Leaving the padding rows out of the loss, as every method here already does, "
    if not nan:
        return text + "kept every gradient finite on this run."
    names = "; ".join(f"“{x['method']}”: {', '.join(n.upper() for n in x['nan_grads'])}" for x in nan)
    if all(outcome(x) == "NaN" for x in nan):
        text += (f"is not enough where the row comes out NaN: the backward pass still multiplies that NaN by a zero "
                 f"gradient, and NaN·0 is NaN ({names})")
    else:
        text += f"still leaves NaN in the gradient of {names}"
    if clean:
        zeros = any(m.startswith("SDPA") and outcome(r.row(m)) == "zeros" for m in clean)
        text += (f". Where the row comes out finite ({len(clean)} of the methods that ran"
                 + (", SDPA's zeros among them" if zeros else "") + "), dropping it is enough: their gradients "
                 "stay finite")
    return text + "."


GRADS_COLUMN = "inputs with NaN in their gradient (loss on the real rows only)"


def masked_rows_table(r: MaskedRowsResult) -> list[dict]:
    """One row per method: the backend that ran (or its refusal), query 0's output, NaN in output and gradients,
    and how far the real rows are from the hand-written −∞ version's."""
    table = []
    for row in r.rows:
        if not row["ran"]:
            table.append({"method": row["method"], "ran": "refused: " + row["refusal"], "query 0's output": "—",
                          "NaN in output": "—", GRADS_COLUMN: "—", "real rows max |diff|": "—"})
            continue
        table.append({"method": row["method"], "ran": row["kernel"],
                      "query 0's output": "[" + ", ".join(f"{x:.3g}" for x in row["masked_rows"][0]) + "]",
                      "NaN in output": "yes" if row["nan_output"] else "no",
                      GRADS_COLUMN: ", ".join(row["nan_grads"]) or "none",
                      "real rows max |diff|": fmt(row["real_rows_diff"])})
    return table


# ---- memory of the T×T matrix ------------------------------------------------------------------------------------


def score_bytes(batch, heads, length, head_dim, dtype):
    """Bytes of the (B, H, T, T) scores and of what a fused CPU flash kernel returns (output and logsumexp), read
    from meta tensors: shapes and dtypes without storage."""
    q = torch.empty(batch, heads, length, head_dim, device="meta", dtype=dtype)
    scores = q @ q.transpose(-2, -1)
    out, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[:2]
    return dict(scores_shape=tuple(scores.shape), scores=scores.nbytes, fused=out.nbytes + logsumexp.nbytes,
                fused_shapes=(tuple(out.shape), tuple(logsumexp.shape)), logsumexp_dtype=str(logsumexp.dtype))


def saved_for_backward(backend):
    """What autograd keeps for backward when SDPA runs `backend` on small real bfloat16 tensors (B, H, T, d) =
    SAVED_SHAPE: the shape and dtype of every tensor it saves, and which storage it lives in (numbered in the order
    first seen, with that storage's bytes): two saved tensors can be views of one buffer."""
    q, k, v = (torch.randn(SAVED_SHAPE, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    saved, storages = [], {}

    def keep(t):
        storage = t.untyped_storage()
        number = storages.setdefault(storage.data_ptr(), len(storages))
        saved.append((tuple(t.shape), str(t.dtype).removeprefix("torch."), number, storage.nbytes()))
        return t
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t), sdpa_kernel(getattr(SDPBackend, backend)):
        out = F.scaled_dot_product_attention(q, k, v)
    return dict(kernel=kernel_that_ran(out), grad_fn=out.grad_fn.name(), saved=saved)


def memory_facts(batch, heads, head_dim):
    return dict(bytes={name: [score_bytes(batch, heads, t, head_dim, getattr(torch, name)) for t in LENGTHS]
                       for name in MEMORY_DTYPES},
                saved={backend: saved_for_backward(backend) for backend in ("MATH", "FLASH_ATTENTION")})


@dataclass(frozen=True)
class MemoryResult:
    batch: int
    heads: int
    head_dim: int
    lengths: tuple[int, ...]
    by_dtype: dict  # dtype name -> one score_bytes dict per length
    saved: dict  # backend -> saved_for_backward's facts, on small real tensors
    code: Script


def validate_memory(batch, heads, head_dim) -> None:
    _check_int(batch, 1, MAX_BATCH, "Batch B")
    _check_int(heads, 1, MAX_HEADS, "Heads H")
    _check_int(head_dim, MIN_HEAD_DIM, MAX_HEAD_DIM, "Head size d")


MEMORY_RUN = """facts = memory_facts(batch, heads, head_dim)
for dtype, rows in facts["bytes"].items():
    for length, row in zip(LENGTHS, rows, strict=True):
        print(dtype, length, row)
for backend, saved in facts["saved"].items():
    print(backend, saved)"""


@entry(2, 4, 64)
def score_memory(batch: int = 1, heads: int = 32, head_dim: int = 128) -> MemoryResult:
    """The T×T scores' bytes against a fused kernel's, for T up to 32768, from meta tensors; and what each CPU
    backend saves for backward, on small real tensors."""
    validate_memory(batch, heads, head_dim)
    code = script(kernel_that_ran, score_bytes, saved_for_backward, memory_facts, run=MEMORY_RUN,
                  imports=imports("torch", "F", "sdpa_kernel"),
                  settings=dict(LENGTHS=LENGTHS, MEMORY_DTYPES=MEMORY_DTYPES, SAVED_SHAPE=SAVED_SHAPE, batch=batch,
                                heads=heads, head_dim=head_dim))
    facts = memory_facts(batch, heads, head_dim)
    return MemoryResult(batch, heads, head_dim, LENGTHS, facts["bytes"], facts["saved"], code)


def memory_sentence(r: MemoryResult) -> str:
    f32, bf16 = r.by_dtype["float32"][-1], r.by_dtype["bfloat16"][-1]
    growth = r.by_dtype["float32"][-1]["scores"] / r.by_dtype["float32"][-2]["scores"]
    fused_growth = r.by_dtype["float32"][-1]["fused"] / r.by_dtype["float32"][-2]["fused"]
    out_shape, lse_shape = f32["fused_shapes"]
    return (f"At T = {r.lengths[-1]:,} the {f32['scores_shape']} scores take {fmt_bytes(f32['scores'])} in float32 "
            f"and {fmt_bytes(bf16['scores'])} in bfloat16, for one attention call of one layer. The fused kernel "
            f"returns the output {out_shape} and a {f32['logsumexp_dtype'].removeprefix('torch.')} logsumexp "
            f"{lse_shape}: {fmt_bytes(f32['fused'])} in float32, {fmt_bytes(bf16['fused'])} in bfloat16. Doubling "
            f"T multiplied the scores by {growth:g} and the fused kernel's bytes by {fused_growth:g}.")


def saved_sentence(r: MemoryResult) -> str:
    """What each backend saved for backward on the small real tensors: tensors and the storages under them counted,
    T×T ones named with their storage's bytes."""
    t = SAVED_SHAPE[2]
    parts = []
    for backend, facts in r.saved.items():
        square = [(shape, dtype, n, nbytes) for shape, dtype, n, nbytes in facts["saved"] if shape[-2:] == (t, t)]
        dtypes = sorted({dtype for _, dtype, _, _ in facts["saved"]})
        upcast = " (upcast from the bfloat16 inputs)" if "bfloat16" not in dtypes else ""
        tensors, storages = len(facts["saved"]), len({n for _, _, n, _ in facts["saved"]})
        text = (f"{backend} (autograd node {facts['grad_fn']}) saved {tensors} tensor{'s' * (tensors != 1)} in "
                f"{storages} storage{'s' * (storages != 1)}, {' and '.join(dtypes)}{upcast}; ")
        if not square:
            text += "none of them T×T"
        else:
            buffers = {n: nbytes for _, _, n, nbytes in square}
            names = ", ".join(str(shape) for shape, _, _, _ in square)
            kept = (f"{len(buffers)} T×T buffer{'s' * (len(buffers) != 1)} of "
                    + " and ".join(f"{b:,} bytes" for b in buffers.values()))
            if len(square) > len(buffers):
                text += f"{len(square)} of the tensors are T×T ({names}) but they share storage: {kept} is kept"
            else:
                text += f"{len(square)} T×T ({names}): {kept} kept"
        parts.append(text)
    return (f"Measured here on real bfloat16 tensors {SAVED_SHAPE} (B, H, T, d), with a hook on what autograd "
            "saves for backward, counting storages (a view shares its base's): " + "; ".join(parts) + ".")


# ---- predict, then run -------------------------------------------------------------------------------------------


def _sdpa_shape():
    q = torch.randn(2, 4, 5, 8)  # (B, H, T_q, d_k)
    k = torch.randn(2, 4, 7, 8)  # (B, H, T_k, d_k)
    v = torch.randn(2, 4, 7, 16)  # (B, H, T_k, d_v)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v).shape


def _scores_shape():
    q = torch.randn(3, 10, 64)  # (B, T, d_k)
    k = torch.randn(3, 12, 64)
    return (q @ k.transpose(-2, -1)).shape


def _causal_count():
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()
    return int(allowed.sum())


def _masked_row():
    scores = torch.tensor([[0.5, 1.0, -1.0], [2.0, 0.0, 1.0]])
    allowed = torch.tensor([[True, True, False], [False, False, False]])
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights[1, 0].item()


def _scores_bytes():
    q = torch.empty(1, 32, 8192, 128, device="meta", dtype=torch.bfloat16)
    return (q @ q.transpose(-2, -1)).nbytes


QUESTIONS = (
    Question("sdpa_shape", "q is (2, 4, 5, 8), k is (2, 4, 7, 8), v is (2, 4, 7, 16). What shape does "
             "F.scaled_dot_product_attention(q, k, v) return?", _sdpa_shape,
             "One output row per query (5), each a weighted average of rows of V (16 wide): (B, H, T_q, d_v).",
             kind="shape"),
    Question("scores_shape", "What is the shape of q @ k.transpose(-2, -1) for q (3, 10, 64) and k (3, 12, 64)?",
             _scores_shape, "One score per (query, key) pair: (B, T_q, T_k). d_k is summed away.", kind="shape"),
    Question("causal_count", "How many (query, key) pairs may attend under a causal mask over 6 tokens?",
             _causal_count, "The lower triangle with its diagonal: 6·7/2 = 21 of the 36 pairs.", kind="number"),
    Question("masked_row", "Row 1 masks every key with −∞. What does the hand-written softmax put in weights[1, 0]?",
             _masked_row, "Every score in the row is −∞: softmax has no finite score to normalise (exp/sum would "
             "be 0/0) and returns NaN. SDPA's backends on this build return zeros for such a row; a hand-written "
             "softmax does not.", kind="choice",
             choices=("0", "0.333333", "nan", "-inf")),
    Question("scores_bytes", "How many bytes does the (1, 32, 8192, 8192) bfloat16 score matrix take?", _scores_bytes,
             "32 · 8192² · 2 bytes = 4 GiB, for a single layer's attention at T = 8192: what flash kernels never "
             "store.", kind="number"),
)
