"""Parameters, buffers and plain tensor attributes: what each registration means, every cell read from torch."""

from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.modules.common import MODULE_IMPORTS, get_path, moved_copy, norm, target_device
from demos.shown import Script, entry, script
from demos.threads import single_threaded

MAX_TRAIN_STEPS, EVAL_STEPS = 20, 3
TRUE_MEAN = (2.0, -1.0, 0.5)
TRUE_STD = (1.0, 2.0, 0.5)


class Tagged(nn.Module):
    """Conv -> BatchNorm -> Linear, with one buffer of each kind and one plain tensor attribute."""

    def __init__(self, channels: int = 4, classes: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, classes)
        # saved and moved, not trained
        self.register_buffer("class_weight", torch.linspace(1.0, 2.0, classes))
        # moved, not saved
        self.register_buffer("last_logits", torch.zeros(classes), persistent=False)
        # a plain attribute: nn.Module never sees it
        self.temperature = torch.ones(classes, requires_grad=True)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = x.mean(dim=(2, 3))
        logits = self.fc(x) * self.class_weight / self.temperature
        self.last_logits = logits.detach()
        return logits


@dataclass(frozen=True)
class TensorRow:
    name: str
    kind: str
    shape: tuple[int, ...]
    requires_grad: bool
    in_parameters: bool
    in_state_dict: bool
    device_after_to: str
    moved: bool
    in_optimizer: bool
    changed_by_step: bool


@dataclass(frozen=True)
class RegistryTable:
    rows: tuple[TensorRow, ...]
    device: str
    state_dict_keys: tuple[str, ...]
    code: Script


def plain_tensor_attributes(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Tensors stored as ordinary attributes (module.__dict__): not parameters, not buffers."""
    found = []
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                found.append((f"{prefix}.{key}" if prefix else key, value))
    return found


def kind_of(model: nn.Module, name: str, base: str) -> str:
    """parameter, buffer, buffer (persistent=False) or plain attribute."""
    if base != "buffer":
        return base
    owner_name, _, leaf = name.rpartition(".")
    owner = get_path(model, owner_name) if owner_name else model
    return "buffer (persistent=False)" if leaf in owner._non_persistent_buffers_set else "buffer"


@entry(1)
def registry_table(seed: int = 0) -> RegistryTable:
    """One row per tensor of Tagged: kind, shape, requires_grad, and where torch lists or moves it."""
    device = target_device()
    keys, rows = tensor_rows(seed, device)
    code = script(Tagged, get_path, moved_copy, plain_tensor_attributes, kind_of, tensor_rows,
                  imports=MODULE_IMPORTS, settings={"seed": seed, "device": device}, run="""
keys, rows = tensor_rows(seed, device)
print("state_dict():", keys)
for row in rows:
    print(row)""")
    return RegistryTable(tuple(TensorRow(**row) for row in rows), device, tuple(keys), code)


def tensor_rows(seed: int, device: str):
    """Tagged's state_dict keys, and per tensor: its kind, shape, requires_grad, whether parameters(), state_dict()
    and the optimizer hold it, its device after .to(device), and whether one optimizer step changed it."""
    torch.manual_seed(seed)
    model = Tagged()
    tensors = [(n, t, "parameter") for n, t in model.named_parameters()]
    tensors += [(n, t, "buffer") for n, t in model.named_buffers()]
    tensors += [(n, t, "plain attribute") for n, t in plain_tensor_attributes(model)]
    param_ids = {id(p) for p in model.parameters()}
    keys = list(model.state_dict().keys())
    moved = moved_copy(model, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    before = {n: t.detach().clone() for n, t, _ in tensors}
    loss = F.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    optimizer.step()
    rows = []
    for name, t, base in tensors:
        after_to = get_path(moved, name)
        rows.append(dict(
            name=name, kind=kind_of(model, name, base), shape=tuple(t.shape), requires_grad=t.requires_grad,
            in_parameters=id(t) in param_ids, in_state_dict=name in keys, device_after_to=str(after_to.device),
            moved=after_to.device != t.device, in_optimizer=id(t) in optimized,
            changed_by_step=not torch.equal(before[name], get_path(model, name).detach()),
        ))
    return keys, rows


def registry_frame(table: RegistryTable) -> pd.DataFrame:
    """The table as a DataFrame with readable column names."""
    return pd.DataFrame([{
        "tensor": r.name, "kind": r.kind, "shape": str(r.shape), "requires_grad": r.requires_grad,
        "parameters()": r.in_parameters, "state_dict()": r.in_state_dict,
        f".to('{table.device}')": r.device_after_to, "optimizer": r.in_optimizer,
        "changed by a step": r.changed_by_step,
    } for r in table.rows])


@dataclass(frozen=True)
class BufferVsAttribute:
    buffer_keys: tuple[str, ...]
    attribute_keys: tuple[str, ...]
    buffer_device: str
    attribute_device: str
    buffer_outcome: str
    attribute_outcome: str
    code: Script


class WithBuffer(nn.Module):
    """Scales its input by a constant registered as a buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))

    def forward(self, x):
        return x * self.scale


