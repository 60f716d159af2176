"""Attention & transformers, Embeddings & dropout and Sequences: each snippet, run alone, prints the numbers its
figure and sentences show."""

import ast
import dataclasses

from demos.transformers import embeddings, sequences
from tests.snippets import checks, fields, linted


def printed_as_shown(result, run, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Run the linted snippet; every `name: value` it prints must be the result's field of that name, as text."""
    shown = fields(run(linted(result.code)))
    values = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    for name, text in shown.items():
        if name not in skip:
            assert text == str(values[name]), (name, text, values[name])
    return shown


@checks(embeddings.embedding_lookup)
def embedding_lookup(r, run):
    shown = printed_as_shown(r, run)
    assert set(shown) == {"ids", "weight", "one_hot", "looked_up", "lookup_equals_product", "max_abs_diff",
                          "float_index_error", "tied_same_object", "params_tied", "params_untied",
                          "tied_logits_max_diff"}
    assert shown["float_index_error"].startswith("RuntimeError: Expected tensor for argument #1 'indices'")


@checks(embeddings.padding_gradient)
def padding_idx_gradient(r, run):
    shown = printed_as_shown(r, run)
    assert set(shown) == {"padding_idx", "padding_row", "occurrences", "grad_with_padding_idx", "grad_without",
                          "padding_output_max"}
    assert ast.literal_eval(shown["grad_with_padding_idx"])[r.padding_idx] == 0.0


@checks(embeddings.dropout_expectation)
def dropout_expectation(r, run):
    shown = printed_as_shown(r, run)
    assert {"train_out", "eval_out", "mean_scaled", "mean_mask", "curve_scaled"} <= set(shown)


@checks(embeddings.functional_dropout_trap)
def functional_dropout_trap(r, run):
    shown = fields(run(linted(r.code)))
    assert {name: ast.literal_eval(text) for name, text in shown.items()} == {
        row.module: {"train_zeroed": row.train_zeroed, "eval_zeroed": row.eval_zeroed,
                     "eval_equals_input": row.eval_equals_input} for row in r.rows}


@checks(sequences.rnn_shapes)
def rnn_shapes(r, run):
    shown = printed_as_shown(r, run)
    assert {"output_shape", "h_n_shape", "weight_shapes", "output_seq0", "h_n_seq0"} <= set(shown)


@checks(sequences.padding_vs_packing)
def padding_vs_packing(r, run):
    shown = printed_as_shown(r, run)
    assert {"padded_vs_alone", "packed_vs_alone", "batch_sizes", "enforce_sorted_error"} <= set(shown)


@checks(sequences.recurrence_vs_attention)
def recurrence_vs_attention(r, run):
    """Times differ from run to run: the steps, calls and lengths must match, the times be positive."""
    shown = {name: ast.literal_eval(text) for name, text in fields(run(linted(r.code))).items()}
    assert (shown["lengths"], shown["lstm_steps"], shown["attention_calls"]) == (
        r.lengths, r.lstm_steps, r.attention_calls)
    assert max(shown["unrolled_max_diff"]) < 1e-5
    assert len(shown["lstm_ms"]) == len(shown["attention_ms"]) == len(r.lengths)
    assert all(t > 0 for t in shown["lstm_ms"] + shown["attention_ms"])
