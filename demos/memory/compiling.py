"""torch.compile on CPU: graph breaks via torch._dynamo.explain, recompilation on new shapes, eager vs inductor.

Dynamo state is process-wide, so every demo here runs under the compiler lock (demos.isolated) and resets
dynamo first. Each takes the server's run slot (demos.guests) first: one heavy run at a time.
"""

import contextlib
import inspect
import io
import textwrap
import time
from dataclasses import dataclass

import torch

from demos.errors import InputError, quoted
from demos.guests import process_slot
from demos.isolated import compiler_in_use
from demos.parsing import count_range, format_shape, parse_shape, text_field
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


PLANTED = {"print": with_print, "data-dependent branch": data_dependent_branch, ".item()": with_item,
           "no break (control)": clean}


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


def count_recompiles(shapes_text: str) -> Recompiles:
    """Compile one function three ways and call it on each shape; count frames dynamo compiled.

    Guards and recompiles depend on shapes, dtypes and devices, not on values, so the inputs are meta tensors:
    a 1024 x 1024 x 1024 input costs no memory and sin/cos on it no time, and the counts are those of real
    tensors of the same shapes (tests/test_memory_compiling.py compares them).
    """
    shapes = parse_shapes(shapes_text)
    inputs = [torch.empty(s, device=INPUT_DEVICE) for s in shapes]  # made before the compiler lock is taken
    compiles, graphs = {}, {}
    with process_slot():
        for label, dynamic in (("dynamic=None (default)", None), ("dynamic=False", False), ("dynamic=True", True)):
            seen = _compiled_graphs(inputs, dynamic)
            compiles[label] = len(seen)
            graphs[label] = tuple(seen)
    code = (
        "import torch\n\n"
        "def f(x):\n    y = x.sin()\n    return y.cos() * 2\n\n"
        "for dynamic in (None, False, True):\n"
        "    torch._dynamo.reset()\n"
        "    compiled = []\n"
        "    def backend(gm, example_inputs):\n"
        "        compiled.append([getattr(t, 'shape', t) for t in example_inputs])\n"
        "        return gm.forward\n"
        "    g = torch.compile(f, backend=backend, dynamic=dynamic)\n"
        f"    for shape in {list(shapes)}:\n"
        f"        g(torch.empty(shape, device={INPUT_DEVICE!r}))  # shapes matter, not values\n"
        "    print(f'dynamic={dynamic}: {len(compiled)} compiles', compiled)\n"
    )
    return Recompiles(shapes, compiles, graphs, code)


def _compiled_graphs(inputs: list[torch.Tensor], dynamic: bool | None, fn=clean) -> list[str]:
    """The input signature of every graph dynamo compiles while fn is called on each input in turn."""
    seen = []

    def backend(gm, example_inputs):
        seen.append(", ".join(_describe(t) for t in example_inputs))
        return gm.forward

    with fresh_dynamo():
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


def strict_compile(shapes_text: str) -> Strict:
    """fullgraph=True on each planted function (a graph break becomes an error), then the shapes under a recompile
    limit one below their count with dynamic=False: the last shape finds the limit hit and runs eagerly."""
    shapes = parse_shapes(shapes_text)
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    inputs = [torch.empty(s, device=INPUT_DEVICE) for s in shapes]
    limit = max(1, len(shapes) - 1)
    with process_slot():
        with fresh_dynamo():
            fullgraph = {name: _fullgraph(fn, x) for name, fn in PLANTED.items()}
        with torch._dynamo.config.patch(recompile_limit=limit):
            compiled = len(_compiled_graphs(inputs, dynamic=False))
    code = (
        "import torch\n\n" + "".join(textwrap.dedent(inspect.getsource(fn)) + "\n" for fn in PLANTED.values())
        + "for fn in (with_print, data_dependent_branch, with_item, clean):\n"
        "    torch._dynamo.reset()\n"
        "    try:\n"
        "        torch.compile(fn, backend='eager', fullgraph=True)(torch.randn(8))\n"
        "        print(fn.__name__, 'one graph')\n"
        "    except torch._dynamo.exc.Unsupported as e:\n"
        "        print(fn.__name__, 'raises', type(e).__name__, str(e).splitlines()[0])\n\n"
        "print('default recompile_limit', torch._dynamo.config.recompile_limit)\n"
        "torch._dynamo.reset()\n"
        "compiled = []\n"
        "def backend(gm, example_inputs):\n"
        "    compiled.append(example_inputs[0].shape)\n"
        "    return gm.forward\n"
        f"with torch._dynamo.config.patch(recompile_limit={limit}):\n"
        "    g = torch.compile(clean, backend=backend, dynamic=False)\n"
        f"    for shape in {list(shapes)}:\n"
        f"        g(torch.empty(shape, device={INPUT_DEVICE!r}))  # past the limit: runs eagerly, a warning logged\n"
        f"print(len(compiled), 'of {len(shapes)} shapes compiled under recompile_limit={limit}')\n"
    )
    return Strict(fullgraph, torch._dynamo.config.recompile_limit, limit, shapes, compiled, code)


