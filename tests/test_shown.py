"""demos/shown.py builds snippets from the source of what ran; tests/provenance.py tells shown code that ran from
shown code that did not."""

import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from demos.shown import Script, script
from tests.provenance import assert_shows_what_ran


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
