"""Start `world_size` gloo ranks on this machine, run one worker, collect the result file, always clean up.

Ranks are forked from this module's own fork server, which imports torch and the workers once; a run then
starts its ranks in milliseconds instead of importing torch per rank. The fork server is private (other pages'
fork servers are unaffected), starts on the first run, and stops with the other warm helpers once the server
has had no run for guests.IDLE_WINDOW_S, so an idle server holds no extra process.

Each rank gets the environment torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and calls the same `workers.run_rank` that `python -m demos.distributed.run` calls under
torchrun, except that the ranks meet through a FileStore in the run's temp folder rather than a TCPStore: a
run opens no listening port beyond gloo's loopback connections. Rank 0 writes a JSON result file; the
launcher reads it back through the validator in `results`, never through pickle.
"""

import io
import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import dataclass
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import wait
from pathlib import Path

from demos import guests
from demos.distributed.results import load_result
from demos.errors import InputError
from demos.guests import free_port, process_slot

MIN_WORLD, MAX_WORLD = 2, 4
INIT_TIMEOUT_S = 30.0
WORK_TIMEOUT_S = 60.0
PRELOAD = ["demos.distributed.workers"]  # imports torch, DDP, FSDP and dynamo once, in the fork server

_SERVER = forkserver.ForkServer()
_SERVER.set_forkserver_preload(PRELOAD)


class RunFailed(InputError):
    """A distributed run that failed or timed out; the message says which rank and why."""


@dataclass(frozen=True)
class RunInfo:
    """How a run went: its ranks' pids and exit codes, its port, and how long it took."""

    pids: tuple[int, ...]
    exit_codes: tuple[int | None, ...]
    port: int
    wall_s: float


class _RankPopen(popen_forkserver.Popen):
    """The standard library's forkserver launch, on this module's fork server and without the parent's __main__.

    multiprocessing normally re-runs the parent's main module in each child (under Streamlit, its CLI; under a
    script without a main guard, the whole script). Ranks need only their importable entry function.
    """

    def _launch(self, process_obj):
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_path", None)
        prep_data.pop("init_main_from_name", None)
        buf = io.BytesIO()
        popen_forkserver.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            popen_forkserver.set_spawning_popen(None)
        self.sentinel, w = _SERVER.connect_to_new_process(self._fds)
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _RankProcess(mp.context.ForkServerProcess):
    """A process forked by this module's fork server."""

    @staticmethod
    def _Popen(process_obj):
        return _RankPopen(process_obj)


def warm_up() -> None:
    """Start the fork server now (it imports torch in its own process) so the next run does not wait for it."""
    _SERVER.ensure_running()


def stop_fork_server() -> None:
    """Stop the fork server (ForkServer._stop is the standard library's own shutdown, used by its tests)."""
    _SERVER._stop()


def fork_server_pid() -> int | None:
    return _SERVER._forkserver_pid


guests.register_helper(lambda: fork_server_pid() is not None, stop_fork_server)  # stops when the server idles


def _rank_main(rank: int, world: int, port: int, demo: str, params: dict, out_path: str, err_dir: str) -> None:
    """Entry of one rank process: set torchrun's environment, run the worker, leave an error file on failure.

    The ranks meet through a FileStore in the run's temp folder, so no rank listens on a store port, and gloo's
    own connections are bound to the loopback interface (GLOO_SOCKET_IFNAME). MASTER_ADDR/MASTER_PORT are set
    as torchrun sets them, for the launch demo to show; nothing listens on that port.
    """
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
                       **guests.GLOO_INTERFACE})
    from demos.distributed import workers

    workers.torch.set_num_threads(1)
    def record(err: BaseException) -> None:
        Path(err_dir, f"rank{rank}.txt").write_text(f"{type(err).__name__}: {err}"[:2000], encoding="utf-8")

    try:
        workers.run_rank(demo, params, out_path if rank == 0 else None, backend="gloo", timeout_s=INIT_TIMEOUT_S,
                         on_error=record, store_file=os.path.join(err_dir, "store"))
    except BaseException as err:
        if not Path(err_dir, f"rank{rank}.txt").exists():
            record(err)
        raise SystemExit(1) from None


def run_ranks(demo: str, world_size: int, params: dict, timeout_s: float = WORK_TIMEOUT_S) -> tuple[dict, RunInfo]:
    """Run one worker on `world_size` ranks; return the validated result record and how the run went."""
    if not MIN_WORLD <= world_size <= MAX_WORLD:
        raise InputError(f"World size must be between {MIN_WORLD} and {MAX_WORLD}; got {world_size}.")
    with process_slot(), tempfile.TemporaryDirectory(prefix="wb-dist-") as tmp:
        port = free_port()
        out_path = os.path.join(tmp, "result.json")
        t0 = time.perf_counter()
        procs = [_RankProcess(target=_rank_main, args=(r, world_size, port, demo, params, out_path, tmp), daemon=True)
                 for r in range(world_size)]
        try:
            for p in procs:
                try:
                    p.start()
                except OSError as err:
                    raise RunFailed(f"Could not start rank processes on this server ({err}).") from None
            _wait_all(procs, time.perf_counter() + timeout_s, timeout_s, tmp)  # the clock starts once all ranks live
        finally:
            _reap(procs)
        info = RunInfo(tuple(p.pid for p in procs), tuple(p.exitcode for p in procs), port, time.perf_counter() - t0)
        for p in procs:
            p.close()
        return load_result(Path(out_path).read_bytes()), info


def _wait_all(procs, deadline: float, timeout_s: float, err_dir: str) -> None:
    """Wait for every rank; stop at the first failure or at the deadline, with a message naming the cause."""
    running = list(procs)
    while running:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise RunFailed(f"The ranks did not finish within {timeout_s:.0f} s, so all of them were stopped; "
                            "try smaller settings or fewer ranks.")
        for sentinel in wait([p.sentinel for p in running], timeout=min(left, 0.5)):
            p = next(p for p in running if p.sentinel == sentinel)
            p.join()
            running.remove(p)
            if p.exitcode != 0:
                raise RunFailed(_failure_message(procs.index(p), p.exitcode, err_dir))


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


def _reap(procs) -> None:
    """Terminate what still runs, then kill what ignores that; afterwards no rank process is left."""
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.terminate()
    for p in procs:
        if p.pid is not None:
            p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)
