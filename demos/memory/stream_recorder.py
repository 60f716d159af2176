"""Record a timeline of host-to-device copies and kernels with CUDA events, for the memory page.

Run on a machine with a CUDA GPU:
    python -m demos.memory.stream_recorder --out assets/traces/streams.json

Scenarios (same work each: `steps` batches, each copied to the GPU and multiplied through a matmul chain):
  pageable copy, blocking      ordinary host memory; .to("cuda") waits for the copy
  pinned, non_blocking         page-locked host memory; the host queues the copy and moves on
  pinned, side stream          copies on their own stream overlap the previous batch's kernels
  side stream + .item()        the same, but reading the loss each step makes the host wait for the GPU
  tiny kernels                 thousands of one-element adds: the GPU is 'busy' all the time, doing almost nothing
Everything except record() runs without CUDA (and is tested without it).
"""

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

SCHEMA = 1
REQUIRED = ("schema", "provenance", "scenarios", "intervals")
PROVENANCE = ("gpu", "driver", "torch", "cuda", "date", "command")
LANES = ("host", "copy stream", "compute stream")
MAX_STEPS, MAX_SIZE_MIB = 32, 512
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "traces" / "streams.json"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demos.memory.stream_recorder", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the JSON recording")
    p.add_argument("--steps", type=int, default=8, help=f"batches per scenario (1-{MAX_STEPS})")
    p.add_argument("--size-mib", type=int, default=64, help=f"bytes per batch in MiB (1-{MAX_SIZE_MIB})")
    return p


def check_args(args: argparse.Namespace) -> None:
    if not 1 <= args.steps <= MAX_STEPS:
        raise SystemExit(f"--steps must be between 1 and {MAX_STEPS}")
    if not 1 <= args.size_mib <= MAX_SIZE_MIB:
        raise SystemExit(f"--size-mib must be between 1 and {MAX_SIZE_MIB}")


def provenance(command: str, gpu: str, driver: str, cuda: str | None) -> dict:
    """Where a recording came from, printed beside it on the page."""
    return {"gpu": gpu, "driver": driver, "torch": torch.__version__, "cuda": cuda or "none",
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "command": command}


def driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or 'unknown' when it is not installed."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return "unknown"
    out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=20)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"


def validate_recording(rec) -> dict:
    """Return rec if it has the recording's shape; raise ValueError naming what is missing."""
    if not isinstance(rec, dict):
        raise ValueError("a recording is a JSON object")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise ValueError(f"recording lacks {missing}")
    if rec["schema"] != SCHEMA:
        raise ValueError(f"recording schema {rec['schema']} is not {SCHEMA}")
    if not isinstance(rec["provenance"], dict) or [k for k in PROVENANCE if k not in rec["provenance"]]:
        raise ValueError("recording provenance is incomplete")
    for r in rec["intervals"]:
        if not {"scenario", "lane", "name", "kind", "start_ms", "end_ms"} <= set(r) or r["end_ms"] < r["start_ms"]:
            raise ValueError(f"bad interval {r!r}")
        if r["scenario"] not in rec["scenarios"]:
            raise ValueError(f"interval of unknown scenario {r['scenario']!r}")
    return rec


def load_recording(path: Path = DEFAULT_OUT) -> dict | None:
    """The shipped recording, or None if none has been made yet."""
    if not Path(path).is_file():
        return None
    return validate_recording(json.loads(Path(path).read_text()))


