"""torch.compile on CPU: graph breaks via torch._dynamo.explain, recompilation on new shapes, eager vs inductor.

Dynamo state is process-wide, so every demo here runs under the compiler lock (demos.isolated) and resets
dynamo first. Each takes the server's run slot (demos.guests) first: one heavy run at a time.
"""

import contextlib
import inspect
import io
import math
import textwrap
import time
from dataclasses import dataclass

import torch

from demos.errors import InputError, quoted
from demos.guests import process_slot
from demos.isolated import compiler_in_use, run_isolated
from demos.parsing import count_range, format_shape, parse_shape, text_field
from demos.shown import entry, print_each, script
from demos.timing import median_ms

MAX_SIZE = 1024
MAX_SHAPES = 6
INPUT_DEVICE = "meta"  # recompiles follow shapes, so the inputs hold no data
EXPLAIN_BUDGET_S = 20  # "Explain and count" at its worst (six 3-d shapes), on 2 cores; python -m bench --memory


def with_print(x):
    y = x.sin()
    print("logging inside a compiled function")
    return y.cos()


def data_dependent_branch(x):
    y = x.sin()
    if y.sum() > 0:
        return y.cos()
    return y.tan()


def with_item(x):
    y = x.sin()
    scale = y.sum().item()
    return y * scale


def clean(x):
    y = x.sin()
    return y.cos() * 2


def planted() -> dict:
    """The functions with a planted graph break (and one without), by the name the page gives them."""
    return {"print": with_print, "data-dependent branch": data_dependent_branch, ".item()": with_item,
            "no break (control)": clean}


PLANTED = planted()


@dataclass(frozen=True)
class BreakReport:
    name: str
    source: str
    graph_count: int
    break_count: int
    reasons: tuple[str, ...]
    graph_code: tuple[str, ...]


@dataclass(frozen=True)
class Recompiles:
    shapes: tuple[tuple[int, ...], ...]
    compiles: dict[str, int]  # "dynamic=None (default)" / "dynamic=False" / "dynamic=True" -> frames compiled
    graphs: dict[str, tuple[str, ...]]  # the input signature of each compiled graph
    code: str


@dataclass(frozen=True)
class CompileTiming:
    size: int
    eager_ms: float
    compiled_ms: float
    compile_s: float
    max_abs_diff: float
    code: str


@contextlib.contextmanager
def fresh_dynamo():
    """One dynamo user at a time, starting from an empty cache."""
    with compiler_in_use():
        torch._dynamo.reset()
        try:
            yield
        finally:
            torch._dynamo.reset()


def explain_breaks() -> tuple[BreakReport, ...]:
    """torch._dynamo.explain on each planted function: graphs, breaks and each break's reason."""
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    reports = []
    with process_slot(), fresh_dynamo():
        for name, fn in PLANTED.items():
            with contextlib.redirect_stdout(io.StringIO()):  # the planted print goes nowhere
                out = torch._dynamo.explain(fn)(x)
            reasons = tuple(_reason(r) for r in out.break_reasons)
            reports.append(BreakReport(name, textwrap.dedent(inspect.getsource(fn)), out.graph_count,
                                       out.graph_break_count, reasons, tuple(g.code.strip() for g in out.graphs)))
    return tuple(reports)


def _reason(r) -> str:
    first = r.reason.strip().splitlines()[0]
    where = r.user_stack[-1] if r.user_stack else None
    return f"{first} (line: `{where.line.strip()}`)" if where is not None and where.line else first


def parse_shapes(text: str) -> tuple[tuple[int, ...], ...]:
    """'8; 16; 32' or '(4, 8); (4, 16)': one shape per ';', each parsed by parse_shape."""
    field = "Input shapes"
    raw = text_field(text, field)
    parts = raw.split(";")
    if not raw or not 1 <= len(parts) <= MAX_SHAPES:
        raise InputError(f"{field}: give {count_range(1, MAX_SHAPES)} shapes separated by ';', such as 8; 16; 32; "
                         f"got {0 if not raw else len(parts)}.")
    if any(not p.strip() for p in parts):
        raise InputError(f"{field} {quoted(raw)}: an entry between two ';' is empty; write each shape once.")
    shapes = tuple(parse_shape(p, max_dims=3, max_dim=MAX_SIZE, field=f"Input shape {i + 1}")
                   for i, p in enumerate(parts))
    for i, shape in enumerate(shapes):
        if len(shape) == 0 or 0 in shape:
            raise InputError(f"Input shape {i + 1}: {format_shape(shape)} needs at least one dimension and no "
                             "zero-size dimension.")
    if len({len(s) for s in shapes}) != 1:
        raise InputError(f"{field}: all shapes need the same number of dimensions; got "
                         f"{', '.join(format_shape(s) for s in shapes)}.")
    return shapes


