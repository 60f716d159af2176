"""Attention & transformers, Positions and Norms & residuals: each snippet, run alone, prints the numbers its entry
point's figure and sentences show."""

import ast
import dataclasses

import pytest

from demos.transformers import norms, positions
from tests.snippets import checks, fields, linted


def printed(r, run) -> dict:
    """The snippet's `name: value` lines, read back as Python values."""
    return {name: ast.literal_eval(value) for name, value in fields(run(linted(r.code))).items()}


def close(a, b) -> bool:
    """Equal structure, numbers equal to float32 precision (the snippet may sum in another thread order)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-5, abs=1e-6)
    return a == b


@checks(positions.permutation_test)
def permutation_equivariance(r, run):
    shown = printed(r, run)
    assert shown["perm"] == list(r.perm)
    assert close(shown["permuted_outputs"], r.permuted_outputs)
    assert close(shown["outputs_of_permuted"], r.outputs_of_permuted)
    assert close(shown["gap"], r.gap)
    assert close(shown["gaps"], {(kind, mask): gap for kind, mask, gap in r.gaps})
    assert not r.equivariant, "the example runs RoPE: the symmetry is broken"


@checks(positions.encoding_tables)
def positional_tables(t, run):
    shown = printed(t, run)
    for name in ("sinusoidal", "learned", "sinusoidal_dots", "learned_dots", "sinusoidal_diagonal_spread",
                 "learned_diagonal_spread"):
        assert close(shown[name], getattr(t, name)), name


@checks(positions.rope_offsets)
def rope_offsets(o, run):
    shown = printed(o, run)
    for field in dataclasses.fields(o):
        if field.name not in ("positions", "head_dim", "base", "code"):
            assert close(shown[field.name], getattr(o, field.name)), field.name
    assert o.rope_relative


@checks(norms.reduction_axes)
def norm_axes(a, run):
    shown = printed(a, run)
    assert shown["moved"] == {name: [[list(row) for row in sample] for sample in moved] for name, moved in a.moved}
    assert shown["counts"] == dict(a.counts)


@checks(norms.batch_dependence)
def batchnorm_batch_dependence(d, run):
    shown = printed(d, run)
    assert close(shown["outputs"], {name: outputs for name, outputs in d.outputs})
    assert close(shown["spreads"], dict(d.spreads))
    assert close(shown["train_spread_by_size"], dict(d.train_spread_by_size))


@checks(norms.rms_vs_layer)
def rmsnorm_vs_layernorm(r, run):
    shown = printed(r, run)
    for field in dataclasses.fields(r):
        if field.name not in ("features", "offset", "offsets", "code"):
            assert close(shown[field.name], getattr(r, field.name)), field.name


@checks(norms.pre_vs_post)
def prenorm_vs_postnorm(p, run):
    shown = printed(p, run)
    for name, runs in (("pre_norm", p.pre), ("post_norm", p.post)):
        assert close(shown[name], dataclasses.asdict(runs)), name
