"""Norms & residuals: which axes LayerNorm, BatchNorm and RMSNorm reduce over, BatchNorm's dependence on the rest of
its batch, RMSNorm as LayerNorm without centering, and pre-norm against post-norm stacks at depth."""

from dataclasses import dataclass

import torch
import torch.nn as nn

from demos.errors import InputError
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script
from demos.transformers.checks import check_choice, check_range

NORM_IMPORTS = "import torch\nimport torch.nn as nn"
NORMS = ("LayerNorm", "BatchNorm", "RMSNorm")
MAX_BATCH, MAX_TOKENS, MAX_CHANNELS = 4, 8, 8
BN_BATCHES = (2, 4, 8, 16, 32, 64)
MIN_FEATURES, MAX_FEATURES = 2, 32
MIN_BATCHES, MAX_BATCHES = 2, 8
MAX_OFFSET = 5.0
OFFSETS = tuple(i / 2 for i in range(-10, 11))  # the curve's grid of added means: -5 to 5 in steps of 0.5
MAX_DEPTH = 24
WIDTHS = (16, 32, 64)
HEADS = (1, 2, 4)
ROUNDING = 1e-5  # float32 differences below this are rounding (the values themselves are of order 1)


# ---- the torch core: the code each snippet shows -----------------------------------------------------------------


def batch_norm_over_tokens(bn, x):
    """BatchNorm1d wants channels second: (B, T, C) -> (B, C, T) -> normalize -> back."""
    return bn(x.transpose(1, 2)).transpose(1, 2)


def shared_statistics(x, b, t, c):
    """Nudge one input x[b, t, c] and see which outputs of each norm move: exactly the elements whose mean and
    variance (or RMS) included it. BatchNorm is in train() mode, so it uses the batch's statistics."""
    channels = x.shape[2]
    norms = {"LayerNorm": nn.LayerNorm(channels),
             "BatchNorm": lambda v: batch_norm_over_tokens(nn.BatchNorm1d(channels), v),
             "RMSNorm": nn.RMSNorm(channels)}
    nudged = x.clone()
    nudged[b, t, c] += 1.0
    moved = {}
    with torch.no_grad():
        for name, norm in norms.items():
            moved[name] = (norm(nudged) != norm(x)).int().tolist()  # 1 where the output changed
    return moved


def axes_facts(batch, tokens, channels, b, t, c, seed):
    torch.manual_seed(seed)
    x = torch.randn(batch, tokens, channels)
    moved = shared_statistics(x, b, t, c)
    counts = {name: int(torch.tensor(m).sum()) for name, m in moved.items()}
    return dict(moved=moved, counts=counts)


def one_sample_in_many_batches(features, batch, batches, seed):
    """Sample 0 in `batches` different batches (the other batch - 1 samples drawn afresh each time): its output from
    BatchNorm in train() mode, from the same BatchNorm in eval() mode afterwards, and from LayerNorm."""
    torch.manual_seed(seed)
    sample = torch.randn(1, features)
    full_batches = [torch.cat([sample, torch.randn(batch - 1, features)]) for _ in range(batches)]
    bn, ln = nn.BatchNorm1d(features), nn.LayerNorm(features)
    with torch.no_grad():
        train = [bn(x)[0] for x in full_batches]  # train(): each batch's own mean and variance
        bn.eval()  # eval(): the running statistics those train() calls left, the same for every batch
        evaluated = [bn(x)[0] for x in full_batches]
        layer = [ln(x)[0] for x in full_batches]
    return {"BatchNorm train()": torch.stack(train), "BatchNorm eval()": torch.stack(evaluated),
            "LayerNorm": torch.stack(layer)}


def spread(outputs):
    """The largest difference between any two batches' outputs for the same feature of sample 0."""
    return float((outputs.max(dim=0).values - outputs.min(dim=0).values).max())


