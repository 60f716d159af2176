"""Record a timeline of host-to-device copies and kernels with CUDA events, for the memory page.

Run on a machine with a CUDA GPU:
    python -m demos.memory.stream_recorder --out assets/traces/streams.json

Every scenario copies `steps` batches to the GPU and runs a chain of matmuls on each. First everything runs once
untimed (CUDA, cuBLAS and the streams start up there), then the recorder measures one pinned copy and one matmul
and sizes the chain so that a batch's kernels take about as long as its copy: only then can a side stream show
what it hides. Then the recorded pass:
  pageable copy, blocking       ordinary host memory; .to("cuda") waits for the copy
  pinned, non_blocking          page-locked host memory; the host queues the copy and moves on (one stream)
  pinned, side stream           copies on their own stream overlap the previous batch's kernels
  side stream + .item()         the same, but reading the loss each step makes the host wait for the GPU
  copies dominate, side stream  an eighth of the compute: the side stream cannot hide a copy longer than it
  tiny kernels                  hundreds of one-element adds: the stream is 'busy' while the GPU does almost nothing
What is measured: CUDA events recorded on a stream before and after each step's copy or kernels, so a kernel
span runs from when the stream reached its first kernel to when it finished its last, and includes any gap in
between (for the tiny kernels, mostly gaps: the host launches them slower than the GPU runs them).
Everything except record() runs without CUDA (and is tested without it).
"""

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

SCHEMA = 2  # 1: the first recorder (no warm-up: step 0 of each scenario includes start-up)
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
    if rec["schema"] not in (1, SCHEMA):
        raise ValueError(f"recording schema {rec['schema']} is not 1 or {SCHEMA}")
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


def step_of(name: str) -> int | None:
    """The batch number an interval belongs to ('H2D 3', 'issue kernels 3', '.item() 3 waits' -> 3)."""
    numbers = [int(w) for w in name.split() if w.isdigit()]
    return numbers[-1] if numbers else None


def steady(rec: dict) -> dict:
    """The recording without start-up: a schema-1 recording had no untimed warm-up, so step 0 of every scenario is
    dropped (on the H200 it held 100 of the first scenario's 102 ms of kernels); newer ones warmed up untimed."""
    if rec["schema"] != 1:
        return rec
    return {**rec, "intervals": [r for r in rec["intervals"] if step_of(r["name"]) != 0]}


def summarize(rec: dict) -> list[dict]:
    """Per scenario, from the steady-state intervals: wall time, copy and kernel time, their overlap, and how much
    of the wall time the compute stream had kernels between its events (which includes gaps between kernels)."""
    rec = steady(rec)
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
        rows.append({"scenario": name, "steps": len({step_of(r["name"]) for r in gpu}), "wall ms": wall,
                     "copy ms": copy_ms, "kernel ms": kernel_ms, "copy/kernel overlap ms": overlap,
                     "kernel spans / wall %": 100 * kernel_ms / wall if wall else 0.0})
    return rows


def lessons(rows: list[dict]) -> list[str]:
    """Sentences about what this recording shows, each built from its numbers."""
    by = {r["scenario"]: r for r in rows}
    said = []
    one, side = by.get("pinned, non_blocking"), by.get("pinned, side stream")
    if one and side:
        per = side["kernel ms"] / max(side["copy ms"], 1e-9)
        said.append(f"One stream: {one['wall ms']:.2f} ms. Side stream: {side['wall ms']:.2f} ms, with "
                    f"{side['copy/kernel overlap ms']:.2f} ms of copying hidden behind kernels; here the kernels "
                    f"take {per:.2f}x as long as the copies, so at most that share of copy time can be hidden.")
    many = by.get("copies dominate, side stream")
    if many:
        said.append(f"Copies dominate: {many['copy ms']:.2f} ms of copies against {many['kernel ms']:.2f} ms of "
                    f"kernels; the side stream hid {many['copy/kernel overlap ms']:.2f} ms and the run still took "
                    f"{many['wall ms']:.2f} ms: a side stream cannot hide a copy longer than the compute beside it.")
    item = by.get("side stream + .item()")
    if side and item:
        said.append(f"With .item() each step: {item['wall ms']:.2f} ms and {item['copy/kernel overlap ms']:.2f} ms "
                    f"of overlap, against {side['wall ms']:.2f} ms and {side['copy/kernel overlap ms']:.2f} ms "
                    "without it.")
    tiny = by.get("tiny kernels")
    if tiny:
        said.append(f"Tiny kernels: the compute stream's event spans cover {tiny['kernel spans / wall %']:.0f}% of "
                    f"the wall time, though each add changes one number.")
    return said


@dataclass(frozen=True)
class Scenario:
    name: str
    pinned: bool
    side_stream: bool
    item_each_step: bool
    matmuls: int  # per batch


def matmul_count(copy_ms: float, matmul_ms: float) -> int:
    """Matmuls per batch so that a batch's kernels take about as long as its pinned copy."""
    return max(1, round(copy_ms / max(matmul_ms, 1e-6)))


