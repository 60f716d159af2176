"""Embeddings & dropout and Sequences (Attention & transformers page): every number equals what torch computes when
asked directly, every sentence says what its numbers say, bad input is one clean sentence, and both tabs run."""

import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pack_sequence

from demos.errors import InputError
from demos.transformers import embeddings as emb
from demos.transformers import sequences as seq
from demos.transformers.figures import embeddings as emb_figs
from demos.transformers.figures import sequences as seq_figs
from tests.conftest import assert_clean, open_page
from tests.messages import check_message

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- embeddings: oracle ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vocab, dim, ids, seed", [(8, 6, "3, 1, 4, 1, 5, 0, 0", 0), (2, 2, "1", 3),
                                                   (32, 16, "31, 0, 7, 7, 7, 12, 30, 1, 2, 3, 4, 5", 9)])
def test_lookup_reads_the_rows_of_the_table(vocab, dim, ids, seed):
    r = emb.embedding_lookup(vocab, dim, ids, seed)
    torch.manual_seed(seed)
    table = nn.Embedding(vocab, dim).weight.detach()
    index = [int(i) for i in ids.split(",")]
    assert r.ids == tuple(index)
    assert torch.allclose(torch.tensor(r.weight), table, atol=5e-5)
    assert torch.allclose(torch.tensor(r.looked_up), table[index], atol=5e-5), "row ids[t] at position t"
    assert r.one_hot == tuple(tuple(float(c == i) for c in range(vocab)) for i in index)
    assert r.lookup_equals_product and r.max_abs_diff == 0.0
    assert (r.params_tied, r.params_untied) == (vocab * dim, 2 * vocab * dim)
    assert r.tied_same_object and r.tied_logits_max_diff == 0.0


def test_float_index_error_is_torchs_own_message():
    r = emb.embedding_lookup()
    with pytest.raises(RuntimeError) as err:
        nn.Embedding(8, 6)(torch.tensor([3.0, 1.0]))
    assert r.float_index_error == f"RuntimeError: {err.value}"
    assert "Long, Int" in r.float_index_error


@pytest.mark.parametrize("ids, padding_idx", [("3, 1, 4, 1, 5, 0, 0", 0), ("2, 2, 2", 2), ("1, 3", 0),
                                              ("7, 7, 6, 0", 7)])
def test_padding_row_gets_no_gradient_and_the_rest_get_the_summed_upstream(ids, padding_idx):
    vocab, dim, seed = 8, 6, 4
    r = emb.padding_gradient(vocab, dim, ids, padding_idx, seed)
    index = torch.tensor([int(i) for i in ids.split(",")])
    torch.manual_seed(seed)
    nn.Embedding(vocab, dim, padding_idx=padding_idx)
    nn.Embedding(vocab, dim)  # the demo builds both tables before drawing the upstream gradient
    upstream = torch.randn(len(index), dim)
    summed = torch.zeros(vocab, dim).index_add_(0, index, upstream)  # d(sum of out * upstream) / d(row v)
    assert torch.allclose(torch.tensor(r.grad_without), summed.norm(dim=1), atol=1e-5)
    summed[padding_idx] = 0
    assert torch.allclose(torch.tensor(r.grad_with_padding_idx), summed.norm(dim=1), atol=1e-5)
    assert r.grad_with_padding_idx[padding_idx] == 0.0
    assert r.padding_row == (0.0,) * dim and r.padding_output_max == 0.0
    assert r.occurrences == tuple(torch.bincount(index, minlength=vocab).tolist())


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_scaling_and_expectation(p):
    r = emb.dropout_expectation(p, 100_000, 2)
    torch.manual_seed(2)
    expected = nn.Dropout(p)(torch.ones(6, 16))
    assert torch.allclose(torch.tensor(r.train_out), expected, atol=5e-5)
    kept = 1 / (1 - p)
    assert all(v == 0 or v == pytest.approx(kept, abs=1e-4) for v in r.train_values)
    assert r.eval_out == ((1.0,) * 16,) * 6 and r.eval_equals_input
    assert abs(r.mean_scaled - 1) < 5 * r.standard_error, "the scaled mean is the input, up to sampling noise"
    assert r.mean_scaled == pytest.approx(r.mean_mask * kept, rel=1e-5), "output = mask / (1 - p)"
    assert abs(r.mean_mask - (1 - p)) < 0.01
    assert r.curve_at[-1] == r.draws and r.curve_scaled[-1] == pytest.approx(r.mean_scaled)
    assert r.curve_mask[-1] == pytest.approx(r.mean_mask)