def batch_facts(features, batch, batches, seed, sizes):
    """Sample 0's outputs and their spreads at this batch size, and BatchNorm train()'s spread at every size."""
    outputs = one_sample_in_many_batches(features, batch, batches, seed)
    by_size = {size: spread(one_sample_in_many_batches(features, size, batches, seed)["BatchNorm train()"])
               for size in sizes}
    return dict(outputs={name: torch.round(o, decimals=4).tolist() for name, o in outputs.items()},
                spreads={name: spread(o) for name, o in outputs.items()}, train_spread_by_size=by_size)


def layer_and_rms(features, offset, seed):
    """One row of zero mean, then the same row with `offset` added: LayerNorm and RMSNorm of each (same eps, no
    affine), their largest difference, and each norm's change when the mean is added."""
    torch.manual_seed(seed)
    row = torch.randn(features)
    centered = row - row.mean()
    ln = nn.LayerNorm(features, eps=1e-5, elementwise_affine=False)
    rms = nn.RMSNorm(features, eps=1e-5, elementwise_affine=False)
    shifted = centered + offset
    return dict(shifted=shifted, layer=ln(shifted), rms=rms(shifted),
                gap_centered=float((ln(centered) - rms(centered)).abs().max()),
                gap_shifted=float((ln(shifted) - rms(shifted)).abs().max()),
                layer_moved=float((ln(shifted) - ln(centered)).abs().max()),
                rms_moved=float((rms(shifted) - rms(centered)).abs().max()))


def rms_facts(features, offset, offsets, seed):
    """The chosen offset's row and outputs, and the largest LayerNorm-RMSNorm difference at every offset."""
    facts = layer_and_rms(features, offset, seed)
    for name in ("shifted", "layer", "rms"):
        facts[name] = torch.round(facts[name], decimals=4).tolist()
    return dict(facts, curve=[layer_and_rms(features, o, seed)["gap_shifted"] for o in offsets])


class Stack(nn.Module):
    """`depth` encoder layers, norm placed before (pre-norm) or after (post-norm) each residual add; a pre-norm
    stack ends in a final LayerNorm, as GPT-style models do."""

    def __init__(self, depth, width, heads, norm_first):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=norm_first)
            for _ in range(depth))
        self.final = nn.LayerNorm(width) if norm_first else nn.Identity()

    def forward(self, x):
        stream = [x]  # the residual stream: the input, then after each layer
        for layer in self.layers:
            stream.append(layer(stream[-1]))
        return self.final(stream[-1]), stream


def rms(t):
    return float(t.pow(2).mean().sqrt())


def depth_run(depth, width, heads, norm_first, seed):
    """At init: each layer's parameter-gradient norm for a regression loss, and the stream's RMS after each layer."""
    torch.manual_seed(seed)
    stack, readout = Stack(depth, width, heads, norm_first), nn.Linear(width, 1)
    x, target = torch.randn(4, 8, width), torch.randn(4, 8, 1)
    out, stream = stack(x)
    nn.functional.mse_loss(readout(out), target).backward()
    grads = [float(torch.cat([p.grad.flatten() for p in layer.parameters()]).norm()) for layer in stack.layers]
    return dict(grad_norms=grads, stream_rms=[rms(s.detach()) for s in stream])


def depth_facts(depth, width, heads, seed):
    """The same weights (same seed) stacked both ways."""
    return {name: depth_run(depth, width, heads, norm_first, seed)
            for name, norm_first in (("pre_norm", True), ("post_norm", False))}


# ---- validation ---------------------------------------------------------------------------------------------------


# ---- entries: what the page computes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axes:
    batch: int
    tokens: int
    channels: int
    cell: tuple[int, int, int]  # (b, t, c): the input that was nudged
    moved: tuple[tuple[str, tuple[tuple[tuple[int, ...], ...], ...]], ...]  # (norm, [b][t][c] 1 = changed)
    counts: tuple[tuple[str, int], ...]  # (norm, outputs that changed)
    code: Script

    def count(self, name: str) -> int:
        return dict(self.counts)[name]


def nested(values):
    return tuple(nested(v) for v in values) if isinstance(values, list | tuple) else values


