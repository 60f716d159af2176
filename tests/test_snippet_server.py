"""The snippet fork server runs a script as a fresh `python [-I] script.py` would: same path, folder, environment,
argv and __main__, exit codes and tracebacks, spawned workers, and a timeout that kills the script's whole group."""

import contextlib
import json
import subprocess
import sys

import pytest

from demos.registry import ROOT
from tests.snippet_runner import SnippetServer, clean_env

PROBE = """
import json, os, sys
print(json.dumps({"path": sys.path, "cwd": os.getcwd(), "argv": sys.argv, "name": __name__,
                  "env": dict(os.environ), "torch_loaded": "torch" in sys.modules}))
"""


@pytest.fixture(scope="module")
def snippets():
    server = SnippetServer()
    yield server
    server.close()


def fresh(script, cwd, env, in_repository) -> subprocess.CompletedProcess:
    flags = [] if in_repository else ["-I"]
    return subprocess.run([sys.executable, *flags, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("in_repository", [False, True], ids=["isolated", "from-the-repository"])
def test_a_script_sees_what_a_fresh_interpreter_would(snippets, tmp_path, in_repository):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**clean_env(), **({"PYTHONPATH": str(ROOT)} if in_repository else {})}
    cwd = ROOT if in_repository else tmp_path
    expected = json.loads(fresh(script, cwd, env, in_repository).stdout)
    got = json.loads(snippets.run(script, cwd, env, in_repository).stdout)
    assert got.pop("torch_loaded") and not expected.pop("torch_loaded"), "the server's point: torch is imported"
    assert got == expected


def test_exit_codes_and_tracebacks_come_back(snippets, tmp_path):
    script = tmp_path / "fails.py"
    for code, returncode, in_stderr in (("raise ValueError('nope')", 1, "ValueError: nope"),
                                        ("import sys; sys.exit(3)", 3, ""), ("import sys; sys.exit('bye')", 1, "bye"),
                                        ("print('fine')", 0, "")):
        script.write_text(code)
        done = snippets.run(script, tmp_path, clean_env(), False)
        assert (done.returncode, in_stderr in done.stderr) == (returncode, True), (code, done)


def test_workers_started_by_fork_and_by_spawn_run_the_script(snippets, tmp_path):
    script = tmp_path / "workers.py"
    script.write_text("""
import multiprocessing as mp
import torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self): return 4
    def __getitem__(self, i): return torch.tensor(i * i)

def double(x): return 2 * x

if __name__ == "__main__":
    print(sorted(int(b) for b in DataLoader(Squares(), num_workers=2, batch_size=None)))
    with mp.get_context("spawn").Pool(1) as pool:
        print(pool.map(double, [1, 2, 3]))
""")
    done = snippets.run(script, tmp_path, clean_env(), False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[0, 1, 4, 9]", "[2, 4, 6]"]


def test_a_script_past_its_time_is_killed_with_its_children(snippets, tmp_path, monkeypatch):
    import psutil

    import tests.snippet_runner as module

    monkeypatch.setattr(module, "SNIPPET_TIMEOUT_S", 2)
    script = tmp_path / "slow.py"
    script.write_text("import subprocess, time\n"
                      "print(subprocess.Popen(['sleep', '60']).pid, flush=True)\n"
                      "time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        snippets.run(script, tmp_path, clean_env(), False)
    sleeper = int(script.with_suffix(".out").read_text())
    with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
        psutil.Process(sleeper).wait(timeout=10)  # returns (or is gone) only once the child has been killed
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE, "the script's own child was killed too"
    script.write_text("print('next')\n")
    assert snippets.run(script, tmp_path, clean_env(), False).stdout == "next\n", "the server serves on"
