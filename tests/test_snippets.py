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


import pytest
import torch

from demos.registry import registered
from demos.training.mistakes import MISTAKES
from tests.snippet_runner import run_alone
from tests.snippets import crawl, measured_numbers, numbers_in, show_code_keys
from tests.test_shown_systems import TESTED_BY

PAGES = [t.file for t in registered() if t.file not in TESTED_BY]  # those pages' snippets: one test per demo
NO_CUDA = "No CUDA GPU here"  # what a CUDA-only snippet says, in one sentence, on a host without one

# Views the crawl opens beyond defaults, tabs and buttons: widgets that choose which snippet a section shows.
EXTRA_VIEWS = {
    "pages/training-loop.py": tuple(({"tl_tab": "Mistakes"}, (("selectbox", "tl_mis_focus", v),)) for v in MISTAKES),
}


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
