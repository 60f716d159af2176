"""Devices: where tensors and parameters live, mixing devices, tensor.to vs module.to, choosing a device, pinning.

Where no CUDA device exists, the examples run on the meta device (shapes and dtypes, no data), so they run anywhere.
"""

from dataclasses import dataclass

import pandas as pd
import torch

from demos.shown import Script, entry, script
from demos.style import COLORS, text_on
from demos.tensors.common import outcome, torch_error
from demos.traps import TrapPair, measure


@dataclass(frozen=True)
class DeviceReport:
    accelerator: str | None  # torch.accelerator.current_accelerator(), None when there is none
    chosen: str  # the device the recommended idiom picks here
    target: str  # where the examples below move things: cuda when present, else meta
    tensor_before: str
    tensor_after: str  # x.to(target): a new tensor
    tensor_same_object: bool  # x.to(target) is x
    x_still_on: str  # x itself after the call
    module_before: str
    module_after: str
    module_same_object: bool  # model.to(target) is model
    mixing_error: str | None  # torch's message for cpu + target
    pinned: str  # what pin_memory() said here
    code: Script


def target_device() -> str:
    """cuda when this host has it; otherwise meta, which runs anywhere."""
    return "cuda" if torch.cuda.is_available() else "meta"


def chosen_device() -> torch.device:
    """The recommended idiom: the current accelerator when one is available, else the CPU."""
    if torch.accelerator.is_available():
        return torch.accelerator.current_accelerator()
    return torch.device("cpu")


def placement(target: str) -> dict:
    """tensor.to makes a new tensor, module.to moves the module in place, and mixing devices fails: where each
    thing lives afterwards, and torch's error for x + y (None if it worked)."""
    x = torch.ones(2, 3)
    y = x.to(target)  # a NEW tensor; x stays where it was
    model = torch.nn.Linear(3, 2)
    before = str(next(model.parameters()).device)
    same = model.to(target)  # moves the parameters in place and returns the same module
    try:
        x + y
        mixing = None
    except RuntimeError as err:
        mixing = err
    return dict(x=str(x.device), y=str(y.device), y_is_x=y is x, model_before=before,
                model_after=str(next(model.parameters()).device), same_module=same is model, mixing=mixing)


NEEDS_ACCELERATOR = "needs an accelerator"


def _pin_status() -> str:
    x = torch.ones(4)
    try:
        return f"pinned: {x.pin_memory().is_pinned()}"
    except RuntimeError as err:  # a CPU-only host: there is no device to page-lock memory for
        return f"{NEEDS_ACCELERATOR} (none on this host); torch says {torch_error(err)}"


@entry()
def report() -> DeviceReport:
    """Run the placement examples on this host and record what torch says."""
    target = target_device()
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    p = placement(target)
    code = script(target_device, chosen_device, placement, run="""
print("chosen device:", chosen_device())
print(placement(target_device()))  # meta when there is no CUDA: shapes without data, runs anywhere""")
    return DeviceReport(
        None if accelerator is None else str(accelerator), str(chosen_device()), target,
        p["x"], p["y"], p["y_is_x"], p["x"], p["model_before"], p["model_after"], p["same_module"],
        p["mixing"] and torch_error(p["mixing"]), _pin_status(), code,
    )


def placement_dot(r: DeviceReport) -> str:
    """Where things live: one box per device; tensor.to makes a new node, module.to moves the same one."""
    data, param, err = COLORS["data"], COLORS["parameter"], COLORS["error"]
    return f'''digraph devices {{
  rankdir=LR; compound=true;
  node [shape=box, style="rounded,filled", fontname="Helvetica"];
  edge [fontname="Helvetica"];
  subgraph cluster_cpu {{ label="cpu"; style=rounded;
    x [label="x\\n{r.tensor_before}", fillcolor="{data}", fontcolor="{text_on(data)}"];
    m_before [label="model (before)\\nparams on {r.module_before}", fillcolor="{param}", fontcolor="{text_on(param)}",
              style="rounded,dashed,filled"];
  }}
  subgraph cluster_target {{ label="{r.target}"; style=rounded;
    y [label="y = x.to('{r.target}')\\n{r.tensor_after}", fillcolor="{data}", fontcolor="{text_on(data)}"];
    m_after [label="model (same object)\\nparams on {r.module_after}", fillcolor="{param}",
             fontcolor="{text_on(param)}"];
  }}
  x -> y [label="tensor.to: new tensor\\n(y is x: {r.tensor_same_object})"];
  m_before -> m_after [label="module.to: in place\\n(returns self: {r.module_same_object})"];
  x -> y [label="x + y: {'error' if r.mixing_error else 'ok'}", color="{err}", fontcolor="{err}", style=dashed,
          dir=both];
}}'''


def placement_table(r: DeviceReport) -> pd.DataFrame:
    """What torch reported for each placement the graph draws."""
    return pd.DataFrame([
        {"what": "x = torch.ones(2, 3)", "device": r.tensor_before},
        {"what": f"y = x.to('{r.target}')", "device": f"{r.tensor_after} (y is x: {r.tensor_same_object})"},
        {"what": "x afterwards", "device": r.x_still_on},
        {"what": f"model.to('{r.target}') parameters", "device":
            f"{r.module_after} (returns self: {r.module_same_object})"},
        {"what": "x + y", "device": r.mixing_error or "ok"},
        {"what": "x.pin_memory()", "device": r.pinned},
    ])


