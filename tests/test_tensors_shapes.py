"""The Shape lab against torch itself: each question runs in the lab and, as plain Python, in torch in this test.

The oracle builds the declared tensors itself (real CPU tensors: floats random, integers zero, masks all True, as
the lab assumes; or meta tensors under `torch.device("meta")` for sizes a CPU should not hold) and runs the
expression text with Python, so the lab's grammar and dispatch are checked against torch's own answer.
"""

import math
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F  # noqa: N812

from demos.errors import InputError
from demos.registry import by_slug
from demos.tensors import shape_explain as sx
from demos.tensors import shape_grammar as g
from demos.tensors.shapes import PRESETS, TAB, evaluate, lab_link

# (tensors, expression); groups as the issue lists them. Sizes are small unless the oracle runs on meta ("big").
METHODS = [
    ("x: 2, 3, 4", "x.view(6, 4)"), ("x: 2, 3, 4", "x.view(-1)"), ("x: 2, 3, 4", "x.reshape(4, -1)"),
    ("x: 2, 3, 4", "x.flatten()"), ("x: 2, 3, 4", "x.flatten(1)"), ("x: 2, 12", "x.unflatten(1, (3, 4))"),
    ("x: 2, 3, 4", "x.permute(2, 0, 1)"), ("x: 2, 3, 4", "x.transpose(0, 2)"), ("x: 3, 4", "x.t()"),
    ("x: 2, 3, 4", "x.mT"), ("x: 3, 4", "x.T"), ("x: 1, 3, 1, 4", "x.squeeze()"), ("x: 1, 3, 1, 4", "x.squeeze(2)"),
    ("x: 2, 3", "x.squeeze(0)"), ("x: 3, 4", "x.unsqueeze(1)"), ("x: 3, 1", "x.expand(3, 5)"),
    ("x: 3, 1; y: 3, 6", "x.expand_as(y)"), ("x: 2, 3", "x.repeat(2, 2, 1)"), ("x: 2, 3", "x.tile((2,))"),
    ("x: 7, 3", "x.chunk(3)[2]"), ("x: 7, 3", "x.split(2)[-1]"), ("x: 4, 3", "x.unbind(1)[0]"),
    ("x: 5, 6", "x.narrow(1, 2, 3)"), ("x: 5, 6", "x.select(0, 2)"), ("x: 3, 4", "x.T.contiguous()"),
    ("x: 2, 3, 4, 5", "x.to(memory_format=torch.channels_last)"), ("x: 2, 3, 4", "x.sum(dim=(0, 2))"),
    ("x: 2, 3, 4", "x.mean(1, keepdim=True)"), ("x: 2, 3, 4", "x.max(1).values"), ("x: 2, 3, 4", "x.min(-1)[1]"),
    ("x: 2, 3, 4", "x.amax((0, 1))"), ("x: 2, 3, 4", "x.argmax(dim=2)"), ("x: 2, 3, 4", "x.argmax()"),
    ("x: 2, 3, 4", "x.std(0)"), ("x: 2, 3, 4", "x.softmax(-1)"), ("x: 2, 3, 4", "x.log_softmax(dim=1)"),
    ("x: 2, 3; m: 2, 3 bool", "x.masked_fill(m, 0)"), ("x: 2, 3; m: 3 bool", "x.masked_fill(m, -1.5)"),
    ("x: 4, 5; i: 4, 2 long", "x.gather(1, i)"), ("x: 4, 5; i: 4, 2 long; s: 4, 2", "x.scatter(1, i, s)"),
    ("x: 2, 3", "x.long()"), ("x: 2, 3", "x.half()"), ("x: 2, 3", "x.to(torch.float64)"),
    ("x: 2, 3", "x.view(x.shape[0], -1, 1)"),
]
INDEXING = [
    ("x: 4, 5, 6", "x[0]"), ("x: 4, 5, 6", "x[-1, 2]"), ("x: 4, 5, 6", "x[1:3]"), ("x: 4, 5, 6", "x[:, ::2]"),
    ("x: 4, 5, 6", "x[::3, 1:, -2:]"), ("x: 4, 5, 6", "x[None]"), ("x: 4, 5, 6", "x[:, None, :, None]"),
    ("x: 4, 5, 6", "x[..., 0]"), ("x: 4, 5, 6", "x[0, ..., None]"), ("x: 4, 5; m: 4, 5 bool", "x[m]"),
    ("x: 4, 5; m: 4 bool", "x[m]"), ("x: 4, 5, 6; i: 3 long", "x[i]"), ("x: 4, 5, 6; i: 2, 3 long", "x[:, i]"),
    ("x: 4, 5, 6; i: 3 long; j: 3 long", "x[i, :, j]"), ("x: 4, 5, 6; i: 3 long; j: 3 long", "x[:, i, j]"),
    ("x: 4, 5, 6", "x[[0, 2]]"),
]
FUNCTIONS = [
    ("a: 3, 1; b: 4", "a + b"), ("a: 2, 3; b: 3", "a - b"), ("a: 5, 1, 4; b: 3, 1", "a * b"), ("a: 3; b: 3", "a / b"),
    ("a: 2, 3; b: 2, 3", "a < b"), ("a: 2, 3, 4; b: 4, 5", "a @ b"), ("a: 4; b: 4, 5", "a @ b"),
    ("a: 6, 2, 3, 4; b: 2, 4, 5", "a @ b"), ("a: 2, 3; b: 2, 4", "torch.cat([a, b], dim=1)"),
    ("a: 2, 3; b: 2, 3", "torch.stack((a, b), 1)"), ("a: 2, 3; b: 3, 5", "torch.matmul(a, b)"),
    ("a: 7, 2, 3; b: 7, 3, 5", "torch.bmm(a, b)"), ("a: 2, 3; b: 3, 5", "torch.einsum('ij,jk->ik', a, b)"),
    ("a: 2, 3; c: 2, 3 bool", "torch.where(c, a, 0.0)"), ("a: 3; b: 4", "torch.outer(a, b)"),
    ("a: 3, 1; b: 1, 4", "torch.broadcast_tensors(a, b)[0]"), ("", "torch.randn(3, 4)"),
    ("", "torch.zeros((2, 5), dtype=torch.long)"), ("", "torch.ones(2, 3, 4)[0]"), ("", "torch.arange(10).view(2, 5)"),
    ("x: 2, 3, 4", "torch.transpose(x, 0, 1)"), ("x: 2, 3", "-x"), ("x: 2, 3", "F.softmax(x, dim=0)"),
]
LAYERS = [
    ("x: 4, 5", "nn.Linear(5, 3)(x)"), ("x: 2, 7, 5", "nn.Linear(5, 3)(x)"), ("a: 4, 5; b: 4, 6",
                                                                             "nn.Bilinear(5, 6, 2)(a, b)"),
    ("x: 2, 3, 20", "nn.Conv1d(3, 4, 5, stride=2, padding=1)(x)"), ("x: 2, 3, 9, 9", "nn.Conv2d(3, 4, 3)(x)"),
    ("x: 2, 4, 9, 11", "nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)(x)"),
    ("x: 1, 2, 6, 6, 6", "nn.Conv3d(2, 3, 3, padding=1)(x)"),
    ("x: 2, 3, 10", "nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1)(x)"),
    ("x: 2, 3, 5, 5", "nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)(x)"),
    ("x: 2, 3, 9, 9", "nn.MaxPool2d(2)(x)"), ("x: 2, 3, 9, 9", "nn.MaxPool2d(3, stride=2, ceil_mode=True)(x)"),
    ("x: 2, 3, 10", "nn.AvgPool1d(3)(x)"), ("x: 2, 3, 9, 9", "nn.AvgPool2d(2, padding=1)(x)"),
    ("x: 2, 3, 9, 7", "nn.AdaptiveAvgPool2d((2, 1))(x)"), ("i: 2, 5 long", "nn.Embedding(10, 4)(i)"),
    ("x: 2, 3, 4, 5", "nn.Flatten()(x)"), ("x: 2, 12", "nn.Unflatten(1, (3, 4))(x)"),
    ("x: 2, 3, 4", "nn.LayerNorm(4)(x)"), ("x: 2, 3, 4, 4", "nn.BatchNorm2d(3)(x)"), ("x: 4, 6", "nn.Dropout(0.5)(x)"),
    ("x: 2, 5, 8", "nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x)[0]"),
    ("x: 5, 2, 8", "nn.MultiheadAttention(8, 2)(x, x, x)[1]"),
    ("x: 2, 3, 8, 8", "nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())(x)"),
]
FAILURES = [
    ("a: 2, 3; b: 4", "a + b"), ("a: 2, 3; b: 2, 3", "a @ b"), ("x: 2, 3", "x.T.view(6)"), ("x: 2, 3", "x.view(4, 2)"),
    ("a: 2, 3; b: 3, 3", "torch.cat([a, b], dim=1)"), ("a: 2, 3; b: 2, 4", "torch.stack([a, b])"),
    ("x: 4, 5", "nn.Linear(4, 3)(x)"), ("x: 2, 3, 8, 8", "nn.Conv2d(4, 6, 3)(x)"), ("x: 2, 3, 2, 2",
                                                                                   "nn.Conv2d(3, 6, 3)(x)"),
    ("x: 3, 4", "x[5]"), ("x: 3, 4", "x.transpose(0, 2)"), ("x: 4, 5; m: 3 bool", "x[m]"),
    ("a: 2, 3; b: 2, 3", "torch.bmm(a, b)"), ("x: 2, 3", "x.expand(4, 4)"), ("x: 4, 5", "nn.Embedding(10, 3)(x)"),
    ("x: 2, 3", "x.squeeze(3)"), ("x: 2, 3; w: 3, 4", "x.long() @ w"), ("x: 2, 3, 8, 8",
                                                                        "nn.Conv2d(3, 4, 3, groups=2)(x)"),
]
BIG = [  # the oracle runs these under torch.device("meta")
    ("x: 32, 3, 64, 64", "nn.Conv2d(3, 16, 3, stride=2, padding=1)(x).flatten(1)"),
    ("x: 1000000000, 1000", "x.sum(0)"), ("x: 4096, 50257; y: 50257, 768", "x @ y"),
    ("x: 32, 3, 224, 224", "x.to(memory_format=torch.channels_last).permute(0, 2, 3, 1)"),
    ("x: 1024, 1024, 1024", "x.view(-1, 1024).T"),
]
DOCS = [  # torch.broadcast_shapes / Broadcasting semantics, Tensor.view and torch.transpose doc examples
    ("x: 5, 7, 3; y: 5, 7, 3", "x + y"), ("x: 0; y: 2, 2", "x + y"), ("x: 5, 3, 4, 1; y: 3, 1, 1", "x + y"),
    ("x: 5, 2, 4, 1; y: 3, 1, 1", "x + y"), ("x: 5, 1, 4, 1; y: 3, 1, 1", "x + y"), ("x: 1; y: 3, 1, 7", "x + y"),
    ("x: 4, 4", "x.view(16)"), ("x: 4, 4", "x.view(-1, 8)"), ("a: 1, 2, 3, 4", "a.transpose(1, 2)"),
    ("a: 1, 2, 3, 4", "a.view(1, 3, 2, 4)"), ("x: 2, 3", "torch.transpose(x, 0, 1)"),
]
TABLE = METHODS + INDEXING + FUNCTIONS + LAYERS + FAILURES + DOCS


