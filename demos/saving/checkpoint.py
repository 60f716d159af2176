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
from demos.shown import Script, entry, script

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
    files: tuple[tuple[str, int, str], ...]  # every file in the save's folder after the crash: name, bytes, holds
    new_file_bytes: int  # the whole new checkpoint, had the save finished
    load_outcome: str  # what torch.load says about the checkpoint's path after the crash
    loaded_step: int | None  # the step stored in the checkpoint that survived, if any


OLD, NEW_PREFIX = "the old checkpoint", "the start of the new checkpoint"  # what _holds says of a file


def _checkpoint(step: int, width: int) -> dict:
    torch.manual_seed(step)
    return {"model": MLP(width=width).state_dict(), "step": step}


def _saved(obj) -> bytes:
    """The bytes torch.save writes for obj."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _holds(data: bytes, old: bytes, new: bytes) -> str:
    """What a file left on disk holds: the old checkpoint byte for byte, a start of the new one, or neither."""
    if data == old:
        return "the old checkpoint"
    return "the start of the new checkpoint" if new.startswith(data) else "neither checkpoint"


def crash_both_ways(fraction: float, width: int) -> list[dict]:
    """Save step 1 cleanly, then crash while saving step 2 after `fraction` of its bytes, naively and atomically.

    One row per strategy, each in its own folder: every file there after the crash (name, bytes, what it holds),
    the new checkpoint's size, and what torch.load says about the checkpoint's path."""
    new = _saved(_checkpoint(2, width))
    rows = []
    with tempfile.TemporaryDirectory(prefix="wb-ckpt-") as root:
        strategies = (("naive: open(path, 'wb')", naive_save), ("atomic: temp file + os.replace", atomic_save))
        for strategy, save in strategies:
            folder = Path(root) / save.__name__
            folder.mkdir()
            path = folder / "checkpoint.pt"
            save(_checkpoint(1, width), path)
            old = path.read_bytes()
            try:
                save(_checkpoint(2, width), path, opener=lambda p, mode: CrashingFile(p, int(len(new) * fraction)))
            except (OSError, RuntimeError):
                pass  # the crash; torch's zip writer may re-raise it as a RuntimeError
            files = tuple((f.name, f.stat().st_size, _holds(f.read_bytes(), old, new))
                          for f in sorted(folder.iterdir()))
            rows.append({"strategy": strategy, "files": files, "new_bytes": len(new), **_load_outcome(path)})
    return rows


def _load_outcome(path: Path) -> dict:
    """What torch.load says about the file, and the step of the checkpoint it loads (None if it cannot)."""
    try:
        step = torch.load(path)["step"]
        return {"load": f"loads: the checkpoint of step {step}", "step": step}
    except Exception as err:  # a truncated zip archive: RuntimeError from the reader
        return {"load": f"{type(err).__name__}: {str(err).splitlines()[0]}", "step": None}


def crash_during_save(fraction: float, width: int = 128) -> tuple[CrashResult, CrashResult]:
    """Save step 1 cleanly, then crash while saving step 2 after `fraction` of its bytes, both ways."""
    if not 0.0 < fraction < 1.0:
        raise InputError(f"The crash point must be strictly between 0 and 1 of the file; got {fraction}.")
    return tuple(CrashResult(r["strategy"], r["files"], r["new_bytes"], r["load"], r["step"])
                 for r in crash_both_ways(fraction, width))


def file_sentence(name: str, size: int, holds: str, new_bytes: int) -> str:
    """One file left after the crash, described by what it holds."""
    if holds == OLD:
        return f"`{name}`: {size:,} bytes, the old checkpoint (step 1), byte for byte"
    if holds == NEW_PREFIX:
        return f"`{name}`: {size:,} bytes, the first {size:,} of the new checkpoint's {new_bytes:,} bytes"
    return f"`{name}`: {size:,} bytes, neither checkpoint"


def crash_sentence(res: CrashResult, width: int) -> str:
    """What is on disk after the crash, file by file, and what that means for the old and the new checkpoint."""
    listed = "; ".join(file_sentence(*f, res.new_file_bytes) for f in res.files)
    text = f"On disk after the crash (width {width} weights and the step): {listed}."
    if all(holds != OLD for _, _, holds in res.files):
        text += " No file holds the old checkpoint any more."
    leftovers = [name for name, _, holds in res.files if holds == NEW_PREFIX and name.endswith(".tmp")]
    if leftovers:
        text += (f" The partial new checkpoint is the orphaned `{leftovers[0]}`, never renamed: the next save "
                 "overwrites it, or a cleanup deletes it.")
    return text


@dataclass(frozen=True)
class CheckpointContents:
    rows: tuple[dict, ...]  # item, needed for resume, needed for serving, bytes


def checkpoint_items(width: int) -> dict[str, tuple[object, bool]]:
    """Each item a resumable checkpoint holds (after one training step), and whether serving needs it."""
    torch.manual_seed(0)
    model = MLP(width=width)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    sched.step()
    return {
        "model.state_dict()": (model.state_dict(), True),
        "optimizer.state_dict()": (opt.state_dict(), False),
        "scheduler.state_dict()": (sched.state_dict(), False),
        "GradScaler.state_dict() (fp16 AMP only)": (torch.amp.GradScaler("cpu").state_dict(), False),
        "step / epoch / sampler epoch": ({"step": 1, "epoch": 0, "sampler_epoch": 0}, False),
        "torch RNG state": (torch.get_rng_state(), False),
        # the states of generators seeded with 0: their pickled size depends on the state's values, and a server's
        # global generators must not be reseeded
        "NumPy and Python RNG states": ({"numpy": np.random.RandomState(0).get_state(),
                                         "python": random.Random(0).getstate()}, False),
    }


def checkpoint_contents(width: int = 128) -> CheckpointContents:
    """The bytes of each item a resumable checkpoint holds, and which of them serving needs."""
    rows = tuple({"item": name, "resume": "yes", "serving": "yes" if serve else "no", "bytes": saved_bytes(obj)}
                 for name, (obj, serve) in checkpoint_items(width).items())
    return CheckpointContents(rows)


def checkpoint_code(width: int, fraction: float) -> Script:
    """The section as one script: the bytes of each checkpoint item, then the crash, naive and atomic."""
    return script(
        MLP, saved_bytes, checkpoint_items, CrashingFile, atomic_save, naive_save, _checkpoint, _saved, _holds,
        crash_both_ways, _load_outcome, imports=IMPORTS, settings={"width": width, "fraction": fraction}, run=RUN)


@dataclass(frozen=True)
class CheckpointDemo:
    contents: CheckpointContents
    crashes: tuple[CrashResult, CrashResult]
    code: Script


@entry(16, 0.3)
def checkpoint_demo(width: int, fraction: float) -> CheckpointDemo:
    """The Checkpoints tab's two measurements at the visitor's width and crash point, with the code of both."""
    return CheckpointDemo(checkpoint_contents(width), crash_during_save(fraction, width),
                          checkpoint_code(width, fraction))


IMPORTS = """import io
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn"""

RUN = """for name, (item, serving) in checkpoint_items(width).items():
    print(f"{name}: {saved_bytes(item)} bytes", "(serving needs it)" if serving else "")
for row in crash_both_ways(fraction, width):
    print(f"{row['strategy']}: torch.load {row['load']}")
    for file, size, holds in row["files"]:
        print(f"  {file}: {size} bytes, {holds} ({row['new_bytes']} bytes new)")"""