# ---------------------------------------------------------------- traps


def multiply_across_devices():
    device = "cuda" if torch.cuda.is_available() else "meta"
    weights = torch.ones(3, device=device)
    batch = torch.ones(3)  # created on the CPU by default
    try:
        outcome = str((weights * batch).device)
    except RuntimeError as err:
        outcome = f"RuntimeError: {err}"
    return {"weights on": str(weights.device), "weights * batch": outcome}


def multiply_on_one_device():
    device = "cuda" if torch.cuda.is_available() else "meta"
    weights = torch.ones(3, device=device)
    batch = torch.ones(3).to(weights.device)  # move the data to where the weights live
    return {"weights on": str(weights.device), "weights * batch": str((weights * batch).device)}


def _mix_sentence(trap: dict, correct: dict) -> str:
    return (f"Weights on {trap['weights on']} times a batch made on the CPU {outcome(trap['weights * batch'])}: an op "
            "needs its tensor operands on one device (a 0-dim CPU tensor is the only exception). Moved to the "
            f"weights' device, the batch multiplies and the result is on {correct['weights * batch']}: move the "
            "batch to the model's device, not the other way round.")


@entry()
def mixed_devices() -> TrapPair:
    """One op with operands on two devices raises; moving the batch to the weights' device works."""
    return measure("mix", "Mixing devices in one op",
                   ("Trap: `weights * batch` across devices", "Correct: `batch.to(weights.device)` first"),
                   (multiply_across_devices, multiply_on_one_device), _mix_sentence)


def move_without_keeping():
    device = "cuda" if torch.cuda.is_available() else "meta"
    x = torch.ones(2)
    x.to(device)  # returns a new tensor, which is dropped
    model = torch.nn.Linear(2, 2)
    model.to(device)  # modules move in place, so this one works
    return {"x on": str(x.device), "model on": str(model.weight.device)}


def move_and_keep():
    device = "cuda" if torch.cuda.is_available() else "meta"
    x = torch.ones(2).to(device)  # keep the returned tensor
    model = torch.nn.Linear(2, 2).to(device)
    return {"x on": str(x.device), "model on": str(model.weight.device)}


def _to_sentence(trap: dict, correct: dict) -> str:
    return (f"After `x.to(device)` without keeping the result, x is still on {trap['x on']} while the model is on "
            f"{trap['model on']}: `Tensor.to` is out of place, it returns a new tensor (or self when nothing "
            "changes), and `Module.to` moves parameters and buffers in place and returns the same module. Keeping "
            f"the returned tensor puts x on {correct['x on']}.")


@entry()
def to_without_keeping() -> TrapPair:
    """tensor.to returns a new tensor that must be kept; module.to moves in place."""
    return measure("to", "tensor.to(device) without keeping the result",
                   ("Trap: `x.to(device)`", "Correct: `x = x.to(device)`"),
                   (move_without_keeping, move_and_keep), _to_sentence)


def copy_from_pageable():
    x = torch.ones(1024)  # pageable host memory
    return {"x.is_pinned()": x.is_pinned()}  # non_blocking=True from here still waits for a staging copy


def copy_from_pinned():
    x = torch.ones(1024)
    if not torch.accelerator.is_available():
        return {"x.is_pinned()": x.is_pinned(),
                "outcome": "needs an accelerator: this host has none, so there is nothing to pin for or copy to"}
    x = x.pin_memory()  # page-locked, so the copy engine can read it while the host goes on
    y = x.to(torch.accelerator.current_accelerator(), non_blocking=True)
    return {"x.is_pinned()": x.is_pinned(), "outcome": f"copy queued to {y.device}"}


def _pinned_sentence(trap: dict, correct: dict) -> str:
    ran = (f"Pinned, the copy was queued without waiting ({correct['outcome']})." if correct["x.is_pinned()"]
           else "This host has no accelerator, so the fix has nothing to pin for: it runs where there is one.")
    return (f"A fresh CPU tensor is pageable (x.is_pinned(): {trap['x.is_pinned()']}). A host-to-device copy can "
            "overlap with compute only from page-locked (pinned) memory; from pageable memory the driver first "
            "copies into a pinned buffer and `non_blocking=True` is effectively blocking. " + ran)


def pinned_label() -> str:
    """The heading over the pinned-memory fix: it runs only where there is an accelerator."""
    label = "Correct: `x.pin_memory()`, then `.to(device, non_blocking=True)`"
    return label if torch.accelerator.is_available() else f"{label} ({NEEDS_ACCELERATOR}: none on this host)"


@entry()
def non_blocking_unpinned() -> TrapPair:
    """non_blocking=True from pageable memory waits anyway; pinned memory lets the copy overlap."""
    return measure("pinned", "non_blocking=True needs pinned memory",
                   ("Trap: `x.to(device, non_blocking=True)` from pageable memory", pinned_label()),
                   (copy_from_pageable, copy_from_pinned), _pinned_sentence)


TRAPS = (mixed_devices, to_without_keeping, non_blocking_unpinned)  # in the order the tab shows them