def recompile_counts(shapes: tuple[tuple[int, ...], ...]) -> dict:
    """Compile one function three ways and call it on each shape; the graphs dynamo compiled for each way.

    Guards and recompiles depend on shapes, dtypes and devices, not on values, so the inputs are meta tensors:
    a 1024 x 1024 x 1024 input costs no memory and sin/cos on it no time, and the counts are those of real
    tensors of the same shapes (tests/test_memory_compiling.py compares them).
    """
    inputs = [torch.empty(s, device=INPUT_DEVICE) for s in shapes]
    compiles, graphs = {}, {}
    for label, dynamic in (("dynamic=None (default)", None), ("dynamic=False", False), ("dynamic=True", True)):
        seen = _compiled_graphs(inputs, dynamic)
        compiles[label] = len(seen)
        graphs[label] = tuple(seen)
    return {"compiles": compiles, "graphs": graphs}


@entry("8; 16")
def count_recompiles(shapes_text: str) -> Recompiles:
    """recompile_counts for the visitor's shapes, with the code that ran."""
    shapes = parse_shapes(shapes_text)
    code = script(clean, _describe, _compiled_graphs, recompile_counts, settings=_shape_settings(shapes),
                  run=print_each("recompile_counts(shapes)"))
    with process_slot(), fresh_dynamo():
        return Recompiles(shapes, **recompile_counts(shapes), code=code)


def _shape_settings(shapes: tuple[tuple[int, ...], ...]) -> dict:
    return {"shapes": shapes, "INPUT_DEVICE": INPUT_DEVICE}


def _compiled_graphs(inputs: list[torch.Tensor], dynamic: bool | None, fn=clean) -> list[str]:
    """The input signature of every graph dynamo compiles while fn is called on each input in turn: each graph
    input as the graph holds it (its placeholder's example value), so a symbolic size reads s77, not the size of
    the call that compiled it."""
    seen = []

    def backend(gm, example_inputs):
        held = [n.meta.get("example_value", x) for n, x in
                zip(gm.graph.find_nodes(op="placeholder"), example_inputs, strict=True)]
        seen.append(", ".join(_describe(t) for t in held))
        return gm.forward

    torch._dynamo.reset()  # an empty cache: count this call's compiles only
    compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
    for x in inputs:
        compiled(x)
    return seen


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return "Tensor(" + ", ".join(str(d) for d in t.shape) + ")"
    return f"SymInt {t}" if isinstance(t, torch.SymInt) else repr(t)


@dataclass(frozen=True)
class Strict:
    fullgraph: dict[str, str]  # planted function -> what torch.compile(fullgraph=True) did with it
    default_limit: int  # torch._dynamo.config.recompile_limit as this torch ships it
    limit: int  # the limit the shapes were run under: one less than their count, so they reach it
    shapes: tuple[tuple[int, ...], ...]
    compiled: int  # frames compiled under `limit` with dynamic=False
    code: str


def fullgraph_and_limit(shapes: tuple[tuple[int, ...], ...]) -> dict:
    """fullgraph=True on each planted function (a graph break becomes an error), then the shapes under a recompile
    limit one below their count with dynamic=False: the last shape finds the limit hit and runs eagerly."""
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    fullgraph = {name: _fullgraph(fn, x) for name, fn in planted().items()}
    inputs = [torch.empty(s, device=INPUT_DEVICE) for s in shapes]
    limit = max(1, len(shapes) - 1)
    with torch._dynamo.config.patch(recompile_limit=limit):
        compiled = len(_compiled_graphs(inputs, dynamic=False))
    return {"fullgraph": fullgraph, "default_limit": torch._dynamo.config.recompile_limit, "limit": limit,
            "compiled": compiled}


@entry("8; 16")
def strict_compile(shapes_text: str) -> Strict:
    """fullgraph_and_limit for the visitor's shapes, with the code that ran."""
    shapes = parse_shapes(shapes_text)
    code = script(with_print, data_dependent_branch, with_item, clean, planted, _fullgraph, _describe,
                  _compiled_graphs, fullgraph_and_limit, imports=COMPILE_IMPORTS, settings=_shape_settings(shapes),
                  run=print_each("fullgraph_and_limit(shapes)"))
    with process_slot(), fresh_dynamo():
        return Strict(shapes=shapes, **fullgraph_and_limit(shapes), code=code)


