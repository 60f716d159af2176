"""The transformer block: one written by hand against nn.TransformerEncoderLayer on the same weights (post-norm and
pre-norm, on the fused fast path and the Python path), and what one block costs: parameters read from its modules,
matmul FLOPs per token counted by FlopCounterMode, and the bytes autograd keeps for backward."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from demos.errors import InputError, quoted
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script
from demos.transformers.multihead import OpLog

IMPORTS = ("import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
           "from torch.utils._python_dispatch import TorchDispatchMode")
COST_IMPORTS = IMPORTS + "\nfrom torch.utils.flop_counter import FlopCounterMode"
EMBED_CHOICES = (8, 16, 24, 32, 48, 64)  # every one is divisible by every head count offered
HEAD_CHOICES = (1, 2, 4, 8)
ACTIVATIONS = ("relu", "gelu")
EPS_CHOICES = (1e-5, 1e-6, 1e-12)
MAX_TOKENS, MAX_BATCH, MAX_SEED = 16, 4, 9999
DEFAULT_DROPOUT = 0.1  # nn.TransformerEncoderLayer's own default
RUNS = ("eval() under no_grad", "train(), dropout=0.0", f"train(), dropout={DEFAULT_DROPOUT} (the default)")
PARTS = ("attention projections", "attention over T tokens", "MLP (4E wide)", "layer norms")
FLOAT_BYTES = 4


# ---- the torch core (shown in the snippets) -------------------------------------------------------------------


def make_block(embed, heads, activation, norm_first, eps, dropout, seed):
    """nn.TransformerEncoderLayer with seeded weights, batch_first=True and a 4E-wide MLP."""
    torch.manual_seed(seed)
    return nn.TransformerEncoderLayer(embed, heads, dim_feedforward=4 * embed, dropout=dropout,
                                      activation=activation, layer_norm_eps=eps, batch_first=True,
                                      norm_first=norm_first)


def attention_by_hand(x, attn):
    """Multi-head self-attention from nn.MultiheadAttention's own parameters."""
    B, T, E = x.shape
    H = attn.num_heads
    q, k, v = F.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(B, T, H, E // H).transpose(1, 2) for t in (q, k, v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(E // H), dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(B, T, E)
    return F.linear(out, attn.out_proj.weight, attn.out_proj.bias)


def mlp_by_hand(x, layer, activation):
    """linear1, the activation, linear2 (no dropout: the hand-written block has none)."""
    act = F.gelu if activation == "gelu" else F.relu
    return F.linear(act(F.linear(x, layer.linear1.weight, layer.linear1.bias)), layer.linear2.weight,
                    layer.linear2.bias)


def block_by_hand(x, layer, activation):
    """Post-norm: norm(x + sublayer(x)); pre-norm (norm_first): x + sublayer(norm(x)). Same eps as the layer."""
    def norm(t, ln):
        return F.layer_norm(t, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    if layer.norm_first:
        x = x + attention_by_hand(norm(x, layer.norm1), layer.self_attn)
        return x + mlp_by_hand(norm(x, layer.norm2), layer, activation)
    x = norm(x + attention_by_hand(x, layer.self_attn), layer.norm1)
    return norm(x + mlp_by_hand(x, layer, activation), layer.norm2)


def run_logged(layer, x):
    """The layer's output and the path it took (the fast path's check reads training, grad mode, heads, ...)."""
    with OpLog() as log:
        out = layer(x)
    fused = "aten._transformer_encoder_layer_fwd.default" in log.ops
    return out.detach(), "fused fast path" if fused else f"Python path, {len(log.ops)} aten ops"


def equivalence_facts(embed, heads, tokens, batch, activation, eps, seed):
    """max |block by hand - nn.TransformerEncoderLayer| for post-norm and pre-norm, in three runs of the layer."""
    x = torch.randn(batch, tokens, embed, generator=torch.Generator().manual_seed(seed + 1))
    rows = []
    for norm_first in (False, True):
        layer = make_block(embed, heads, activation, norm_first, eps, 0.0, seed)
        with torch.no_grad():
            mine = block_by_hand(x, layer, activation)
            eval_out, eval_path = run_logged(layer.eval(), x)
        train_out, train_path = run_logged(layer.train(), x)  # grad enabled: the Python path
        default = make_block(embed, heads, activation, norm_first, eps, 0.1, seed).train()
        default.load_state_dict(layer.state_dict())
        torch.manual_seed(seed)  # dropout draws its masks from the global generator
        dropped_out, dropped_path = run_logged(default, x)
        for run, out, path in (("eval() under no_grad", eval_out, eval_path),
                               ("train(), dropout=0.0", train_out, train_path),
                               ("train(), dropout=0.1 (the default)", dropped_out, dropped_path)):
            rows.append((norm_first, run, float((out - mine).abs().max()), path))
    return dict(rows=rows)


def parameter_parts(layer):
    """Parameters per part, read from the modules."""
    def numel(*modules):
        return sum(p.numel() for m in modules for p in m.parameters())

    return {"attention projections": numel(layer.self_attn), "attention over T tokens": 0,
            "MLP (4E wide)": numel(layer.linear1, layer.linear2), "layer norms": numel(layer.norm1, layer.norm2)}


def parameter_formula(E):
    """in_proj 3E² + 3E and out_proj E² + E; linear1 4E² + 4E and linear2 4E² + E; two norms of 2E."""
    return {"attention projections": 4 * E * E + 4 * E, "attention over T tokens": 0,
            "MLP (4E wide)": 8 * E * E + 5 * E, "layer norms": 4 * E}


def flop_formula(E, T):
    """Forward matmul FLOPs per token, 2 per multiply-add: the weights 2·12E², attention 2·T·E twice."""
    return {"attention projections": 2 * 4 * E * E, "attention over T tokens": 2 * T * E + 2 * T * E,
            "MLP (4E wide)": 2 * 8 * E * E, "layer norms": 0}


def counted_flops(fn):
    """FLOPs of the matmuls `fn` runs, as torch.utils.flop_counter counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def memory_formula(E, H, T, activation, kept_weights):
    """Floats per token autograd keeps for backward (float32: 4 bytes each), dropout=0.0. The attention keeps
    either H log-sum-exp values (a fused kernel) or its H×T weights (written by hand); relu keeps its output,
    gelu its input, and linear2 its input either way."""
    hidden = 4 * E if activation == "relu" else 8 * E
    return {"attention projections": 5 * E,  # the input to in_proj, q, k, v, the merged heads
            "attention over T tokens": H * T if kept_weights else H,
            "MLP (4E wide)": E + hidden,  # linear1's input and the hidden layer
            "layer norms": 2 * E + 4}  # each norm's input, mean and 1/std


def saved_bytes(fn, parameters):
    """Bytes of the tensors autograd saves while `fn` runs, each storage once, the parameters left out."""
    own = {p.untyped_storage().data_ptr() for p in parameters}
    kept = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(kept.values())


def cost_facts(embed, heads, tokens, batch, activation, seed):
    """Parameters, FLOPs per token and bytes kept per token: formula beside what torch reports."""
    layer = make_block(embed, heads, activation, False, 1e-5, 0.0, seed).train()
    x = torch.randn(batch, tokens, embed, generator=torch.Generator().manual_seed(seed + 1))
    n = batch * tokens
    with OpLog() as log:
        layer(x)
    return dict(
        attention_kernels=sorted({op for op in log.ops if "attention" in op}),
        parameter_parts=parameter_parts(layer), parameter_formula=parameter_formula(embed),
        parameter_count=sum(p.numel() for p in layer.parameters()),
        flop_formula=flop_formula(embed, tokens),
        flops_by_hand=counted_flops(lambda: block_by_hand(x, layer, activation)) / n,
        flops_layer=counted_flops(lambda: layer(x)) / n,
        memory_formula_layer=memory_formula(embed, heads, tokens, activation, kept_weights=False),
        memory_formula_by_hand=memory_formula(embed, heads, tokens, activation, kept_weights=True),
        bytes_layer=saved_bytes(lambda: layer(x), layer.parameters()) / n,
        bytes_by_hand=saved_bytes(lambda: block_by_hand(x, layer, activation), layer.parameters()) / n,
    )


# ---- validation and the entries a page computes -------------------------------------------------------------


def validate(embed: int, heads: int, tokens: int, batch: int, activation: str, seed: int) -> None:
    if embed not in EMBED_CHOICES:
        raise InputError(f"Model width E must be one of {', '.join(map(str, EMBED_CHOICES))}; got {embed}.")
    if heads not in HEAD_CHOICES:
        raise InputError(f"Heads H must be one of {', '.join(map(str, HEAD_CHOICES))}; got {heads}.")
    if not 1 <= tokens <= MAX_TOKENS:
        raise InputError(f"Tokens T must be between 1 and {MAX_TOKENS}; got {tokens}.")
    if not 1 <= batch <= MAX_BATCH:
        raise InputError(f"Batch B must be between 1 and {MAX_BATCH}; got {batch}.")
    if activation not in ACTIVATIONS:
        raise InputError(f"Activation must be relu or gelu; got {quoted(activation)}.")
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be between 0 and {MAX_SEED}; got {seed}.")


@dataclass(frozen=True)
class Equivalence:
    embed: int
    heads: int
    tokens: int
    activation: str
    eps: float
    rows: list  # (norm_first, run, max |difference|, path taken)
    code: Script

    def row(self, norm_first: bool, run: str) -> tuple:
        return next(r for r in self.rows if r[0] == norm_first and r[1] == run)


@entry(16, 4, 6, 2, "gelu", 1e-5, 0)
def block_equivalence(embed: int = 32, heads: int = 4, tokens: int = 8, batch: int = 2, activation: str = "relu",
                      eps: float = 1e-5, seed: int = 0) -> Equivalence:
    """The hand-written block against nn.TransformerEncoderLayer, both norm placements, three runs each."""
    validate(embed, heads, tokens, batch, activation, seed)
    if eps not in EPS_CHOICES:
        raise InputError(f"layer_norm_eps must be one of {', '.join(map(str, EPS_CHOICES))}; got {quoted(eps)}.")
    code = script(make_block, attention_by_hand, mlp_by_hand, block_by_hand, OpLog, run_logged, equivalence_facts,
                  imports=IMPORTS, settings={"embed": embed, "heads": heads, "tokens": tokens, "batch": batch,
                                             "activation": activation, "eps": eps, "seed": seed},
                  run="""
for norm_first, run, diff, path in equivalence_facts(embed, heads, tokens, batch, activation, eps, seed)["rows"]:
    print(f"norm_first={norm_first} {run}: max |difference| {diff} ({path})")""")
    facts = equivalence_facts(embed, heads, tokens, batch, activation, eps, seed)
    return Equivalence(embed, heads, tokens, activation, eps, **facts, code=code)


@dataclass(frozen=True)
class Costs:
    embed: int
    heads: int
    tokens: int
    batch: int
    activation: str
    attention_kernels: list  # the aten ops with "attention" in their name that the layer ran in train()
    parameter_parts: dict
    parameter_formula: dict
    parameter_count: int
    flop_formula: dict  # per token
    flops_by_hand: float  # FlopCounterMode, per token
    flops_layer: float
    memory_formula_layer: dict  # floats per token
    memory_formula_by_hand: dict
    bytes_layer: float  # saved_tensors_hooks, per token
    bytes_by_hand: float
    code: Script

    @property
    def formula_flops(self) -> int:
        return sum(self.flop_formula.values())

    @property
    def formula_bytes_layer(self) -> int:
        return FLOAT_BYTES * sum(self.memory_formula_layer.values())

    @property
    def formula_bytes_by_hand(self) -> int:
        return FLOAT_BYTES * sum(self.memory_formula_by_hand.values())

    @property
    def layer_bytes(self) -> int:
        """Bytes kept for backward by one layer over the whole (B, T) batch."""
        return round(self.bytes_layer * self.batch * self.tokens)


@entry(16, 4, 6, 2, "relu", 0)
def block_costs(embed: int = 32, heads: int = 4, tokens: int = 8, batch: int = 2, activation: str = "relu",
                seed: int = 0) -> Costs:
    """One block's parameters, FLOPs per token and saved bytes per token, formula beside measurement."""
    validate(embed, heads, tokens, batch, activation, seed)
    code = script(make_block, attention_by_hand, mlp_by_hand, block_by_hand, parameter_parts, parameter_formula,
                  flop_formula, counted_flops, memory_formula, saved_bytes, OpLog, cost_facts, imports=COST_IMPORTS,
                  settings={"embed": embed, "heads": heads, "tokens": tokens, "batch": batch,
                            "activation": activation, "seed": seed},
                  run=print_each("cost_facts(embed, heads, tokens, batch, activation, seed)"))
    return Costs(embed, heads, tokens, batch, activation, **cost_facts(embed, heads, tokens, batch, activation, seed),
                 code=code)


# ---- sentences the page shows, read from the numbers ----------------------------------------------------------


def short(value: float) -> str:
    return "0" if value == 0 else f"{value:.2g}"


def equivalence_sentence(e: Equivalence, norm_first: bool) -> str:
    """One norm placement: how far the hand-written block is from each dropout-free run, and the path each took."""
    name = "Pre-norm (`norm_first=True`)" if norm_first else "Post-norm (`norm_first=False`, the default)"
    _, _, eval_diff, eval_path = e.row(norm_first, RUNS[0])
    _, _, train_diff, train_path = e.row(norm_first, RUNS[1])
    return (f"{name}: max |difference| {short(eval_diff)} in eval() under no_grad ({eval_path}) and "
            f"{short(train_diff)} in train() with dropout=0.0 ({train_path}).")


def path_sentence(e: Equivalence) -> str:
    """Why eval() took the path it took, from the path recorded and the one condition the settings can break."""
    worst = max(r[2] for r in e.rows if r[1] != RUNS[2])
    agree = (f"Every dropout-free run matches the block written by hand to float32 rounding (at most "
             f"{short(worst)})." if worst < 1e-5 else
             f"The dropout-free runs differ from the block written by hand by up to {short(worst)}.")
    if "fused" in e.row(False, RUNS[0])[3]:
        return ("In eval() under no_grad the layer skips its Python code and calls one fused op, "
                "`torch._transformer_encoder_layer_fwd`; with grad enabled (or in train()) it runs self_attn, "
                f"linear1, linear2 and the norms one by one. {agree}")
    reason = (f"the fast path needs an even number of heads and H = {e.heads}" if e.heads % 2 else
              "one of the fast path's conditions failed")
    return (f"Even in eval() under no_grad this layer ran its Python code, not the fused "
            f"`torch._transformer_encoder_layer_fwd`: {reason}. {agree}")


def dropout_sentence(e: Equivalence) -> str:
    post, pre = (e.row(norm_first, RUNS[2])[2] for norm_first in (False, True))
    return (f"Left at its default `dropout={DEFAULT_DROPOUT}`, the layer in train() zeroes activations at random at "
            f"four sites (attention weights, after attention, inside and after the MLP), so it is "
            f"{short(post)} (post-norm) and {short(pre)} (pre-norm) away from the block by hand: compare with "
            f"dropout=0.0, or in eval().")


def parameters_sentence(c: Costs) -> str:
    E = c.embed
    total = sum(c.parameter_formula.values())
    verdict = "equal to" if c.parameter_count == total else "not equal to"
    attention, mlp, norms = (c.parameter_parts[p] for p in ("attention projections", "MLP (4E wide)", "layer norms"))
    return (f"`parameters()` counts **{c.parameter_count:,}**: self_attn {attention:,} (4E² + 4E), linear1 and "
            f"linear2 {mlp:,} (8E² + 5E: 4E² each, biases 4E and E), norm1 and norm2 {norms:,} (4E), "
            f"{verdict} 12E² + 13E = 12·{E}² + 13·{E} = {total:,}. The heads add nothing: they split E.")


def flops_sentence(c: Costs) -> str:
    E, T = c.embed, c.tokens
    weights = c.flop_formula["attention projections"] + c.flop_formula["MLP (4E wide)"]
    over_t = c.flop_formula["attention over T tokens"]
    by_hand = "equal" if c.flops_by_hand == c.formula_flops else "not equal"
    head = (f"Forward matmul FLOPs per token (2 per multiply-add): 2·12E² for the weights plus 4·T·E for q·kᵀ and "
            f"weights·v, 24·{E}² + 4·{T}·{E} = {weights:,} + {over_t:,} = **{c.formula_flops:,}**; the attention "
            f"term overtakes the weights' when T > 6E = {6 * E}. `FlopCounterMode` counts "
            f"{c.flops_by_hand:,.0f} per token on the block by hand ({by_hand}). ")
    missing = c.formula_flops - c.flops_layer
    if missing == 0:
        return head + f"On `nn.TransformerEncoderLayer` it counts {c.flops_layer:,.0f} too."
    kernels = ", ".join(f"`{k.rsplit('.', 1)[0]}`" for k in c.attention_kernels) or "one attention kernel"
    if missing == over_t:
        return head + (f"On `nn.TransformerEncoderLayer` it counts {c.flops_layer:,.0f}, exactly the 4·T·E term "
                       f"({over_t:,}) fewer: the layer's attention ran as {kernels}, and FlopCounterMode counted "
                       "none of its FLOPs, only the weights' matmuls.")
    return head + f"On `nn.TransformerEncoderLayer` it counts {c.flops_layer:,.0f}, {missing:,.0f} fewer."


def memory_sentence(c: Costs) -> str:
    E, H, T = c.embed, c.heads, c.tokens
    k = 12 if c.activation == "relu" else 16
    layer_ok = "equal to" if c.bytes_layer == c.formula_bytes_layer else "not equal to"
    hand_ok = "equal to" if c.bytes_by_hand == c.formula_bytes_by_hand else "not equal to"
    why = ("relu keeps its output, which linear2 keeps too" if c.activation == "relu" else
           "gelu keeps its input and linear2 gelu's output: two 4E tensors")
    return (f"In train() autograd keeps **{c.bytes_layer:,.0f} bytes per token** for backward (summed in "
            f"`saved_tensors_hooks`, each storage once, parameters left out), {layer_ok} 4·({k}E + H + 4) = "
            f"4·({k}·{E} + {H} + 4) = {c.formula_bytes_layer:,} ({why}). The block by hand keeps "
            f"{c.bytes_by_hand:,.0f}, {hand_ok} 4·({k}E + H·T + 4) = {c.formula_bytes_by_hand:,}: its softmax keeps "
            f"the H×T weights of every token (B·H·T² numbers in all), where the layer's fused attention keeps H "
            f"log-sum-exp values and recomputes the weights in backward. One layer on this batch of "
            f"{c.batch}×{T} tokens keeps {c.layer_bytes:,} bytes; a model keeps that per layer, on top of its "
            f"weights, gradients and optimizer state: see "
            f"[Memory & speed → Training step](/memory?mem_tab=Training+step).")


# ---- predict-then-run questions ----------------------------------------------------------------------------------


def _block_parameter_count():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=64)
    return sum(p.numel() for p in layer.parameters())


def _default_dropout_repeats():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, batch_first=True)  # a fresh module is in train()
    x = torch.randn(1, 5, 8)
    return torch.equal(layer(x), layer(x))


