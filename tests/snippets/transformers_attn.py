"""Attention & transformers, the Attention and From scratch views: each snippet, run alone, prints the numbers its
entry point's figure, sentences and table are drawn from."""

from demos.transformers import attention, scratch
from tests.snippets import checks, fields, linted


@checks(attention.attention_steps)
def attention_steps(r, run):
    printed = fields(run(linted(r.code)))
    assert printed["shapes"] == str(r.shapes)
    assert printed["kernel"] == r.kernel
    assert float(printed["max_abs_diff"]) == r.max_abs_diff
    assert printed["is_causal_diff"] == str(r.is_causal_diff) and r.mask == "causal"
    assert printed["weights"] == str([[round(w, 4) for w in row] for row in r.matrices["weights"]])


@checks(attention.scaling_curves)
def scaling_curves(r, run):
    lines = run(linted(r.code)).splitlines()
    assert lines == [f"{label} {d} {stats}" for label in ("scaled", "unscaled")
                     for d, stats in zip(r.d_k, getattr(r, label), strict=True)]


@checks(attention.fully_masked_rows)
def fully_masked_rows(r, run):
    assert run(linted(r.code)).splitlines() == [str(row) for row in r.rows]
    assert r.row("by hand, masked_fill(-inf)")["nan_output"], "the snippet shows the NaN row, as the page does"


@checks(attention.score_memory)
def score_memory(r, run):
    lines = run(linted(r.code)).splitlines()
    assert lines == [*(f"{dtype} {length} {row}" for dtype, rows in r.by_dtype.items()
                       for length, row in zip(r.lengths, rows, strict=True)),
                     *(f"{backend} {saved}" for backend, saved in r.saved.items())]
    math_saved = r.saved["MATH"]["saved"]
    assert len({n for *_, n, _ in math_saved}) < len(math_saved), "MATH saves two views of one T×T buffer"


@checks(scratch.from_scratch)
def from_scratch(r, run):
    printed = fields(run(linted(r.code)))
    assert printed["shape"] == str(r.shape)
    assert float(printed["max_abs_diff"]) == r.max_abs_diff
    assert float(printed["max_grad_diff"]) == r.max_grad_diff
    assert float(printed["out_scale"]) == r.out_scale and float(printed["grad_scale"]) == r.grad_scale
    assert ("expectation" in printed) == (r.piece == "dropout")


@checks(scratch.scratch_table)
def scratch_table(t, run):
    assert run(linted(t.code)).splitlines() == [str(row) for row in t.rows]