def oracle_tensors(text: str, device: str) -> dict:
    out = {}
    for d in g.parse_tensors(text):
        dtype = g.DTYPES[d.dtype]
        if device == "meta":
            out[d.name] = torch.empty(d.shape, dtype=dtype, device="meta")
        elif dtype == torch.bool:
            out[d.name] = torch.ones(d.shape, dtype=dtype)
        elif dtype.is_floating_point:
            out[d.name] = torch.randn(d.shape, dtype=dtype)
        else:
            out[d.name] = torch.zeros(d.shape, dtype=dtype)
    return out


def torch_answer(tensors: str, expression: str, device: str = "cpu"):
    """What torch itself gives for the expression text: the output shapes, or the exception type it raises."""
    scope = {"torch": torch, "nn": nn, "F": F, **oracle_tensors(tensors, device)}
    try:
        with torch.device(device):
            out = eval(expression, scope)  # the test's own table, never visitor text
    except Exception as err:
        return type(err).__name__
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    return tuple(tuple(t.shape) for t in outs), str(outs[0].dtype).removeprefix("torch.")


@pytest.mark.parametrize(("tensors", "expression"), TABLE, ids=[e for _, e in TABLE])
def test_the_lab_answers_as_torch_does(tensors, expression):
    r = evaluate(tensors, expression)
    expected = torch_answer(tensors, expression)
    if isinstance(expected, str):
        assert r.shape is None and r.error.startswith(expected), (r.error, expected)
        assert r.clash and r.steps[-1].error == r.error
    else:
        assert r.error is None, r.error
        assert (r.shapes, r.dtype) == expected


