"""demos/shown.py builds snippets from the source of what ran; tests/provenance.py tells shown code that ran from
shown code that did not."""

import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from demos.registry import ROOT
from demos.shown import Script, script
from tests import test_shown_core, test_shown_systems
from tests.provenance import assert_shows_what_ran, show_code_keys


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


def test_every_show_code_call_in_the_app_has_a_per_demo_test():
    """Each `ui.show_code` call (found in the source, so a new one cannot be missed) is mapped to the test that
    calls its demo through assert_shows_what_ran and runs the snippet it shows."""
    maps = {test_shown_core: test_shown_core.TESTED_BY, test_shown_systems: test_shown_systems.TESTED_BY}
    tested = {file: (module, keys) for module, by_file in maps.items() for file, keys in by_file.items()}
    sources = sorted(str(f.relative_to(ROOT)) for f in (ROOT / "pages").rglob("*.py"))
    calling = {f: {k.pattern.replace(".+", "{}") for k in show_code_keys(f)} for f in sources}
    assert {f for f, keys in calling.items() if keys} == set(tested)
    for file, (module, keys) in tested.items():
        assert calling[file] == {re.sub(r"\{[^}]*\}", "{}", key) for key in keys}, file
        missing = [name for name in keys.values() if not callable(getattr(module, name, None))]
        assert not missing, f"{file}: no test named {missing} in {module.__name__}"
