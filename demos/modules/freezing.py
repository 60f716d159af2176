"""Freezing layers: which parameters a real step changes, which .grad stay None, what the optimizer holds."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError, quoted
from demos.modules.common import MODULE_IMPORTS, norm
from demos.modules.inputs import parse_lrs
from demos.shown import Script, entry, script
from demos.threads import single_threaded

LAYERS = ("stem", "bn", "body", "head")
BACKBONE = ("stem", "bn", "body")
OPTIMIZERS = ("SGD", "SGD + momentum", "AdamW")


class FineTuneNet(nn.Module):
    """A pretrained-backbone stand-in (stem, bn, body) and a task head; dropout between them."""

    def __init__(self, d_in=8, hidden=16, classes=3, p=0.5):
        super().__init__()
        self.stem = nn.Linear(d_in, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.drop = nn.Dropout(p)
        self.body = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        x = self.drop(x)
        x = torch.relu(self.body(x))
        return self.head(x)


def make_optimizer(name: str, params, lr: float = 0.1):
    """The optimizer the demo steps with."""
    if name == "SGD":
        return torch.optim.SGD(params, lr=lr)
    if name == "SGD + momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=0.01)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


def batch(seed: int):
    """A seeded batch: 32 samples of 8 features and their class labels."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)


@dataclass(frozen=True)
class ParamChange:
    name: str
    layer: str
    requires_grad: bool
    grad_is_none: bool
    grad_norm: float | None
    change_norm: float
    bit_identical: bool


@dataclass(frozen=True)
class GroupView:
    index: int
    lr: float
    weight_decay: float
    names: tuple[str, ...]


@dataclass(frozen=True)
class FreezeStep:
    frozen: tuple[str, ...]
    optimizer: str
    params: tuple[ParamChange, ...]
    groups: tuple[GroupView, ...]
    bn_running_mean_change: float  # BatchNorm statistics move in train() even when its parameters are frozen
    code: Script


def _validate_layers(frozen, allowed=LAYERS) -> tuple[str, ...]:
    unknown = [f for f in frozen if f not in allowed]
    if unknown:
        raise InputError(f"Unknown layer {quoted(unknown[0])}; the layers are {', '.join(allowed)}.")
    return tuple(f for f in allowed if f in frozen)


@entry(("stem", "head"), "AdamW")
@single_threaded  # the shown script pins one thread too, so it prints these numbers
def freeze_step(frozen=("stem", "bn"), optimizer="SGD", seed: int = 0) -> FreezeStep:
    """Freeze layers with requires_grad_(False), give the optimizer the rest, run one real step."""
    frozen = _validate_layers(frozen)
    if len(frozen) == len(LAYERS):
        raise InputError("Leave at least one layer trainable: with every layer frozen there is nothing to train.")
    if optimizer not in OPTIMIZERS:
        raise InputError(f"The optimizer must be one of {', '.join(OPTIMIZERS)}; got {quoted(optimizer)}.")
    rows, model, opt, bn_moved = frozen_step(frozen, optimizer, seed)
    code = script(norm, FineTuneNet, make_optimizer, batch, frozen_step, imports=MODULE_IMPORTS,
                  settings={"frozen": frozen, "optimizer": optimizer, "seed": seed}, run="""
rows, model, opt, bn_moved = frozen_step(frozen, optimizer, seed)
for row in rows:
    print(row)
print("param groups:", [len(g["params"]) for g in opt.param_groups], "bn.running_mean moved:", bn_moved)""")
    return FreezeStep(frozen, optimizer, tuple(ParamChange(**row) for row in rows), group_views(opt, model), bn_moved,
                      code)