@entry(2, 3, 4, 1, 2, 3, 0)
def reduction_axes(batch: int = 3, tokens: int = 4, channels: int = 6, b: int = 0, t: int = 1, c: int = 2,
                   seed: int = 0) -> Axes:
    """Which outputs share statistics with one input, for each norm on a (B, T, C) tensor."""
    check_range("Batch size B", batch, 1, MAX_BATCH)
    check_range("Tokens T", tokens, 1, MAX_TOKENS)
    check_range("Channels C", channels, 2, MAX_CHANNELS)
    check_range("Sample b", b, 0, batch - 1)
    check_range("Position t", t, 0, tokens - 1)
    check_range("Channel c", c, 0, channels - 1)
    if batch * tokens < 2:
        raise InputError("BatchNorm needs more than one value per channel: make B × T at least 2.")
    settings = {"batch": batch, "tokens": tokens, "channels": channels, "b": b, "t": t, "c": c, "seed": seed}
    code = script(batch_norm_over_tokens, shared_statistics, axes_facts, imports=NORM_IMPORTS, settings=settings,
                  run=print_each("axes_facts(batch, tokens, channels, b, t, c, seed)"))
    f = axes_facts(batch, tokens, channels, b, t, c, seed)
    return Axes(batch, tokens, channels, (b, t, c), tuple((n, nested(m)) for n, m in f["moved"].items()),
                tuple(f["counts"].items()), code)


@dataclass(frozen=True)
class BatchDependence:
    features: int
    batch: int
    batches: int
    outputs: tuple[tuple[str, tuple[tuple[float, ...], ...]], ...]  # (norm, [batch][feature]) for sample 0
    spreads: tuple[tuple[str, float], ...]
    train_spread_by_size: tuple[tuple[int, float], ...]  # BatchNorm train()'s spread at each batch size
    code: Script

    def spread(self, name: str) -> float:
        return dict(self.spreads)[name]


@entry(4, 4, 2, 0)
def batch_dependence(features: int = 8, batch: int = 4, batches: int = 5, seed: int = 0) -> BatchDependence:
    """One sample's normalized output in several batches, from BatchNorm (train and eval) and LayerNorm."""
    check_range("Features", features, MIN_FEATURES, MAX_FEATURES)
    check_choice("Batch size", batch, BN_BATCHES)
    check_range("Batches", batches, MIN_BATCHES, MAX_BATCHES)
    check_range("Seed", seed, 0, 9999)
    code = script(one_sample_in_many_batches, spread, batch_facts, imports=NORM_IMPORTS,
                  settings={"features": features, "batch": batch, "batches": batches, "seed": seed,
                            "sizes": BN_BATCHES},
                  run=print_each("batch_facts(features, batch, batches, seed, sizes)"))
    f = batch_facts(features, batch, batches, seed, BN_BATCHES)
    return BatchDependence(features, batch, batches, tuple((n, nested(o)) for n, o in f["outputs"].items()),
                           tuple(f["spreads"].items()), tuple(f["train_spread_by_size"].items()), code)


@dataclass(frozen=True)
class RmsVsLayer:
    features: int
    offset: float
    shifted: tuple[float, ...]  # the zero-mean row plus the offset
    layer: tuple[float, ...]
    rms: tuple[float, ...]
    gap_centered: float  # max |LayerNorm - RMSNorm| on the zero-mean row
    gap_shifted: float  # ... on the row with the offset added
    layer_moved: float  # max |LayerNorm(shifted) - LayerNorm(centered)|
    rms_moved: float
    offsets: tuple[float, ...]
    curve: tuple[float, ...]  # gap at each offset
    code: Script


