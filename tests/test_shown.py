"""demos/shown.py builds snippets from the source of what ran; tests/provenance.py tells shown code that ran from
shown code that did not."""

import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from demos import shown
from demos.shown import Script, all_entries, entry, script, scripts_in
from tests.provenance import assert_shows_what_ran
from tests.snippet_runner import run_alone
from tests.snippets import all_checks


class Doubler(torch.nn.Module):
    def forward(self, x):
        return 2 * x


def double_sum(n: int) -> float:
    return float(Doubler()(torch.arange(n, dtype=torch.float32)).sum())


def never_called():
    return 0


@dataclass
class Result:
    value: float
    code: Script


def demo(n: int) -> Result:
    code = script(Doubler, double_sum, imports="import torch", settings={"n": n}, run="print(double_sum(n))")
    return Result(double_sum(n), code)


def test_the_script_is_the_source_with_the_settings_and_prints_what_the_demo_computed():
    value, code = demo(5).value, demo(5).code
    assert isinstance(code, Script) and code.origins == (Doubler, double_sum)
    assert code.index("n = 5") < code.index("class Doubler") < code.index("def double_sum") < code.index("print(")
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert float(printed.stdout) == value == 20.0


def test_provenance_sees_classes_and_functions_that_ran_and_names_the_one_that_did_not():
    assert assert_shows_what_ran(demo, 3).value == 6.0
    shown_but_idle = script(double_sum, never_called, run="print(double_sum(3))")

    def lying_demo():
        double_sum(3)
        return shown_but_idle

    with pytest.raises(AssertionError, match="never_called"):
        assert_shows_what_ran(lying_demo)


def test_an_entry_names_itself_in_every_snippet_it_makes_and_keeps_its_example():
    registered = entry(4, entries=3)(demo)
    name = f"{demo.__module__}.{demo.__qualname__}"
    try:
        assert registered(4).code.entry == name and registered(4).value == 12.0
        assert (registered.example, registered.cache_entries, registered.__wrapped__) == ((4,), 3, demo)
        assert demo(4).code.entry == "", "the function itself stays unregistered"
    finally:
        shown.ENTRIES.pop(name)


REGISTERED = all_entries()


def test_every_registered_entry_has_one_check():
    """Registering a demo entry point is what puts its snippet under test: each has a check in tests/snippets."""
    checks = all_checks()
    assert not set(REGISTERED) - set(checks), f"entries without a check: {sorted(set(REGISTERED) - set(checks))}"
    assert not set(checks) - set(REGISTERED), f"checks of no registered entry: {sorted(set(checks) - set(REGISTERED))}"


@pytest.mark.parametrize("name", list(REGISTERED))
def test_each_entry_shows_what_ran_and_its_snippet_prints_its_numbers(name, tmp_path, snippet_server):
    """The entry's example call runs every function its snippet shows; the snippet, run alone, prints what the
    entry's check reads against the result the page draws."""
    fn = REGISTERED[name]
    result = assert_shows_what_ran(fn, *fn.example)
    assert all(code.entry == name for code in scripts_in(result))

    def run(code: str) -> str:
        done = run_alone(code, tmp_path, snippet_server)
        assert done.returncode == 0, done.stderr
        return done.stdout

    all_checks()[name](result, run)