def frozen_step(frozen, optimizer: str, seed: int):
    """Freeze the `frozen` layers, give the optimizer the rest, run one real step: per parameter what its .grad
    was and how far it moved; the model, the optimizer, and how far BatchNorm's running mean moved."""
    torch.manual_seed(seed)
    model = FineTuneNet()
    for name in frozen:
        getattr(model, name).requires_grad_(False)
    opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    mean_before = model.bn.running_mean.clone()
    x, y = batch(seed)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    rows = [dict(name=n, layer=n.split(".")[0], requires_grad=p.requires_grad, grad_is_none=p.grad is None,
                 grad_norm=norm(p.grad), change_norm=norm(p.detach() - before[n]),
                 bit_identical=torch.equal(p.detach(), before[n])) for n, p in model.named_parameters()]
    return rows, model, opt, norm(model.bn.running_mean - mean_before)


def group_views(opt: torch.optim.Optimizer, model: nn.Module) -> tuple[GroupView, ...]:
    """What each param group holds, with parameter objects mapped back to their names."""
    names = {id(p): n for n, p in model.named_parameters()}
    return tuple(GroupView(i, g["lr"], g.get("weight_decay", 0.0), tuple(names[id(p)] for p in g["params"]))
                 for i, g in enumerate(opt.param_groups))


@dataclass(frozen=True)
class LateFreeze:
    optimizer: str
    change_set_to_none: float  # step 2 change of the frozen stem, grads set to None
    change_zeroed: float  # the same with zero_grad(set_to_none=False): zeros, not None
    grad_after_zero_grad: str  # what stem.weight.grad was at step 2, per variant
    code: Script


@entry("SGD + momentum")
def late_freeze(optimizer="SGD + momentum", seed: int = 0) -> LateFreeze:
    """Freeze the stem after one step: does the optimizer still move it? It depends on zero_grad."""
    if optimizer not in OPTIMIZERS:
        raise InputError(f"The optimizer must be one of {', '.join(OPTIMIZERS)}; got {quoted(optimizer)}.")
    (grad_none, moved_none), (grad_zeroed, moved_zeroed) = (
        freeze_after_one_step(optimizer, set_to_none, seed) for set_to_none in (True, False))
    code = script(norm, FineTuneNet, make_optimizer, batch, freeze_after_one_step, imports=MODULE_IMPORTS,
                  settings={"optimizer": optimizer, "seed": seed}, run="""
for set_to_none in (True, False):
    grad, moved = freeze_after_one_step(optimizer, set_to_none, seed)
    print("set_to_none", set_to_none, "stem.weight.grad:", grad, "frozen stem moved by", moved)""")
    return LateFreeze(optimizer, moved_none, moved_zeroed,
                      f"set_to_none=True: {grad_none}; set_to_none=False: {grad_zeroed}", code)


def freeze_after_one_step(optimizer: str, set_to_none: bool, seed: int):
    """One step, zero_grad(set_to_none), then freeze the stem and step again: what stem.weight.grad held at the
    second step ("None" or "zeros") and how far that step moved the frozen stem."""
    torch.manual_seed(seed)
    model = FineTuneNet()
    opt = make_optimizer(optimizer, model.parameters())
    x, y = batch(seed)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    model.stem.requires_grad_(False)  # frozen after training started
    before = model.stem.weight.detach().clone()
    F.cross_entropy(model(x), y).backward()
    grad = "None" if model.stem.weight.grad is None else "zeros"
    opt.step()  # momentum and weight decay still move a parameter whose .grad is zeros, not None
    return grad, norm(model.stem.weight.detach() - before)


@dataclass(frozen=True)
class EvalVsFreeze:
    rows: tuple[tuple[str, str, str], ...]  # property, with eval(), with requires_grad_(False)
    code: Script


@entry()
def eval_vs_freeze(seed: int = 0) -> EvalVsFreeze:
    """model.eval() changes dropout and BatchNorm behaviour; only requires_grad_(False) stops training."""
    facts = {variant: eval_or_freeze(variant, seed) for variant in ("eval", "freeze")}
    labels = ("model.training", "two forward passes on the same input", "stem.weight.grad after backward",
              "|change| of stem.weight after opt.step()", "|change| of bn.running_mean")
    rows = tuple((label, facts["eval"][i], facts["freeze"][i]) for i, label in enumerate(labels))
    code = script(norm, FineTuneNet, batch, eval_or_freeze, imports=MODULE_IMPORTS,
                  settings={"BACKBONE": BACKBONE, "seed": seed}, run="""
for variant in ("eval", "freeze"):
    print(variant, eval_or_freeze(variant, seed))""")
    return EvalVsFreeze(rows, code)


