"""pin_memory: page-locked host memory lets a non_blocking host-to-device copy overlap compute.

Measured here: whether this host can pin at all (torch's own answer), what the DataLoader does with
pin_memory=True, the CPU cost of the copy a pin makes, and with CUDA the copy speed pinned vs pageable and the
device-to-host trap: a non_blocking copy to the host read before the stream is synchronized.
"""

import time
import warnings
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, TensorDataset

from demos.errors import InputError
from demos.shown import Script, entry, print_each, script

MAX_MB = 64


@dataclass(frozen=True)
class PinResult:
    megabytes: int
    accelerator: str  # "" when none is present
    pin_error: str  # torch's message when pinning is impossible here
    loader_warning: str  # what DataLoader(pin_memory=True) says here
    loader_pinned: bool  # whether a batch came out pinned
    copy_ms: float  # a pageable host copy of the tensor: the copy a pin makes, without the page locking
    pin_ms: float | None  # tensor.pin_memory(), when possible
    h2d_pageable_gbps: float | None
    h2d_pinned_gbps: float | None
    code: str


def pin_and_copy(megabytes: int) -> dict:
    """Try pinning; time what can be timed on this host (CUDA copy speeds only where CUDA exists)."""
    x = torch.ones(megabytes * 2**20 // 4)
    accelerator = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else ""
    pin_error, pinned, pin_ms = "", None, None
    try:
        t0 = time.perf_counter()
        pinned = x.pin_memory()  # page-locked: the GPU's DMA engine can read it directly
        pin_ms = 1000 * (time.perf_counter() - t0)
    except RuntimeError as err:
        pin_error = str(err)
    copy_ms = _best_ms(lambda: x.clone())
    loader_warning, loader_pinned = _loader_pinning()
    pageable = pinned_speed = None
    if torch.cuda.is_available() and pinned is not None:
        pageable = _h2d_gbps(x)
        pinned_speed = _h2d_gbps(pinned)
    return {"accelerator": accelerator, "pin_error": pin_error, "loader_warning": loader_warning,
            "loader_pinned": loader_pinned, "copy_ms": copy_ms, "pin_ms": pin_ms, "h2d_pageable_gbps": pageable,
            "h2d_pinned_gbps": pinned_speed}


@entry(1, entries=8)
def pin_demo(megabytes: int) -> PinResult:
    """pin_and_copy at the visitor's size, with the code that ran (the copy speeds only where CUDA is present)."""
    if not 1 <= megabytes <= MAX_MB:
        raise InputError(f"Tensor size must be between 1 and {MAX_MB} MiB; got {megabytes}.")
    code = script(_best_ms, _loader_pinning, _h2d_gbps, pin_and_copy, imports=IMPORTS,
                  settings={"megabytes": megabytes}, run=print_each("pin_and_copy(megabytes)"), cuda_only=(_h2d_gbps,))
    return PinResult(megabytes, **pin_and_copy(megabytes), code=code)


IMPORTS = """import time
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset"""


def _best_ms(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 1000 * best


def _loader_pinning() -> tuple[str, bool]:
    """One batch from DataLoader(pin_memory=True): is it pinned, and what did torch warn?"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = next(iter(DataLoader(TensorDataset(torch.ones(8, 4)), batch_size=4, pin_memory=True)))
    messages = [str(m.message) for m in caught if "pin" in str(m.message)]
    return (messages[0] if messages else ""), bool(batch[0].is_pinned()) if torch.accelerator.is_available() else False


def _h2d_gbps(x: torch.Tensor) -> float:
    """Host-to-device GB/s, timed with CUDA events (best of three copies)."""
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.to("cuda", non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1000)
    return x.numel() * x.element_size() / best / 1e9


@dataclass(frozen=True)
class D2HResult:
    """A non_blocking device-to-host copy read before and after synchronizing (CUDA only)."""

    expected: float  # the sum on the GPU
    read_early: float  # the host tensor's sum read right after .to('cpu', non_blocking=True)
    read_after_sync: float  # the same tensor's sum after torch.cuda.synchronize()


def d2h_trap(megabytes: int = 64) -> D2HResult | None:
    """Read a non_blocking device-to-host copy before and after synchronizing; None without CUDA."""
    if not torch.cuda.is_available():
        return None
    x = torch.ones(megabytes * 2**20 // 4, device="cuda")
    expected = x.sum().item()  # .item() synchronizes: the GPU is idle before the copy starts
    y = x.to("cpu", non_blocking=True)  # returns at once; the copy is still running
    early = y.sum().item()  # the trap: y's memory is read while the DMA engine may still be writing it
    torch.cuda.synchronize()
    return D2HResult(expected, early, y.sum().item())


def d2h_code(megabytes: int = 64) -> Script:
    """The code of d2h_trap, as the page runs it (without CUDA it stops before making a D2HResult)."""
    return script(D2HResult, d2h_trap, imports="from dataclasses import dataclass\n\nimport torch",
                  settings={"megabytes": megabytes}, run=D2H_RUN, cuda_only=(D2HResult,))


@dataclass(frozen=True)
class D2HView:
    trap: D2HResult | None  # None without CUDA: the trap cannot run here
    code: Script


@entry()
def d2h_demo(megabytes: int = 64) -> D2HView:
    """d2h_trap on this host, with the code that ran."""
    return D2HView(d2h_trap(megabytes), d2h_code(megabytes))


D2H_RUN = """print(d2h_trap(megabytes) or "No CUDA GPU here: a device-to-host copy is only asynchronous on a GPU.")"""


def d2h_verdict(d: D2HResult) -> str:
    """One sentence on what the early read saw, from the two reads. What the copy had not yet reached held whatever
    that host memory held before: a pinned block reused from the caching host allocator keeps an earlier tensor's
    bytes, a fresh one is uninitialized. So the sum's shortfall (or excess) says nothing about how many values were
    missing, and the sentence claims no fraction."""
    after = ("After synchronize the same tensor sums right." if d.read_after_sync == d.expected else
             f"After synchronize it summed {d.read_after_sync:,.0f}.")
    if d.read_early != d.expected:
        return (f"The early read summed {d.read_early:,.0f} where the GPU's values sum to {d.expected:,.0f} "
                f"({d.read_early - d.expected:+,.0f}), and nothing raised: part of the buffer did not yet hold the "
                "copied values, so the read saw whatever that memory held before, stale bytes of an earlier tensor "
                f"or uninitialized memory. {after}")
    return ("This time the early read saw every value: the copy finished before the host read its end. The race is "
            "still there (nothing orders the read after the copy); a busier GPU or a larger tensor loses it.")
