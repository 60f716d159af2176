"""The models a training step can run: an MLP, a small CNN and GPT-2-style transformer stacks."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from demos.memory.autocast import active_simulated_autocast, same_autocast_as


@dataclass(frozen=True)
class ModelPreset:
    kind: str  # "mlp", "cnn" or "transformer"
    layers: int
    width: int
    heads: int = 0
    vocab: int = 0


MODELS = {
    "MLP (4 x 2048)": ModelPreset("mlp", 4, 2048),
    "Small CNN (CIFAR 32x32)": ModelPreset("cnn", 3, 64),
    "Transformer tiny (2 x 128)": ModelPreset("transformer", 2, 128, 4, 1024),
    "GPT-2 small (124M)": ModelPreset("transformer", 12, 768, 12, 50257),
    "GPT-2 medium (355M)": ModelPreset("transformer", 24, 1024, 16, 50257),
    "GPT-2 large (774M)": ModelPreset("transformer", 36, 1280, 20, 50257),
    "GPT-2 XL (1.5B)": ModelPreset("transformer", 48, 1600, 25, 50257),
}
MLP_IN, N_CLASSES, CNN_SIDE = 1024, 10, 32
GPT2_CONTEXT = 1024  # position embeddings: GPT-2 has 1024, longer sequences get more


def _run_block(block: nn.Module, x: torch.Tensor, use_checkpoint: bool) -> torch.Tensor:
    """Run a block, optionally under non-reentrant activation checkpointing (inputs kept, inside recomputed)."""
    if not use_checkpoint:
        return block(x)
    mode = active_simulated_autocast()

    def run(inp):
        with same_autocast_as(mode):
            return block(inp)

    return checkpoint(run, x, use_reentrant=False, preserve_rng_state=False)


class MLP(nn.Module):
    def __init__(self, layers: int, width: int, d_in: int = MLP_IN, classes: int = N_CLASSES):
        super().__init__()
        dims = [d_in] + [width] * (layers - 1)
        pairs = zip(dims, dims[1:], strict=False)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(a, b), nn.ReLU()) for a, b in pairs)
        self.head = nn.Linear(dims[-1], classes)
        self.use_checkpoint = False

    def forward(self, x):
        for block in self.blocks:
            x = _run_block(block, x, self.use_checkpoint)
        return self.head(x)


class SmallCNN(nn.Module):
    def __init__(self, layers: int, width: int, classes: int = N_CLASSES):
        super().__init__()
        chans = [3] + [width * 2**i for i in range(layers)]
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            for a, b in zip(chans, chans[1:], strict=False)
        )
        side = CNN_SIDE // 2**layers
        self.head = nn.Linear(chans[-1] * side * side, classes)
        self.use_checkpoint = False

    def forward(self, x):
        for block in self.blocks:
            x = _run_block(block, x, self.use_checkpoint)
        return self.head(x.flatten(1))


def attention(q, k, v):
    """Causal attention. On meta tensors call the fused kernel CUDA would pick (flash for 16-bit, efficient for
    fp32), since F.scaled_dot_product_attention on meta takes the math path and would store the T x T scores."""
    if q.device.type != "meta":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if q.dtype in (torch.float16, torch.bfloat16):
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0]
    return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True)[0]


class Block(nn.Module):
    """A GPT-2 block: pre-norm attention and a 4x GELU MLP, both residual."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate="tanh")
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, blocks, final norm, and an output head tied to the token embedding."""

    def __init__(self, layers: int, d: int, heads: int, vocab: int, context: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.use_checkpoint = False

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = _run_block(block, x, self.use_checkpoint)
        return self.head(self.ln(x))


def build_model(preset: ModelPreset, seq_len: int) -> nn.Module:
    if preset.kind == "mlp":
        return MLP(preset.layers, preset.width)
    if preset.kind == "cnn":
        return SmallCNN(preset.layers, preset.width)
    return GPT(preset.layers, preset.width, preset.heads, preset.vocab, max(seq_len, GPT2_CONTEXT))


def make_batch(preset: ModelPreset, batch: int, seq_len: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random batch (inputs, targets) of the model's input shape."""
    g = torch.Generator().manual_seed(0)
    if preset.kind == "mlp":
        x = torch.randn(batch, MLP_IN, generator=g)
        y = torch.randint(0, N_CLASSES, (batch,), generator=g)
    elif preset.kind == "cnn":
        x = torch.randn(batch, 3, CNN_SIDE, CNN_SIDE, generator=g)
        y = torch.randint(0, N_CLASSES, (batch,), generator=g)
    else:
        x = torch.randint(0, preset.vocab, (batch, seq_len), generator=g)
        y = torch.randint(0, preset.vocab, (batch, seq_len), generator=g)
    if torch.device(device).type == "meta":
        return torch.empty_like(x, device="meta"), torch.empty_like(y, device="meta")
    return x.to(device), y.to(device)


def loss_of(model: nn.Module, preset: ModelPreset, x, y) -> torch.Tensor:
    out = model(x)
    if preset.kind == "transformer":
        return F.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))
    return F.cross_entropy(out, y)
