"""Start `world_size` gloo ranks on this machine, run one worker, collect the result file, always clean up.

Ranks are forked from the fork server (demos/processes.py) with torch and the workers imported once, so a run
starts its ranks in milliseconds instead of importing torch per rank. The server starts on the first run and
stays warm between runs; it stops with the other warm helpers once the server has had no run for
guests.IDLE_WINDOW_S, so an idle server holds no extra process. A DataLoader run in between replaces it with a
fork server of its own (demos/worker_runs.py), so the next rank run starts one again.

Each rank gets the environment torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and calls the same `workers.run_rank` that `python -m demos.distributed.run` calls under
torchrun, except that the ranks meet through a FileStore in the run's temp folder rather than a TCPStore: a
run opens no listening port beyond gloo's loopback connections. Rank 0 writes a JSON result file; the
launcher reads it back through the validator in `results`, never through pickle.
"""

import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from demos import processes
from demos.distributed.results import load_result
from demos.errors import InputError
from demos.guests import process_slot
from demos.processes import free_port

MIN_WORLD, MAX_WORLD = 2, 4
INIT_TIMEOUT_S = 30.0
WORK_TIMEOUT_S = 60.0
# Imported once in the fork server: torch, the workers, FSDP and dynamo (DDP and FSDP import dynamo when they first
# run: importing it here saves ~0.6 s a run). The app itself imports the workers (to show their code) but not these.
PRELOAD = ("torch", "torch._dynamo", "torch.distributed.fsdp", "demos.distributed.workers")
# When this environment variable names a folder (tests/provenance.py sets it while it records which code ran), each
# rank writes there the code of this repository's demos that it ran: a test can then see what ran in the ranks.
CALLS_DIR = "WB_CALLS_DIR"
_DEMOS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # demos/


class RunFailed(InputError):
    """A distributed run that failed or timed out; the message says which rank and why."""


@dataclass(frozen=True)
class RunInfo:
    """How a run went: its ranks' pids and exit codes, its port, and how long it took."""

    pids: tuple[int, ...]
    exit_codes: tuple[int | None, ...]
    port: int
    wall_s: float


def _rank_main(rank: int, world: int, port: int, demo: str, params: dict, out_path: str, err_dir: str,
               calls_dir: str | None = None) -> None:
    """Entry of one rank process: set torchrun's environment, run the worker, leave an error file on failure.

    The ranks meet through a FileStore in the run's temp folder, so no rank listens on a store port, and gloo's
    own connections are bound to the loopback interface (GLOO_SOCKET_IFNAME). MASTER_ADDR/MASTER_PORT are set
    as torchrun sets them, for the launch demo to show; nothing listens on that port.
    """
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
                       **processes.gloo_interface()})
    from demos.distributed import workers

    workers.torch.set_num_threads(1)

    def record(err: BaseException) -> None:
        Path(err_dir, f"rank{rank}.txt").write_text(f"{type(err).__name__}: {err}"[:2000], encoding="utf-8")

    try:
        with _writing_calls(calls_dir, rank):
            workers.run_rank(demo, params, out_path if rank == 0 else None, backend="gloo", timeout_s=INIT_TIMEOUT_S,
                             on_error=record, store_file=os.path.join(err_dir, "store"))
    except BaseException as err:
        if not Path(err_dir, f"rank{rank}.txt").exists():
            record(err)
        raise SystemExit(1) from None


@contextmanager
def _writing_calls(folder: str | None, rank: int):
    """With a folder, record the code of demos/ that this rank calls (every thread the block starts too) and write
    it there afterwards, one `file<TAB>first line<TAB>name` line each; without one, do nothing."""
    if folder is None:
        yield
        return
    called = set()

    def trace(frame, event, arg):  # a call event only: returning None skips the lines inside
        called.add(frame.f_code)

    sys.settrace(trace)
    threading.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(None)
        threading.settrace(None)
        lines = {f"{os.path.abspath(c.co_filename)}\t{c.co_firstlineno}\t{c.co_name}" for c in called}
        Path(folder, f"rank{rank}-{os.getpid()}.calls").write_text(
            "\n".join(sorted(line for line in lines if line.startswith(_DEMOS))), encoding="utf-8")


def run_ranks(demo: str, world_size: int, params: dict, timeout_s: float = WORK_TIMEOUT_S) -> tuple[dict, RunInfo]:
    """Run one worker on `world_size` ranks; return the validated result record and how the run went."""
    if not MIN_WORLD <= world_size <= MAX_WORLD:
        raise InputError(f"World size must be between {MIN_WORLD} and {MAX_WORLD}; got {world_size}.")
    with process_slot(), tempfile.TemporaryDirectory(prefix="wb-dist-") as tmp:
        t0 = time.perf_counter()  # a cold run's wall time includes starting the fork server
        ctx, _ = processes.fork_server(PRELOAD)
        port = free_port()
        out_path = os.path.join(tmp, "result.json")
        calls = os.environ.get(CALLS_DIR)
        procs = [ctx.Process(target=_rank_main, args=(r, world_size, port, demo, params, out_path, tmp, calls),
                             daemon=True) for r in range(world_size)]
        try:
            with processes.started(procs):
                _wait_all(procs, timeout_s, tmp)  # the clock starts once all ranks live
        except OSError as err:
            if all(p.pid is not None for p in procs):
                raise
            raise RunFailed(f"Could not start rank processes on this server ({err}).") from None
        info = RunInfo(tuple(p.pid for p in procs), tuple(p.exitcode for p in procs), port, time.perf_counter() - t0)
        for p in procs:
            p.close()
        return load_result(Path(out_path).read_bytes()), info


def _wait_all(procs, timeout_s: float, err_dir: str) -> None:
    """Wait for every rank; stop at the first failure or at the deadline, with a message naming the cause."""
    try:
        failed = processes.first_failure(procs, timeout_s)
    except TimeoutError:
        raise RunFailed(f"The ranks did not finish within {timeout_s:.0f} s, so all of them were stopped; "
                        "try smaller settings or fewer ranks.") from None
    if failed is not None:
        raise RunFailed(_failure_message(procs.index(failed), failed.exitcode, err_dir))


def _failure_message(rank: int, code: int, err_dir: str) -> str:
    """Name the rank that failed first: the others usually fail after it because their peer vanished."""
    time.sleep(0.3)  # let the other ranks write their errors too
    files = sorted(Path(err_dir).glob("rank*.txt"), key=lambda f: f.stat().st_mtime_ns)
    if files:
        rank = int(files[0].stem.removeprefix("rank"))
        detail = files[0].read_text(encoding="utf-8").splitlines()[0]
    else:
        detail = f"exit code {code}"
    return f"Rank {rank} failed ({detail[:300]}); all ranks were stopped."
