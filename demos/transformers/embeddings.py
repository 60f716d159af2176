"""Embeddings and dropout: nn.Embedding as a row lookup (one-hot @ weight), the index dtype it demands, the
padding row that gets no gradient, a head tied to the table; dropout's mask, its 1/(1-p) scaling, and the
F.dropout call that model.eval() cannot switch off."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.parsing import parse_numbers, whole_in_range
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script

IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
NN_IMPORTS = "import torch\nimport torch.nn as nn"
MIN_VOCAB, MAX_VOCAB = 2, 32
MIN_DIM, MAX_DIM = 2, 16
MAX_IDS = 12
MAX_SEED = 9999
DEFAULT_IDS = "3, 1, 4, 1, 5, 0, 0"
DROPOUT_PS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)
DRAW_CHOICES = (100, 1_000, 10_000, 100_000)


# ---- validation -------------------------------------------------------------------------------------------------


def validate_sizes(vocab: int, dim: int, seed: int) -> None:
    if not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise InputError(f"Vocabulary size must be between {MIN_VOCAB} and {MAX_VOCAB}; got {vocab}.")
    if not MIN_DIM <= dim <= MAX_DIM:
        raise InputError(f"Embedding size must be between {MIN_DIM} and {MAX_DIM}; got {dim}.")
    validate_seed(seed)


def validate_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be between 0 and {MAX_SEED}; got {seed}.")


def read_ids(text: str, vocab: int) -> tuple[int, ...]:
    """'3, 1, 4' -> (3, 1, 4): 1 to 12 token ids, each a whole number from 0 to vocab - 1."""
    values = parse_numbers(text, "Token ids", 1, MAX_IDS, example="a token id such as 3", list_example="3, 1, 4")
    return tuple(whole_in_range(v, f"Token ids, entry {i + 1}", 0, vocab - 1) for i, v in enumerate(values))


def validate_padding_idx(padding_idx: int, vocab: int) -> None:
    if not 0 <= padding_idx < vocab:
        raise InputError(f"padding_idx must be a row of the table, from 0 to {vocab - 1}; got {padding_idx}.")


def validate_p(p: float) -> None:
    if p not in DROPOUT_PS:
        raise InputError(f"Dropout p must be one of {', '.join(f'{v:g}' for v in DROPOUT_PS)}; got {p:g}.")


def validate_draws(draws: int) -> None:
    if draws not in DRAW_CHOICES:
        raise InputError(f"Draws must be one of {', '.join(f'{v:,}' for v in DRAW_CHOICES)}; got {draws}.")


# ---- the torch core the snippets show ---------------------------------------------------------------------------


def rounded(t: torch.Tensor) -> tuple:
    """A 2-D tensor as rows of floats to 4 decimals (what the heatmaps show)."""
    return tuple(tuple(round(v, 4) for v in row) for row in t.detach().tolist())


def raised(call) -> str:
    """torch's own message when `call()` raises, as 'Type: message'; empty when it runs."""
    try:
        call()
    except (RuntimeError, IndexError, TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return ""


def lookup_facts(vocab: int, dim: int, ids: tuple, seed: int) -> dict:
    """nn.Embedding(ids) beside one_hot(ids) @ weight, the same ids as floats, and an output head tied to the
    table (the head scores token v by the dot product with row v)."""
    torch.manual_seed(seed)
    emb = nn.Embedding(vocab, dim)
    idx = torch.tensor(ids)
    with torch.no_grad():  # nothing here is trained: compare values only
        looked_up = emb(idx)  # (T, dim): row ids[t] of emb.weight at position t
        one_hot = F.one_hot(idx, vocab).float()  # (T, vocab): a single 1 per row, at column ids[t]
        product = one_hot @ emb.weight  # (T, vocab) @ (vocab, dim): picks the same rows by multiplying
        head = nn.Linear(dim, vocab, bias=False)
        head.weight = emb.weight  # tied: one Parameter, registered under both modules
        untied = nn.Linear(dim, vocab, bias=False)
        tied_gap = (head(looked_up) - looked_up @ emb.weight.T).abs().max()  # logits = h @ W.T, the same W
    return dict(
        ids=ids, weight=rounded(emb.weight), one_hot=rounded(one_hot), looked_up=rounded(looked_up),
        lookup_equals_product=torch.equal(looked_up, product),
        max_abs_diff=float((looked_up - product).abs().max()),
        float_index_error=raised(lambda: emb(idx.float())),
        tied_same_object=head.weight is emb.weight,
        params_tied=sum(p.numel() for p in nn.ModuleList([emb, head]).parameters()),
        params_untied=sum(p.numel() for p in nn.ModuleList([emb, untied]).parameters()),
        tied_logits_max_diff=float(tied_gap),
    )


def padding_facts(vocab: int, dim: int, ids: tuple, padding_idx: int, seed: int) -> dict:
    """Row gradient norms of two embeddings holding the same values, with and without padding_idx, after one
    backward of the same upstream gradient."""
    torch.manual_seed(seed)
    padded = nn.Embedding(vocab, dim, padding_idx=padding_idx)  # row padding_idx starts at zeros
    plain = nn.Embedding(vocab, dim)
    with torch.no_grad():
        plain.weight.copy_(padded.weight)  # the same numbers, padding row included; only padding_idx differs
    idx = torch.tensor(ids)
    upstream = torch.randn(len(ids), dim)  # stands in for the gradient arriving from the layers above
    out = padded(idx)
    out.backward(upstream)
    plain(idx).backward(upstream)
    return dict(
        padding_idx=padding_idx, padding_row=tuple(padded.weight[padding_idx].tolist()),
        occurrences=tuple(torch.bincount(idx, minlength=vocab).tolist()),
        grad_with_padding_idx=tuple(padded.weight.grad.norm(dim=1).tolist()),
        grad_without=tuple(plain.weight.grad.norm(dim=1).tolist()),
        padding_output_max=float(out.detach()[idx == padding_idx].abs().max()) if padding_idx in ids else 0.0,
    )


def dropout_facts(p: float, draws: int, seed: int) -> dict:
    """nn.Dropout(p) on ones in train() and eval(); then `draws` single draws of the mask: the mean of the scaled
    output (x * mask / (1 - p)) against the mean of the mask alone, as running means over the draws."""
    torch.manual_seed(seed)
    drop = nn.Dropout(p)
    x = torch.ones(6, 16)
    train_out = drop(x)  # a fresh module is in train mode
    drop.eval()
    eval_out = drop(x)
    drop.train()
    out = drop(torch.ones(draws)).double()  # one draw per entry: 0 or 1 / (1 - p)
    kept = (out != 0).double()  # the mask alone, without the scaling
    count = torch.arange(1, draws + 1, dtype=torch.float64)
    at = torch.unique(torch.logspace(0, torch.log10(count[-1]).item(), 60).round().long())  # 60 points to draw
    return dict(
        p=p, draws=draws, train_out=rounded(train_out), eval_out=rounded(eval_out),
        train_values=tuple(round(v, 4) for v in torch.unique(train_out).tolist()),
        train_zeroed=float((train_out == 0).float().mean()), eval_equals_input=torch.equal(eval_out, x),
        mean_scaled=float(out.mean()), mean_mask=float(kept.mean()),
        standard_error=float(out.std() / draws**0.5) if draws > 1 else 0.0,
        curve_at=tuple(at.tolist()),
        curve_scaled=tuple((out.cumsum(0) / count)[at - 1].tolist()),
        curve_mask=tuple((kept.cumsum(0) / count)[at - 1].tolist()),
    )


class DropoutModule(nn.Module):
    """nn.Dropout: follows model.train() / model.eval()."""

    def __init__(self, p):
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(x)


class FunctionalWithTraining(nn.Module):
    """F.dropout told the module's mode: off in eval()."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class FunctionalDefault(nn.Module):
    """The trap: F.dropout's training argument defaults to True, and eval() cannot reach a plain argument."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p)


def trap_facts(p: float, seed: int) -> dict:
    """Fraction of 10,000 ones each module zeroes in train() and in eval(), and whether eval() returns x itself."""
    torch.manual_seed(seed)
    x = torch.ones(10_000)
    facts = {}
    for model in (DropoutModule(p), FunctionalWithTraining(p), FunctionalDefault(p)):
        model.train()
        train_out = model(x)
        model.eval()
        eval_out = model(x)
        facts[type(model).__name__] = dict(
            train_zeroed=float((train_out == 0).float().mean()), eval_zeroed=float((eval_out == 0).float().mean()),
            eval_equals_input=torch.equal(eval_out, x))
    return facts


# ---- results and entries ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LookupResult:
    vocab: int
    dim: int
    seed: int
    ids: tuple[int, ...]
    weight: tuple  # (vocab, dim) rows, 4 decimals
    one_hot: tuple  # (T, vocab)
    looked_up: tuple  # (T, dim)
    lookup_equals_product: bool
    max_abs_diff: float
    float_index_error: str
    tied_same_object: bool
    params_tied: int
    params_untied: int
    tied_logits_max_diff: float
    code: Script


@entry(6, 4, "2, 0, 5", 1)
def embedding_lookup(vocab: int = 8, dim: int = 6, ids_text: str = DEFAULT_IDS, seed: int = 0) -> LookupResult:
    """The lookup against the one-hot product, the float-index error and the tied head, for the visitor's ids."""
    validate_sizes(vocab, dim, seed)
    ids = read_ids(ids_text, vocab)
    code = script(rounded, raised, lookup_facts, imports=IMPORTS,
                  settings={"vocab": vocab, "dim": dim, "ids": ids, "seed": seed},
                  run=print_each("lookup_facts(vocab, dim, ids, seed)"))
    return LookupResult(vocab=vocab, dim=dim, seed=seed, **lookup_facts(vocab, dim, ids, seed), code=code)


@dataclass(frozen=True)
class PaddingResult:
    vocab: int
    ids: tuple[int, ...]
    padding_idx: int
    padding_row: tuple[float, ...]
    occurrences: tuple[int, ...]  # how often each row is looked up
    grad_with_padding_idx: tuple[float, ...]  # ‖weight.grad[v]‖ per row v
    grad_without: tuple[float, ...]
    padding_output_max: float  # max |emb(ids)| at the padding positions
    code: Script

    @property
    def padding_count(self) -> int:
        return self.occurrences[self.padding_idx]


@entry(6, 4, "2, 0, 5, 0", 0, 1)
def padding_gradient(vocab: int = 8, dim: int = 6, ids_text: str = DEFAULT_IDS, padding_idx: int = 0,
                     seed: int = 0) -> PaddingResult:
    """Row gradient norms with and without padding_idx, for the visitor's ids."""
    validate_sizes(vocab, dim, seed)
    ids = read_ids(ids_text, vocab)
    validate_padding_idx(padding_idx, vocab)
    code = script(padding_facts, imports=NN_IMPORTS,
                  settings={"vocab": vocab, "dim": dim, "ids": ids, "padding_idx": padding_idx, "seed": seed},
                  run=print_each("padding_facts(vocab, dim, ids, padding_idx, seed)"))
    return PaddingResult(vocab=vocab, ids=ids, **padding_facts(vocab, dim, ids, padding_idx, seed), code=code)


@dataclass(frozen=True)
class DropoutResult:
    p: float
    draws: int
    train_out: tuple  # nn.Dropout(p)(ones(6, 16)) in train(), 4 decimals
    eval_out: tuple
    train_values: tuple[float, ...]  # the distinct values train() produced
    train_zeroed: float
    eval_equals_input: bool
    mean_scaled: float  # mean of the scaled output over `draws` draws
    mean_mask: float  # mean of the mask alone
    standard_error: float  # of mean_scaled, from the draws' own spread
    curve_at: tuple[int, ...]
    curve_scaled: tuple[float, ...]
    curve_mask: tuple[float, ...]
    code: Script

    @property
    def scale(self) -> float:
        return 1 / (1 - self.p)


@entry(0.5, 1_000, 2)
def dropout_expectation(p: float = 0.5, draws: int = 10_000, seed: int = 0) -> DropoutResult:
    """The train and eval outputs of nn.Dropout(p) and the mean over many draws, scaled and unscaled."""
    validate_p(p)
    validate_draws(draws)
    validate_seed(seed)
    code = script(rounded, dropout_facts, imports=NN_IMPORTS, settings={"p": p, "draws": draws, "seed": seed},
                  run=print_each("dropout_facts(p, draws, seed)"))
    return DropoutResult(**dropout_facts(p, draws, seed), code=code)


@dataclass(frozen=True)
class TrapRow:
    module: str
    forward: str  # the line its forward runs
    train_zeroed: float
    eval_zeroed: float
    eval_equals_input: bool


TRAP_FORWARDS = {"DropoutModule": "self.drop(x)  # nn.Dropout(p)",
                 "FunctionalWithTraining": "F.dropout(x, p, self.training)",
                 "FunctionalDefault": "F.dropout(x, p)"}


@dataclass(frozen=True)
class TrapResult:
    p: float
    rows: tuple[TrapRow, ...]
    code: Script

    def row(self, module: str) -> TrapRow:
        return next(r for r in self.rows if r.module == module)


@entry(0.3, 4)
def functional_dropout_trap(p: float = 0.5, seed: int = 0) -> TrapResult:
    """Three modules that drop with p, each run in train() and eval()."""
    validate_p(p)
    validate_seed(seed)
    code = script(DropoutModule, FunctionalWithTraining, FunctionalDefault, trap_facts, imports=IMPORTS,
                  settings={"p": p, "seed": seed}, run=print_each("trap_facts(p, seed)"))
    rows = tuple(TrapRow(name, TRAP_FORWARDS[name], **facts) for name, facts in trap_facts(p, seed).items())
    return TrapResult(p, rows, code)


# ---- sentences the page shows, read from the results -------------------------------------------------------------


def table_rows(ids) -> str:
    """'row 1', 'rows 2, 5': the distinct rows of the table that ids read, in order."""
    rows = sorted(set(ids))
    return f"row {rows[0]}" if len(rows) == 1 else f"rows {', '.join(map(str, rows))}"


def lookup_sentence(r: LookupResult) -> str:
    """The lookup against the one-hot product, as measured."""
    t, v = len(r.ids), r.vocab
    same = ("bit for bit equal" if r.lookup_equals_product
            else f"different (max |difference| {r.max_abs_diff:.2g})")
    return (f"Measured: `emb(ids)` and `one_hot(ids) @ emb.weight` are **{same}**. The product multiplies a "
            f"{t} × {v} matrix that is all zeros but one 1 per row; the lookup copies {table_rows(r.ids)} of the "
            "table directly, which is why an embedding is a "
            "lookup and not a Linear layer on one-hot vectors.")


def float_index_sentence(r: LookupResult) -> str:
    if not r.float_index_error:
        return "`emb(ids.float())` ran without an error on this torch version."
    return "The same ids as floats are refused. `emb(ids.float())` raised, just now:"


def tying_sentence(r: LookupResult) -> str:
    return (f"**Tying** the output head to the table (`head.weight = emb.weight`) makes them one Parameter "
            f"(`head.weight is emb.weight`: {r.tied_same_object}): `parameters()` counts {r.params_tied:,} numbers "
            f"instead of {r.params_untied:,}, and the logits are `h @ emb.weight.T` (max difference "
            f"{r.tied_logits_max_diff:g}): token v is scored by the dot product with its own embedding. How a shared "
            "Parameter's gradient adds up, and the copy that silently unties: "
            "[Modules › Weight sharing](/modules?modules_tab=Weight+sharing).")


def padding_sentence(r: PaddingResult) -> str:
    p, k = r.padding_idx, r.padding_count
    others = max((abs(a - b) for v, (a, b) in enumerate(zip(r.grad_with_padding_idx, r.grad_without, strict=True))
                  if v != p), default=0.0)
    rest = f"Every other row gets the same gradient in both tables (max difference {others:g})."
    if k == 0:
        return (f"Row {p} is not among the ids, so it gets no gradient in either table. Put {p} among the token "
                f"ids to see padding_idx at work. {rest}")
    zeros = all(v == 0 for v in r.padding_row) and r.padding_output_max == 0
    start = (f" It also starts at zeros, so the {k} padding position{'s' if k > 1 else ''} embed to zero "
             f"(max |value| {r.padding_output_max:g})." if zeros else "")
    grad = r.grad_with_padding_idx[p]
    verdict = "the padding vector never trains" if grad == 0 else "the padding row still got a gradient"
    return (f"Row {p} is looked up {k} time{'s' if k > 1 else ''}. Without padding_idx its gradient norm is "
            f"{r.grad_without[p]:.4g}; with padding_idx={p} it is **{grad:g}**: {verdict}.{start} {rest}")


def mask_sentence(r: DropoutResult) -> str:
    kept = [v for v in r.train_values if v != 0]
    cells = len(r.train_out) * len(r.train_out[0])
    dropped = f"{r.train_zeroed:.0%} of the {cells} ones became 0"
    if kept:
        dropped += (f" and the rest became {', '.join(f'{v:g}' for v in kept)} "
                    f"(1 / (1 − {r.p:g}) = {r.scale:.4g})")
    after = "returns x itself" if r.eval_equals_input else "changed x"
    return f"With p = {r.p:g}, in train() {dropped}; in eval() the same module {after}."


def expectation_sentence(r: DropoutResult) -> str:
    return (f"Over {r.draws:,} draws the output's mean is **{r.mean_scaled:.4f}** (the input is 1; standard error "
            f"{r.standard_error:.2g}), while the mask alone averages {r.mean_mask:.4f} (1 − p = {1 - r.p:g}). "
            "Scaling the kept values by 1 / (1 − p) during training keeps the expected output equal to the input, "
            "so eval() can pass x through unchanged.")


def trap_sentence(r: TrapResult) -> str:
    trap, module, passed = (r.row(name) for name in ("FunctionalDefault", "DropoutModule", "FunctionalWithTraining"))
    if r.p == 0:
        return ("At p = 0 no module drops anything in either mode, so the trap is invisible: pick p above 0. "
                f"(Zeroed in eval(): {trap.eval_zeroed:.1%}, {module.eval_zeroed:.1%}, {passed.eval_zeroed:.1%}.)")
    return (f"After `model.eval()`, `F.dropout(x, p)` still zeroed **{trap.eval_zeroed:.1%}** of the values "
            f"(p = {r.p:g}): its `training` argument defaults to True, and eval() only flips `self.training`, which "
            f"that call never reads. `nn.Dropout` and `F.dropout(x, p, self.training)` zeroed "
            f"{module.eval_zeroed:.1%} and {passed.eval_zeroed:.1%} in eval().")


# ---- predict-then-run questions ---------------------------------------------------------------------------------


def _dropout_mean():
    torch.manual_seed(0)
    drop = nn.Dropout(p=0.5)  # a fresh module is in train mode
    return drop(torch.ones(100_000)).mean().item()


def _dropout_kept_value():
    torch.manual_seed(0)
    drop = nn.Dropout(p=0.2)
    return drop(torch.ones(1000)).max().item()


def _functional_dropout_in_eval():
    class Net(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.5)

    torch.manual_seed(0)
    model = Net().eval()
    return (model(torch.ones(10_000)) == 0).float().mean().item()


def _float_index():
    emb = nn.Embedding(10, 3)
    try:
        emb(torch.tensor([1.0, 2.0]))
        outcome = "returns rows 1 and 2"
    except Exception as err:
        outcome = type(err).__name__
    return outcome


def _padding_row_grad():
    emb = nn.Embedding(5, 3, padding_idx=0)
    emb(torch.tensor([0, 0, 2])).sum().backward()
    return emb.weight.grad[0].abs().sum().item()


QUESTIONS = (
    Question("emb_dropout_mean", "nn.Dropout(p=0.5) in train mode on 100,000 ones: what is the mean of the output?",
             _dropout_mean, "Half the values become 0 and the kept half are scaled by 1 / (1 − 0.5) = 2, so the "
             "expected value stays 1: the mean is 1 up to sampling noise.", kind="number", imports=IMPORTS),
    Question("emb_dropout_kept", "nn.Dropout(p=0.2) on ones: what value do the kept entries have?",
             _dropout_kept_value, "Inverted dropout scales what survives by 1 / (1 − p) = 1 / 0.8 = 1.25 during "
             "training, so eval() can return x unchanged.", kind="number", imports=IMPORTS),
    Question("emb_functional_eval", "After model.eval(), what fraction of the output is zero?",
             _functional_dropout_in_eval, "F.dropout's `training` argument defaults to True and eval() only flips "
             "`self.training`, which this forward never passes on: about half the values are still dropped. "
             "Write F.dropout(x, p, self.training) or use nn.Dropout.", kind="number", imports=IMPORTS),
    Question("emb_float_index", "What does an nn.Embedding do with float indices?", _float_index,
             "An embedding is a row lookup and rows are numbered by integers: torch raises a RuntimeError that "
             "asks for Long or Int indices. Token ids come from a tokenizer as int64; keep them that way.",
             choices=("returns rows 1 and 2", "RuntimeError", "IndexError", "TypeError"), imports=IMPORTS),
    Question("emb_padding_grad", "What is the sum of |weight.grad| over the padding row (row 0)?", _padding_row_grad,
             "With padding_idx=0 the backward of the lookup skips row 0: its gradient is exactly 0 however often "
             "it is looked up, so the padding vector never trains.", kind="number", imports=IMPORTS),
)
