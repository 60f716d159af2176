"""state_dict anatomy: keys and bytes, the optimizer's layout, strict loading, prefixes, map_location, weights_only."""

import io
import re
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from demos.saving.models import WithBuffer
from demos.shown import entry, print_each, script


@dataclass
class TrainingConfig:
    """A custom class inside a checkpoint: what weights_only=True refuses to unpickle."""

    lr: float = 1e-3
    note: str = "custom object"


class WithBufferRenamed(nn.Module):
    """WithBuffer after a refactor: `norm` renamed `bn`. Loading the old checkpoint must notice."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        h = self.lin(x)
        return self.bn(h)


class Wrapped(nn.Module):
    """Holds the model as `self.module`, as nn.DataParallel and DDP do, so its keys gain the same 'module.' prefix.

    nn.DataParallel itself would move the model to cuda:0 when a GPU is present; this wrapper moves nothing.
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


@dataclass(frozen=True)
class StateDictReport:
    model_rows: tuple[dict, ...]  # key, kind, shape, dtype, bytes
    hidden: tuple[str, ...]  # tensors on the module that the state_dict leaves out
    optimizer_state: tuple[dict, ...]  # per parameter index: state name, shape
    param_groups: tuple[dict, ...]
    file_bytes_model: int
    file_bytes_checkpoint: int
    strict_error: str
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    prefixed_keys: tuple[str, ...]
    prefix_error: str
    prefix_fixed: bool
    locations: tuple[str, ...]
    device_note: str
    weights_only_error: str
    safe_globals_config: str
    code: str


def saved_bytes(obj) -> int:
    """Size of what torch.save writes for obj."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.tell()


def _model_and_optimizer():
    torch.manual_seed(0)
    model = WithBuffer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    opt.step()  # Adam's state exists only after the first step
    return model, opt


def _rows(model: nn.Module) -> tuple[dict, ...]:
    params = dict(model.named_parameters())
    return tuple(
        {"key": k, "kind": "parameter" if k in params else "buffer", "shape": str(tuple(v.shape)),
         "dtype": str(v.dtype).removeprefix("torch."), "bytes": v.numel() * v.element_size()}
        for k, v in model.state_dict().items()
    )


def _optimizer_layout(opt: torch.optim.Optimizer):
    sd = opt.state_dict()
    state = tuple(
        {"param index": i, "state": name, "shape": str(tuple(t.shape)) if torch.is_tensor(t) else "scalar"}
        for i, entry in sd["state"].items()
        for name, t in entry.items()
    )
    groups = tuple({k: str(v) for k, v in g.items()} for g in sd["param_groups"])
    return state, groups


def _strict_load(sd):
    try:
        WithBufferRenamed().load_state_dict(sd)
        error = ""
    except RuntimeError as err:
        error = str(err)
    result = WithBufferRenamed().load_state_dict(sd, strict=False)
    return error, tuple(result.missing_keys), tuple(result.unexpected_keys)


def _prefix_demo(model: nn.Module):
    wrapped = Wrapped(model)
    sd = wrapped.state_dict()
    keys = tuple(sd)
    try:
        WithBuffer().load_state_dict(sd)
        error = ""
    except RuntimeError as err:
        error = str(err)
    consume_prefix_in_state_dict_if_present(sd, "module.")
    fixed = WithBuffer()
    fixed.load_state_dict(sd)
    same = all(torch.equal(a, b) for a, b in zip(fixed.state_dict().values(), model.state_dict().values(), strict=True))
    return keys, error, same


def _map_location_demo(model: nn.Module):
    """Load with a map_location callable that records the location each storage was saved from."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    buf = io.BytesIO()
    torch.save({k: v.to(device) for k, v in model.state_dict().items()}, buf)
    buf.seek(0)
    seen = []

    def to_cpu(storage, location):
        seen.append(location)
        return storage.cpu()

    torch.load(buf, map_location=to_cpu)
    note = ("saved from CUDA tensors, loaded onto the CPU" if device == "cuda" else
            "no CUDA here: saved from CPU tensors; with a GPU checkpoint the locations would read 'cuda:0'")
    return tuple(sorted(set(seen))), note


def _weights_only_demo():
    buf = io.BytesIO()
    torch.save({"weights": torch.ones(2), "config": TrainingConfig()}, buf)
    buf.seek(0)
    try:
        torch.load(buf)  # weights_only=True is the default
        error = ""
    except Exception as err:  # torch raises pickle.UnpicklingError
        error = f"{type(err).__name__}: {_reason(str(err))}"
    buf.seek(0)
    with torch.serialization.safe_globals([TrainingConfig]):
        loaded = torch.load(buf)
    return error, repr(loaded["config"])


def _reason(message: str) -> str:
    """The line of torch's weights_only message that names the refused global, without terminal colours."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", message)
    return next((line.strip() for line in plain.splitlines() if "Unsupported global" in line), plain.splitlines()[0])


def state_dict_anatomy() -> dict:
    """Everything the state_dict section shows, read from torch, by the name of the report field that shows it."""
    model, opt = _model_and_optimizer()
    state, groups = _optimizer_layout(opt)
    strict_error, missing, unexpected = _strict_load(model.state_dict())
    prefixed, prefix_error, fixed = _prefix_demo(model)
    locations, note = _map_location_demo(model)
    weights_error, config = _weights_only_demo()
    return {
        "model_rows": _rows(model),
        "hidden": tuple(n for n, _ in model.named_buffers() if n not in model.state_dict()),
        "optimizer_state": state, "param_groups": groups,
        "file_bytes_model": saved_bytes(model.state_dict()),
        "file_bytes_checkpoint": saved_bytes({"model": model.state_dict(), "optimizer": opt.state_dict()}),
        "strict_error": strict_error, "missing": missing, "unexpected": unexpected,
        "prefixed_keys": prefixed, "prefix_error": prefix_error, "prefix_fixed": fixed,
        "locations": locations, "device_note": note,
        "weights_only_error": weights_error, "safe_globals_config": config,
    }


@entry()
def state_dict_report() -> StateDictReport:
    """Everything the state_dict section shows, with the code that read it."""
    code = script(
        WithBuffer, WithBufferRenamed, Wrapped, TrainingConfig, saved_bytes, _model_and_optimizer, _rows,
        _optimizer_layout, _strict_load, _prefix_demo, _map_location_demo, _weights_only_demo, _reason,
        state_dict_anatomy, imports=IMPORTS,
        run=print_each("state_dict_anatomy()"))
    return StateDictReport(**state_dict_anatomy(), code=code)


IMPORTS = """import io
import re
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present"""