def eval_or_freeze(variant: str, seed: int):
    """model.eval(), or the backbone frozen with requires_grad_(False), then one step: model.training, whether two
    forwards agree, stem.weight.grad, how far stem.weight and bn.running_mean moved."""
    torch.manual_seed(seed)
    model = FineTuneNet()
    if variant == "eval":
        model.eval()  # changes dropout and BatchNorm; gradients still flow
    else:
        for name in BACKBONE:
            getattr(model, name).requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    before = model.stem.weight.detach().clone()
    mean_before = model.bn.running_mean.clone()
    x, y = batch(seed)
    same_twice = torch.equal(model(x), model(x))
    F.cross_entropy(model(x), y).backward()
    opt.step()
    return (
        str(model.training),
        "same" if same_twice else "different (dropout active)",
        "None" if model.stem.weight.grad is None else f"tensor, norm {norm(model.stem.weight.grad):.3g}",
        f"{norm(model.stem.weight.detach() - before):.4g}",
        f"{norm(model.bn.running_mean - mean_before):.4g}",
    )


@dataclass(frozen=True)
class GroupLRs:
    lrs: tuple[float, float]
    groups: tuple[GroupView, ...]
    effective: tuple[tuple[str, int, float, float], ...]  # name, group, |change| / |grad|, group lr
    verified: bool
    code: Script


@entry("0.02, 0.2")
@single_threaded  # the shown script pins one thread too, so it prints these numbers
def per_group_lrs(lr_text: str = "0.01, 0.1", seed: int = 0) -> GroupLRs:
    """Two param groups (backbone, head) with their own learning rates; plain SGD so change = lr * grad."""
    lrs = parse_lrs(lr_text)
    rows, ok, model, opt = step_with_group_lrs(lrs, seed)
    code = script(norm, FineTuneNet, batch, step_with_group_lrs, imports=MODULE_IMPORTS,
                  settings={"BACKBONE": BACKBONE, "lrs": lrs, "seed": seed}, run="""
rows, ok, model, opt = step_with_group_lrs(lrs, seed)
for name, group, ratio, lr in rows:
    print(name, "group", group, "lr", lr, "|change| / |grad| =", ratio)
print("every change is -lr * grad:", ok)""")
    return GroupLRs(lrs, group_views(opt, model), tuple(rows), ok, code)


def step_with_group_lrs(lrs, seed: int):
    """One plain-SGD step with two param groups (backbone, head) at their own learning rates: per parameter its
    group, |change| / |grad| and the group's lr; whether every change is exactly -lr * grad; the model, optimizer."""
    torch.manual_seed(seed)
    model = FineTuneNet()
    backbone = [p for name in BACKBONE for p in getattr(model, name).parameters()]
    opt = torch.optim.SGD([{"params": backbone, "lr": lrs[0]}, {"params": model.head.parameters(), "lr": lrs[1]}])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.eval()  # no dropout noise: the check below is exact arithmetic
    x, y = batch(seed)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    group_of = {id(p): i for i, g in enumerate(opt.param_groups) for p in g["params"]}
    rows, ok = [], True
    for n, p in model.named_parameters():
        i = group_of[id(p)]
        step = p.detach() - before[n]
        ok = ok and torch.allclose(step, -opt.param_groups[i]["lr"] * p.grad, rtol=1e-4, atol=1e-7)
        ratio = norm(step) / max(norm(p.grad), 1e-30)
        rows.append((n, i, ratio, opt.param_groups[i]["lr"]))
    return rows, ok, model, opt
