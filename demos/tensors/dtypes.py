"""dtypes: the promotion matrix from torch.result_type, float formats from torch.finfo, and the silent traps."""

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch

from demos.errors import InputError, quoted
from demos.shown import Script, entry, script
from demos.style import COLORS, base_layout, cell_text
from demos.tensors.common import outcome
from demos.traps import TrapPair, measure

DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "complex64": torch.complex64, "complex128": torch.complex128,
}
DEFAULT_DTYPES = ("uint8", "int64", "float16", "bfloat16", "float32")
SCALARS = {"int": 2, "float": 2.5, "bool": True, "complex": 1j}
DEFAULT_SCALARS = ("int", "float")
CATEGORY_COLORS = {
    "bool": COLORS["idle"], "integer": COLORS["data"], "half": COLORS["temporary"],
    "float": COLORS["activation"], "complex": COLORS["optimizer_state"],
}


@dataclass(frozen=True)
class PromotionResult:
    labels: tuple[str, ...]  # one per operand kind, e.g. "int64 tensor", "int64 0-dim", "Python float"
    results: tuple[tuple[str, ...], ...]  # torch.result_type(row, column), dtype names without "torch."
    code: Script


def operands(dtypes, zero_dim: bool, scalars) -> list[tuple[str, object]]:
    """(label, operand) for each chosen kind: a tensor per dtype, a 0-dim tensor per dtype if asked, Python scalars."""
    ops = [(f"{d} tensor", torch.ones(2, dtype=DTYPES[d])) for d in dtypes]
    if zero_dim:
        ops += [(f"{d} 0-dim", torch.tensor(1, dtype=DTYPES[d])) for d in dtypes]
    ops += [(f"Python {s}", SCALARS[s]) for s in scalars]
    return ops


def result_types(ops) -> list[list[str]]:
    """torch.result_type(a, b) for every pair of operands (a per row, b per column), without "torch."."""
    return [[str(torch.result_type(a, b)).removeprefix("torch.") for _, b in ops] for _, a in ops]


def validate(dtypes, scalars) -> None:
    """Every name must be one torch knows here; at least one tensor dtype."""
    unknown = [d for d in dtypes if d not in DTYPES] + [s for s in scalars if s not in SCALARS]
    if unknown:
        raise InputError(f"Unknown dtype or scalar {quoted(unknown[0])}; choose from {', '.join([*DTYPES, *SCALARS])}.")
    if not dtypes:
        raise InputError("Pick at least one tensor dtype for the promotion matrix.")


@entry(("uint8", "int64", "float16"), True, ("int", "float"))
def promotion(dtypes: tuple[str, ...], zero_dim: bool, scalars: tuple[str, ...]) -> PromotionResult:
    """torch.result_type for every pair of the chosen operands (n-dim tensors, 0-dim tensors, Python scalars)."""
    validate(dtypes, scalars)
    ops = operands(dtypes, zero_dim, scalars)
    code = script(operands, result_types, settings={"DTYPES": DTYPES, "SCALARS": SCALARS, "dtypes": dtypes,
                                                    "zero_dim": zero_dim, "scalars": scalars}, run="""
ops = operands(dtypes, zero_dim, scalars)
for (label, _), row in zip(ops, result_types(ops)):
    print(label, row)""")
    return PromotionResult(tuple(label for label, _ in ops), tuple(map(tuple, result_types(ops))), code)


def category(dtype_name: str) -> str:
    """bool / integer / half (16-bit float) / float / complex."""
    if dtype_name == "bool":
        return "bool"
    if dtype_name.startswith(("int", "uint")):
        return "integer"
    if dtype_name in ("float16", "bfloat16"):
        return "half"
    return "complex" if dtype_name.startswith("complex") else "float"


