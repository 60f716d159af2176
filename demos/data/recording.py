"""A recording of the Workers tab's two default runs, made by this app's own code, so the tab opens on its figures
at once on a fresh server (running them takes 8-10 s on an idle 2-core host: a fork server imports torch, then
five real DataLoaders run).

    python -m demos.data.recording                  # runs both defaults here and writes RECORDING

The file holds what compare() and epoch_boundaries() measured at the page's defaults (every span each process
stamped, the throughputs, the host's cores and load) and where it was made (date, host, CPU, torch, command). The
page draws it, with that provenance beside the figures, until the visitor presses a button and runs their own. The
snippet shown beside it is built from the source of the functions that made it, and the file names a fingerprint
of that source: tests/snippets/data.py fails when the code changed after the recording, or the recording's shape
no longer matches what the demos return.
"""

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import socket
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from demos.data.timeline import (
    COMPARE_LIMIT_S,
    Comparison,
    EpochRuns,
    LoaderConfig,
    LoaderRun,
    Span,
    Workload,
    compare,
    default_cases,
    epoch_boundaries,
    timeline_code,
)
from demos.registry import ROOT
from demos.shown import entry, source

SCHEMA = 2  # 2: the 0-worker baselines' steady rates
RECORDING = ROOT / "assets" / "traces" / "data_loading_defaults.json"
COMMAND = "python -m demos.data.recording"


@dataclass(frozen=True)
class DefaultRuns:
    comparison: Comparison  # compare(*default_cases()[0])
    epochs: EpochRuns  # epoch_boundaries(*default_cases()[1])
    provenance: dict  # date, host, cpu, cores, torch, python, command, code_sha256


def record(cases=None, command: str = COMMAND) -> dict:
    """Run both default cases here (or `cases`, as default_cases() gives them) and return the recording."""
    (w, a, b), (epoch_w, epoch_c) = cases or default_cases()
    comparison = compare(w, a, b)
    return to_json(DefaultRuns(comparison, epoch_boundaries(epoch_w, epoch_c), provenance(command, comparison)))


@entry(None, entries=2)
def default_runs(path: str | None = str(RECORDING)) -> DefaultRuns:
    """The Workers tab's two default runs as read from the recording at `path`; with no path, run here and now."""
    return from_json(record() if path is None else json.loads(Path(path).read_text()))


def recorded_on(p: dict) -> str:
    """The provenance in a few words, for the figure itself: a shared screen shows it with the timeline."""
    return f"recorded {p['date']} on host {p['host']}, not on this server"


def provenance(command: str, comparison: Comparison) -> dict:
    """Where and how a recording was made, printed beside its figures."""
    return {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "host": socket.gethostname(),
            "cpu": cpu_model(), "cores": comparison.cores, "torch": torch.__version__,
            "python": platform.python_version(), "command": command, "code_sha256": code_fingerprint(comparison.code)}


def cpu_model() -> str:
    """The CPU's model name (Linux), else what platform reports."""
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def code_fingerprint(code) -> str:
    """sha256 of the source of the functions a snippet shows: it changes when the code that measured changes."""
    return hashlib.sha256("\n".join(source(o) for o in code.origins).encode()).hexdigest()[:16]


def to_json(runs: DefaultRuns) -> dict:
    """The recording: both runs as JSON (their snippets are rebuilt from the code when read) and the provenance."""
    return {"schema": SCHEMA, "provenance": runs.provenance, "comparison": _comparison_json(runs.comparison),
            "epochs": _epochs_json(runs.epochs)}


def _run_json(r: LoaderRun) -> dict:
    """A run as JSON; spans as [row, kind, start, end, text] with times to the microsecond."""
    plain = {f.name: getattr(r, f.name) for f in fields(r) if f.name not in ("workload", "config", "spans")}
    return {"workload": asdict(r.workload), "config": asdict(r.config), **plain,
            "spans": [[s.row, s.kind, round(s.start, 6), round(s.end, 6), s.text] for s in r.spans]}


def _comparison_json(r: Comparison) -> dict:
    return {"a": _run_json(r.a), "b": _run_json(r.b), "baseline_samples_per_s": r.baseline_samples_per_s,
            "baseline_steady_per_s": r.baseline_steady_per_s, "fork_server_s": r.fork_server_s, "cores": r.cores,
            "load_average": r.load_average}


def _epochs_json(r: EpochRuns) -> dict:
    return {"off": _run_json(r.off), "on": _run_json(r.on)}


def _run(d: dict) -> LoaderRun:
    return LoaderRun(Workload(**d["workload"]), LoaderConfig(**d["config"]), d["epochs"],
                     tuple(Span(*s) for s in d["spans"]), tuple(map(tuple, d["loaded"])), d["wall_s"],
                     d["starved_s"], tuple(d["epoch_startup_s"]), tuple(d["warnings"]))


def from_json(rec: dict) -> DefaultRuns:
    """The recording's runs as the demos return them, with the snippet of the code that measured them."""
    if rec.get("schema") != SCHEMA:
        raise ValueError(f"a recording of schema {SCHEMA} was expected, not {rec.get('schema')!r}")
    c, e = rec["comparison"], rec["epochs"]
    a, b, off, on = _run(c["a"]), _run(c["b"]), _run(e["off"]), _run(e["on"])
    comparison = Comparison(a, b, {int(k): v for k, v in c["baseline_samples_per_s"].items()}, c["fork_server_s"],
                            c["cores"], c["load_average"],
                            timeline_code(a.workload, (a.config, b.config), 1, COMPARE_LIMIT_S),
                            {int(k): v for k, v in c["baseline_steady_per_s"].items()})
    epochs = EpochRuns(off, on, timeline_code(off.workload, (off.config, on.config), 2, COMPARE_LIMIT_S))
    return DefaultRuns(comparison, epochs, rec["provenance"])


def busy_host(rec: dict) -> str:
    """Why the recording must not be kept, or '': on a host busier than its cores, workers look slower than loading in
    the main process, the opposite of what the tab teaches on an idle machine."""
    load, cores = rec["comparison"]["load_average"], rec["comparison"]["cores"]
    if load > cores:
        return (f"not written: the host's load average was {load:.1f} on {cores} cores during the runs; record on an "
                "idle host")
    return ""


def dumps(value, depth: int = 0) -> str:
    """JSON indented by one space per level, with a list of plain values (a span) on one line: short and diffable."""
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k))}: {dumps(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list | tuple) and any(isinstance(v, list | tuple | dict) for v in value):
        return "[\n" + ",\n".join(inner + dumps(v, depth + 1) for v in value) + f"\n{pad}]"
    return json.dumps(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RECORDING, help="where to write the JSON recording")
    args = parser.parse_args(argv)
    rec = record(command=" ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])]))
    if busy := busy_host(rec):
        print(busy, file=sys.stderr)
        return 1
    args.out.write_text(dumps(rec) + "\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