def test_dropout_at_zero_keeps_everything():
    r = emb.dropout_expectation(0.0, 1_000, 0)
    assert r.train_values == (1.0,) and r.train_zeroed == 0.0 and r.mean_scaled == 1.0 and r.mean_mask == 1.0


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_functional_dropout_without_training_still_drops_in_eval(p):
    r = emb.functional_dropout_trap(p, 5)
    x = torch.ones(10_000)

    class Direct(nn.Module):
        def forward(self, x):
            return F.dropout(x, p)

    model = Direct().eval()
    torch.manual_seed(0)
    direct = float((model(x) == 0).float().mean())
    trap = r.row("FunctionalDefault")
    assert abs(trap.eval_zeroed - p) < 0.03 and abs(direct - p) < 0.03 and not trap.eval_equals_input
    for name in ("DropoutModule", "FunctionalWithTraining"):
        assert r.row(name).eval_zeroed == 0.0 and r.row(name).eval_equals_input
    assert all(abs(row.train_zeroed - p) < 0.03 for row in r.rows)


# ---- embeddings: sentences ---------------------------------------------------------------------------------------


def test_lookup_sentences_read_the_result():
    r = emb.embedding_lookup(8, 6, "5, 2, 5", 0)
    assert "bit for bit equal" in emb.lookup_sentence(r) and "3 × 8" in emb.lookup_sentence(r)
    assert "rows 2, 5 of the table" in emb.lookup_sentence(r)
    for ids, rows in (("1", "row 1 of the table"), ("3, 3, 3", "row 3 of the table"), ("0, 7", "rows 0, 7 of")):
        assert rows in emb.lookup_sentence(emb.embedding_lookup(8, 6, ids, 0)), ids  # one distinct id: 'row'
    assert emb.float_index_sentence(r).startswith("The same ids as floats are refused")
    tying = emb.tying_sentence(r)
    assert "counts 48 numbers instead of 96" in tying and "(/modules?modules_tab=Weight+sharing)" in tying
    differ = dataclasses.replace(r, lookup_equals_product=False, max_abs_diff=0.5, float_index_error="")
    assert "different (max |difference| 0.5)" in emb.lookup_sentence(differ)
    assert emb.float_index_sentence(differ) == "`emb(ids.float())` ran without an error on this torch version."


def test_padding_sentence_follows_the_measured_gradients():
    r = emb.padding_gradient(8, 6, "3, 0, 0, 0", 0, 1)
    text = emb.padding_sentence(r)
    assert "Row 0 is looked up 3 times" in text and f"{r.grad_without[0]:.4g}" in text
    assert "it is **0**: the padding vector never trains" in text and "3 padding positions embed to zero" in text
    assert "max difference 0)" in text
    absent = emb.padding_sentence(emb.padding_gradient(8, 6, "3, 1", 0, 1))
    assert absent.startswith("Row 0 is not among the ids")
    once = emb.padding_sentence(emb.padding_gradient(8, 6, "3, 2", 2, 1))
    assert "looked up 1 time." in once and "1 padding position embed" in once
    leaky = dataclasses.replace(r, grad_with_padding_idx=(0.3,) + r.grad_with_padding_idx[1:])
    assert "the padding row still got a gradient" in emb.padding_sentence(leaky)


@pytest.mark.parametrize("p", [0.0, 0.25, 0.9])
def test_dropout_sentences_read_the_result(p):
    r = emb.dropout_expectation(p, 10_000, 0)
    mask = emb.mask_sentence(r)
    assert f"{r.train_zeroed:.0%} of the 96 ones became 0" in mask and "returns x itself" in mask
    assert ("the rest became" in mask) == any(v != 0 for v in r.train_values)
    mean = emb.expectation_sentence(r)
    assert f"**{r.mean_scaled:.4f}**" in mean and f"averages {r.mean_mask:.4f}" in mean and "10,000 draws" in mean
    trap = emb.trap_sentence(emb.functional_dropout_trap(p, 0))
    assert trap.startswith("At p = 0 no module drops") == (p == 0)