@entry(6, 1.5, 0)
def rms_vs_layer(features: int = 8, offset: float = 1.0, seed: int = 0) -> RmsVsLayer:
    """LayerNorm and RMSNorm on a zero-mean row and on the same row with a mean added."""
    check_range("Features", features, MIN_FEATURES, MAX_FEATURES)
    if not -MAX_OFFSET <= offset <= MAX_OFFSET:
        raise InputError(f"Mean added must be between {-MAX_OFFSET:g} and {MAX_OFFSET:g}; got {offset:g}.")
    check_range("Seed", seed, 0, 9999)
    code = script(layer_and_rms, rms_facts, imports=NORM_IMPORTS,
                  settings={"features": features, "offset": offset, "offsets": OFFSETS, "seed": seed},
                  run=print_each("rms_facts(features, offset, offsets, seed)"))
    f = rms_facts(features, offset, OFFSETS, seed)
    return RmsVsLayer(features, offset, tuple(f["shifted"]), tuple(f["layer"]), tuple(f["rms"]), f["gap_centered"],
                      f["gap_shifted"], f["layer_moved"], f["rms_moved"], OFFSETS, tuple(f["curve"]), code)


@dataclass(frozen=True)
class DepthRun:
    grad_norms: tuple[float, ...]  # per layer, layer 1 first
    stream_rms: tuple[float, ...]  # the input, then after each layer


@dataclass(frozen=True)
class PrePost:
    depth: int
    width: int
    heads: int
    pre: DepthRun
    post: DepthRun
    code: Script


@entry(3, 16, 2, 0)
def pre_vs_post(depth: int = 12, width: int = 32, heads: int = 4, seed: int = 0) -> PrePost:
    """Pre-norm and post-norm stacks of the same encoder layers at init: gradients per layer, the stream's size."""
    check_range("Depth", depth, 1, MAX_DEPTH)
    check_choice("Width", width, WIDTHS)
    check_choice("Heads", heads, HEADS)
    check_range("Seed", seed, 0, 9999)
    code = script(Stack, rms, depth_run, depth_facts, imports=NORM_IMPORTS,
                  settings={"depth": depth, "width": width, "heads": heads, "seed": seed},
                  run=print_each("depth_facts(depth, width, heads, seed)"))
    f = depth_facts(depth, width, heads, seed)
    runs = {name: DepthRun(tuple(r["grad_norms"]), tuple(r["stream_rms"])) for name, r in f.items()}
    return PrePost(depth, width, heads, runs["pre_norm"], runs["post_norm"], code)


# ---- the sentences the page shows, built from the numbers ----------------------------------------------------------


def measured(value: float) -> str:
    """A difference as the page reports it: exactly 0, float32 rounding, or a real difference."""
    if value == 0:
        return "0 (bit for bit)"
    if value < ROUNDING:
        return f"{value:.1e} (float32 rounding)"
    return f"{value:.3g}"


def moved_span(moved) -> tuple[list[int], list[int], list[int]]:
    """The samples, tokens and channels that hold a moved output."""
    cells = [(b, t, c) for b, sample in enumerate(moved) for t, row in enumerate(sample)
             for c, changed in enumerate(row) if changed]
    return tuple(sorted({cell[axis] for cell in cells}) for axis in range(3))


def _span_part(singular: str, values: list[int], total: int) -> str:
    if len(values) == total:
        return f"the only {singular}" if total == 1 else f"all {total} {singular}s"
    if len(values) == 1:
        return f"{singular} {values[0]} only"
    return f"{len(values)} of {total} {singular}s"


AXES_MEANING = {
    "LayerNorm": "one mean and variance per (sample, token), over its C = {channels} channels: {groups} of them",
    "BatchNorm": "one mean and variance per channel, over all B × T = {positions} (sample, token) places: "
                 "{channels} of them, which is why a sample's output depends on the rest of its batch",
    "RMSNorm": "the same groups as LayerNorm ({groups}), but only a root mean square per group: no mean is "
               "subtracted",
}


def axes_sentences(a: Axes) -> list[str]:
    """What moved for each norm (measured), then which statistics that norm keeps (its definition)."""
    lines = []
    for name, moved in a.moved:
        samples, tokens, channels = moved_span(moved)
        where = ", ".join((_span_part("sample", samples, a.batch), _span_part("token", tokens, a.tokens),
                           _span_part("channel", channels, a.channels)))
        meaning = AXES_MEANING[name].format(channels=a.channels, groups=a.batch * a.tokens,
                                            positions=a.batch * a.tokens)
        lines.append(f"**{name}**: {a.count(name)} outputs moved ({where}). It computes {meaning}.")
    return lines