def union_ms(spans: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def summarize(rec: dict) -> list[dict]:
    """Per scenario: wall time, copy and kernel time, their overlap, and 'utilization' (kernel busy fraction)."""
    rows = []
    for name in rec["scenarios"]:
        ivs = [r for r in rec["intervals"] if r["scenario"] == name]
        gpu = [r for r in ivs if r["lane"] != "host"]
        if not gpu:
            continue
        copies = [(r["start_ms"], r["end_ms"]) for r in gpu if r["kind"] == "copy"]
        kernels = [(r["start_ms"], r["end_ms"]) for r in gpu if r["kind"] == "kernel"]
        start = min(r["start_ms"] for r in ivs)
        wall = max(r["end_ms"] for r in ivs) - start
        copy_ms, kernel_ms = union_ms(copies), union_ms(kernels)
        overlap = copy_ms + kernel_ms - union_ms(copies + kernels)
        rows.append({"scenario": name, "wall ms": wall, "copy ms": copy_ms, "kernel ms": kernel_ms,
                     "copy/kernel overlap ms": overlap,
                     "utilization (kernel running) %": 100 * kernel_ms / wall if wall else 0.0})
    return rows


def record(steps: int = 8, size_mib: int = 64, command: str = "") -> dict:
    """Run every scenario on the GPU and time it with CUDA events (requires CUDA)."""
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: a stream recording needs an NVIDIA GPU")
    dev = torch.device("cuda")
    n = size_mib * 2**20 // 4
    side = int((n // 64) ** 0.5) or 1
    weight = torch.randn(64, 64, device=dev)
    t0 = torch.cuda.Event(enable_timing=True)
    marks = []  # (scenario, lane, name, kind, start event, end event)
    host = []  # (scenario, name, start s, end s)
    compute, copier = torch.cuda.current_stream(), torch.cuda.Stream()

    def timed(scenario, lane, name, kind, stream, fn):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        a.record(stream)
        with torch.cuda.stream(stream):
            out = fn()
        b.record(stream)
        host.append((scenario, f"issue {name}", h0, time.perf_counter()))
        marks.append((scenario, lane, name, kind, a, b))
        return out

    def work(x):
        y = x.view(-1, 64)[: side * 64] @ weight
        return (y @ weight.T).sum()

    batches = {p: [torch.randn(n, pin_memory=p) for _ in range(2)] for p in (False, True)}
    torch.cuda.synchronize()
    scenarios = ["pageable copy, blocking", "pinned, non_blocking", "pinned, side stream",
                 "side stream + .item()", "tiny kernels"]
    host_t0 = time.perf_counter()
    t0.record()
    for sc in scenarios[:4]:
        pinned, side_stream = sc != scenarios[0], sc in scenarios[2:4]
        stream = copier if side_stream else compute
        for i in range(steps):
            src = batches[pinned][i % 2]
            x = timed(sc, "copy stream" if side_stream else "compute stream", f"H2D {i}", "copy", stream,
                      lambda src=src, pinned=pinned: src.to(dev, non_blocking=pinned))
            if side_stream:
                compute.wait_stream(copier)
                x.record_stream(compute)
            loss = timed(sc, "compute stream", f"kernels {i}", "kernel", compute, lambda x=x: work(x))
            if sc == scenarios[3]:
                h0 = time.perf_counter()
                loss.item()
                host.append((sc, f".item() {i} waits", h0, time.perf_counter()))
        torch.cuda.synchronize()
    tiny = torch.zeros(1, device=dev)
    for i in range(steps):
        timed(scenarios[4], "compute stream", f"200 tiny adds {i}", "kernel", compute,
              lambda: [tiny.add_(1) for _ in range(200)])
    torch.cuda.synchronize()
    intervals = [{"scenario": s, "lane": lane, "name": nm, "kind": k, "start_ms": t0.elapsed_time(a),
                  "end_ms": t0.elapsed_time(b)} for s, lane, nm, k, a, b in marks]
    # Host times share the event clock's origin only approximately (t0 was recorded right after host_t0).
    intervals += [{"scenario": s, "lane": "host", "name": nm, "kind": "sync" if "item" in nm else "host",
                   "start_ms": 1e3 * (h0 - host_t0), "end_ms": 1e3 * (h1 - host_t0)} for s, nm, h0, h1 in host]
    name = torch.cuda.get_device_name(0)
    return validate_recording({"schema": SCHEMA, "provenance": provenance(command, name, driver_version(),
                                                                          torch.version.cuda),
                               "scenarios": scenarios, "steps": steps, "size_mib": size_mib,
                               "intervals": intervals})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    if not torch.cuda.is_available():
        print("No CUDA GPU here: nothing recorded. Run this on a machine with an NVIDIA GPU.", file=sys.stderr)
        return 2
    command = "python -m demos.memory.stream_recorder " + " ".join(argv if argv is not None else sys.argv[1:])
    rec = record(args.steps, args.size_mib, command.strip())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1))
    print(f"wrote {args.out} ({len(rec['intervals'])} intervals) on {rec['provenance']['gpu']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