def test_trap_sentence_states_the_measured_fractions():
    r = emb.functional_dropout_trap(0.5, 0)
    text = emb.trap_sentence(r)
    assert f"still zeroed **{r.row('FunctionalDefault').eval_zeroed:.1%}**" in text
    assert "zeroed 0.0% and 0.0% in eval()" in text


# ---- embeddings: validation --------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, words", [
    (lambda: emb.embedding_lookup(1, 6), "Vocabulary size must be between 2 and 32; got 1."),
    (lambda: emb.embedding_lookup(8, 17), "Embedding size must be between 2 and 16; got 17."),
    (lambda: emb.embedding_lookup(8, 6, "3, 8"), "Token ids, entry 2: 8 is out of range; it must be from 0 to 7."),
    (lambda: emb.embedding_lookup(8, 6, "1.5"), "Token ids, entry 1: 1.5 is not a whole number."),
    (lambda: emb.embedding_lookup(8, 6, ",".join("1" * 13)), "Token ids: needs 1 to 12 numbers; got 13."),
    (lambda: emb.embedding_lookup(8, 6, "x"), "Token ids"),
    (lambda: emb.embedding_lookup(8, 6, "1", -1), "Seed must be between 0 and 9999; got -1."),
    (lambda: emb.padding_gradient(8, 6, "1", 8), "padding_idx must be a row of the table, from 0 to 7; got 8."),
    (lambda: emb.dropout_expectation(0.95), "Dropout p must be one of 0, 0.1,"),
    (lambda: emb.dropout_expectation(0.5, 7), "Draws must be one of 100, 1,000, 10,000, 100,000; got 7."),
    (lambda: emb.functional_dropout_trap(1.0), "Dropout p must be one of"),
])
def test_embedding_inputs_are_refused_with_one_sentence(call, words):
    with pytest.raises(InputError) as err:
        call()
    assert words in str(err.value)
    check_message(str(err.value), "")


