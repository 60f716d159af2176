"""The container recipe and the production settings: what the README promises is what the files say."""

import json
import re
import tomllib
from pathlib import Path

from demos.distributed.results import MAX_BYTES

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
README = (ROOT / "README.md").read_text()


def instruction(name: str) -> list[str]:
    """The arguments of every Dockerfile instruction `name` (continuation lines joined)."""
    text = DOCKERFILE.replace("\\\n", " ")
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.*)$", text, re.MULTILINE)]


def test_the_container_runs_the_readme_command_as_a_non_root_user_with_a_health_check():
    cmd = json.loads(instruction("CMD")[-1])
    assert cmd[:2] == ["sh", "-c"] and cmd[2].startswith("streamlit run app.py --server.address 0.0.0.0")
    assert cmd[2] in README, "the README gives the container's exact command"
    assert instruction("FROM") == ["python:3.11-slim"]
    assert instruction("USER") and instruction("USER")[-1] not in ("0", "root")
    assert "/_stcore/health" in instruction("HEALTHCHECK")[0]


def test_requirements_are_pinned_and_the_container_takes_torch_from_the_cpu_index():
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    pins = [ln for ln in lines if ln and not ln.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.+]+", p) for p in pins), pins
    assert sum(p.startswith("torch==") for p in pins) == 1
    install = next(r for r in instruction("RUN") if "download.pytorch.org/whl/cpu" in r)
    assert "sed -n 's/^torch==//p' requirements.txt" in install and "-r requirements.txt" in install


def test_production_settings():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] * 2**20 == MAX_BYTES, "the server refuses what no importer accepts"
    assert config["server"]["enableXsrfProtection"] is True
    assert config["client"]["showErrorDetails"] == "none"
