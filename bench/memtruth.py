"""The memory model against a real GPU: every spec in assets/gpu/memtruth.json predicted on meta tensors, and the
same training steps run in plain torch on CUDA (no tracker, no dispatch mode), measured as the page measures.

    python -m bench.memtruth --out memtruth_new.json     # needs a CUDA GPU; about a minute on an H200

Measured: the cuBLAS/cuBLASLt workspaces are made first (demos.memory.training.warm_cuda_workspaces), then the
cache is emptied and the peak statistics reset, and each figure is relative to that start: `cuda_max_alloc` is
max_memory_allocated() minus memory_allocated() at the start, `cuda_max_reserved` is max_memory_reserved() minus
memory_reserved() at the start (the workspaces' segments stay reserved after empty_cache(), so they are excluded).
The page's own CUDA path (its tracker on CUDA, its baseline-subtracted measurement) is recorded beside them.
"""

import argparse
import datetime as dt
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from demos.memory import training as tr
from demos.memory.models import MODELS, build_model, loss_of, make_batch
from demos.memory.stream_recorder import driver_version

SPECS = Path(__file__).resolve().parents[1] / "assets" / "gpu" / "memtruth.json"


def load_specs(path: Path = SPECS) -> list[tr.RunSpec]:
    return [tr.RunSpec(**row["spec"]) for row in json.loads(Path(path).read_text())["rows"]]


def plain_steps(spec: tr.RunSpec) -> None:
    """The steps of training.run_steps in plain torch on CUDA."""
    preset = MODELS[spec.model]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = build_model(preset, spec.seq_len)
    if spec.dtype == "bf16 weights":
        model.to(torch.bfloat16)
    model.use_checkpoint = spec.checkpointing
    params = list(model.parameters())
    x, y = make_batch(preset, spec.batch, spec.seq_len, "cuda")
    if spec.dtype == "bf16 weights" and x.is_floating_point():
        x = x.to(torch.bfloat16)
    opt = tr._optimizer(spec.optimizer, params, spec.foreach)
    low = torch.bfloat16 if spec.dtype.startswith("bf16") else torch.float16
    for _ in range(spec.steps):
        with torch.autocast("cuda", dtype=low, enabled="autocast" in spec.dtype):
            loss = loss_of(model, preset, x, y)
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=spec.set_to_none)
    torch.cuda.synchronize()


def plain_peak(spec: tr.RunSpec) -> tuple[int, int]:
    """(peak allocated, peak reserved) of the plain steps, each above its value at the start."""
    with tr.CUDA_RUN_LOCK:
        tr.warm_cuda_workspaces()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        alloc, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        plain_steps(spec)
        peak = torch.cuda.max_memory_allocated() - alloc, torch.cuda.max_memory_reserved() - reserved
    gc.collect()
    torch.cuda.empty_cache()
    return peak


def pct(predicted: int, measured: int) -> float:
    return round(100 * (predicted - measured) / measured, 2) if measured else float("nan")


def replay(spec: tr.RunSpec) -> dict:
    row: dict = {"spec": {k: getattr(spec, k) for k in spec.__dataclass_fields__}}
    t0 = time.perf_counter()
    meta = tr.simulate(spec, "meta")
    row.update(meta_s=round(time.perf_counter() - t0, 2), meta_pred_alloc=meta.predicted_peak_allocated,
               meta_pred_reserved=max(meta.reserved), meta_tracked_peak=meta.peak, meta_peak_phase=tr.peak_phase(meta))
    row["cuda_max_alloc"], row["cuda_max_reserved"] = plain_peak(spec)
    row["err_alloc_pct"] = pct(row["meta_pred_alloc"], row["cuda_max_alloc"])
    row["err_reserved_pct"] = pct(row["meta_pred_reserved"], row["cuda_max_reserved"])
    page = tr.simulate(spec, "cuda")
    row.update(page_cuda_pred_alloc=page.predicted_peak_allocated,
               page_cuda_measured=max(r[4] for r in page.measured), page_cuda_baseline=list(page.baseline),
               page_cuda_peak_phase=tr.peak_phase(page))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memtruth", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--specs", type=Path, default=SPECS)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("No CUDA GPU here: nothing measured. Run this on a machine with an NVIDIA GPU.", file=sys.stderr)
        return 2
    rows = []
    for spec in load_specs(args.specs):
        try:
            rows.append(replay(spec))
        except Exception as err:  # one failing spec must not lose the others' measurements
            rows.append({"spec": spec.__dict__, "error": f"{type(err).__name__}: {err}"[-400:]})
        print(json.dumps(rows[-1]), flush=True)
    errs = [abs(r["err_alloc_pct"]) for r in rows if "err_alloc_pct" in r]
    provenance = {"gpu": torch.cuda.get_device_name(0), "driver": driver_version(), "torch": torch.__version__,
                  "cuda": torch.version.cuda, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                  "command": "python -m bench.memtruth " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.write_text(json.dumps({"provenance": provenance, "torch": provenance["torch"], "gpu": provenance["gpu"],
                                    "method": __doc__.split("\n\n")[2], "rows": rows}, indent=1))
    print(f"{len(errs)} of {len(rows)} specs measured; |error| median {statistics.median(errs or [0]):.2f}%, "
          f"max {max(errs or [0]):.2f}%; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