class WithAttribute(nn.Module):
    """The same, with the constant stored as a plain attribute (the trap)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.tensor([1.0, 2.0, 3.0])

    def forward(self, x):
        return x * self.scale


def forward_after_move(model: nn.Module, device: str) -> str:
    """What forward does on an input on `device`: its output's device, or torch's error."""
    try:
        out = model(torch.ones(2, 3, device=device))
        return f"forward works: output on {out.device}, shape {tuple(out.shape)}"
    except RuntimeError as err:
        return f"RuntimeError: {str(err).splitlines()[0]}"


def moved_and_run(model_cls, device: str):
    """A fresh model's state_dict keys, then where its scale lives after .to(device) and what forward does there."""
    model = model_cls()
    keys = list(model.state_dict())
    model.to(device)
    return keys, str(model.scale.device), forward_after_move(model, device)


@entry()
def buffer_vs_attribute() -> BufferVsAttribute:
    """register_buffer vs a plain attribute: state_dict keys, device after .to(), forward after the move."""
    device = target_device()
    (good_keys, good_device, good_outcome), (bad_keys, bad_device, bad_outcome) = (
        moved_and_run(cls, device) for cls in (WithBuffer, WithAttribute))
    code = script(WithBuffer, WithAttribute, forward_after_move, moved_and_run, imports=MODULE_IMPORTS,
                  settings={"device": device}, run="""
for model_cls in (WithBuffer, WithAttribute):
    print(model_cls.__name__, moved_and_run(model_cls, device))""")
    return BufferVsAttribute(tuple(good_keys), tuple(bad_keys), good_device, bad_device, good_outcome, bad_outcome,
                             code)


@dataclass(frozen=True)
class BatchNormTrace:
    momentum: float
    modes: tuple[str, ...]  # "init", then "train" or "eval" per step
    batch_means: tuple[tuple[float, ...], ...]  # per step, per channel (nan for init)
    running_means: tuple[tuple[float, ...], ...]
    running_vars: tuple[tuple[float, ...], ...]
    num_batches: tuple[int, ...]
    eval_uses_running_stats: bool
    code: str


@entry(4, 0.2, 1)
@single_threaded  # the shown script pins one thread too, so it prints these numbers
def batchnorm_stats(train_steps: int = 5, momentum: float = 0.1, seed: int = 0) -> BatchNormTrace:
    """BatchNorm1d's running statistics over train() steps, then frozen over eval() steps."""
    if not 1 <= train_steps <= MAX_TRAIN_STEPS:
        raise InputError(f"Train steps must be between 1 and {MAX_TRAIN_STEPS}; got {train_steps}.")
    if not 0.01 <= momentum <= 1.0:
        raise InputError(f"Momentum must be between 0.01 and 1.0; got {momentum}.")
    rows = trace_batchnorm(train_steps, momentum, seed)
    columns = {key: tuple(row[key] for row in rows) for key in rows[0]}
    code = script(trace_batchnorm, imports=MODULE_IMPORTS,
                  settings={"TRUE_MEAN": TRUE_MEAN, "TRUE_STD": TRUE_STD, "EVAL_STEPS": EVAL_STEPS,
                            "train_steps": train_steps, "momentum": momentum, "seed": seed}, run="""
for row in trace_batchnorm(train_steps, momentum, seed)[1:]:  # after each batch (row 0: at init)
    print(row)""")
    return BatchNormTrace(momentum, columns["mode"], columns["batch_mean"], columns["running_mean"],
                          columns["running_var"], columns["num_batches_tracked"], all(columns["eval_as_formula"]),
                          code)


def trace_batchnorm(train_steps: int, momentum: float, seed: int) -> list[dict]:
    """BatchNorm1d over `train_steps` train() batches, then EVAL_STEPS eval() batches: per step its mode, the batch's
    mean, the running statistics after it, and (in eval) whether the output is the formula with the running stats."""
    torch.manual_seed(seed)
    bn = nn.BatchNorm1d(3, momentum=momentum)
    mean, std = torch.tensor(TRUE_MEAN), torch.tensor(TRUE_STD)
    rows = [dict(mode="init", batch_mean=(float("nan"),) * 3, running_mean=tuple(bn.running_mean.tolist()),
                 running_var=tuple(bn.running_var.tolist()), num_batches_tracked=int(bn.num_batches_tracked),
                 eval_as_formula=True)]
    for step in range(train_steps + EVAL_STEPS):
        bn.train(step < train_steps)
        x = torch.randn(16, 3) * std + mean
        with torch.no_grad():
            y = bn(x)
        expected = (x - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
        rows.append(dict(mode="train" if bn.training else "eval", batch_mean=tuple(x.mean(0).tolist()),
                         running_mean=tuple(bn.running_mean.tolist()), running_var=tuple(bn.running_var.tolist()),
                         num_batches_tracked=int(bn.num_batches_tracked),
                         eval_as_formula=bn.training or torch.allclose(y, expected, atol=1e-5)))
    return rows


def momentum_formula(trace: BatchNormTrace, channel: int = 0) -> str:
    """The update of the first train step for one channel, with torch's numbers plugged in."""
    old, batch, new = trace.running_means[0][channel], trace.batch_means[1][channel], trace.running_means[1][channel]
    m = trace.momentum
    return (f"running_mean = (1 − momentum) · running_mean + momentum · batch_mean = "
            f"(1 − {m:g}) · {old:.4f} + {m:g} · {batch:.4f} = {(1 - m) * old + m * batch:.4f}   "
            f"(torch: {new:.4f})")


def batchnorm_norm_check(trace: BatchNormTrace) -> float:
    """How far running_mean moved during the eval() steps (0 when eval leaves it alone)."""
    first_eval = trace.modes.index("eval")
    a = torch.tensor(trace.running_means[first_eval - 1])
    b = torch.tensor(trace.running_means[-1])
    return norm(a - b)
