"""A TorchDispatchMode that sees every storage a step allocates and hears when each one dies.

Each op's outputs are checked for storages not seen before: that is an allocation of the storage's size.
A weak reference to the storage calls back when the storage is freed. Categories are tags on storages, so
every byte is in exactly one category for its whole life (parameter, input, activation, gradient,
optimizer_state, temporary); untagged storages are temporaries. A `workspace` callback can add what a kernel
allocates for itself and frees before returning (cuDNN's convolution workspace), which no dispatch mode sees: an
estimate, allocated after the op's outputs and freed at once, in its own category.
"""

import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from demos.memory.allocator import round_size

CATEGORIES = ("parameter", "input", "gradient", "optimizer_state", "activation", "temporary", "workspace")
# A stronger tag wins: a parameter saved for backward is still a parameter.
_RANK = {c: i for i, c in enumerate(CATEGORIES)}


@dataclass(frozen=True)
class Storage:
    sid: int
    nbytes: int
    op: str
    shape: tuple[int, ...]
    dtype: str
    phase: str


@dataclass(frozen=True)
class Event:
    op_index: int
    sid: int
    delta: int  # +rounded bytes on allocation, -rounded bytes on free


class StorageTracker(TorchDispatchMode):
    """Record allocations and frees of storages on one device type, with op index and phase."""

    def __init__(self, device_type: str, workspace=None):
        super().__init__()
        self.device_type = device_type
        self.workspace = workspace  # (func, args) -> estimated bytes a kernel allocates and frees inside itself
        self.storages: dict[int, Storage] = {}
        self.events: list[Event] = []
        self.tags: dict[int, str] = {}
        self.phase = "setup"
        self.op_index = 0
        self._live: dict[int, int] = {}  # storage C pointer -> sid
        self._refs: dict[int, weakref.ref] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.op_index += 1
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.see(t, func.__name__)
        nbytes = self.workspace(func, args) if self.workspace else 0
        if nbytes:
            self._transient(nbytes, f"{func.__name__} workspace")
        return out

    def _transient(self, nbytes: int, op: str) -> None:
        """A workspace that lives only while the kernel runs: allocated after the outputs, freed at once."""
        sid = len(self.storages)
        self.storages[sid] = Storage(sid, nbytes, op, (nbytes,), "uint8", self.phase)
        self.tags[sid] = "workspace"
        self.events.append(Event(self.op_index, sid, round_size(nbytes)))
        self.events.append(Event(self.op_index, sid, -round_size(nbytes)))

    def see(self, t: torch.Tensor, op: str) -> int | None:
        """Register t's storage if it is new on the tracked device; return its id."""
        if t.device.type != self.device_type:
            return None
        st = t.untyped_storage()
        key = st._cdata
        if key in self._live:
            return self._live[key]
        sid = len(self.storages)
        self._live[key] = sid
        self.storages[sid] = Storage(sid, st.nbytes(), op, tuple(t.shape), str(t.dtype).replace("torch.", ""),
                                     self.phase)
        self.events.append(Event(self.op_index, sid, round_size(st.nbytes())))
        self._refs[sid] = weakref.ref(st, lambda _, key=key, sid=sid: self._freed(key, sid))
        return sid

    def _freed(self, key: int, sid: int) -> None:
        self._live.pop(key, None)
        self._refs.pop(sid, None)
        self.events.append(Event(self.op_index, sid, -round_size(self.storages[sid].nbytes)))

    def tag(self, t: torch.Tensor, category: str, op: str = "") -> None:
        """Give t's storage a category unless it already has a stronger one."""
        sid = self.see(t, op or category)
        if sid is None:
            return
        old = self.tags.get(sid)
        if old is None or _RANK[category] < _RANK[old]:
            self.tags[sid] = category

    def tag_live(self, category: str) -> None:
        """Tag every live, untagged storage (at the end of forward: what autograd holds for backward)."""
        for sid in self._live.values():
            self.tags.setdefault(sid, category)

    def category(self, sid: int) -> str:
        return self.tags.get(sid, "temporary")

    def live_sids(self) -> list[int]:
        return list(self._live.values())