TEXT = (st.text(max_size=60) | st.from_regex(r"[\d\s,.()\[\]e+-]{0,30}", fullmatch=True)
        | st.sampled_from(["__import__('os')", "![t](http://x)", "`x`", "3,,4", "1e39", "nan", "-inf", "", " "]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_any_ids_or_lengths_text_is_read_or_a_clean_input_error(text):
    for read in (lambda t: emb.read_ids(t, 8), seq.read_lengths):
        try:
            values = read(text)
        except InputError as err:
            check_message(str(err), text)
        else:
            assert values and all(isinstance(v, int) for v in values)


# ---- sequences: oracle -------------------------------------------------------------------------------------------


SHAPE_CASES = [("LSTM", 2, True, True, 3, 6, 5, 4), ("GRU", 1, False, False, 2, 7, 3, 5),
               ("RNN", 3, True, False, 4, 1, 16, 16), ("LSTM", 1, False, True, 1, 12, 1, 1),
               ("RNN", 1, True, True, 2, 3, 2, 1)]


@pytest.mark.parametrize("cell, layers, bidirectional, batch_first, batch, length, input_size, hidden", SHAPE_CASES)
def test_shapes_are_read_from_the_module(cell, layers, bidirectional, batch_first, batch, length, input_size, hidden):
    r = seq.rnn_shapes(cell, layers, bidirectional, batch_first, batch, length, input_size, hidden, seed=3)
    d = 2 if bidirectional else 1
    bt = (batch, length) if batch_first else (length, batch)
    assert r.input_shape == (*bt, input_size)
    assert r.output_shape == (*bt, d * hidden), "output: the last layer, both directions side by side"
    assert r.h_n_shape == (layers * d, batch, hidden), "h_n keeps the batch in dim 1 whatever batch_first says"
    assert r.c_n_shape == ((layers * d, batch, hidden) if cell == "LSTM" else None)
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[cell]
    shapes = dict(r.weight_shapes)
    assert shapes["weight_ih_l0"] == (gates * hidden, input_size)
    assert shapes["weight_hh_l0"] == (gates * hidden, hidden)
    assert all(shapes[f"weight_ih_l{k}"] == (gates * hidden, d * hidden) for k in range(1, layers))
    torch.manual_seed(3)
    module = getattr(nn, cell)(input_size, hidden, num_layers=layers, bidirectional=bidirectional,
                               batch_first=batch_first)
    x = torch.randn(batch, length, input_size) if batch_first else torch.randn(length, batch, input_size)
    with torch.no_grad():
        output, state = module(x)
    h_n = state[0] if cell == "LSTM" else state
    first = output[0] if batch_first else output[:, 0]
    assert torch.allclose(torch.tensor(r.output_seq0), first, atol=5e-5)
    assert torch.allclose(torch.tensor(r.h_n_seq0), h_n[:, 0], atol=5e-5)
    assert r.forward_h_n_is_last_output and r.backward_h_n_is_first_output is (True if bidirectional else None)


@pytest.mark.parametrize("cell, lengths", [("GRU", "5, 3, 2, 5"), ("LSTM", "2, 7"), ("RNN", "4, 4, 1"),
                                           ("LSTM", "6, 6")])
def test_packed_h_n_equals_each_sequence_alone_and_padded_does_not(cell, lengths):
    r = seq.padding_vs_packing(cell, lengths, 1)
    lens = [int(n) for n in lengths.split(",")]
    torch.manual_seed(1)
    rnn = getattr(nn, cell)(3, 4, batch_first=True)
    seqs = [torch.randn(n, 3) for n in lens]
    with torch.no_grad():
        _, state = rnn(pack_sequence(seqs, enforce_sorted=False))  # packed without going through padding
        h_n = (state[0] if cell == "LSTM" else state)[-1]
        alone = []
        for s in seqs:
            _, state = rnn(s[None])
            alone.append((state[0] if cell == "LSTM" else state)[-1, 0])
    assert torch.allclose(torch.tensor(r.h_packed), h_n, atol=5e-5)
    assert torch.allclose(torch.tensor(r.h_alone), torch.stack(alone), atol=5e-5)
    assert max(r.packed_vs_alone) < 1e-6
    for n, diff in zip(lens, r.padded_vs_alone, strict=True):
        assert (diff > 1e-3) if n < max(lens) else (diff < 1e-6), (n, diff)
    assert r.batch_sizes == tuple(sum(n > t for n in lens) for t in range(max(lens)))
    assert r.padded_shape == (len(lens), max(lens), 3)


def test_enforce_sorted_message_is_torchs_own():
    r = seq.padding_vs_packing("GRU", "2, 5, 3", 0)
    with pytest.raises(RuntimeError) as err:
        torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(3, 5, 1), torch.tensor([2, 5, 3]), batch_first=True)
    assert r.enforce_sorted_error == str(err.value) and "decreasing order" in r.enforce_sorted_error
    assert r.sorted_indices == (1, 2, 0)
    assert seq.padding_vs_packing("GRU", "5, 3, 3", 0).enforce_sorted_error == ""


def test_timing_counts_sequential_steps_and_measures_both_layers():
    r = seq.recurrence_vs_attention(16, (4, 16, 64), 2, 0)
    assert r.lstm_steps == (4, 16, 64) and r.attention_calls == (1, 1, 1)
    assert max(r.unrolled_max_diff) < 1e-5, "the unrolled LSTMCell loop is the LSTM"
    assert all(t > 0 for t in r.lstm_ms + r.attention_ms)
    lstm = nn.LSTM(16, 16, batch_first=True)
    x = torch.randn(1, 5, 16)
    assert seq.unrolled_steps(lstm, x)[0] == 5
    assert seq.attention_calls(nn.MultiheadAttention(16, 4, batch_first=True), x) == 1


# ---- sequences: sentences ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SHAPE_CASES)
def test_shape_sentences_read_the_result(case):
    r = seq.rnn_shapes(*case)
    text = seq.shapes_sentence(r)
    assert f"**output {r.output_shape}**" in text and f"**h_n {r.h_n_shape}**" in text
    assert ("c_n has the same shape" in text) == (r.cell == "LSTM")
    assert ("(batch, time" in text) == r.batch_first
    match = seq.match_sentence(r)
    columns = "column" if r.hidden == 1 else f"{r.hidden} columns"  # hidden 1: one column, said in the singular
    assert f"first {columns}: equal, bit for bit" in match
    assert ("Dashed" in match) == r.bidirectional
    if r.bidirectional:
        assert ("`output[:, -1]`" in match) == r.batch_first and f"last {columns}: equal, bit for bit" in match
    assert " 1 columns" not in match
    gates = seq.gate_sentence(r)
    shape = dict(r.weight_shapes)["weight_ih_l0"]
    assert f"`weight_ih_l0` is {shape}" in gates
    n = {"RNN": 1, "LSTM": 4, "GRU": 3}[r.cell]
    assert n * r.hidden == shape[0]
    said_gates = "1 gate" if n == 1 else f"{n} gates"
    said_rows = "1 row" if shape[0] == 1 else f"{shape[0]} rows"
    assert f"{said_gates} × hidden {r.hidden} = {said_rows}" in gates


def test_packing_sentences_follow_the_measured_differences():
    r = seq.padding_vs_packing("GRU", "5, 3, 2, 5", 0)
    text = seq.packing_sentence(r)
    assert "after sequences 1, 2 end" in text and f"**{max(r.padded_vs_alone[1:3]):.2g}**" in text
    assert f"to within {max(r.packed_vs_alone):.1g}" in text or "equals the sequence alone exactly" in text
    exact = dataclasses.replace(r, packed_vs_alone=(0.0,) * 4)
    assert "every h_n equals the sequence alone exactly." in seq.packing_sentence(exact)
    off = dataclasses.replace(r, packed_vs_alone=(0.0, 0.2, 0.0, 0.0))
    assert "Packed, the largest difference from the sequence alone is 0.2." in seq.packing_sentence(off)
    assert seq.packing_sentence(seq.padding_vs_packing("GRU", "4, 4", 0)).startswith("Every sequence has the longest")
    one = seq.packing_sentence(seq.padding_vs_packing("LSTM", "2, 6", 0))
    assert "after sequence 0 ends" in one
    sizes = seq.batch_sizes_sentence(r)
    assert "[4, 4, 3, 2, 2]" in sizes and "15 steps of real data instead of the 4 × 5 = 20" in sizes
    assert "torch raised" in seq.enforce_sorted_sentence(r) and "[0, 3, 1, 2]" in seq.enforce_sorted_sentence(r)
    assert "are in decreasing order" in seq.enforce_sorted_sentence(seq.padding_vs_packing("GRU", "5, 3", 0))


def test_timing_sentences_follow_the_numbers():
    base = dict(threads=1, width=32, lengths=(4, 8), lstm_steps=(4, 8), attention_calls=(1, 1),
                unrolled_max_diff=(0.0, 1e-7), repeats=5, code="")
    slow_attention = seq.TimingResult(lstm_ms=(1.0, 2.0), attention_ms=(0.5, 4.0), **base)
    first, second, third, fourth = seq.timing_sentences(slow_attention)
    assert "ran its cell 4, 8 times" in first and "ran once at every length" in first
    twice = dataclasses.replace(slow_attention, attention_calls=(2, 2))
    assert "ran 2 times at every length" in seq.timing_sentences(twice)[0]
    assert "grew 2.0× and attention's grew 8.0×" in second and "Attention was faster at 1 of 2 lengths" in second
    assert "(1 thread, fastest of 5 runs, width 32)" in second
    assert "(2 threads," in seq.timing_sentences(dataclasses.replace(slow_attention, threads=2))[1]
    assert "(1 thread, fastest of 1 run," in seq.timing_sentences(dataclasses.replace(slow_attention, repeats=1))[1]
    assert "Both times grew about as fast as the work or faster, so the work dominates them." in third
    assert fourth == seq.GPU_EXPECTATION and fourth.startswith("Not measured here")
    assert "one would expect" in fourth and "because" in fourth
    fast_attention = seq.TimingResult(lstm_ms=(1.0, 4.0), attention_ms=(0.5, 0.6), **base)
    assert "faster at 2 of 2 lengths" in seq.timing_sentences(fast_attention)[1]
    flat = dataclasses.replace(fast_attention, lstm_ms=(1.0, 0.97))
    assert "the LSTM's time stayed about the same (0.97×)" in seq.timing_sentences(flat)[1]


# (lstm_ms, attention_ms) at T = 4 ... 128: the walkthrough's CPU numbers (time grew ~2× and ~3.4× for 32× and
# 1024× the work), the work in step with T for both, and a flat LSTM beside a T²-growing attention
GROWTH_CASES = {
    "overhead": ((0.085, 0.097, 0.088, 0.185, 0.211, 0.17), (0.062, 0.07, 0.068, 0.173, 0.19, 0.21)),
    "overhead_then_work": ((0.167, 0.126, 0.144, 0.171, 0.22, 0.349), (0.068, 0.082, 0.097, 0.111, 0.15, 0.344)),
    "work": ((0.1, 0.2, 0.4, 0.8, 1.6, 3.2), (0.1, 0.4, 1.6, 6.4, 25.6, 102.4)),
    "mixed": ((0.1,) * 6, (0.1, 0.4, 1.6, 6.4, 25.6, 102.4)),
}


@pytest.mark.parametrize("name", GROWTH_CASES)
def test_growth_sentence_is_built_from_both_growth_ratios(name):
    """What the sentence says dominates follows the measured time growth against the work's growth: cell calls
    for the LSTM, at least T for attention; 'the work starts to dominate' only where the last step measured it."""
    lengths = seq.TIMING_LENGTHS
    lstm_ms, attention_ms = GROWTH_CASES[name]
    r = seq.TimingResult(threads=1, width=32, lengths=lengths, lstm_steps=lengths, attention_calls=(1,) * 6,
                         unrolled_max_diff=(0.0,) * 6, repeats=5, code="", lstm_ms=lstm_ms, attention_ms=attention_ms)
    said = seq.timing_sentences(r)[2]
    lstm_growth, attention_growth = lstm_ms[-1] / lstm_ms[0], attention_ms[-1] / attention_ms[0]
    assert f"the LSTM made 32× the cell calls and its time {seq.grew(lstm_growth)}" in said
    assert f"score matrix grew 1024× (its projections 32×) and its time {seq.grew(attention_growth)}" in said
    kinds = seq.regime(lstm_growth, 32), seq.regime(attention_growth, 32)
    overhead = "far less than" in said and "a fixed cost per call" in said
    assert overhead == ("overhead" in kinds)
    assert ("so the work dominates" in said) == ("work" in kinds)
    last = [ms[-1] / ms[-2] for ms in (lstm_ms, attention_ms)]
    starts = [g / 2 >= seq.IN_STEP and kind != "work" for g, kind in zip(last, kinds, strict=True)]
    assert ("there the work starts to dominate" in said) == any(starts)
    if name == "overhead":
        assert kinds == ("overhead", "overhead") and "Both times grew far less than the work" in said
        assert "work starts" not in said and "dominates them" in said
    if name == "overhead_then_work":
        assert "Over the last step, T = 64 to 128, the LSTM's time grew 1.6× for 2× the cell calls" in said
    if name == "mixed":
        assert "The LSTM's time grew far less than its work" in said and "attention's grew about as fast" in said
    assert "GPU" not in said, "nothing measured on a GPU is said as measured"


# ---- sequences: validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, words", [
    (lambda: seq.rnn_shapes("CNN"), "Recurrent module must be one of RNN, LSTM, GRU; got `CNN`."),
    (lambda: seq.rnn_shapes("GRU", 4), "Layers must be between 1 and 3; got 4."),
    (lambda: seq.rnn_shapes("GRU", 1, True, True, 5), "Batch size must be between 1 and 4; got 5."),
    (lambda: seq.rnn_shapes("GRU", 1, True, True, 1, 0), "Sequence length must be between 1 and 12; got 0."),
    (lambda: seq.rnn_shapes("GRU", 1, True, True, 1, 3, 17), "Input size must be between 1 and 16; got 17."),
    (lambda: seq.rnn_shapes("GRU", 1, True, True, 1, 3, 2, 0), "Hidden size must be between 1 and 16; got 0."),
    (lambda: seq.padding_vs_packing("GRU", "5"), "Sequence lengths: needs 2 to 6 numbers; got 1."),
    (lambda: seq.padding_vs_packing("GRU", "5, 13"), "Sequence lengths, entry 2: 13 is out of range"),
    (lambda: seq.padding_vs_packing("GRU", "0, 2"), "Sequence lengths, entry 1: 0 is out of range"),
    (lambda: seq.padding_vs_packing("GRU", "5, 3", 10_000), "Seed must be between 0 and 9999; got 10000."),
    (lambda: seq.recurrence_vs_attention(48), "Width must be one of 16, 32, 64; got 48."),
])
def test_sequence_inputs_are_refused_with_one_sentence(call, words):
    with pytest.raises(InputError) as err:
        call()
    assert words in str(err.value)
    check_message(str(err.value), "")