@pytest.mark.parametrize(("tensors", "expression"), BIG, ids=[e for _, e in BIG])
def test_billions_of_elements_cost_nothing(tensors, expression):
    r = evaluate(tensors, expression)
    assert (r.shapes, r.dtype) == torch_answer(tensors, expression, "meta")
    assert r.view_source == "meta"


def test_the_table_covers_sixty_questions_and_every_group():
    assert len(TABLE) >= 60
    assert all(len(group) >= 5 for group in (METHODS, INDEXING, FUNCTIONS, LAYERS, FAILURES, DOCS))


def test_steps_report_torchs_strides_and_view_or_copy():
    r = evaluate("x: 3, 4", "x.T.reshape(12).view(2, 6)")
    x = torch.randn(3, 4)
    expected = [x.T, x.T.reshape(12), x.T.reshape(12).view(2, 6)]
    assert [s.outputs[0] for s in r.steps] == [tuple(t.shape) for t in expected]
    assert [s.stride for s in r.steps] == [t.stride() for t in expected]
    assert [s.contiguous for s in r.steps] == [t.is_contiguous() for t in expected]
    assert [s.view for s in r.steps] == ["view", "copy", "view"]  # reshape of a transpose copies
    assert r.view_source == "real"
    big = evaluate("x: 3000, 4000", "x.T.reshape(-1)")
    assert big.view_source == "meta" and [s.view for s in big.steps] == ["view", "copy"]


