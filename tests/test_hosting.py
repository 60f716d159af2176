"""The container recipe, the host-specific files and the production settings: what the README promises is what the
files say, and the container's entry point really hands PID 1 to streamlit."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from demos.distributed.results import MAX_BYTES
from demos.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
README = (ROOT / "README.md").read_text()
sys.path.insert(0, str(ROOT / "deploy"))
from serve import server_command  # noqa: E402 (deploy/ is not a package: the container runs the file)


def instruction(name: str) -> list[str]:
    """The arguments of every Dockerfile instruction `name` (continuation lines joined)."""
    text = DOCKERFILE.replace("\\\n", " ")
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.*)$", text, re.MULTILINE)]


def requirement_pins(text: str) -> dict[str, str]:
    lines = [ln.strip() for ln in text.splitlines()]
    return dict(ln.split("==") for ln in lines if ln and not ln.startswith(("#", "-")))


def test_the_container_execs_streamlit_as_a_non_root_user_with_a_health_check():
    assert json.loads(instruction("ENTRYPOINT")[-1]) == ["python", "deploy/serve.py"], "exec form: no shell"
    assert not instruction("CMD")
    cmd = server_command({"PORT": "8501"})
    assert cmd[1:] == ["-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501"]
    assert "streamlit run app.py --server.address 0.0.0.0 --server.port ${PORT:-8501}" in README
    assert instruction("USER") and instruction("USER")[-1] not in ("0", "root")
    assert "/_stcore/health" in instruction("HEALTHCHECK")[0]
    assert instruction("EXPOSE") == [server_command({})[-1]] == ["8501"]


def test_the_base_image_is_pinned_by_digest_and_the_image_has_a_compiler():
    (base,) = instruction("FROM")
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", base), base
    assert base.split("@")[1] in README, "the README names the digest it could not pull here"
    assert any(re.search(r"apt-get install .*\bg\+\+=\S+", r) for r in instruction("RUN")), "g++ for inductor"


def test_the_code_is_roots_and_read_only_to_the_app_user():
    copies = instruction("COPY")
    assert copies and not any("--chown" in c for c in copies), "COPY leaves the files root's"
    assert "chmod -R go-w /app" in instruction("RUN")
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in ("tests", "bench", ".ci", "assets/screenshots", ".git", ".venv"):
        assert path in ignored, f"{path} stays out of the image"
    assert "!deploy/serve.py" in ignored, "the entry point goes in"


def test_a_bad_port_is_one_sentence():
    for port in ("", "http", "0", "70000", "８０"):
        with pytest.raises(SystemExit, match="PORT must be a TCP port number"):
            server_command({"PORT": port})


def test_the_entry_point_leaves_streamlit_as_the_process_that_gets_sigterm(tmp_path):
    """deploy/serve.py execs: the process started for it is streamlit itself, and SIGTERM stops it promptly."""
    (tmp_path / "app.py").write_text("import streamlit as st\nst.write('up')\n")
    port = free_port()
    env = {**os.environ, "PORT": str(port), "STREAMLIT_SERVER_HEADLESS": "true",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "deploy" / "serve.py")], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.2)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"streamlit" in cmdline and b"serve.py" not in b" ".join(cmdline), cmdline
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_community_cloud_reads_the_cpu_torch_pin_and_a_compiler():
    """Its Pipfile (read before requirements.txt) pins what requirements.txt pins, torch from the CPU index only."""
    pinned = requirement_pins((ROOT / "requirements.txt").read_text())
    pipfile = tomllib.loads((ROOT / "Pipfile").read_text())
    sources = {s["name"]: s["url"] for s in pipfile["source"]}
    assert pipfile["source"][0]["url"] == "https://pypi.org/simple", "PyPI stays the default source"
    packages = pipfile["packages"]
    torch = packages.pop("torch")
    assert torch["version"] == f"=={pinned.pop('torch')}"
    assert sources[torch["index"]] == "https://download.pytorch.org/whl/cpu"
    assert {name: spec.removeprefix("==") for name, spec in packages.items()} == pinned
    assert pipfile["requires"]["python_version"] == "3.11"
    assert (ROOT / "packages.txt").read_text().split() == ["g++"], "one apt package a line, no comments"


def test_requirements_are_pinned_and_the_container_takes_torch_from_the_cpu_index():
    pins = requirement_pins((ROOT / "requirements.txt").read_text())
    assert pins and all(re.fullmatch(r"[\w.+]+", v) for v in pins.values()), pins
    install = next(r for r in instruction("RUN") if "download.pytorch.org/whl/cpu" in r)
    assert "--index-url https://download.pytorch.org/whl/cpu" in install, "the CPU index only, no PyPI fallback"
    assert "sed -n 's/^torch==//p' requirements.txt" in install and "-r requirements.txt" in install


def test_the_hugging_face_space_card_runs_the_container_on_its_port():
    text = (ROOT / "deploy" / "huggingface" / "README.md").read_text()
    header = dict(line.split(": ", 1) for line in text.split("---\n")[1].splitlines())  # flat "key: value" YAML
    assert header["sdk"] == "docker"
    assert str(header["app_port"]) == instruction("EXPOSE")[-1] == server_command({})[-1]


def test_production_settings():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server = config["server"]
    assert server["maxUploadSize"] * 2**20 == MAX_BYTES, "the server refuses what no importer accepts"
    assert server["enableXsrfProtection"] is True
    assert config["client"]["showErrorDetails"] == "none"
    assert {"localhost", "127.0.0.1"} <= set(server["allowedHosts"]), "local runs and the tests keep working"
    assert 1 <= server["maxMessageSize"] < 200, "tighter than Streamlit's default"
    assert re.fullmatch(r"\d+mb", server["maxCacheDataSize"])


def test_the_favicon_is_a_local_file():
    entry = (ROOT / "pages" / "shell" / "entry.py").read_text()
    assert "page_icon=str(FAVICON)" in entry and ":material/" not in entry.split("page_icon=")[1].split(",")[0]
    assert (ROOT / "assets" / "icons" / "favicon.svg").read_text().lstrip().startswith("<svg")
