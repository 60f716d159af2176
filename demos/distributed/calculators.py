"""Calculators that start no process: ZeRO bytes per rank, parallelism trade-offs, parameter counts, byte units."""

import torch

from demos.distributed.models import Tower
from demos.distributed.params import whole
from demos.errors import InputError, quoted
from demos.gpt import GPT, GPT2_CONTEXT  # the Memory page's model: one parameter count for both pages

PRESETS = {
    "This page's MLP": None,
    "GPT-2 small shape (12 × 768)": (12, 768, 12, 50257),
    "GPT-2 medium shape (24 × 1024)": (24, 1024, 16, 50257),
    "GPT-2 XL shape (48 × 1600)": (48, 1600, 25, 50257),
    "7B-class shape (32 × 4096)": (32, 4096, 32, 32000),
}
PRECISIONS = {
    "ZeRO's mixed precision + Adam (2 + 2 + 12 bytes)": (2, 2, 12),
    "fp32 + Adam (4 + 4 + 8 bytes)": (4, 4, 8),
}


def model_param_count(preset: str, layers: int, width: int) -> tuple[int, str]:
    """Real parameter count: the page's MLP, or the Memory page's GPT-2-style model built on the meta device.

    Both pages build the same `demos.gpt.GPT` (token and 1024 position embeddings, pre-norm blocks with
    biases, final LayerNorm, output head tied to the token embedding), so GPT-2 small is 124,439,808 on both.
    """
    if preset not in PRESETS:
        raise InputError(f"Unknown model {quoted(preset)}.")
    if PRESETS[preset] is None:
        model = Tower(whole("layers", layers), whole("width", width))
        return sum(p.numel() for p in model.parameters()), f"Tower({layers}, {width}) in torch"
    n_layers, d, heads, vocab = PRESETS[preset]
    with torch.device("meta"):
        model = GPT(n_layers, d, heads, vocab, GPT2_CONTEXT)
    count = sum(p.numel() for p in model.parameters())  # parameters() lists the tied head weight once
    return count, (f"the Memory page's GPT({n_layers} blocks, d={d}, {heads} heads, vocab {vocab}, context "
                   f"{GPT2_CONTEXT}, head tied to the token embedding) built on meta")


def precision_note(name: str) -> str:
    """What the chosen byte accounting assumes, and what torch.autocast keeps instead."""
    p_b, g_b, o_b = _precision(name)
    if p_b == 4:
        return (f"fp32 + Adam: {p_b} + {g_b} + {o_b} = {p_b + g_b + o_b} bytes per parameter (fp32 weights, "
                "gradients, and Adam's m and v). This is also what training under `torch.autocast` holds: autocast "
                "casts ops' inputs and outputs, while parameters and their gradients stay fp32.")
    return (f"{p_b} + {g_b} + {o_b} = {p_b + g_b + o_b} bytes per parameter is the ZeRO paper's accounting: fp16/bf16 "
            f"weights and gradients ({p_b} + {g_b}), and in the optimizer fp32 master weights, m and v "
            f"({o_b}). Under `torch.autocast` parameters and gradients stay fp32 (the fp32 + Adam row); these "
            "numbers hold where the model itself is kept in half precision beside fp32 master weights, as "
            "DeepSpeed's fp16 and bf16 modes do.")


def _precision(name: str) -> tuple[int, int, int]:
    if name not in PRECISIONS:
        raise InputError(f"Unknown precision {quoted(name)}.")
    return PRECISIONS[name]


def zero_bytes(params: int, world: int, stage: int, precision: str) -> dict:
    """Bytes per rank for parameters, gradients and optimizer state under ZeRO stage 0-3 (the ZeRO paper's model)."""
    p_b, g_b, o_b = _precision(precision)
    shard = {0: (1, 1, 1), 1: (1, 1, world), 2: (1, world, world), 3: (world, world, world)}[stage]
    return {"parameters": params * p_b / shard[0], "gradients": params * g_b / shard[1],
            "optimizer_state": params * o_b / shard[2]}