def test_conv_and_pool_arithmetic_equals_torchs_output():
    for tensors, expression in LAYERS[3:13]:
        r = evaluate(tensors, expression)
        out = r.steps[-1].outputs[0]
        sizes = [int(n) for n in re.findall(r"= (\d+)", r.steps[-1].arithmetic)]
        spatial = len(sizes)
        assert sizes == list(out[-spatial:]), (expression, r.steps[-1].arithmetic)


def test_failures_name_the_clashing_dims():
    assert evaluate("a: 2, 3; b: 4", "a + b").clash == "Aligned from the right, dim -1 (3 vs 4) differ and " \
                                                      "neither size is 1."
    assert "last dim is 5" in evaluate("x: 4, 5", "nn.Linear(4, 3)(x)").clash
    assert "3 channels at dim 1" in evaluate("x: 2, 3, 8, 8", "nn.Conv2d(4, 6, 3)(x)").clash
    assert "(3) and B's second-to-last dim (2)" in evaluate("a: 2, 3; b: 2, 3", "a @ b").clash
    assert "would span dims 0 and 1 of (3, 2)" in evaluate("x: 2, 3", "x.T.view(6)").clash
    assert "Dim 0 differs (2 vs 3)" in evaluate("a: 2, 3; b: 3, 3", "torch.cat([a, b], dim=1)").clash


def test_what_meta_lets_through_the_cpu_run_refuses():
    r = evaluate("x: 2, 3; w: 3, 4", "x.long() @ w")  # meta checks shapes only; a small chain also runs on the CPU
    assert r.view_source == "real" and r.error.startswith("RuntimeError") and "dtypes differ" in r.clash


