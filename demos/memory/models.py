"""The models a training step can run: an MLP, a small CNN and GPT-2-style transformer stacks."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from demos import gpt
from demos.gpt import GPT2_CONTEXT
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


class GPT(gpt.GPT):
    """The shared GPT-2-style model (demos/gpt.py), its blocks optionally under activation checkpointing."""

    use_checkpoint = False

    def run_block(self, block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return _run_block(block, x, self.use_checkpoint)


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
