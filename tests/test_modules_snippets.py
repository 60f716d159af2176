"""Every 'show the code' snippet on the Modules page runs on its own and prints the numbers the page shows (those
built by demos.shown.script are checked in tests/test_shown_core.py)."""

import pytest

from demos.modules import hooks


def run_snippet(code: str) -> list[str]:
    """Execute a snippet as a script; return the lines it printed."""
    lines = []

    def capture(*args, **kwargs):
        lines.append(" ".join(str(a) for a in args))

    exec(compile(code, "<snippet>", "exec"), {"print": capture, "__name__": "__snippet__"})
    return lines


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # the first conv's input needs no grad
def test_hook_snippet_reproduces_the_logits():
    run = hooks.hook_outputs("3, 5", 16, "stripes", 2)
    out = run_snippet(run.code)
    assert out[-1] == f"logits {[list(r) for r in run.logits]}"