WORLD_SIZES = (1, 2, 4, 8, 16, 32, 64)
STAGE_NAMES = {0: "DDP (no sharding)", 1: "ZeRO-1: optimizer state", 2: "ZeRO-2: + gradients",
               3: "ZeRO-3 / FSDP: + parameters"}


def zero_table(params: int, precision: str) -> list[dict]:
    """Total bytes per rank for every stage at every world size in WORLD_SIZES."""
    return [{"stage": s, "world": n, "bytes": sum(zero_bytes(params, n, s, precision).values())}
            for s in STAGE_NAMES for n in WORLD_SIZES]


def tradeoff_rows(params: int, world: int, layers: int, width: int, tokens: int, precision: str,
                  preset: str = "GPT-2 small shape (12 × 768)") -> list[dict]:
    """Memory per rank, communication per step and complexity of DDP, FSDP, TP and PP for one model and world size."""
    p_b, g_b, o_b = _precision(precision)
    state = params * (p_b + g_b + o_b)
    act = tokens * width * p_b  # one layer's activation tensor for the batch
    ring = 2 * (world - 1) / world
    return [
        {"strategy": "DDP", "memory per rank": state, "communication per step": ring * params * g_b,
         "what is sent": "all_reduce of all gradients", "complexity": "low: wrap the model"},
        {"strategy": "FSDP (ZeRO-3)", "memory per rank": state / world,
         "communication per step": 1.5 * ring * params * p_b,
         "what is sent": "all_gather params (fwd + bwd) + reduce_scatter grads", "complexity": "medium: wrap policy"},
        {"strategy": "Tensor parallel", "memory per rank": state / world,
         **tensor_parallel_traffic(preset, layers, width, tokens, p_b, ring),
         "complexity": "high: rewrite layers, needs fast links"},
        {"strategy": "Pipeline parallel", "memory per rank": state / world,
         "communication per step": min(2, world - 1) * act,
         "what is sent": (f"activations forward, their gradients backward, between neighbours: a middle stage "
                          f"sends both, an end stage one; {2 * (world - 1)} tensors of {human_bytes(act)} over all "
                          f"{world - 1} boundaries ({human_bytes(2 * (world - 1) * act)} in total)"),
         "complexity": "high: split stages, schedule, bubble"},
    ]


def tensor_parallel_traffic(preset: str, layers: int, width: int, tokens: int, p_b: int, ring: float) -> dict:
    """Megatron tensor parallelism's all_reduces per step, counted for the model's own Linear layers.

    A column-parallel Linear followed by a row-parallel one needs one all_reduce of the pair's output in forward
    and one of the pair's input gradient in backward (the Tensor & pipeline tab runs such a pair: one all_reduce
    forward). A transformer block has two such pairs (attention, MLP); the page's MLP tower pairs its Linear
    layers in order, fc0 with fc1 and so on, and an odd last block with the Linear(width, 1) head.
    """
    if PRESETS.get(preset) is not None:  # a transformer shape
        return {"communication per step": 4 * layers * ring * tokens * width * p_b,
                "what is sent": (f"2 all_reduce of activations per transformer block (attention, MLP) forward, 2 "
                                 f"backward: {4 * layers} over {layers} blocks")}
    pairs, head_paired = layers // 2 + layers % 2, layers % 2 == 1
    out_elems = (layers // 2) * width + (1 if head_paired else 0)  # the row-parallel outputs, per token
    grad_elems = pairs * width  # each pair's input gradient, per token
    head = ", the last with the head" if head_paired else "; the head stays whole on every rank"
    return {"communication per step": ring * tokens * (out_elems + grad_elems) * p_b,
            "what is sent": (f"1 all_reduce per pair of Linear layers (column- then row-parallel) forward, 1 "
                             f"backward: {2 * pairs} over this MLP's {pairs} pair{'s' * (pairs != 1)} of its "
                             f"{layers + 1} Linear layers{head}")}


def human_bytes(n: float) -> str:
    """Bytes in binary units, labelled as such (KiB, MiB, GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"
