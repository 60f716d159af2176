"""Tiny model: one attention layer trained on this CPU to copy or reverse a sequence, and its heads' maps as it learns.

The task is built so that the right attention pattern is known: the model reads n tokens followed by n blanks and
must write, at each blank, the token of one input position (the same position for copy, the mirrored one for
reverse). The only way to the answer is to attend to that position, so how much of each head's attention lands
there is a direct measure of whether it found the pattern.
"""

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from demos.errors import InputError, quoted
from demos.quiz import Question
from demos.shown import Script, entry, script
from demos.threads import single_threaded

TASKS = ("reverse", "copy")
HEAD_CHOICES = (1, 2, 4)
STEP_CHOICES = (50, 100, 150, 200, 300, 400)  # multiples of CHECKPOINTS: every checkpoint falls on a whole step
LR_CHOICES = (0.001, 0.003, 0.01)
MIN_LENGTH, MAX_LENGTH = 3, 10
MAX_SEED = 9999
DEFAULTS = dict(task="reverse", heads=2, steps=150, length=8, lr=0.003, seed=0)  # the page opens on these

VOCAB = 10  # tokens 0-9; id 10 is the blank the outputs are written at
DIM = 32  # model width, split evenly between the heads
BATCH = 32  # fresh random sequences per step
HELD_OUT = 256  # sequences the model is scored on and never trained on
CHECKPOINTS = 10  # the run is recorded at step 0 and at every tenth of the way
LEARNED = 0.99  # held-out token accuracy from which the page says the task is learned
FOUND = 0.9  # a head "found" the pattern when this much of its attention lands on the expected positions

TINY_IMPORTS = "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn"


def sources(task, length):
    """The input position each output position must copy from: itself (copy) or its mirror image (reverse)."""
    return list(range(length)) if task == "copy" else list(range(length - 1, -1, -1))


def make_batch(generator, size, length, task):
    """`size` random sequences of `length` tokens, each followed by `length` blanks, and the targets at the blanks."""
    tokens = torch.randint(0, VOCAB, (size, length), generator=generator)
    blanks = torch.full((size, length), VOCAB)
    return torch.cat([tokens, blanks], dim=1), tokens[:, sources(task, length)]


def codes(tokens):
    """One whole number per sequence (its tokens as base-10 digits): equal sequences, equal codes."""
    return (tokens * VOCAB ** torch.arange(tokens.shape[1])).sum(dim=1)


class TinyAttention(nn.Module):
    """Token and position embeddings, one multi-head self-attention layer with a residual, a linear read-out."""

    def __init__(self, length, heads, dim=DIM):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(VOCAB + 1, dim)  # the extra id is the blank
        self.pos = nn.Embedding(2 * length, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, x):
        """Logits at the blanks (B, n, VOCAB) and each head's attention from the blanks (B, heads, n, 2n)."""
        h = self.tok(x) + self.pos.weight
        b, t, d = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        h = h + self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))
        n = t // 2
        return self.out(h[:, n:]), weights[:, :, n:]


def evaluate(model, x, y, task):
    """Held-out token and whole-sequence accuracy, each head's attention map averaged over the sequences, and the
    share of each head's attention that lands on the expected input position (mean over output positions)."""
    with torch.no_grad():
        logits, weights = model(x)
    right = logits.argmax(dim=-1) == y
    maps = weights.mean(dim=0)  # (heads, n, 2n)
    n = y.shape[1]
    on_expected = maps[:, torch.arange(n), sources(task, n)]  # (heads, n)
    return dict(token_accuracy=right.float().mean().item(), sequence_accuracy=right.all(dim=1).float().mean().item(),
                head_mass=on_expected.mean(dim=1).tolist(), best_head_mass=on_expected.max(dim=0).values.mean().item(),
                blank_mass=maps[:, :, n:].sum(dim=-1).mean(dim=1).tolist(), maps=maps.tolist())