def batch_sentences(d: BatchDependence) -> list[str]:
    train, evaluated, layer = (d.spread(name) for name in ("BatchNorm train()", "BatchNorm eval()", "LayerNorm"))
    by_size = ", ".join(f"{size} → {value:.2g}" for size, value in d.train_spread_by_size)
    pair = (" With 2 samples per batch it can only output ±1 per feature (each value sits one std from the mean "
            "of the two), so the other sample decides only the sign." if d.batch == 2 else "")
    return [
        f"**BatchNorm in train()** normalized sample 0 with each batch's own mean and variance: its output moved "
        f"by up to {measured(train)} across the {d.batches} batches of {d.batch}, though the sample itself never "
        f"changed.{pair} The same measurement at each batch size: {by_size}.",
        f"**BatchNorm in eval()** (the same module, after those {d.batches} train() calls) used its running "
        f"statistics, the same numbers for every batch: spread {measured(evaluated)}.",
        f"**LayerNorm** normalized sample 0 over its own {d.features} features and never looked across the "
        f"batch: spread {measured(layer)}.",
    ]


def rms_sentences(r: RmsVsLayer) -> list[str]:
    lines = [f"On the zero-mean row, LayerNorm and RMSNorm (both eps 1e-5, no affine) differ by at most "
             f"{measured(r.gap_centered)}: with mean 0 the variance is the mean square, so both divide by the same "
             "number."]
    if r.offset == 0:
        lines.append("Your row has mean 0 too: choose a nonzero mean to see them part.")
    else:
        lines.append(f"With {r.offset:g} added to every feature, LayerNorm, which subtracts the mean first, moved by "
                     f"{measured(r.layer_moved)}; RMSNorm moved by {measured(r.rms_moved)}. They now differ by up to "
                     f"{measured(r.gap_shifted)}.")
    lines.append("RMSNorm saves the mean's reduction and carries a weight but no bias (`nn.RMSNorm`).")
    return lines


def _profile(run: DepthRun, depth: int) -> str:
    first, last = run.grad_norms[0], run.grad_norms[-1]
    if depth == 1:
        return f"{first:.3g}"
    direction = "larger" if first > last else "smaller" if first < last else "equal"
    spread_ratio = max(run.grad_norms) / min(run.grad_norms)
    return (f"{first:.3g} at layer 1 and {last:.3g} at layer {depth} (layer 1 {direction}; largest / smallest "
            f"{spread_ratio:.2f}×)")


def depth_sentences(p: PrePost) -> list[str]:
    pre, post = p.pre.stream_rms, p.post.stream_rms
    low, high = min(post[1:]), max(post[1:])
    post_text = f"{low:.3g}" if f"{low:.3g}" == f"{high:.3g}" else f"between {low:.3g} and {high:.3g}"
    layers = "1 layer" if p.depth == 1 else f"{p.depth} layers"
    ratios = f"post-norm's is {p.post.grad_norms[0] / p.pre.grad_norms[0]:.2f}× pre-norm's at layer 1"
    if p.depth > 1:
        ratios += f" and {p.post.grad_norms[-1] / p.pre.grad_norms[-1]:.2f}× at layer {p.depth}"
    return [
        f"**Residual stream**: pre-norm adds each layer's output to a stream nothing renormalizes, and its RMS went "
        f"from {pre[0]:.3g} to {pre[-1]:.3g} over {layers} ({pre[-1] / pre[0]:.2f}×). Post-norm ends every layer in "
        f"LayerNorm, so after each layer the RMS is {post_text}.",
        f"**Gradients at init** (norm of each layer's parameter gradients): pre-norm {_profile(p.pre, p.depth)}; "
        f"post-norm {_profile(p.post, p.depth)}; {ratios}.",
        "The wiring that differs: in pre-norm, x + f(LN(x)) leaves the stream itself un-normalized, so the gradient "
        "at the top of the stack reaches every layer through additions alone; in post-norm, LN(x + f(x)) puts a "
        "LayerNorm on that path after every layer, so what reaches a lower layer has passed back through every "
        "LayerNorm above it.",
    ]