def test_broadcast_and_matmul_arithmetic_name_the_dims():
    assert evaluate("a: 32; b: 32, 1", "a - b").steps[0].arithmetic == (
        "aligned from the right: (_, 32) vs (32, 1) → (32, 32); dims [0, 1] stretch")
    assert evaluate("a: 6, 2, 3, 4; b: 2, 4, 5", "a @ b").steps[0].arithmetic == (
        "contracts A's last dim (4) with B's second-to-last dim (4); batch dims (6, 2) and (2,) broadcast to (6, 2) "
        "→ (6, 2, 3, 5)")


@pytest.mark.parametrize(("a", "b"), [((8, 3, 4), (8, 4, 5)), ((2, 3, 4), (2, 4, 7))])
def test_a_bmm_that_runs_says_its_batch_dims_are_equal_not_broadcast(a, b):
    said = evaluate(f"a: {', '.join(map(str, a))}; b: {', '.join(map(str, b))}", "torch.bmm(a, b)").steps[0].arithmetic
    assert torch.bmm(torch.zeros(a), torch.zeros(b)).shape[0] == a[0] == b[0]
    assert f"batch dims ({a[0]},) and ({b[0]},) are equal, as bmm requires (it never broadcasts)" in said
    assert "broadcast to" not in said


@pytest.mark.parametrize(("a", "b"), [((1, 3, 4), (8, 4, 5)), ((2, 3, 4), (8, 4, 5))])
def test_a_refused_bmm_blames_unequal_batch_dims_that_matmul_would_broadcast_when_it_can(a, b):
    """(1,) and (8,) broadcast, so 'do not broadcast' would be false: bmm refuses them because it never broadcasts."""
    shapes = f"a: {', '.join(map(str, a))}; b: {', '.join(map(str, b))}"
    said = evaluate(shapes, "torch.bmm(a, b)").clash
    with pytest.raises(RuntimeError):
        torch.bmm(torch.zeros(a), torch.zeros(b))
    assert said.startswith(f"bmm never broadcasts: its batch dims must be equal, and here they are {a[0]} and {b[0]}")
    assert "do not broadcast" not in said
    broadcasts = a[0] == 1 or b[0] == 1
    matmul = evaluate(shapes, "a @ b")
    assert (matmul.error is None) == broadcasts  # what the sentence says matmul does with the same dims
    if not broadcasts:
        assert matmul.clash == f"The batch dims ({a[0]},) and ({b[0]},) do not broadcast: aligned from the right, " \
                               f"{a[0]} vs {b[0]} differ and neither size is 1."


@pytest.mark.parametrize(("tensors", "expression"), [
    ("x: 8, 3, 32, 32", "nn.Conv2d(3, 16, 3)(x.permute(0, 2, 3, 1))"), ("x: 32, 128, 10", "nn.Linear(128, 64)(x)"),
    ("x: 32, 10, 64", "nn.Linear(128, 64)(x)"), ("x: 2, 3", "x.T.view(6)"), ("a: 2, 3; b: 4", "a + b"),
    ("a: 1, 3, 4; b: 8, 4, 5", "torch.bmm(a, b)"),
])
def test_a_step_torch_refused_gets_no_arithmetic(tensors, expression):
    r = evaluate(tensors, expression)
    assert r.error and r.steps[-1].error and r.steps[-1].arithmetic == ""


def test_the_fallback_points_to_torchs_message_where_the_page_shows_it():
    """The page shows the clash sentence first and torch's message after it (pages/tensors.py, lab_verdict)."""
    r = evaluate("x: 3, 4", "x.gather(0, x)")
    assert r.clash == "torch refused inputs of shape (3, 4), (3, 4); its own message, below, says what it checked."
    page = Path("pages/tensors.py").read_text()
    verdict = page[page.index("def lab_verdict"):]
    assert verdict.index("r.clash") < verdict.index("st.code(r.error")


