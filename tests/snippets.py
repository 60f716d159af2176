"""Find every 'show the code' snippet a page shows, and the numbers on the page beside it.

A crawl opens a page in AppTest, opens each of its sections (demos/registry.py), presses each button once (the
heavy demos wait behind one) and records every call of `ui.show_code` with everything else the page drew at that
moment: charts, tables, metrics and text. `tests/test_snippets.py` runs each snippet alone and compares.
"""

import ast
import base64
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa

from demos.registry import ROOT, by_file
from tests.conftest import open_page, shown_frame

# a number as a person reads it: 3, -0.5, 1e-3, 1.2e+05, 123,651,840; never the digit inside a name such as fc1
_NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+(?![\d])|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w])")
_SPECIAL = re.compile(r"(?<![\w.])[-+−]?(?:inf|nan)(?![\w])")
# a wall-clock measurement: a fresh process cannot reproduce it (the number just before a time unit)
_PERCENT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)%")
_TIMING = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*(?:ms|s|µs|us|ns|seconds|[A-Za-z]+/s)\b")


@dataclass(frozen=True)
class Number:
    """A number and how precisely it was written: a printed 0.395 stands for anything in [0.3945, 0.3955]."""

    value: float
    half_unit: float = 0.0  # half the last written digit; 0 for a number read from chart or table data

    def matches(self, other: "Number") -> bool:
        if np.isnan(self.value) or np.isnan(other.value):
            return bool(np.isnan(self.value) and np.isnan(other.value))
        if np.isinf(self.value) or np.isinf(other.value):
            return self.value == other.value
        slack = 1e-6 * max(abs(self.value), abs(other.value))
        return abs(self.value - other.value) <= self.half_unit + other.half_unit + slack


def parse_number(text: str) -> Number:
    text = text.replace("−", "-").replace(",", "")
    if text.lstrip("+-") in ("inf", "nan"):
        return Number(float(text))
    exponent = Decimal(text).as_tuple().exponent
    return Number(float(text), 0.5 * 10.0 ** min(exponent, 300))


def numbers_in(text: str) -> list[Number]:
    """Every number written in a text (comma-grouped thousands read as one number)."""
    return [parse_number(m.group()) for pattern in (_NUMBER, _SPECIAL) for m in pattern.finditer(text)]


def measured_numbers(line: str) -> list[Number]:
    """The numbers of a line that are wall-clock measurements: followed by a time unit, and the percentages
    beside them (a profiler table's share of time). A row with several timings is a profiler table row: which
    ops make a top-N sorted by time differs from run to run, so its call count is left out with its timings."""
    timings = [n for m in _TIMING.finditer(line) for n in numbers_in(m.group())]
    if not timings:
        return []
    if len(timings) >= 2:
        return numbers_in(line)
    return timings + [n for m in _PERCENT.finditer(line) for n in numbers_in(m.group())]


@dataclass
class Shown:
    """One snippet as a page showed it, and the numbers on the page at that moment."""

    page: str
    view: str
    key: str
    code: str
    page_numbers: list[Number] = field(default_factory=list)


# ---- the numbers a page drew ---------------------------------------------------------------------------------------

