"""A GPT-2-style transformer (nanoGPT's shape): the model the Memory page trains and the Distributed page counts.

Both pages build this one class, so a GPT-2 preset has one parameter count on both.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

GPT2_CONTEXT = 1024  # position embeddings: GPT-2 has 1024, longer sequences get more


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

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = self.run_block(block, x)
        return self.head(self.ln(x))

    def run_block(self, block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """One block's forward; the Memory page's subclass runs it under activation checkpointing when asked."""
        return block(x)
