"""Unit tests for models, run live: shape, overfit one batch, every parameter gets a gradient, determinism."""

import time
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError, quoted
from demos.shown import Script, entry, script

BUGS = ("none", "unused_layer", "detached_branch", "squeeze_output", "softmax_before_ce", "dropout_always_on")
BUG_LABELS = {
    "none": "no bug",
    "unused_layer": "a layer defined but never used",
    "detached_branch": ".detach() inside forward",
    "squeeze_output": ".squeeze() on the logits",
    "softmax_before_ce": "softmax before CrossEntropyLoss",
    "dropout_always_on": "F.dropout(training=True) hard-coded",
}
IN, HIDDEN, CLASSES = 10, 32, 4
OVERFIT_STEPS, OVERFIT_LOSS = 150, 0.05


class Classifier(nn.Module):
    """A small MLP classifier with one optional planted bug."""

    def __init__(self, bug: str = "none"):
        super().__init__()
        self.bug = bug
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, CLASSES)
        if bug == "unused_layer":
            self.extra = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.bug == "detached_branch":
            h = h.detach()
        if self.bug == "dropout_always_on":
            h = nn.functional.dropout(h, 0.2, training=True)
        out = self.fc2(h)
        if self.bug == "squeeze_output":
            out = out.squeeze()
        if self.bug == "softmax_before_ce":
            out = torch.softmax(out, dim=1)
        return out


@dataclass(frozen=True)
class TestRow:
    test: str
    passed: bool
    detail: str
    ms: float


@dataclass(frozen=True)
class TestReport:
    bug: str
    rows: tuple[TestRow, ...]
    overfit_losses: tuple[float, ...]
    code: Script

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.rows)


def _make(bug: str, seed: int = 0) -> Classifier:
    torch.manual_seed(seed)
    return Classifier(bug)


def test_output_shape(bug: str) -> tuple[bool, str]:
    """Logits are (batch, classes) for batch sizes 1 and 8: batch 1 catches a stray squeeze()."""
    model = _make(bug).eval()
    got = {b: tuple(model(torch.randn(b, IN)).shape) for b in (1, 8)}
    ok = all(shape == (b, CLASSES) for b, shape in got.items())
    return ok, ", ".join(f"batch {b} → {s}" for b, s in got.items())


def overfit_one_batch(bug: str) -> tuple[bool, str, list[float]]:
    """Adam on one fixed batch of 8: a correct model drives the loss to ~0."""
    model = _make(bug)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, IN, generator=g), torch.randint(0, CLASSES, (8,), generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(OVERFIT_STEPS):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses[-1] < OVERFIT_LOSS, f"final loss {losses[-1]:.4f} (needs < {OVERFIT_LOSS})", losses


def every_param_gets_grad(bug: str) -> tuple[bool, str]:
    """After one backward every parameter has a non-zero .grad."""
    model = _make(bug)
    x, y = torch.randn(8, IN), torch.randint(0, CLASSES, (8,))
    nn.functional.cross_entropy(model(x), y).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    return not missing, "no gradient: " + ", ".join(missing) if missing else "all parameters have gradients"


def deterministic_under_seed(bug: str) -> tuple[bool, str]:
    """Same seed → same weights and the same eval-mode output, twice in a row."""
    x = torch.randn(8, IN)
    a, b = _make(bug).eval(), _make(bug).eval()
    with torch.no_grad():
        same = torch.equal(a(x), b(x)) and torch.equal(a(x), a(x))
    return same, "identical outputs" if same else "eval outputs differ between identical calls"


def _timed(fn, bug):
    start = time.perf_counter()
    try:
        result = fn(bug)
    except RuntimeError as err:  # a crashing test is a failing test, with its message
        result = (False, f"raised: {str(err).splitlines()[0]}")
    return result, (time.perf_counter() - start) * 1000


def four_tests(bug: str) -> dict:
    """Run the four tests against the model with the chosen bug (or none); a test that raises fails."""
    rows, losses = [], []
    for name, fn in (("output shape", test_output_shape), ("overfit one batch", overfit_one_batch),
                     ("every parameter gets a gradient", every_param_gets_grad),
                     ("deterministic under a seed", deterministic_under_seed)):
        result, ms = _timed(fn, bug)
        if len(result) == 3:
            losses = result[2]
        rows.append(TestRow(name, bool(result[0]), result[1], ms))
    return {"rows": tuple(rows), "overfit_losses": tuple(losses)}


@entry("squeeze_output")
def run_model_tests(bug: str) -> TestReport:
    """four_tests for the chosen bug, with the code that ran."""
    if bug not in BUGS:
        raise InputError(f"The planted bug must be one of {', '.join(BUGS)}; got {quoted(bug)}.")
    settings = {"bug": bug, "IN": IN, "HIDDEN": HIDDEN, "CLASSES": CLASSES, "OVERFIT_STEPS": OVERFIT_STEPS,
                "OVERFIT_LOSS": OVERFIT_LOSS}
    code = script(Classifier, TestRow, _make, test_output_shape, overfit_one_batch, every_param_gets_grad,
                  deterministic_under_seed, _timed, four_tests, imports=IMPORTS, settings=settings, run=RUN)
    return TestReport(bug, **four_tests(bug), code=code)


IMPORTS = """import time
from dataclasses import dataclass

import torch
from torch import nn"""

RUN = """for row in four_tests(bug)["rows"]:
    print(f"{row.test}: {'pass' if row.passed else 'FAIL'} ({row.detail})")"""