@pytest.mark.parametrize(("tensors", "expression", "viewed", "merged"), [
    ("x: 32, 3, 64", "x.transpose(1, 2).view(32, -1)", lambda: torch.zeros(32, 3, 64).transpose(1, 2), (32, 192)),
    ("x: 4, 6", "x.T.view(24)", lambda: torch.zeros(4, 6).T, (24,)),
    ("x: 4, 6", "x.T.view(2, 12)", lambda: torch.zeros(4, 6).T, (2, 12)),
    ("x: 2, 3, 5", "x.permute(2, 0, 1).view(10, 3)", lambda: torch.zeros(2, 3, 5).permute(2, 0, 1), (10, 3)),
    ("x: 4, 1, 6", "x.transpose(0, 2).view(24)", lambda: torch.zeros(4, 1, 6).transpose(0, 2), (24,)),
])
def test_a_refused_view_names_the_dims_one_stride_cannot_walk(tensors, expression, viewed, merged):
    r = evaluate(tensors, expression)
    x = viewed()
    with pytest.raises(RuntimeError, match="not compatible"):
        x.view(merged)
    found = re.search(r"would span dims (\d+) and (\d+) of (\(.*?\)), whose strides are (\d+) and (\d+)\. .*"
                      r"\((\d+) × (\d+) = (\d+)\); here it is (\d+)", r.clash)
    i, j, shape, si, sj, inner_stride, inner_size, product, outer = found.groups()
    i, j = int(i), int(j)
    assert shape == str(tuple(x.shape)) and (int(si), int(sj)) == (x.stride(i), x.stride(j))
    assert (int(inner_stride), int(inner_size), int(outer)) == (x.stride(j), x.shape[j], x.stride(i))
    assert int(product) == x.stride(j) * x.shape[j] != x.stride(i)
    assert "not contiguous" not in r.clash
    offered = re.search(r"view(\(.*?\)) works on this same tensor", r.clash)
    if all(size < 4 or all(size % f for f in range(2, size)) for size in x.shape):  # no dim splits in two
        assert offered is None
    else:
        split = tuple(int(n) for n in re.findall(r"\d+", offered.group(1)))
        assert x.view(split).data_ptr() == x.data_ptr()  # the split the sentence offers is a view of x
    merged_pair = list(x.shape[:i]) + [x.shape[i] * x.shape[j]] + list(x.shape[j + 1:])
    with pytest.raises(RuntimeError):
        x.view(merged_pair)  # merging exactly the two dims it names is what no stride can do


def test_presets_run_and_the_traps_show_what_they_teach():
    answers = {name: evaluate(*p) for name, p in PRESETS.items()}
    assert answers["(32,) − (32, 1) in a loss"].steps[0].outputs == ((32, 32),)
    assert answers["view after transpose"].error and answers["Linear on the wrong axis"].error
    assert answers["squeeze() on a batch of one"].steps[0].outputs == ((3, 10),)
    assert "3600" in answers["conv output off by one"].clash
    assert len(answers["10-step chain"].steps) == 10


@pytest.mark.parametrize(("fields", "device"), [(PRESETS["CNN head"], "meta"),
                                                (("x: 4, 5; m: 4, 5 bool", "x[m].unsqueeze(0)"), "cpu")])
def test_the_code_shown_runs_and_prints_the_labs_shape(fields, device):
    r = evaluate(*fields)
    assert f"device = '{device}'" in r.code and r.view_source == ("real" if device == "cpu" else "meta")
    printed = []
    exec(compile(r.code, "<lab>", "exec"), {"print": lambda *a: printed.append(a)})  # the engine's own rendering
    assert [p[1]["shapes"] for p in printed] == [s.outputs for s in r.steps] and printed[-1][1]["shapes"] == r.shapes


def test_the_link_reproduces_the_question():
    link = lab_link("x: 2, 3", "x.T @ x")
    assert link.startswith("/tensors?tensors_tab=Shape+lab&") and "x.T+%40+x" in link


def test_the_chain_figure_draws_a_box_per_dim():
    r = evaluate(*PRESETS["CNN head"])
    fig = sx.chain_figure(r)
    boxes = sum(len(s) for _, s, _, _ in sx.chain_rows(r))
    assert len(fig.layout.shapes) == boxes == 4 + 2 + 4 + 2 + 2
    assert sx.changed_dims((32, 3, 64, 64), (32, 12288)) == {1}
    assert sx.box_width(2**20) > sx.box_width(64) > sx.box_width(1) == 1


