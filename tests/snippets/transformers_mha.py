"""Attention & transformers, Multi-head and The block: each snippet, run alone, prints the numbers its view shows."""

import ast
import dataclasses
import math
import re

from demos.transformers import block, multihead
from tests.snippets import checks, fields, linted


def close(printed, shown, tol: float = 1e-6) -> bool:
    """Printed values against the result's: structure and whole numbers exactly, floats to float32 rounding (the
    snippet may run with another thread count)."""
    if isinstance(shown, dict):
        return printed.keys() == shown.keys() and all(close(printed[k], shown[k], tol) for k in shown)
    if isinstance(shown, list | tuple):
        return len(printed) == len(shown) and all(close(p, s, tol) for p, s in zip(printed, shown, strict=True))
    if isinstance(shown, float):
        return math.isclose(printed, shown, rel_tol=tol, abs_tol=tol)
    return printed == shown


def check_printed_facts(result, out: str) -> None:
    """Every `name: value` the snippet printed is a field of the result holding that value (the settings and the
    code are the result's other fields)."""
    printed = {name: ast.literal_eval(value) for name, value in fields(out).items()}
    shown = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name in printed}
    assert printed and shown.keys() == printed.keys()
    for name, value in shown.items():
        assert close(printed[name], value), name


@checks(multihead.head_split)
def head_split(s, run):
    check_printed_facts(s, run(linted(s.code)))
    assert s.misplaced_wrong > 0 and s.misplaced_right == 0, "the example splits 4 heads of 6 tokens: the trap shows"


@checks(multihead.module_check)
def multihead_attention_by_hand(m, run):
    out = run(linted(m.code))
    check_printed_facts(m, out)
    assert "parameter_count" in fields(out) and m.parameter_count == m.formula_count
    assert m.output_diff < 1e-6 and m.each_head_diff < 1e-6 and m.average_diff < 1e-6


@checks(multihead.batch_first_trap)
def batch_first_trap(t, run):
    check_printed_facts(t, run(linted(t.code)))
    assert t.trap_weights_shape == (t.tokens, t.batch, t.batch) and t.max_abs_diff > 0.01


@checks(block.block_equivalence)
def block_by_hand(e, run):
    lines = run(linted(e.code)).splitlines()
    assert len(lines) == len(e.rows) == 6
    for line, (norm_first, name, diff, path) in zip(lines, e.rows, strict=True):
        said = re.fullmatch(r"norm_first=(\w+) (.+): max \|difference\| (\S+) \((.+)\)", line)
        assert said, line
        assert said.group(1) == str(norm_first) and said.group(2) == name and said.group(4) == path
        assert math.isclose(float(said.group(3)), diff, rel_tol=1e-6, abs_tol=1e-6)


@checks(block.block_costs)
def block_costs(c, run):
    check_printed_facts(c, run(linted(c.code)))
    assert c.bytes_layer == c.formula_bytes_layer and c.flops_by_hand == c.formula_flops