def _layer_flops_counted():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=64, dropout=0.0, batch_first=True)
    x = torch.randn(1, 4, 16)  # B=1, T=4 tokens
    with FlopCounterMode(display=False) as counter:
        layer(x)  # train() with grad: the Python path
    return counter.get_total_flops()


def _saved_bytes_per_token():
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    own = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    kept = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in own:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(1, 4, 8)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return sum(kept.values()) // x.shape[1]  # bytes per token


QUESTIONS = (
    Question("tf_block_params", "How many parameters does nn.TransformerEncoderLayer(16, 4, dim_feedforward=64) have?",
             _block_parameter_count,
             "self_attn 4E² + 4E = 1,088; linear1 (16→64) and linear2 (64→16) 8E² + 5E = 2,128; norm1 and norm2 "
             "4E = 64: 12E² + 13E = 3,280. The 4 heads add nothing: they split E.",
             kind="number", imports="import torch.nn as nn"),
    Question("tf_block_dropout", "The same input twice through a freshly built layer: are the outputs equal?",
             _default_dropout_repeats,
             "A new module is in train() mode and TransformerEncoderLayer's dropout defaults to 0.1: each call "
             "draws new masks, so the outputs differ (False). Call .eval() or build it with dropout=0.0.",
             choices=("True", "False"), imports="import torch\nimport torch.nn as nn"),
    Question("tf_block_flops", "How many FLOPs does FlopCounterMode count for this forward (E=16, T=4, B=1)?",
             _layer_flops_counted,
             "The matmul formula says T·(24E² + 4TE) = 4·(6,144 + 256) = 25,600, but on CPU the layer's attention "
             "runs as aten._scaled_dot_product_flash_attention_for_cpu, which FlopCounterMode does not count: it "
             "reports only the weights' 4·24·16² = 24,576.", kind="number",
             imports="import torch\nimport torch.nn as nn\nfrom torch.utils.flop_counter import FlopCounterMode"),
    Question("tf_block_saved", "How many bytes per token does autograd keep for this layer (E=8, H=2, relu)?",
             _saved_bytes_per_token,
             "4 bytes × (12E + H + 4) = 4 × (96 + 2 + 4) = 408: the in_proj input, q, k, v, the merged heads (5E), "
             "two norm inputs (2E) with their mean and 1/std (4), linear1's input (E), relu's output (4E, shared "
             "with linear2) and H log-sum-exp values from the fused attention. No T×T matrix is kept.",
             kind="number", imports="import torch\nimport torch.nn as nn"),
)
