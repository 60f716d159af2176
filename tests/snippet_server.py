"""Run snippet scripts as fresh Python processes would, minus the 1 s `import torch`: a fork server.

The server is started as `python -I tests/snippet_server.py` (its path holds neither this repository nor the user's
site), or without -I and with PYTHONPATH set for snippets that run from the repository. It imports torch once, then
for each request forks a child that runs one script with `runpy`, as `python [-I] script.py` would: its own
`__main__` (spawned workers re-import the script, as usual), `sys.argv`, the working directory, environment and
`sys.path` of such a run, its stdout and stderr in files, and its own process group. The server itself never runs
torch code, so no thread pool exists to be broken by the fork.

Protocol: one JSON request per line on stdin ({"script", "cwd", "env", "path_head", "out", "err", "timeout"}), one
JSON reply per line on stdout ({"returncode"}; -9 after a timeout, when the child's whole group is killed).
"""

import sys

if not sys.flags.isolated:
    del sys.path[0]  # this file's folder: a script's own folder is the snippet's, added per request

import atexit  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import torch  # noqa: E402, F401  (the point of the server: every child starts with it imported)

BASE_PATH = list(sys.path)  # the path of such a run after its script's folder: PYTHONPATH, stdlib, site-packages


def run_child(request: dict) -> None:
    """In the forked child: become the snippet's process and never return."""
    os.setpgrp()
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = [*request["path_head"], *BASE_PATH]
        for fd, name in ((1, "out"), (2, "err")):
            target = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        sys.stdin = open(os.devnull)
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()  # what interpreter shutdown would run (e.g. the snippet's multiprocessing cleanup)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def wait_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.01)


def serve(replies: int) -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.close(replies)
            run_child(request)
        returncode = wait_child(pid, request["timeout"])
        try:  # the child's own children (a snippet's workers) go with it
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        os.write(replies, (json.dumps({"returncode": returncode}) + "\n").encode())


if __name__ == "__main__":
    serve(os.dup(1))