COMPILE_IMPORTS = """import contextlib
import io

import torch"""


def _fullgraph(fn, x: torch.Tensor) -> str:
    """What torch.compile(fn, fullgraph=True) does on x; a graph it compiles must give eager's output."""
    with contextlib.redirect_stdout(io.StringIO()):  # the planted print goes nowhere
        expected = fn(x)  # eager runs every one of them
        try:
            got = torch.compile(fn, backend="eager", fullgraph=True)(x)
        except torch._dynamo.exc.Unsupported as e:
            return f"raises {type(e).__name__}: {str(e).strip().splitlines()[0]}"
        finally:
            torch._dynamo.reset()
    return "one graph, no error" if torch.allclose(got, expected) else "one graph, but its output differs from eager"


def mlp_block(x, w1, w2):
    h = torch.nn.functional.gelu(x @ w1)
    h = h * torch.sigmoid(h) + 0.1 * h
    return torch.nn.functional.layer_norm(h @ w2, (w2.shape[1],))


def eager_vs_compiled(size: int, repeats: int) -> dict:
    """Inductor on CPU: compile time once, then median time per call for eager and compiled (after warm-up)."""
    g = torch.Generator().manual_seed(0)
    x, w1, w2 = (torch.randn(size, size, generator=g) / size**0.5 for _ in range(3))
    compiled = torch.compile(mlp_block)
    t0 = time.perf_counter()
    expected, got = mlp_block(x, w1, w2), compiled(x, w1, w2)
    compile_s = time.perf_counter() - t0
    return {"eager_ms": median_ms(lambda: mlp_block(x, w1, w2), repeats, warmup=3),
            "compiled_ms": median_ms(lambda: compiled(x, w1, w2), repeats, warmup=3),
            "compile_s": compile_s, "max_abs_diff": float((expected - got).abs().max())}


@entry(16, 3)
def time_compile(size: int, repeats: int = 20) -> CompileTiming:
    """eager_vs_compiled at the visitor's size, with the code that ran."""
    if not 16 <= size <= MAX_SIZE:
        raise InputError(f"Size must be between 16 and {MAX_SIZE}; got {size}.")
    code = script(mlp_block, median_ms, eager_vs_compiled, imports=TIMING_IMPORTS,
                  settings={"size": size, "repeats": repeats}, run=print_each("eager_vs_compiled(size, repeats)"))
    with fresh_dynamo():
        return CompileTiming(size, **eager_vs_compiled(size, repeats), code=code)


def payoff_sentence(t: CompileTiming) -> str:
    """The one-off compile time against what each compiled call saves, from the timing's own numbers."""
    saved = t.eager_ms - t.compiled_ms
    head = f"Compiling took {t.compile_s:.1f} s, once"
    if saved <= 0:
        return (head + f"; here the compiled call ({t.compiled_ms:.3f} ms) is no faster than eager "
                f"({t.eager_ms:.3f} ms) at size {t.size}, so it never pays that back.")
    calls = math.ceil(1000 * t.compile_s / saved)
    return (head + f"; each compiled call saves {saved:.3f} ms ({t.eager_ms:.3f} → {t.compiled_ms:.3f} ms) at size "
            f"{t.size}, so it pays for itself after {calls:,} calls.")


TIMING_IMPORTS = """import statistics
import time

import torch"""


def dynamo_report(shapes_text: str) -> tuple[tuple[BreakReport, ...], Recompiles, Strict]:
    """The torch.compile tab's dynamo runs in one go (the page runs it in a child, whose dynamo state leaves with
    it): explain() on the planted functions, then recompiles and fullgraph=True for the shapes."""
    parse_shapes(shapes_text)  # bad text is answered before any compiling
    return explain_breaks(), count_recompiles(shapes_text), strict_compile(shapes_text)


def dynamo_in_child(shapes_text: str) -> tuple[tuple[BreakReport, ...], Recompiles, Strict]:
    """dynamo_report in a child process: dynamo's state (about 110 MB) leaves with it."""
    return run_isolated(dynamo_report, shapes_text)


def compile_timing_in_child(size: int) -> CompileTiming:
    """time_compile in a child process: inductor's compiler and caches leave with it."""
    return run_isolated(time_compile, size)


BENCH_CASES = {
    "explain planted graph breaks": explain_breaks,
    "count recompiles (3 settings x 3 shapes)": lambda: count_recompiles("8; 16; 32"),
    "inductor compile + timing, 256x256": lambda: time_compile(256),
}