# ---- predict-then-run questions -------------------------------------------------------------------------------------


def _layernorm_means():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)  # (batch, tokens, channels)
    ln = torch.nn.LayerNorm(8)
    return ln(x).mean(dim=-1).abs().lt(1e-5).sum().item()  # how many rows come out with mean 0


def _batchnorm_statistics():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)  # (batch, tokens, channels)
    bn = torch.nn.BatchNorm1d(8)
    bn(x.transpose(1, 2))
    return bn.running_mean.numel()


def _batchnorm_batch_matters():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4)  # a fresh module is in train() mode
    sample = torch.randn(1, 4)
    alone_with_a = bn(torch.cat([sample, torch.randn(3, 4)]))[0]
    alone_with_b = bn(torch.cat([sample, torch.randn(3, 4)]))[0]
    return torch.allclose(alone_with_a, alone_with_b)


def _rms_on_constant():
    x = torch.full((1, 4), 3.0)  # a constant row: mean 3, variance 0
    return round(torch.nn.RMSNorm(4)(x)[0, 0].item(), 4)


def _postnorm_stream():
    torch.manual_seed(0)
    x = torch.randn(1, 8, 16)
    layers = [torch.nn.TransformerEncoderLayer(16, 2, 64, dropout=0.0, batch_first=True, norm_first=False)
              for _ in range(6)]
    for layer in layers:
        x = layer(x)
    return round(x.pow(2).mean().sqrt().item(), 2)  # RMS of the stream after 6 post-norm layers


QUESTIONS = (
    Question("tf_norm_ln_rows",
             "LayerNorm(8) on a (2, 5, 8) tensor: how many rows of 8 come out with mean 0?", _layernorm_means,
             "LayerNorm normalizes over the last dim (normalized_shape) separately for every (batch, token): "
             "2 × 5 = 10 rows, each with its own mean and variance.", kind="number"),
    Question("tf_norm_bn_stats",
             "BatchNorm1d(8) on the same (2, 5, 8) tensor, transposed to (2, 8, 5): how many running means does "
             "it keep?", _batchnorm_statistics,
             "BatchNorm keeps one mean per channel, computed over batch and tokens together (2 × 5 = 10 values "
             "each): 8 running means.", kind="number"),
    Question("tf_norm_bn_batch",
             "A fresh BatchNorm1d sees the same sample in two batches whose other 3 samples differ. Is the "
             "sample's output the same both times?", _batchnorm_batch_matters,
             "In train() mode BatchNorm subtracts the batch's mean and divides by the batch's std: change the "
             "rest of the batch and every sample's output changes. In eval() it uses the running statistics, "
             "and LayerNorm never looks across the batch.", choices=("True", "False")),
    Question("tf_norm_rms_constant",
             "RMSNorm(4) on the row [3, 3, 3, 3] (mean 3, variance 0). What is the first output?", _rms_on_constant,
             "RMSNorm divides by sqrt(mean(x²) + eps) = 3 and does not subtract the mean, so it outputs 1s. "
             "LayerNorm would subtract the mean first and output 0s.", kind="number"),
    Question("tf_norm_post_stream",
             "Six post-norm TransformerEncoderLayers (norm_first=False, width 16) applied to randn input: what "
             "is the RMS of the output?", _postnorm_stream,
             "A post-norm layer ends in LayerNorm (weight 1, bias 0 at init), so its output has mean 0 and "
             "variance 1 per token: RMS 1, however deep the stack. In a pre-norm stack nothing renormalizes the "
             "residual stream, and it grows with depth.", kind="number"),
)
