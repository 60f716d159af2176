"""Run a snippet the way a reader would: as a script file in an empty folder with a clean environment, through a
fork server that has torch imported (tests/snippet_server.py), or under torchrun when its header says so."""

import json
import os
import re
import subprocess
import sys

import pytest

from demos.registry import ROOT

SNIPPET_TIMEOUT_S = 300
IN_REPOSITORY = "# Run from the repository root"


def clean_env() -> dict[str, str]:
    """This process's environment without what would change how a snippet runs (Python, Streamlit, torch.distributed
    settings)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STREAMLIT", "MASTER_", "RANK"))}


class SnippetServer:
    """tests/snippet_server.py, started on first use: one for isolated snippets (-I, run from an empty folder) and
    one for snippets that run from the repository (PYTHONPATH); each forks a child per snippet with torch imported."""

    def __init__(self):
        self.servers: dict[bool, subprocess.Popen] = {}

    def server(self, in_repository: bool) -> subprocess.Popen:
        if in_repository not in self.servers:
            env = {**clean_env(), "PYTHONPATH": str(ROOT)} if in_repository else clean_env()
            flags = [] if in_repository else ["-I"]
            self.servers[in_repository] = subprocess.Popen(
                [sys.executable, *flags, str(ROOT / "tests" / "snippet_server.py")], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True, start_new_session=True)
        return self.servers[in_repository]

    def run(self, script, cwd, env: dict, in_repository: bool) -> subprocess.CompletedProcess:
        out, err = script.with_suffix(".out"), script.with_suffix(".err")
        path_head = [str(script.parent)] if in_repository else []  # `python script.py` puts the script's folder first
        request = {"script": str(script), "cwd": str(cwd), "env": env, "path_head": path_head, "out": str(out),
                   "err": str(err), "timeout": SNIPPET_TIMEOUT_S}
        server = self.server(in_repository)
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        reply = server.stdout.readline()
        assert reply, f"the snippet server stopped (exit code {server.poll()})"
        returncode = json.loads(reply)["returncode"]
        if returncode == -9:
            raise subprocess.TimeoutExpired(str(script), SNIPPET_TIMEOUT_S)
        return subprocess.CompletedProcess(str(script), returncode, out.read_text(), err.read_text())

    def close(self) -> None:
        for server in self.servers.values():
            server.stdin.close()
            server.wait(timeout=30)


@pytest.fixture(scope="module")
def snippet_server():
    server = SnippetServer()
    yield server
    server.close()


def run_alone(code: str, tmp_path, snippets: SnippetServer) -> subprocess.CompletedProcess:
    """The snippet as a script file, run in an empty folder with a clean environment, as `python -I snippet.py`
    would, by the snippet server (its children start with torch imported).

    A snippet whose header says `# Run with: torchrun --nproc-per-node N` runs that way in a new process (torchrun
    starts a fresh interpreter per rank anyway; its --standalone rendezvous picks a free port); one that says
    `# Run from the repository root` (it uses this app's own tools, such as the memory tracker) runs there, as
    `python snippet.py` with the repository on PYTHONPATH.
    """
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = clean_env()
    in_repository = code.startswith(IN_REPOSITORY)
    cwd = ROOT if in_repository else tmp_path
    if in_repository:
        env["PYTHONPATH"] = str(ROOT)
    launch = re.search(r"^# Run with: torchrun --nproc-per-node (\d+)", code, re.M)
    if not launch:
        return snippets.run(script, cwd, env, in_repository)
    isolated = [] if in_repository else ["-I"]  # -I: no repository, no user site on the path
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", launch.group(1)]
    command = [sys.executable, *isolated, *torchrun, str(script)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT_S)