BAD = {
    ("x: 2, 3", "x.frobnicate()"): "not a tensor op the lab knows",
    ("x: 2, 3", "x.view()"): "view takes 1 to 8 positional arguments here; got 0",
    ("x: 2, 3", "x.transpose(0)"): "transpose takes 2 positional arguments here; got 1",
    ("x: 99999999999999999, 2", "x"): "too large to describe",
    ("x: 2, 3", "(" * 20 + "x" + ")" * 20): "more than 16 levels deep",
    ("x: 2, 3", "x.view(" * 17 + "x" + ")" * 17): "more than 16 levels deep",
    ("x: 2, 3", "x * 1e309"): "the number `1e309` at position 5 is too large",
    ("x: 2, 3", "(x + 1"): "the bracket `(` at position 1 is never closed",
    ("x: 2, 3", "x[0))"): "the bracket `[` at position 2 is closed by `)`",
    ("x: (2, 3", "x"): "never closed",
    ("x: 2, 3", "y + 1"): "`y` is not a declared tensor",
    ("x: 2, 3", "torch.load(x)"): "not a function the lab knows",
    ("x: 2, 3", "nn.LSTM(3, 4)(x)"): "not a layer the lab knows",
    ("x: 2, 3 complex", "x"): "not a dtype here",
    ("x: 2, 3", "torch.zeros(3, device='cuda')"): "picks the device",
    ("x: 2, 3", "x.shape"): "end it in a tensor",
}


@pytest.mark.parametrize(("fields", "reason"), list(BAD.items()), ids=list(map(str, BAD.values())))
def test_bad_input_is_one_sentence_naming_the_field(fields, reason):
    with pytest.raises(InputError) as err:
        evaluate(*fields)
    message = str(err.value)
    assert reason in message and message.startswith(("Expression", "Tensors")), message
    assert message.count(". ") <= 1 and "\n" not in message


TOKENS = ["x", "y", "m", "i", ".", "(", ")", "[", "]", ",", ":", "...", "None", "-1", "0", "1", "2", "3", "64",
          "1e309", "2**40", "+", "-", "*", "/", "@", "<", "==", "view", "reshape", "T", "mT", "sum", "max", "shape",
          "flatten", "permute", "squeeze", "unsqueeze", "expand", "chunk", "values", "dim=", "keepdim=True",
          "torch", "nn", "F", "cat", "stack", "einsum", "'ij,jk->ik'", "Linear", "Conv2d", "Sequential", "zeros",
          "float16", "channels_last", "memory_format=", "stride=", "to", "masked_fill", "gather", "1099511627776"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors=st.one_of(st.text(max_size=40), st.sampled_from(["x: 2, 3; y: 3, 4; m: 2, 3 bool; i: 2 long",
                                                                 "x: 1099511627776, 2; y: 2"])),
       expression=st.one_of(st.text(max_size=60), st.lists(st.sampled_from(TOKENS), max_size=14).map("".join)))
def test_any_text_evaluates_or_raises_the_input_error(tensors, expression):
    try:
        r = evaluate(tensors, expression)
    except InputError as err:
        assert str(err)
        return
    assert (r.shape is None) == (r.error is not None)
    if r.shape is not None:
        assert all(isinstance(d, int) for d in r.shape) and math.prod(r.shape) >= 0


def test_practice_chains_are_graded_by_torch_and_link_to_the_lab():
    from demos.practice.catalog import generated
    from demos.quiz import format_answer

    for seed in range(12):
        it = generated("shape_chain", seed)
        query = dict(it.link[1])
        assert it.link[0] == "tensors" and query["tensors_tab"] == "Shape lab"
        r = evaluate(query["tensors_lab_tensors"], query["tensors_lab_expr"])
        assert format_answer(r.shape) == format_answer(it.question.run())  # the lab and the snippet agree
        assert query["tensors_lab_expr"] in it.question.prompt


def test_the_page_tab_is_the_one_links_name():
    assert {"tensors_tab": TAB} in by_slug("tensors").sections()  # the tabs the page draws (ui.sections)
    assert lab_link("x: 1", "x").count("tensors_tab=Shape+lab") == 1
