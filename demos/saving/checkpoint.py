"""Checkpoint design: what exact resume needs vs what serving needs, and an atomic save surviving a crash."""

import io
import os
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from demos.errors import InputError
from demos.saving.models import MLP
from demos.saving.state import saved_bytes

CRASH_FRACTIONS = (0.1, 0.9)


class CrashingFile(io.RawIOBase):
    """A writable file that dies after `limit` bytes, as a process killed mid-save would leave it."""

    def __init__(self, path: Path, limit: int):
        self._f = open(path, "wb")
        self._left = limit

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)[: max(self._left, 0)]
        self._f.write(chunk)
        self._left -= len(data)
        if self._left < 0:
            self._f.close()
            raise OSError("simulated crash: the process died in the middle of torch.save")
        return len(data)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()
        super().close()


def atomic_save(obj, path: Path, opener=open) -> None:
    """Write to a temporary file in the same folder, fsync it, then os.replace: readers see old or new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with opener(tmp, "wb") as f:
        torch.save(obj, f)
        if opener is open:  # a real file: make the bytes durable before the rename
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def naive_save(obj, path: Path, opener=open) -> None:
    with opener(path, "wb") as f:
        torch.save(obj, f)


@dataclass(frozen=True)
class CrashResult:
    strategy: str
    bytes_on_disk: int
    new_file_bytes: int  # the whole new checkpoint, had the save finished
    load_outcome: str  # what torch.load says about the file after the crash
    loaded_step: int | None  # the step stored in the checkpoint that survived, if any


def _checkpoint(step: int, width: int) -> dict:
    torch.manual_seed(step)
    return {"model": MLP(width=width).state_dict(), "step": step}


def crash_during_save(fraction: float, width: int = 128) -> tuple[CrashResult, CrashResult]:
    """Save step 1 cleanly, then crash while saving step 2 after `fraction` of its bytes, both ways."""
    if not 0.0 < fraction < 1.0:
        raise InputError(f"The crash point must be strictly between 0 and 1 of the file; got {fraction}.")
    size = saved_bytes(_checkpoint(2, width))
    results = []
    with tempfile.TemporaryDirectory(prefix="wb-ckpt-") as folder:
        strategies = (("naive: open(path, 'wb')", naive_save), ("atomic: temp file + os.replace", atomic_save))
        for strategy, save in strategies:
            path = Path(folder) / f"{save.__name__}.pt"
            save(_checkpoint(1, width), path)
            try:
                save(_checkpoint(2, width), path, opener=lambda p, mode: CrashingFile(p, int(size * fraction)))
            except (OSError, RuntimeError):
                pass  # the crash; torch's zip writer may re-raise it as a RuntimeError
            results.append(_inspect(strategy, path, size))
    return tuple(results)


def _inspect(strategy: str, path: Path, new_file_bytes: int) -> CrashResult:
    try:
        step = torch.load(path)["step"]
        outcome = f"loads: the checkpoint of step {step}"
    except Exception as err:  # a truncated zip archive: RuntimeError from the reader
        step, outcome = None, f"{type(err).__name__}: {str(err).splitlines()[0]}"
    return CrashResult(strategy, path.stat().st_size, new_file_bytes, outcome, step)


@dataclass(frozen=True)
class CheckpointContents:
    rows: tuple[dict, ...]  # item, needed for resume, needed for serving, bytes


def checkpoint_contents(width: int = 128) -> CheckpointContents:
    """The bytes of each item a resumable checkpoint holds, and which of them serving needs."""
    torch.manual_seed(0)
    model = MLP(width=width)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    sched.step()
    items = {
        "model.state_dict()": (model.state_dict(), True),
        "optimizer.state_dict()": (opt.state_dict(), False),
        "scheduler.state_dict()": (sched.state_dict(), False),
        "GradScaler.state_dict() (fp16 AMP only)": (torch.amp.GradScaler("cpu").state_dict(), False),
        "step / epoch / sampler epoch": ({"step": 1, "epoch": 0, "sampler_epoch": 0}, False),
        "torch RNG state": (torch.get_rng_state(), False),
        # the states a script that seeded both with 0 holds (as the snippet does): their pickled size depends on
        # the state's values, and this server's global generators must not be reseeded
        "NumPy and Python RNG states": ({"numpy": np.random.RandomState(0).get_state(),
                                         "python": random.Random(0).getstate()}, False),
    }
    rows = tuple({"item": name, "resume": "yes", "serving": "yes" if serve else "no", "bytes": saved_bytes(obj)}
                 for name, (obj, serve) in items.items())
    return CheckpointContents(rows)


def checkpoint_code(width: int, fraction: float) -> str:
    """The section as one script: the bytes of each checkpoint item, then the crash, naive and atomic."""
    return f'''import io
import os
import random

import numpy as np
import torch
from torch import nn


def atomic_save(obj, path, opener=open):
    """Readers see the old file or the new one, never half of one."""
    tmp = path + ".tmp"                 # same folder: os.replace is atomic within one filesystem
    with opener(tmp, "wb") as f:
        torch.save(obj, f)
        if opener is open:
            f.flush()
            os.fsync(f.fileno())        # the bytes are on disk before the rename
    os.replace(tmp, path)


def naive_save(obj, path, opener=open):
    with opener(path, "wb") as f:
        torch.save(obj, f)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        return self.head(self.body(x))


def saved_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.tell()


# What a resumable checkpoint holds (serving needs only the model's state_dict)
torch.manual_seed(0)
np.random.seed(0)
random.seed(0)
model = MLP({width})
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
model(torch.randn(8, 16)).sum().backward()
optimizer.step()
scheduler.step()
checkpoint = {{
    "model": model.state_dict(),
    "optimizer": optimizer.state_dict(),
    "scheduler": scheduler.state_dict(),
    "scaler": torch.amp.GradScaler("cpu").state_dict(),   # fp16 autocast only
    "step": {{"step": 1, "epoch": 0, "sampler_epoch": 0}},
    "torch_rng": torch.get_rng_state(),
    "other_rng": {{"numpy": np.random.get_state(), "python": random.getstate()}},
}}
for name, item in checkpoint.items():
    print(name, saved_bytes(item), "bytes")
atomic_save(checkpoint, "last.pt")
torch.save(model.state_dict(), "serve.pt")


# A crash after {fraction:g} of the new file is written
class CrashingFile(io.RawIOBase):
    def __init__(self, path, limit):
        self.f, self.left = open(path, "wb"), limit

    def writable(self):
        return True

    def write(self, data):
        self.f.write(bytes(data)[: max(self.left, 0)])
        self.left -= len(data)
        if self.left < 0:
            self.f.close()
            raise OSError("the process died in the middle of torch.save")
        return len(data)


def weights(step):
    torch.manual_seed(step)
    return {{"model": MLP({width}).state_dict(), "step": step}}


size = saved_bytes(weights(2))
print("the new checkpoint:", size, "bytes")
for save in (naive_save, atomic_save):
    path = save.__name__ + ".pt"
    save(weights(1), path)
    try:
        save(weights(2), path, opener=lambda p, mode: CrashingFile(p, int(size * {fraction!r})))
    except (OSError, RuntimeError):
        pass
    try:
        outcome = f"loads the checkpoint of step {{torch.load(path)['step']}}"
    except Exception as err:
        outcome = f"{{type(err).__name__}}: {{str(err).splitlines()[0]}}"
    print(save.__name__, os.path.getsize(path), "bytes on disk;", outcome)
'''
