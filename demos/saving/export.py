"""TorchScript (legacy) vs torch.export on a model with data-dependent control flow."""

import re
import time
import warnings
from dataclasses import dataclass

import torch

from demos.errors import InputError
from demos.guests import process_slot
from demos.isolated import compiler_in_use, run_isolated
from demos.saving.models import Branchy, BranchyCond
from demos.shown import entry, print_each, script

MAX_ABS_INPUT = 100.0


def _branchy(seed: int = 0) -> Branchy:
    torch.manual_seed(seed)
    return Branchy().eval()


def example_inputs(sign: float) -> torch.Tensor:
    """A (2, 4) input whose sum has the sign of `sign`, so it picks that branch."""
    return torch.full((2, 4), float(sign))


@dataclass(frozen=True)
class TraceScriptResult:
    rows: tuple[dict, ...]  # input, eager, traced, scripted, traced correct?
    trace_warnings: tuple[str, ...]
    script_warnings: tuple[str, ...]
    traced_code: str
    scripted_code: str
    code: str


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, tuple(dict.fromkeys(f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught))


def trace_and_script(test_value: float) -> dict:
    """Trace with a positive example, script the same model, and run both on a positive and a chosen input."""
    model = _branchy()
    example = example_inputs(+1)
    traced, trace_warnings = _warnings_of(lambda: torch.jit.trace(model, example))
    scripted, script_warnings = _warnings_of(lambda: torch.jit.script(model))
    rows = []
    with torch.no_grad():
        for name, x in (("trace example (positive branch)", example), (f"all entries = {test_value:g}",
                                                                        torch.full((2, 4), float(test_value)))):
            eager, t_out, s_out = model(x), traced(x), scripted(x)
            rows.append({
                "input": name, "branch taken": "h * 2" if x.sum() > 0 else "-h",
                "eager sum": eager.sum().item(), "traced sum": t_out.sum().item(), "scripted sum": s_out.sum().item(),
                "traced correct": bool(torch.allclose(eager, t_out)),
                "scripted correct": bool(torch.allclose(eager, s_out)),
            })
    return {"rows": tuple(rows), "trace_warnings": trace_warnings, "script_warnings": script_warnings,
            "traced_code": traced.code, "scripted_code": scripted.code}


@entry(-3.0)
def trace_vs_script(test_value: float) -> TraceScriptResult:
    """trace_and_script at the visitor's input, with the code that ran."""
    if not -MAX_ABS_INPUT <= test_value <= MAX_ABS_INPUT:
        raise InputError(f"The test input must be between -{MAX_ABS_INPUT:g} and {MAX_ABS_INPUT:g}; got {test_value}.")
    code = script(Branchy, _branchy, example_inputs, _warnings_of, trace_and_script, imports=TRACE_IMPORTS,
                  settings={"test_value": test_value}, run=print_each("trace_and_script(test_value)"))
    return TraceScriptResult(**trace_and_script(test_value), code=code)


@dataclass(frozen=True)
class ExportResult:
    branch_error: str  # torch.export on the Python `if`
    graph_code: str  # the ExportedProgram's graph module with torch.cond
    checks: tuple[dict, ...]  # batch size, sign, max abs diff vs eager
    seconds: float
    dynamic_error: str  # a batch outside the Dim's range
    code: str


def _short_error(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: " + "\n".join(lines[:3])


def export_with_cond() -> dict:
    """torch.export fails on the `if`, succeeds with torch.cond and a dynamic batch Dim; outputs checked."""
    model = _branchy()
    x = example_inputs(+1)
    try:
        torch.export.export(model, (x,))
        branch_error = ""
    except Exception as err:  # torch raises a data-dependent guard error (a UserError subclass)
        branch_error = _short_error(err)
    cond_model = BranchyCond().eval()
    cond_model.load_state_dict(model.state_dict())
    batch = torch.export.Dim("batch", min=1, max=64)
    start = time.perf_counter()
    program = torch.export.export(cond_model, (x,), dynamic_shapes={"x": {0: batch}})
    seconds = time.perf_counter() - start
    exported = program.module()
    checks = []
    with torch.no_grad():
        for n in (1, 8, 64):
            for sign in (+1, -1):
                xi = example_inputs(sign)[:1].expand(n, 4).contiguous()
                diff = (exported(xi) - model(xi)).abs().max().item()
                checks.append({"batch": n, "branch": "h * 2" if sign > 0 else "-h", "max |exported - eager|": diff})
    try:
        exported(torch.ones(65, 4))
        dynamic_error = ""
    except Exception as err:  # the guard on the Dim's range
        dynamic_error = _short_error(err)
    graph = re.sub(r"\n\s*\n", "\n", program.graph_module.code.strip())
    return {"branch_error": branch_error, "graph_code": graph, "checks": tuple(checks), "seconds": seconds,
            "dynamic_error": dynamic_error}


@entry()
@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def export_demo() -> ExportResult:
    """export_with_cond, with the code that ran."""
    code = script(Branchy, BranchyCond, _branchy, example_inputs, _short_error, export_with_cond,
                  imports=EXPORT_IMPORTS, run=print_each("export_with_cond()"))
    with compiler_in_use():  # a fork for an isolated run waits until export is done (demos/isolated.py)
        return ExportResult(**export_with_cond(), code=code)


def export_in_child() -> ExportResult:
    """export_demo in a child process: torch.export's state leaves with it."""
    return run_isolated(export_demo)


TRACE_IMPORTS = """import warnings

import torch
from torch import nn"""

EXPORT_IMPORTS = """import re
import time

import torch
from torch import nn"""