def train_tiny(task, heads, steps, length, lr, seed):
    """Train with Adam on fresh random sequences, none of them one of the held-out ones; record the loss at every
    step and the held-out scores and maps at step 0 and every tenth of the run."""
    torch.manual_seed(seed)
    model = TinyAttention(length, heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    held_x, held_y = make_batch(torch.Generator().manual_seed(MAX_SEED + 1 + seed), HELD_OUT, length, task)
    held_codes = codes(held_x[:, :length])
    data = torch.Generator().manual_seed(seed)
    losses, records, dropped = [], [], 0
    for step in range(steps + 1):
        if step % (steps // CHECKPOINTS) == 0:
            records.append(dict(step=step, **evaluate(model, held_x, held_y, task)))
        if step == steps:
            break
        x, y = make_batch(data, BATCH, length, task)
        keep = ~torch.isin(codes(x[:, :length]), held_codes)  # held-out sequences are never trained on
        dropped += int((~keep).sum())
        logits, _ = model(x[keep])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y[keep].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return dict(losses=losses, records=records, dropped=dropped)


@dataclass(frozen=True)
class Checkpoint:
    step: int
    token_accuracy: float  # held-out output tokens right
    sequence_accuracy: float  # held-out sequences with every output token right
    head_mass: tuple[float, ...]  # per head: mean attention on the expected input position
    best_head_mass: float  # per output position the most attentive head's mass on it, averaged over positions
    blank_mass: tuple[float, ...]  # per head: mean attention on the blanks, which hold nothing to copy
    maps: tuple  # (heads, n, 2n): attention from each output position, averaged over the held-out sequences


@dataclass(frozen=True)
class TinyRun:
    task: str
    heads: int
    steps: int
    length: int
    lr: float
    seed: int
    losses: tuple[float, ...]  # training loss at every step
    checkpoints: tuple[Checkpoint, ...]
    expected: tuple[int, ...]  # the input position each output position must attend to
    dropped: int  # training sequences dropped because they were held-out sequences
    seconds: float  # how long the training took on this server (once: the run is cached)
    code: Script

    @property
    def final(self) -> Checkpoint:
        return self.checkpoints[-1]

    @property
    def uniform(self) -> float:
        """The attention an input position gets when a head spreads its attention evenly over all 2n positions."""
        return 1 / (2 * self.length)


def validate(task: str, heads: int, steps: int, length: int, lr: float, seed: int) -> None:
    if task not in TASKS:
        raise InputError(f"Task must be one of {', '.join(TASKS)}; got {quoted(task)}.")
    if heads not in HEAD_CHOICES:
        raise InputError(f"Heads must be one of {', '.join(map(str, HEAD_CHOICES))}; got {quoted(heads)}.")
    if steps not in STEP_CHOICES:
        raise InputError(f"Training steps must be one of {', '.join(map(str, STEP_CHOICES))}; got {quoted(steps)}.")
    if isinstance(length, bool) or not isinstance(length, int) or not MIN_LENGTH <= length <= MAX_LENGTH:
        raise InputError(f"Sequence length must be a whole number from {MIN_LENGTH} to {MAX_LENGTH}; "
                         f"got {quoted(length)}.")
    if lr not in LR_CHOICES:
        raise InputError(f"Learning rate must be one of {', '.join(map(str, LR_CHOICES))}; got {quoted(lr)}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be a whole number from 0 to {MAX_SEED}; got {quoted(seed)}.")


RUN_LINE = """
run = train_tiny(task, heads, steps, length, lr, seed)
print("loss at every step:", run["losses"])
for record in run["records"]:
    print(f"step {record['step']}: held-out token accuracy {record['token_accuracy']}, "
          f"sequences {record['sequence_accuracy']}, attention on the expected position per head "
          f"{record['head_mass']}, best head per position {record['best_head_mass']}")
for head, rows in enumerate(run["records"][-1]["maps"], 1):
    print(f"head {head} after {steps} steps (rows: output positions, columns: the {2 * length} positions read):")
    for row in rows:
        print(" ".join(f"{w:.2f}" for w in row))
print("training sequences dropped because they were held out:", run["dropped"])"""


@entry("copy", 1, 50, 4, 0.01, 0, entries=16)
@single_threaded  # the shown script pins one thread too, so it prints these numbers
def tiny_model(task: str = DEFAULTS["task"], heads: int = DEFAULTS["heads"], steps: int = DEFAULTS["steps"],
               length: int = DEFAULTS["length"], lr: float = DEFAULTS["lr"], seed: int = DEFAULTS["seed"]) -> TinyRun:
    """Train the tiny model once for these settings and keep what every checkpoint of the run measured."""
    validate(task, heads, steps, length, lr, seed)
    code = script(sources, make_batch, codes, TinyAttention, evaluate, train_tiny, imports=TINY_IMPORTS,
                  settings={"VOCAB": VOCAB, "DIM": DIM, "BATCH": BATCH, "HELD_OUT": HELD_OUT,
                            "CHECKPOINTS": CHECKPOINTS, "MAX_SEED": MAX_SEED, "task": task, "heads": heads,
                            "steps": steps, "length": length, "lr": lr, "seed": seed}, run=RUN_LINE)
    import torch._dynamo  # noqa: F401  the first optimizer a process builds imports it (a second or more, once):
    start = time.perf_counter()  # not training time, so it is left out of the time the page reports
    run = train_tiny(task, heads, steps, length, lr, seed)
    seconds = time.perf_counter() - start
    checkpoints = tuple(Checkpoint(r["step"], r["token_accuracy"], r["sequence_accuracy"], tuple(r["head_mass"]),
                                   r["best_head_mass"], tuple(r["blank_mass"]), _frozen(r["maps"]))
                        for r in run["records"])
    return TinyRun(task, heads, steps, length, lr, seed, tuple(run["losses"]), checkpoints,
                   tuple(sources(task, length)), run["dropped"], seconds, code)


def _frozen(nested):
    """Nested lists as nested tuples (a result is shared read-only by every visitor)."""
    return tuple(_frozen(v) for v in nested) if isinstance(nested, list) else nested


# ---- what the page says about a run, built from its numbers ----------------------------------------------------


def pct(x: float) -> str:
    """A share as the page prints it: whole percent, or one decimal when that would round to 0 or 100."""
    text = f"{x:.0%}"
    if text in ("0%", "100%") and 0 < x < 1:
        return f"{x:.1%}"
    return text


def first_learned_step(run: TinyRun) -> int | None:
    """The first checkpoint from which every checkpoint's held-out token accuracy is at least LEARNED."""
    for i, c in enumerate(run.checkpoints):
        if all(later.token_accuracy >= LEARNED for later in run.checkpoints[i:]):
            return c.step
    return None


def pattern_name(task: str) -> str:
    return "the diagonal (output i reads input i)" if task == "copy" else \
        "the anti-diagonal (output i reads input n−1−i)"


def verdict(run: TinyRun) -> tuple[bool, str]:
    """Whether the model learned the task, and one sentence saying so from the held-out numbers."""
    c = run.final
    held = f"{HELD_OUT} held-out sequences it never trained on"
    chance = f"chance is {pct(1 / VOCAB)}"
    if c.token_accuracy >= LEARNED:
        return True, (f"Learned: after {run.steps} steps the model writes {pct(c.token_accuracy)} of the output tokens "
                      f"of {held} correctly ({chance}), and gets {pct(c.sequence_accuracy)} of those sequences "
                      "entirely right.")
    more = [way for way, room in (("more training steps", run.steps < max(STEP_CHOICES)),
                                  ("a larger learning rate", run.lr < max(LR_CHOICES))) if room]
    hint = f" {' or '.join(more).capitalize()} (settings) may get it there." if more else ""
    return False, (f"Not learned yet: after {run.steps} steps the model writes {pct(c.token_accuracy)} of the output "
                   f"tokens of {held} correctly ({chance}) and gets {pct(c.sequence_accuracy)} of those sequences "
                   f"entirely right.{hint}")


def pattern_sentences(run: TinyRun) -> list[str]:
    """What the attention maps show at the end of the run, measured on the held-out sequences."""
    c = run.final
    found = [h for h, m in enumerate(c.head_mass, 1) if m >= FOUND]
    per_head = ", ".join(f"head {h} {pct(m)}" for h, m in enumerate(c.head_mass, 1))
    lines = [f"The expected pattern is {pattern_name(run.task)}, outlined on each map. Share of each head's "
             f"attention on it, averaged over the held-out sequences: {per_head}; a head spreading its attention "
             f"evenly over the {2 * run.length} positions would put {pct(run.uniform)} there."]
    if len(found) == run.heads:
        lines.append(f"Every head found the pattern (at least {pct(FOUND)} on it)." if run.heads > 1 else
                     f"The head found the pattern (at least {pct(FOUND)} on it).")
    elif found:
        lines.append(f"{_heads(found)} found the pattern (at least {pct(FOUND)} on it); the others put less there.")
    else:
        lines.append(f"No head puts {pct(FOUND)} of its attention on the pattern.")
    if run.heads > 1:
        lines.append(f"For each output position, the head that looks most at the expected input puts "
                     f"{pct(c.best_head_mass)} there on average.")
        if c.token_accuracy >= LEARNED and len(found) < run.heads:
            lines.append("The read-out sees every head's output together, so the model can be right without every "
                         "head attending to the expected position.")
    learned_at = first_learned_step(run)
    if learned_at is not None:
        lines.append(f"From step {learned_at} on, every checkpoint gets at least {pct(LEARNED)} of the held-out "
                     "output tokens right.")
    return lines


def _heads(numbers: list[int]) -> str:
    return f"Head {numbers[0]}" if len(numbers) == 1 else "Heads " + ", ".join(map(str, numbers[:-1])) + \
        f" and {numbers[-1]}"


def head_share(head: int, mass: float) -> str:
    """A head's share of attention on the expected positions, as every map title writes it, whatever the heads."""
    return f"head {head}: {pct(mass)} on the pattern"


def checkpoint_sentence(run: TinyRun, index: int) -> str:
    """The figure's shown checkpoint in words: its step, held-out accuracy and the heads' share on the pattern."""
    c = run.checkpoints[index]
    shares = ", ".join(pct(m) for m in c.head_mass)
    return (f"At step {c.step} of {run.steps}: {pct(c.token_accuracy)} of held-out output tokens right; attention on "
            f"the expected positions per head: {shares}.")


def provenance_sentence(run: TinyRun) -> str:
    many = run.dropped > 1
    dropped = ("none of the training sequences happened to be one of them" if run.dropped == 0 else
               f"{run.dropped} training sequence{'s' if many else ''} that equalled one of them "
               f"{'were' if many else 'was'} dropped from {'their batches' if many else 'its batch'}")
    return (f"Trained on this server's CPU in {run.seconds:.2f} s ({run.steps} Adam steps, each on a fresh batch of "
            f"{BATCH} random sequences), once for these settings and shared by every visitor who picks them. The "
            f"{HELD_OUT} held-out sequences are drawn with a separate seed and kept out of training: {dropped}.")


# ---- predict-then-run questions -------------------------------------------------------------------------------


def _uniform_attention_share():
    torch.manual_seed(0)
    q = torch.zeros(1, 12, 8)  # every query is zero, so every score is zero
    k = torch.randn(1, 12, 8)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, dim=-1)
    return round(weights[0, 0, 3].item(), 4)


def _reverse_targets():
    tokens = torch.tensor([[3, 1, 4, 1, 5]])
    expected = list(range(4, -1, -1))  # the input position each output position reads
    return tokens[:, expected].tolist()


def _heads_split_the_width():
    qkv = nn.Linear(32, 3 * 32)
    x = torch.zeros(2, 16, 32)
    q, k, v = qkv(x).view(2, 16, 3, 4, 32 // 4).permute(2, 0, 3, 1, 4)
    return tuple((q @ k.transpose(-2, -1)).shape)


def _guessing_loss():
    logits = torch.zeros(4, 10)  # the same score for each of 10 tokens: a uniform guess
    targets = torch.tensor([3, 1, 4, 1])
    return round(F.cross_entropy(logits, targets).item(), 4)


QUESTIONS = (
    Question("tiny_uniform", "Every query is zero, so every attention score is zero. What weight does query 0 give "
             "key 3 out of 12 keys? (rounded to 4 places)", _uniform_attention_share,
             "softmax of equal scores is uniform: 1/12 ≈ 0.0833 for each of the 12 keys. An untrained model's "
             "attention is close to this, which is why the maps start out flat.", kind="number"),
    Question("tiny_reverse_targets", "The reverse task: what does indexing the tokens with the expected positions "
             "give?", _reverse_targets,
             "Output i reads input n−1−i, so the targets are the tokens in reverse order: the anti-diagonal is the "
             "attention pattern that solves it.",
             choices=("[[5, 1, 4, 1, 3]]", "[[3, 1, 4, 1, 5]]", "[[1, 5, 1, 4, 3]]", "[[1, 3, 4, 5, 1]]")),
    Question("tiny_head_maps", "A 4-head layer of width 32 on a batch of 2 sequences of 16 tokens: what shape are the "
             "attention scores q @ kᵀ?", _heads_split_the_width,
             "Each head gets 32/4 = 8 dimensions; the scores are one 16×16 map per head per sequence: (2, 4, 16, 16).",
             kind="shape", imports="import torch\nfrom torch import nn"),
    Question("tiny_guessing_loss", "A model that gives all 10 tokens the same score: what is its cross-entropy loss? "
             "(rounded to 4 places)", _guessing_loss,
             "Softmax of equal scores is 1/10 for every token, so the loss is −ln(1/10) = ln 10 ≈ 2.3026 whatever "
             "the targets: the dashed line the tiny model's loss starts at.", kind="number",
             imports="import torch\nimport torch.nn.functional as F"),
)