# ---- figures -----------------------------------------------------------------------------------------------------


def test_figures_draw_the_results():
    lookup = emb_figs.lookup_figure(emb.embedding_lookup())
    assert [t.type for t in lookup.data] == ["heatmap"] * 3 and len(lookup.layout.shapes) == 5  # rows 0,1,3,4,5
    pad = emb_figs.padding_figure(emb.padding_gradient())
    assert pad.data[1].y[0] == 0.0 and pad.data[1].text[0] == "0" and set(pad.data[1].text[1:]) == {""}
    r = emb.dropout_expectation(0.0, 100, 0)
    assert len(emb_figs.expectation_figure(r).layout.shapes) == 1, "at p = 0 the 1 − p line is the input line"
    assert len(emb_figs.trap_figure(emb.functional_dropout_trap(0.0)).layout.shapes) == 0
    shapes = seq_figs.shapes_figure(seq.rnn_shapes())
    assert len(shapes.layout.shapes) == 4 and shapes.data[1].y == ("layer 0 →", "layer 0 ←", "layer 1 →", "layer 1 ←")
    assert len(seq_figs.shapes_figure(seq.rnn_shapes(bidirectional=False)).layout.shapes) == 2
    packing = seq_figs.packing_figure(seq.padding_vs_packing())
    assert [t.name for t in packing.data] == ["padded batch", "pack_padded_sequence"]
    timing = seq_figs.timing_figure(seq.recurrence_vs_attention(16, (4, 8), 1))
    assert list(timing.data[1].y) == [1, 1] and list(timing.data[0].y) == [4, 8]


