"""Reproducibility: unseeded vs seeded runs (checked bit for bit) and what deterministic mode changes."""

import hashlib
import threading
from dataclasses import dataclass

import torch
from torch import nn

from demos.errors import InputError
from demos.parsing import parse_int
from demos.shown import entry, print_each, script

MAX_STEPS = 50
MAX_SEED = 2**31 - 1
_DETERMINISM_LOCK = threading.Lock()  # the flag is process-wide: flip it for one check at a time


@dataclass(frozen=True)
class Run:
    label: str
    losses: tuple[float, ...]
    digest: str  # sha256 of the final parameters' bytes, first 16 hex digits


@dataclass(frozen=True)
class SeedResult:
    runs: tuple[Run, ...]  # unseeded A, unseeded B, seeded A, seeded B
    unseeded_equal: bool
    seeded_equal: bool  # every loss and every parameter bit identical
    unseeded_max_diff: float
    code: str


def short_run(steps: int, seed: int | None) -> tuple[list[float], list[torch.Tensor]]:
    """Random init, random data, SGD: everything drawn from the global generator."""
    if seed is not None:
        torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    x, y = torch.randn(64, 10), torch.randn(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, 64, (16,))
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def parse_seed(text: str) -> int:
    """A seed typed as text: a whole number between 0 and MAX_SEED."""
    return parse_int(text, "Seed", 0, MAX_SEED)


