"""The code each core page shows is the code that drew its figure: per demo, call it (every function and class the
snippet shows must run, tests/provenance.py), then run the snippet alone (tests/snippet_runner.py) and check it
prints the figure's numbers."""

from demos.training import mistakes
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone


def printed(code: str, tmp_path, snippet_server) -> str:
    """What the snippet prints, run as a reader would run it; it must exit cleanly."""
    done = run_alone(code, tmp_path, snippet_server)
    assert done.returncode == 0, done.stderr
    return done.stdout


# Training loop ----------------------------------------------------------------------------------------------------


def test_mistake_loop(tmp_path, snippet_server):
    run = assert_shows_what_ran(mistakes.run_loop, "no_train_after_eval", 20, 0.5, 3)
    assert printed(run.code, tmp_path, snippet_server) == f"validation loss {run.val_loss}\n"