def _fullgraph(fn, x: torch.Tensor) -> str:
    with contextlib.redirect_stdout(io.StringIO()):  # the planted print goes nowhere
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(x)
        except torch._dynamo.exc.Unsupported as e:
            return f"raises {type(e).__name__}: {str(e).strip().splitlines()[0]}"
        finally:
            torch._dynamo.reset()
    return "one graph, no error"


def mlp_block(x, w1, w2):
    h = torch.nn.functional.gelu(x @ w1)
    h = h * torch.sigmoid(h) + 0.1 * h
    return torch.nn.functional.layer_norm(h @ w2, (w2.shape[1],))


def time_compile(size: int, repeats: int = 20) -> CompileTiming:
    """Inductor on CPU: compile time once, then median time per call for eager and compiled (after warm-up)."""
    if not 16 <= size <= MAX_SIZE:
        raise InputError(f"Size must be between 16 and {MAX_SIZE}; got {size}.")
    g = torch.Generator().manual_seed(0)
    x, w1, w2 = (torch.randn(size, size, generator=g) / size**0.5 for _ in range(3))
    with fresh_dynamo():
        compiled = torch.compile(mlp_block)
        t0 = time.perf_counter()
        expected, got = mlp_block(x, w1, w2), compiled(x, w1, w2)
        compile_s = time.perf_counter() - t0
        eager_ms = median_ms(lambda: mlp_block(x, w1, w2), repeats, warmup=3)
        compiled_ms = median_ms(lambda: compiled(x, w1, w2), repeats, warmup=3)
    code = (
        "import time, torch\n\n" + textwrap.dedent(inspect.getsource(mlp_block)) + "\n"
        f"g = torch.Generator().manual_seed(0)\n"
        f"x, w1, w2 = (torch.randn({size}, {size}, generator=g) / {size}**0.5 for _ in range(3))\n"
        "compiled = torch.compile(mlp_block)\n"
        "t0 = time.perf_counter(); got = compiled(x, w1, w2); print('first call (compiles)', time.perf_counter() - t0, "
        "'s')\n"
        "diff = (mlp_block(x, w1, w2) - got).abs().max()\n"
        "print(f'largest difference between eager and compiled outputs: {diff:.2e}')\n"
        "for name, fn in (('eager', mlp_block), ('compiled', compiled)):\n"
        "    for _ in range(3): fn(x, w1, w2)  # warm-up\n"
        "    t0 = time.perf_counter()\n"
        f"    for _ in range({repeats}): fn(x, w1, w2)\n"
        f"    print(name, (time.perf_counter() - t0) / {repeats} * 1e3, 'ms')\n"
    )
    return CompileTiming(size, eager_ms, compiled_ms, compile_s, float((expected - got).abs().max()), code)


def dynamo_report(shapes_text: str) -> tuple[tuple[BreakReport, ...], Recompiles, Strict]:
    """The torch.compile tab's dynamo runs in one go (the page runs it in a child, whose dynamo state leaves with
    it): explain() on the planted functions, then recompiles and fullgraph=True for the shapes."""
    parse_shapes(shapes_text)  # bad text is answered before any compiling
    return explain_breaks(), count_recompiles(shapes_text), strict_compile(shapes_text)


BENCH_CASES = {
    "explain planted graph breaks": explain_breaks,
    "count recompiles (3 settings x 3 shapes)": lambda: count_recompiles("8; 16; 32"),
    "inductor compile + timing, 256x256": lambda: time_compile(256),
}