def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _json_numbers(obj, out: list, skip=("template",)) -> None:
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:  # plotly's binary array encoding
            array = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            out.extend(Number(float(v)) for v in array)
            return
        if "y" in obj and "x" not in obj and obj.get("type", "scatter") == "scatter":  # x is implicitly 0, 1, 2…
            y = obj["y"]
            n = len(y) if isinstance(y, list) else len(base64.b64decode(y["bdata"])) // np.dtype(y["dtype"]).itemsize
            out.extend(Number(float(i)) for i in range(n))
        for k, v in obj.items():
            if k not in skip:
                _json_numbers(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _json_numbers(v, out)
    elif isinstance(obj, bool):
        return
    elif isinstance(obj, (int, float)):
        out.append(Number(float(obj)))
    elif isinstance(obj, str):
        out.extend(numbers_in(obj))


def _frame_numbers(frame: pd.DataFrame, out: list) -> None:
    for value in [*frame.columns, *frame.index, *frame.to_numpy().ravel()]:
        if isinstance(value, (bool, np.bool_)):
            continue
        if isinstance(value, (int, float, np.integer, np.floating)):
            out.append(Number(float(value)))
        elif isinstance(value, str):
            out.extend(numbers_in(value))
        elif isinstance(value, (list, tuple, np.ndarray)):
            _json_numbers([v.item() if hasattr(v, "item") else v for v in value], out)


def _arrow_frame(data: bytes) -> pd.DataFrame:
    return pa.ipc.open_stream(data).read_all().to_pandas()


def element_numbers(el, out: list) -> None:
    """The numbers one AppTest element shows (code blocks excluded: a snippet's numbers are no evidence)."""
    kind = getattr(el, "type", "")
    proto = getattr(el, "proto", None)
    if kind in ("code", "exception") or proto is None:
        return
    if kind == "dataframe":
        _frame_numbers(el.value, out)
    elif kind == "table":
        _frame_numbers(shown_frame(el.value), out)
    elif kind == "plotly_chart":
        _json_numbers(json.loads(proto.spec), out)
    elif kind == "arrow_vega_lite_chart":
        _json_numbers(json.loads(proto.spec), out)
        for ds in [proto.data, *(d.data for d in proto.datasets)]:
            if ds.data:
                _frame_numbers(_arrow_frame(ds.data), out)
    elif kind == "graphviz_chart":  # DOT's line breaks in a label (\n, \l, \r) are spaces to the reader
        out.extend(numbers_in(re.sub(r"\\[nlr]", " ", proto.spec)))
    elif kind == "metric":  # before the generic branch: a metric's value is a str too, and its delta counts
        out.extend(numbers_in(" ".join([el.label, el.value, el.delta or ""])))
    elif hasattr(el, "value") and isinstance(el.value, str):
        out.extend(numbers_in(el.value))
        out.extend(numbers_in(getattr(el, "label", "") or ""))
    else:
        out.extend(numbers_in(str(proto)))


def page_numbers(at) -> list[Number]:
    out: list[Number] = []
    for root in (at.main, at.sidebar):
        for el in _walk(root):
            element_numbers(el, out)
    return out


# ---- the crawl -----------------------------------------------------------------------------------------------------

def show_code_keys(page_file: str) -> list[re.Pattern]:
    """The `key=` of every ui.show_code call in a page's source, as patterns (an f-string key matches any fill)."""
    tree = ast.parse((ROOT / page_file).read_text())
    keys = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "show_code":
            key = next(k.value for k in call.keywords if k.arg == "key")
            if isinstance(key, ast.Constant):
                keys.append(re.compile(re.escape(key.value)))
            else:
                parts = [re.escape(p.value) if isinstance(p, ast.Constant) else ".+" for p in key.values]
                keys.append(re.compile("".join(parts)))
    return keys


def crawl(page_file: str, monkeypatch, extra_views: tuple = (), messages: list | None = None) -> list[Shown]:
    """Every snippet the page shows: in each section (the page's defaults when it has no tabs), after each button,
    and in any extra view.

    An extra view is (query, widget settings): settings are (kind, key, value), e.g. ("selectbox", "k", "v"),
    applied after the page opens, for widgets that choose which snippet a section shows. The error and warning
    texts each view showed go to `messages`, so a snippet the crawl missed can be explained.
    """
    import pages.ui as ui

    own = show_code_keys(page_file)
    shown: list[Shown] = []
    pending: list[tuple[str, str]] = []
    monkeypatch.setattr(ui, "show_code", lambda code, key, **_: pending.append((key, code)))

    def record(at, view: str) -> None:
        if messages is not None:
            messages.extend(f"{view}: {m.value}" for m in (*at.error, *at.warning, *at.exception))
        numbers = page_numbers(at)
        shown.extend(Shown(page_file, view, key, code, numbers) for key, code in pending
                     if any(p.fullmatch(key) for p in own))  # open_page runs Home first: not this page's
        pending.clear()

    def visit(query: dict, settings: tuple = ()) -> None:
        view = "&".join(f"{k}={v}" for k, v in query.items()) or "defaults"
        at = open_page(page_file, query=query, timeout=600)
        for kind, key, value in settings:
            getattr(at, kind)(key=key).set_value(value)
            view += f", {key}={value}"
        if settings:
            pending.clear()
            at.run()
        record(at, view)
        if messages is not None:
            messages.append(f"{view}: buttons {[b.key for b in at.button]}")
        for button in list(at.button):
            if button.disabled:
                continue
            at.button(key=button.key).click().run()
            record(at, f"{view}, after {button.key}")

    views = [(query, ()) for query in by_file(page_file).sections()]
    for query, settings in [*views, *extra_views]:
        visit(query, settings)
    return shown
