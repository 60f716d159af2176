"""Weight sharing: a tied input embedding and output projection, checked against an untied copy."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.modules.common import MODULE_IMPORTS, norm
from demos.shown import Script, entry, script

MIN_VOCAB, MAX_VOCAB = 4, 1000
MIN_DIM, MAX_DIM = 2, 128
MAX_STEPS = 20


class TinyLM(nn.Module):
    """Embed tokens, squash, project back to the vocabulary; `tie` makes both ends one Parameter."""

    def __init__(self, vocab=50, dim=16, tie=True):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        if tie:
            self.out.weight = self.embed.weight  # the same Parameter object, registered under two names

    def forward(self, tokens):
        return self.out(torch.tanh(self.embed(tokens)))


def tokens(vocab: int, seed: int):
    """A seeded batch of 4 sequences of 9 token ids: inputs are the first 8, targets the last 8."""
    g = torch.Generator().manual_seed(seed + 1)
    seq = torch.randint(0, vocab, (4, 9), generator=g)
    return seq[:, :-1], seq[:, 1:]


def lm_loss(model, x, y):
    """Next-token cross entropy."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


@dataclass(frozen=True)
class TyingResult:
    vocab: int
    dim: int
    same_object: bool
    ids: tuple[int, int]
    count_tied: int
    count_untied: int
    names_dedup: tuple[str, ...]
    names_all: tuple[str, ...]
    state_dict_keys: tuple[str, ...]
    same_storage: bool
    grad_embed_use: float  # norm of the embedding's share of the gradient (untied copy)
    grad_out_use: float  # norm of the projection's share
    grad_tied: float
    grad_max_diff: float  # max |tied grad - (embed grad + out grad)| of the untied copy
    drift_tied: tuple[float, ...]  # ||embed - out|| after each SGD step
    drift_copied: tuple[float, ...]
    count_copied: int
    code: Script


def validate(vocab: int, dim: int, steps: int) -> None:
    if not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise InputError(f"Vocabulary size must be between {MIN_VOCAB} and {MAX_VOCAB}; got {vocab}.")
    if not MIN_DIM <= dim <= MAX_DIM:
        raise InputError(f"Embedding size must be between {MIN_DIM} and {MAX_DIM}; got {dim}.")
    if not 1 <= steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 1 and {MAX_STEPS}; got {steps}.")


def untied_copy(tied: TinyLM) -> TinyLM:
    """Two separate Parameters holding the tied model's values."""
    vocab, dim = tied.embed.weight.shape
    model = TinyLM(vocab, dim, tie=False)
    with torch.no_grad():
        model.embed.weight.copy_(tied.embed.weight)
        model.out.weight.copy_(tied.embed.weight)
    return model


def copied_not_tied(tied: TinyLM) -> TinyLM:
    """The trap: the projection gets a copy of the embedding instead of the embedding itself."""
    vocab, dim = tied.embed.weight.shape
    model = TinyLM(vocab, dim, tie=False)
    model.embed.weight = nn.Parameter(tied.embed.weight.detach().clone())
    model.out.weight = nn.Parameter(model.embed.weight.detach().clone())
    return model


def drift(model: TinyLM, x, y, steps: int) -> tuple[float, ...]:
    """||embed.weight - out.weight|| after each of `steps` SGD steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        lm_loss(model, x, y).backward()
        opt.step()
        out.append(norm(model.embed.weight - model.out.weight))
    return tuple(out)


def count(model: nn.Module) -> int:
    """Trainable numbers as parameters() sees them (a shared Parameter counts once)."""
    return sum(p.numel() for p in model.parameters())


@entry(30, 8, 4)
def weight_tying(vocab: int = 50, dim: int = 16, steps: int = 10, seed: int = 0) -> TyingResult:
    """Tie, count, compare the tied gradient with the untied sum, and watch a copy drift away."""
    validate(vocab, dim, steps)
    code = script(norm, TinyLM, tokens, lm_loss, untied_copy, copied_not_tied, drift, count, tying_facts,
                  imports=MODULE_IMPORTS, settings={"vocab": vocab, "dim": dim, "steps": steps, "seed": seed}, run="""
for name, value in tying_facts(vocab, dim, steps, seed).items():
    if name != "ids":  # id() numbers change from run to run
        print(name, value)""")
    return TyingResult(**tying_facts(vocab, dim, steps, seed), code=code)


def tying_facts(vocab: int, dim: int, steps: int, seed: int) -> dict:
    """A tied TinyLM beside an untied copy of it and a copied-not-tied trap: parameter counts and names, state_dict
    storage, the tied gradient against the sum of the untied two, and how far embed and out drift apart in SGD."""
    torch.manual_seed(seed)
    tied = TinyLM(vocab, dim, tie=True)
    untied, copied = untied_copy(tied), copied_not_tied(tied)
    x, y = tokens(vocab, seed)
    lm_loss(tied, x, y).backward()
    lm_loss(untied, x, y).backward()
    summed = untied.embed.weight.grad + untied.out.weight.grad
    sd = tied.state_dict()
    storage = {sd[k].untyped_storage().data_ptr() for k in ("embed.weight", "out.weight")}
    facts = dict(
        vocab=vocab, dim=dim, same_object=tied.out.weight is tied.embed.weight,
        ids=(id(tied.embed.weight), id(tied.out.weight)), count_tied=count(tied), count_untied=count(untied),
        names_dedup=tuple(n for n, _ in tied.named_parameters()),
        names_all=tuple(n for n, _ in tied.named_parameters(remove_duplicate=False)),
        state_dict_keys=tuple(sd), same_storage=len(storage) == 1,
        grad_embed_use=norm(untied.embed.weight.grad), grad_out_use=norm(untied.out.weight.grad),
        grad_tied=norm(tied.embed.weight.grad),
        grad_max_diff=float((tied.embed.weight.grad - summed).abs().max()),
        count_copied=count(copied),
    )
    tied.zero_grad()
    return dict(facts, drift_tied=drift(tied, x, y, steps), drift_copied=drift(copied, x, y, steps))
