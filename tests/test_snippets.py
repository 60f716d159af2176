"""Every 'show the code' snippet, run alone in a fresh Python, prints the numbers its page shows.

The snippets are discovered, not listed: a crawl (tests/snippets.py) opens each registered page, each of its
URL-bound tabs, presses each button, and records every `ui.show_code` call with the numbers the page drew at that
moment. Each snippet then runs as a script in a process of its own (forked from tests/snippet_server.py, which
imports torch once; the snippet gets the path, folder and environment of a fresh `python -I`, so no repository),
and every number it prints must be one the page shows, to the digits printed (a snippet that prints only
names, devices or dtypes must still run cleanly and print them). Wall-clock timings (a number
followed by a time unit) are measurements a second process cannot repeat; they are left out of the comparison.
A second check reads each page's source: every `show_code` call in it must have been reached by the crawl.
"""

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from demos.registry import ROOT, registered
from demos.training.mistakes import MISTAKES
from tests.snippets import crawl, measured_numbers, numbers_in, show_code_keys

PAGES = [t.file for t in registered()]
SNIPPET_TIMEOUT_S = 300
IN_REPOSITORY = "# Run from the repository root"
NO_CUDA = "No CUDA GPU here"  # what a CUDA-only snippet says, in one sentence, on a host without one

# Views the crawl opens beyond defaults, tabs and buttons: widgets that choose which snippet a section shows.
EXTRA_VIEWS = {
    "pages/training-loop.py": tuple(({"tl_tab": "Mistakes"}, (("selectbox", "tl_mis_focus", v),)) for v in MISTAKES),
}


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


def unmatched(printed: str, page_numbers: list) -> list[str]:
    """Printed numbers (timings aside) that no number on the page matches."""
    missing = []
    for line in printed.splitlines():
        timings = measured_numbers(line)
        for n in numbers_in(line):
            if n in timings:
                continue
            if not any(n.matches(p) for p in page_numbers):
                missing.append(f"{n.value:g} in {line.strip()[:120]!r}")
    return missing


@pytest.mark.parametrize("page_file", PAGES)
def test_every_snippet_prints_the_numbers_its_page_shows(page_file, monkeypatch, tmp_path, snippet_server):
    messages = []
    shown = crawl(page_file, monkeypatch, EXTRA_VIEWS.get(page_file, ()), messages)
    reached = {s.key for s in shown}
    for pattern in show_code_keys(page_file):
        assert any(pattern.fullmatch(k) for k in reached), (
            f"the crawl never reached show_code(key={pattern.pattern}); the page said: {messages}")

    failures = []
    for snippet in {s.code: s for s in shown}.values():
        done = run_alone(snippet.code, tmp_path, snippet_server)
        where = f"{snippet.key} ({snippet.view})"
        if done.returncode != 0 and NO_CUDA in done.stdout + done.stderr and not torch.cuda.is_available():
            continue  # a CUDA-only script (the allocator's, the stream recorder) says what it needs and stops
        if done.returncode != 0:
            failures.append(f"{where} failed:\n{done.stderr[-1500:]}")
            continue
        if not done.stdout.strip():
            failures.append(f"{where} printed nothing")
            continue
        missing = unmatched(done.stdout, snippet.page_numbers)
        if missing:
            failures.append(f"{where} printed numbers the page does not show: {missing[:8]}")
    assert not failures, "\n\n".join(failures)