def digest(params: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for p in params:
        h.update(p.numpy().tobytes())
    return h.hexdigest()[:16]


def four_runs(steps: int, seed: int) -> dict:
    """The same short run twice without a seed, then twice after torch.manual_seed(seed)."""
    torch.seed()  # the unseeded runs start from fresh entropy, as a new process would
    ua, pa = short_run(steps, None)
    ub, pb = short_run(steps, None)
    sa, qa = short_run(steps, seed)
    sb, qb = short_run(steps, seed)
    torch.seed()  # do not leave the global generator at a predictable state for other pages
    same = sa == sb and all(torch.equal(p, q) for p, q in zip(qa, qb, strict=True))
    runs = (Run("unseeded run A", tuple(ua), digest(pa)), Run("unseeded run B", tuple(ub), digest(pb)),
            Run(f"seed {seed}, run A", tuple(sa), digest(qa)), Run(f"seed {seed}, run B", tuple(sb), digest(qb)))
    return {"runs": runs, "unseeded_equal": ua == ub, "seeded_equal": same,
            "unseeded_max_diff": max(abs(a - b) for a, b in zip(ua, ub, strict=True))}


@entry(4, 7)
def seeded_runs(steps: int, seed: int) -> SeedResult:
    """four_runs at the visitor's settings, with the code that ran."""
    if not isinstance(steps, int) or not 2 <= steps <= MAX_STEPS:
        raise InputError(f"Steps must be between 2 and {MAX_STEPS}; got {steps}.")
    if not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed: must be a whole number from 0 to {MAX_SEED}; got {seed!r}.")
    code = script(Run, short_run, digest, four_runs, imports=SEED_IMPORTS, settings={"steps": steps, "seed": seed},
                  run=print_each("four_runs(steps, seed)"))
    return SeedResult(**four_runs(steps, seed), code=code)


SEED_IMPORTS = """import hashlib
from dataclasses import dataclass

import torch
from torch import nn

torch.set_num_threads(1)  # as the server runs its demos: a different thread count can change a sum's last bit"""


@dataclass(frozen=True)
class OpCheck:
    op: str
    device: str
    outcome: str  # "ran" or "raised"
    detail: str


@dataclass(frozen=True)
class DeterminismResult:
    cuda: bool
    empty_default: str  # torch.empty(4) printed with the flag off (whatever memory held)
    empty_deterministic: str  # with the flag on: filled with NaN
    cpu_checks: tuple[OpCheck, ...]
    cuda_checks: tuple[OpCheck, ...]  # empty without CUDA
    code: str


def _max_unpool(device):
    x = torch.rand(1, 1, 4, 4, device=device)
    pooled, idx = nn.functional.max_pool2d(x, 2, return_indices=True)
    return nn.functional.max_unpool2d(pooled, idx, 2)


def _index_put_accumulate(device):
    return torch.zeros(5, device=device).index_put_((torch.tensor([0, 0], device=device),),
                                                    torch.ones(2, device=device), accumulate=True)


def _adaptive_avg_pool_backward(device):
    x = torch.rand(1, 1, 5, 5, device=device, requires_grad=True)
    nn.functional.adaptive_avg_pool2d(x, 2).sum().backward()
    return x.grad


def _bilinear_backward(device):
    x = torch.rand(1, 1, 4, 4, device=device, requires_grad=True)
    nn.functional.interpolate(x, scale_factor=2, mode="bilinear").sum().backward()
    return x.grad


def _scatter_add(device):
    return torch.zeros(5, device=device).scatter_add_(0, torch.tensor([0, 0, 1], device=device),
                                                      torch.ones(3, device=device))


def _histc(device):
    return torch.histc(torch.rand(100, device=device), bins=10)


def deterministic_checks() -> tuple[tuple, ...]:
    """Each op checked: its name, the function that runs it, and what deterministic mode does with it."""
    return (
        ("max_unpool2d", _max_unpool, "no deterministic kernel on any device: raises, CPU included"),
        ("index_put_(accumulate=True)", _index_put_accumulate, "CPU: switches to a deterministic (sorted) kernel; "
         "CUDA's kernel sorts already and is not on torch's nondeterministic list"),
        ("adaptive_avg_pool2d backward", _adaptive_avg_pool_backward, "CUDA backward uses atomicAdd: raises on CUDA"),
        ("interpolate(bilinear) backward", _bilinear_backward, "CUDA backward uses atomicAdd: raises on CUDA"),
        ("scatter_add_", _scatter_add, "CUDA switches to a deterministic kernel"),
        ("histc", _histc, "CUDA kernel uses atomics: raises on CUDA"),
    )


CHECKS = deterministic_checks()


def _run_checks(device: str) -> tuple[OpCheck, ...]:
    out = []
    for name, fn, _why in deterministic_checks():
        try:
            fn(device)
            out.append(OpCheck(name, device, "ran", ""))
        except RuntimeError as err:
            out.append(OpCheck(name, device, "raised", str(err).split(". ")[0]))
    return tuple(out)


def deterministic_mode(cuda: bool) -> dict:
    """torch.empty with the flag off and on, then each op with torch.use_deterministic_algorithms(True) on CPU,
    and on CUDA when present; the flag is restored afterwards."""
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        empty_default = str(torch.empty(4).tolist())
        torch.use_deterministic_algorithms(True)
        empty_det = str(torch.empty(4).tolist())
        cpu = _run_checks("cpu")
        gpu = _run_checks("cuda") if cuda else ()
    finally:
        torch.use_deterministic_algorithms(before)
    return {"cuda": cuda, "empty_default": empty_default, "empty_deterministic": empty_det, "cpu_checks": cpu,
            "cuda_checks": gpu}


@entry(entries=1)
def determinism_checks() -> DeterminismResult:
    """deterministic_mode on this host, with the code that ran."""
    cuda = torch.cuda.is_available()
    code = script(OpCheck, _max_unpool, _index_put_accumulate, _adaptive_avg_pool_backward, _bilinear_backward,
                  _scatter_add, _histc, deterministic_checks, _run_checks, deterministic_mode, imports=DET_IMPORTS,
                  settings={"cuda": cuda}, run=print_each("deterministic_mode(cuda)"))
    with _DETERMINISM_LOCK:  # the flag is process-wide
        return DeterminismResult(**deterministic_mode(cuda), code=code)


DET_IMPORTS = """from dataclasses import dataclass

import torch
from torch import nn

# On CUDA also set CUBLAS_WORKSPACE_CONFIG=:4096:8 before CUDA starts and torch.backends.cudnn.benchmark = False"""