def scenarios(matmuls: int) -> list[Scenario]:
    """The recorded scenarios, compute sized by `matmuls` (an eighth of it where copies must dominate)."""
    return [Scenario("pageable copy, blocking", False, False, False, matmuls),
            Scenario("pinned, non_blocking", True, False, False, matmuls),
            Scenario("pinned, side stream", True, True, False, matmuls),
            Scenario("side stream + .item()", True, True, True, matmuls),
            Scenario("copies dominate, side stream", True, True, False, max(1, matmuls // 8))]


TINY_ADDS = 200


def record(steps: int = 8, size_mib: int = 64, command: str = "") -> dict:
    """Warm up untimed, size the compute to the copy, then run every scenario on the GPU timed by CUDA events."""
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: a stream recording needs an NVIDIA GPU")
    dev = torch.device("cuda")
    n = size_mib * 2**20 // 4
    side = min(2048, int(n**0.5))
    weight = torch.randn(side, side, device=dev)
    compute, copier = torch.cuda.current_stream(), torch.cuda.Stream()
    batches = {p: [torch.randn(n, pin_memory=p) for _ in range(2)] for p in (False, True)}
    tiny = torch.zeros(1, device=dev)
    marks, host = [], []  # (scenario, lane, name, kind, start event, end event); (scenario, name, start s, end s)

    def timed(sc, lane, name, kind, stream, fn):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        a.record(stream)
        with torch.cuda.stream(stream):
            out = fn()
        b.record(stream)
        host.append((sc, f"issue {name}", h0, time.perf_counter()))
        marks.append((sc, lane, name, kind, a, b))
        return out

    def work(x, matmuls):
        a = x[: side * side].view(side, side)
        for _ in range(matmuls):
            y = a @ weight
        return y.sum()

    def run(plan: list[Scenario], count: int) -> None:
        for sc in plan:
            stream = copier if sc.side_stream else compute
            for i in range(count):
                src = batches[sc.pinned][i % 2]
                x = timed(sc.name, "copy stream" if sc.side_stream else "compute stream", f"H2D {i}", "copy",
                          stream, lambda src=src, sc=sc: src.to(dev, non_blocking=sc.pinned))
                if sc.side_stream:
                    compute.wait_stream(copier)
                    x.record_stream(compute)
                loss = timed(sc.name, "compute stream", f"kernels {i}", "kernel", compute,
                             lambda x=x, sc=sc: work(x, sc.matmuls))
                if sc.item_each_step:
                    h0 = time.perf_counter()
                    loss.item()
                    host.append((sc.name, f".item() {i} waits", h0, time.perf_counter()))
            torch.cuda.synchronize()
        for i in range(count):
            timed("tiny kernels", "compute stream", f"{TINY_ADDS} tiny adds {i}", "kernel", compute,
                  lambda: [tiny.add_(1) for _ in range(TINY_ADDS)])
        torch.cuda.synchronize()

    run(scenarios(1), 2)  # untimed warm-up: CUDA context, cuBLAS, the side stream, pinned buffers
    marks.clear()
    host.clear()
    copy_ms = _median_ms(lambda: batches[True][0].to(dev, non_blocking=True))
    operand = torch.randn(side, side, device=dev)
    matmul_ms = _median_ms(lambda: operand @ weight)
    matmuls = matmul_count(copy_ms, matmul_ms)
    host_t0 = time.perf_counter()
    t0 = torch.cuda.Event(enable_timing=True)
    t0.record()
    run(scenarios(matmuls), steps)
    intervals = [{"scenario": s, "lane": lane, "name": nm, "kind": k, "start_ms": t0.elapsed_time(a),
                  "end_ms": t0.elapsed_time(b)} for s, lane, nm, k, a, b in marks]
    # Host times share the event clock's origin only approximately (t0 was recorded right after host_t0).
    intervals += [{"scenario": s, "lane": "host", "name": nm, "kind": "sync" if "item" in nm else "host",
                   "start_ms": 1e3 * (h0 - host_t0), "end_ms": 1e3 * (h1 - host_t0)} for s, nm, h0, h1 in host]
    names = [sc.name for sc in scenarios(matmuls)] + ["tiny kernels"]
    return validate_recording({
        "schema": SCHEMA,
        "provenance": provenance(command, torch.cuda.get_device_name(0), driver_version(), torch.version.cuda),
        "scenarios": names, "steps": steps, "size_mib": size_mib,
        "warmup": "every scenario ran twice untimed before the recorded pass",
        "sizing": {"pinned copy ms": copy_ms, "matmul ms": matmul_ms, "matmul size": side,
                   "matmuls per batch": matmuls},
        "measured": "CUDA events on each stream around each step's copy or kernels; a kernel span includes gaps "
                    "between its kernels",
        "intervals": intervals})


def _median_ms(fn, repeats: int = 5) -> float:
    """Median time of fn on the current stream, by CUDA events, after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


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


def recorder_script() -> str:
    """This whole file, as the page shows it (a demos.shown.Script): the recorder that made the recording it draws."""
    from demos.shown import script  # imported here: the file itself runs alone on a machine with a GPU

    return script(sys.modules[__name__], imports="")


if __name__ == "__main__":
    raise SystemExit(main())