# ---- the tabs in AppTest -----------------------------------------------------------------------------------------


def open_tab(tab: str, **query):
    return open_page("pages/transformers.py", query={"tf_tab": tab, **query})


@pytest.fixture(scope="module")
def embeddings_tab():
    return open_tab("Embeddings & dropout")


@pytest.fixture(scope="module")
def sequences_tab():
    return open_tab("Sequences")


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_embeddings_tab_opens_on_its_figures(embeddings_tab):
    at = embeddings_tab
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 5
    assert "Long, Int" in "\n".join(c.value for c in at.code)
    assert "/modules?modules_tab=Weight+sharing" in markdown(at)


def test_embeddings_tab_widgets_and_bad_ids(embeddings_tab):
    at = embeddings_tab
    at.slider(key="tf_emb_vocab").set_value(4).run()
    at.text_input(key="tf_emb_ids").set_value("3, 3, 2").run()
    at.selectbox(key="tf_emb_pad").set_value(3).run()
    at.select_slider(key="tf_drop_p").set_value(0.0).run()
    assert_clean(at)
    assert "Row 3 is looked up 2 times" in markdown(at) and "At p = 0 no module drops" in markdown(at)
    at.text_input(key="tf_emb_ids").set_value("3, 9").run()
    assert [e.value for e in at.error] == ["Token ids, entry 2: 9 is out of range; it must be from 0 to 3."]
    assert not at.exception


def test_sequences_tab_opens_on_its_figures_and_takes_bad_lengths(sequences_tab):
    at = sequences_tab
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3
    assert "decreasing order" in "\n".join(c.value for c in at.code)
    at.toggle(key="tf_seq_bidir").set_value(False).run()
    at.selectbox(key="tf_seq_cell").set_value("GRU").run()
    at.text_input(key="tf_pack_lengths").set_value("6, 4, 1").run()
    assert_clean(at)
    assert "h_n (2, 3, 4)" in markdown(at) and "are in decreasing order" in markdown(at)
    at.text_input(key="tf_pack_lengths").set_value("6").run()
    assert [e.value for e in at.error] == ["Sequence lengths: needs 2 to 6 numbers; got 1."]


def test_a_link_with_an_impossible_padding_idx_is_shown_at_the_default():
    at = open_tab("Embeddings & dropout", tf_emb_vocab="4", tf_emb_pad="9", tf_emb_ids="1, 2")
    assert_clean(at)
    assert [w.value for w in at.warning] == [
        "This link holds settings this page cannot use. Shown at the default instead: `tf_emb_pad=9`."]
    assert at.selectbox(key="tf_emb_pad").value == 0 and "Row 0 is not among the ids" in markdown(at)