def promotion_figure(r: PromotionResult) -> go.Figure:
    """Cell (row, column) = dtype of row OP column; colour = its category (grey bool, cyan int, olive half,
    green float, purple complex)."""
    kinds = list(CATEGORY_COLORS)
    z = [[kinds.index(category(d)) for d in row] for row in r.results]
    scale = []
    for i, kind in enumerate(kinds):
        scale += [[i / len(kinds), CATEGORY_COLORS[kind]], [(i + 1) / len(kinds), CATEGORY_COLORS[kind]]]
    hover = [[f"{a}  op  {b}  ->  {d}" for b, d in zip(r.labels, row, strict=True)]
             for a, row in zip(r.labels, r.results, strict=True)]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(r.labels), y=list(r.labels), hovertext=hover, hoverinfo="text", colorscale=scale, zmin=0,
        zmax=len(kinds), showscale=False, xgap=2, ygap=2,
    ))
    cells = [(b, a, d, CATEGORY_COLORS[category(d)])
             for a, row in zip(r.labels, r.results, strict=True) for b, d in zip(r.labels, row, strict=True)]
    fig.add_trace(cell_text(*map(list, zip(*cells, strict=True)), size=11))
    fig.update_yaxes(autorange="reversed", title="left operand")
    fig.update_xaxes(side="top", tickangle=-40, title="right operand")
    return base_layout(fig, height=max(340, 150 + 34 * len(r.labels)))


def finfo_table() -> pd.DataFrame:
    """Range and precision of the float formats, straight from torch.finfo."""
    rows = []
    for name in ("float16", "bfloat16", "float32", "float64"):
        info = torch.finfo(DTYPES[name])
        rows.append({"dtype": name, "bits": info.bits, "max": info.max, "smallest normal": info.tiny,
                     "eps (gap after 1.0)": info.eps, "resolution": info.resolution})
    return pd.DataFrame(rows)


def rounding_step(dtype: torch.dtype = torch.bfloat16) -> tuple[int, float, float]:
    """(significant bits, eps, largest step that vanishes) near 1.0: the gap after 1.0 is eps = 2^-(bits - 1), and
    1 + step rounds to nearest (ties to even), so every step up to eps / 2 rounds back to 1.0."""
    eps = torch.finfo(dtype).eps
    return 1 - int(math.log2(eps)), eps, eps / 2


def overflow_threshold(dtype: torch.dtype = torch.float16) -> tuple[float, float]:
    """(largest finite value, smallest value that rounds to inf): above the largest value the next step would be
    one gap up, so round-to-nearest sends values up to half a gap above it back down, and the half-gap point itself
    (a tie, whose even neighbour is the overflow) to inf."""
    info = torch.finfo(dtype)
    gap = 2.0 ** (math.floor(math.log2(info.max)) - (1 - int(math.log2(info.eps))) + 1)
    return info.max, info.max + gap / 2


def fp16_lesson() -> str:
    """The float16 overflow trap's lesson, its thresholds from torch.finfo."""
    largest, to_inf = overflow_threshold(torch.float16)
    return (f"float16 has 5 exponent bits: its largest value is {largest:.0f}. A value below {to_inf:.0f} rounds "
            f"down to {largest:.0f}; from {to_inf:.0f} up it is inf (so is any product past that), and inf - inf "
            "is nan. bfloat16 keeps float32's 8 exponent bits, which is why it trains without loss scaling.")


def bf16_lesson() -> str:
    """The bf16 trap's lesson, with its numbers from torch.finfo."""
    bits, eps, step = rounding_step(torch.bfloat16)
    return (f"bfloat16 pays for its range with {bits} significant bits: the gap after 1.0 is 1/{round(1 / eps)} "
            f"(its eps), so adding a step of 1/{round(1 / step)} or less to 1.0 rounds back to 1.0. Accumulate "
            "sums and optimizer state in float32.")


def finfo_frame() -> pd.DataFrame:
    """torch.finfo's table as the page shows it: floats to 6 significant digits."""
    return finfo_table().map(lambda v: f"{v:.6g}" if isinstance(v, float) else v)


# ---------------------------------------------------------------- traps


def floor_divide_ints():
    x = torch.tensor([7, -7])
    return {"x // 2": (x // 2).tolist()}  # floor division: -3.5 rounds down to -4


def divide_ints_saying_how():
    x = torch.tensor([7, -7])
    true_div = x / 2  # true division always gives float
    trunc = torch.div(x, 2, rounding_mode="trunc")  # C-style toward zero
    return {"x / 2": true_div.tolist(), "dtype": str(true_div.dtype), "trunc": trunc.tolist()}


def _floor_div_sentence(trap: dict, correct: dict) -> str:
    return (f"`x // 2` on [7, -7] gave {trap['x // 2']}: `//` floors, so -3.5 went down to {trap['x // 2'][1]}, "
            f"where C and CUDA code truncate to {correct['trunc'][1]}. `/` on integer tensors is true division "
            f"({correct['x / 2']}, {correct['dtype']}); `rounding_mode='trunc'` gives {correct['trunc']}.")


@entry()
def floor_division() -> TrapPair:
    """// floors negative integers; / and rounding_mode say what they do."""
    return measure("floordiv", "Integer division and //",
                   ("Trap: `x // 2`", "Correct: `x / 2`, or `torch.div(x, 2, rounding_mode='trunc')`"),
                   (floor_divide_ints, divide_ints_saying_how), _floor_div_sentence)


def add_in_uint8():
    pixels = torch.tensor([250, 100], dtype=torch.uint8)
    return {"pixels + 10": (pixels + 10).tolist()}  # 260 wraps to 4, silently


def add_widened_then_clamp():
    pixels = torch.tensor([250, 100], dtype=torch.uint8)
    return {"pixels + 10": (pixels.to(torch.int16) + 10).clamp(0, 255).tolist()}


def _uint8_sentence(trap: dict, correct: dict) -> str:
    return (f"250 + 10 in uint8 gave {trap['pixels + 10'][0]}: integer arithmetic wraps modulo 2^bits with no "
            f"warning, and uint8 image tensors are the classic case. Widened to int16 first, then clamped: "
            f"{correct['pixels + 10']}.")


@entry()
def uint8_wraparound() -> TrapPair:
    """uint8 arithmetic wraps silently; widen, then clamp."""
    return measure("uint8", "uint8 wrap-around",
                   ("Trap: `pixels + 10` in uint8", "Correct: `(pixels.to(torch.int16) + 10).clamp(0, 255)`"),
                   (add_in_uint8, add_widened_then_clamp), _uint8_sentence)


def square_in_float16():
    x = torch.tensor([300.0, 65519.0, 65520.0], dtype=torch.float16)  # 65519 rounds to 65504, 65520 to inf
    return {"x": x.tolist(), "x * x": (x * x).tolist()}


def square_in_bfloat16():
    x = torch.tensor([300.0, 65519.0, 65520.0], dtype=torch.bfloat16)  # float32's range, fewer digits
    return {"x": x.tolist(), "x * x": (x * x).tolist()}


def _fp16_sentence(trap: dict, correct: dict) -> str:
    return (f"[300, 65519, 65520] became {trap['x']} in float16 and {correct['x']} in bfloat16; squared, "
            f"{trap['x * x']} against {correct['x * x']}. " + fp16_lesson())


@entry()
def float16_overflow() -> TrapPair:
    """float16 overflows past 65504; bfloat16 keeps float32's range."""
    return measure("fp16", "float16 overflow past 65504", ("Trap: float16", "Correct: bfloat16 (or float32)"),
                   (square_in_float16, square_in_bfloat16), _fp16_sentence)


def add_small_step_in_bfloat16():
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    return {"1 + 1e-3": (one + 1e-3).item()}  # bfloat16 eps is 0.0078: the 1e-3 vanishes


def add_small_step_in_float16():
    one = torch.tensor(1.0, dtype=torch.float16)
    return {"1 + 1e-3": (one + 1e-3).item()}  # float16 eps is 0.00098: kept, roughly


def _bf16_sentence(trap: dict, correct: dict) -> str:
    return (f"1 + 1e-3 is {trap['1 + 1e-3']} in bfloat16 and {correct['1 + 1e-3']} in float16. " + bf16_lesson())


@entry()
def bfloat16_precision() -> TrapPair:
    """A small step added to 1.0 vanishes in bfloat16 and survives, roughly, in float16."""
    return measure("bf16", "bfloat16 vs float16 precision: 1 + 1e-3",
                   ("Trap: bfloat16", "Correct: float16, or accumulate in float32"),
                   (add_small_step_in_bfloat16, add_small_step_in_float16), _bf16_sentence)


def sum_in_float32():
    x = torch.tensor([1e8, 1.0, -1e8])  # float32 has ~7 decimal digits
    return {"x.sum()": x.sum().item()}


def sum_reordered_or_in_float64():
    x = torch.tensor([1e8, 1.0, -1e8])
    reordered = torch.tensor([1e8, -1e8, 1.0]).sum().item()
    in_float64 = x.double().sum().item()
    return {"reordered": reordered, "in float64": in_float64}


def _sum_sentence(trap: dict, correct: dict) -> str:
    return (f"[1e8, 1, -1e8].sum() in float32 gave {trap['x.sum()']:g}; reordered it gives "
            f"{correct['reordered']:g}, and in float64 {correct['in float64']:g}. Floating-point addition is not "
            "associative: the order of a reduction (threads, blocks, devices) changes the last digits, or "
            "everything when magnitudes differ this much.")


@entry()
def summation_order() -> TrapPair:
    """The same three numbers summed in float32, reordered, and in float64."""
    return measure("sum", "float32 summation order", ("Trap: `x.sum()` in float32", "Correct: reorder, or sum in "
                   "float64"), (sum_in_float32, sum_reordered_or_in_float64), _sum_sentence)


def tensor_from_ints():
    w = torch.tensor([1, 2])  # Python ints -> int64
    try:
        w.requires_grad_()
        raised = None
    except RuntimeError as err:
        raised = f"RuntimeError: {err}"
    return {"w.dtype": str(w.dtype), "w.requires_grad_()": raised}


def tensor_from_floats():
    w = torch.tensor([1.0, 2.0], requires_grad=True)  # Python floats -> float32
    noise = torch.randn(2)  # randn is float32 too
    return {"w.dtype": str(w.dtype), "randn dtype": str(noise.dtype), "w.requires_grad": w.requires_grad}


def _default_sentence(trap: dict, correct: dict) -> str:
    return (f"`torch.tensor([1, 2])` is {trap['w.dtype']}, so `requires_grad_()` "
            f"{outcome(trap['w.requires_grad_()'])}. `torch.tensor` infers the dtype from the Python values: ints "
            f"give int64, floats the default {correct['w.dtype']}; factories like randn and zeros give "
            f"{correct['randn dtype']}.")


@entry()
def default_int64() -> TrapPair:
    """Integer literals make an int64 tensor, which cannot require grad; float literals make float32."""
    return measure("default", "torch.tensor([1, 2]) is int64",
                   ("Trap: `torch.tensor([1, 2])`", "Correct: `torch.tensor([1.0, 2.0])`"),
                   (tensor_from_ints, tensor_from_floats), _default_sentence)


def write_after_to_same_dtype():
    x = torch.zeros(3)
    y = x.to(torch.float32)  # already float32: returns x itself
    y[0] = 1.0
    return {"y is x": y is x, "x": x.tolist()}


def write_after_copy():
    x = torch.zeros(3)
    y = x.to(torch.float32, copy=True)  # or x.clone()
    y[0] = 1.0
    return {"y is x": y is x, "x": x.tolist()}


def _to_self_sentence(trap: dict, correct: dict) -> str:
    return (f"`x.to(torch.float32)` on a float32 x returned x itself (y is x: {trap['y is x']}), so writing y[0] "
            f"changed x to {trap['x']}. `.to()` is a no-op when dtype and device already match; with `copy=True` "
            f"(or `clone()`) y is a new tensor and x stays {correct['x']}.")


@entry()
def to_returns_self() -> TrapPair:
    """.to() to the dtype a tensor already has returns the tensor itself; copy=True makes a copy."""
    return measure("to_self", ".to() returns self when nothing changes",
                   ("Trap: `y = x.to(torch.float32)`", "Correct: `y = x.to(torch.float32, copy=True)`"),
                   (write_after_to_same_dtype, write_after_copy), _to_self_sentence)


TRAPS = (floor_division, uint8_wraparound, float16_overflow, bfloat16_precision, summation_order, default_int64,
         to_returns_self)  # in the order the tab shows them


# Worst cases allowed by the limits, timed by `python -m bench`.
BENCH_CASES = {
    "20 x 20 promotion matrix, drawn": lambda: promotion_figure(promotion(tuple(list(DTYPES)[:8]), True,
                                                                          tuple(SCALARS))),
}
