"""Attention & transformers, Tiny model: the model's attention is torch's multi-head attention, a training run
matches one written independently with nn.MultiheadAttention, held-out sequences are never trained on, the scores
are what the maps say, every sentence the view shows holds for its run, and bad settings are sentences."""

import dataclasses
import functools
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from demos.errors import InputError
from demos.transformers import tiny_model as tm
from demos.transformers.figures.tiny_model import training_figure
from pages.ui.compute import compute
from tests.conftest import assert_clean, open_page

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "pages/transformers.py"
# (task, heads, steps, length, lr, seed): the defaults; a run stopped before it learns; four heads that share the
# work; the shortest sequences, where training batches often hold a held-out sequence
SETTINGS = {
    "defaults": tuple(tm.DEFAULTS.values()),
    "too_short": ("reverse", 1, 50, 8, 0.001, 0),
    "four_heads": ("copy", 4, 150, 8, 0.003, 0),
    "length_3": ("reverse", 2, 100, 3, 0.01, 2),
}


@functools.cache
def run_of(name: str) -> tm.TinyRun:
    return tm.tiny_model(*SETTINGS[name])


# ---- the model and the run against torch computed directly ----------------------------------------------------


def mha_like(model: tm.TinyAttention, heads: int) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding the tiny model's projections."""
    mha = nn.MultiheadAttention(tm.DIM, heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(model.qkv.weight)
        mha.in_proj_bias.copy_(model.qkv.bias)
        mha.out_proj.weight.copy_(model.proj.weight)
        mha.out_proj.bias.copy_(model.proj.bias)
    return mha


def oracle_forward(model: tm.TinyAttention, mha: nn.MultiheadAttention, x: torch.Tensor):
    """Logits at the blanks and per-head weights from them, through nn.MultiheadAttention."""
    n = x.shape[1] // 2
    h = model.tok(x) + model.pos(torch.arange(2 * n))
    mixed, weights = mha(h, h, h, need_weights=True, average_attn_weights=False)
    return model.out(h + mixed)[:, n:], weights[:, :, n:]


@pytest.mark.parametrize("heads", tm.HEAD_CHOICES)
def test_the_models_attention_is_torchs_multi_head_attention(heads):
    torch.manual_seed(heads)
    model = tm.TinyAttention(6, heads)
    x, _ = tm.make_batch(torch.Generator().manual_seed(1), 5, 6, "reverse")
    logits, weights = model(x)
    expected_logits, expected_weights = oracle_forward(model, mha_like(model, heads), x)
    assert weights.shape == (5, heads, 6, 12)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(logits, expected_logits, atol=1e-5, rtol=1e-5)


def test_targets_are_the_tokens_in_order_or_reversed():
    for task, flip in (("copy", False), ("reverse", True)):
        x, y = tm.make_batch(torch.Generator().manual_seed(0), 4, 7, task)
        tokens = x[:, :7]
        assert torch.equal(y, tokens.flip(1) if flip else tokens)
        assert (x[:, 7:] == tm.VOCAB).all(), "the second half is all blanks"


def test_codes_are_the_tokens_read_as_base_10_digits():
    tokens = torch.tensor([[3, 0, 7], [0, 0, 1], [9, 9, 9]])
    assert tm.codes(tokens).tolist() == [int("".join(map(str, reversed(row)))) for row in tokens.tolist()]


def independent_training(task, heads, steps, length, lr, seed):
    """The run written again: nn.MultiheadAttention, held-out sequences kept out with a Python set, per-example
    scoring loops. Returns the losses, the held-out token accuracy and head maps at the end, and the drop count."""
    torch.manual_seed(seed)
    start = tm.TinyAttention(length, heads)  # the same initial values: the run starts from torch.manual_seed(seed)
    mha = mha_like(start, heads)
    params = [start.tok.weight, start.pos.weight, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
              mha.out_proj.bias, start.out.weight, start.out.bias]
    optimizer = torch.optim.Adam(params, lr=lr)
    held_x, held_y = tm.make_batch(torch.Generator().manual_seed(tm.MAX_SEED + 1 + seed), tm.HELD_OUT, length, task)
    held = {tuple(row) for row in held_x[:, :length].tolist()}
    data = torch.Generator().manual_seed(seed)
    losses, dropped = [], 0
    for _ in range(steps):
        x, y = tm.make_batch(data, tm.BATCH, length, task)
        rows = [i for i, row in enumerate(x[:, :length].tolist()) if tuple(row) not in held]
        dropped += tm.BATCH - len(rows)
        logits, _ = oracle_forward(start, mha, x[rows])
        loss = F.cross_entropy(logits.reshape(-1, tm.VOCAB), y[rows].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits, weights = oracle_forward(start, mha, held_x)
    right = sum(int(logits[b, i].argmax() == held_y[b, i]) for b in range(tm.HELD_OUT) for i in range(length))
    return losses, right / (tm.HELD_OUT * length), weights.mean(dim=0), dropped


@pytest.mark.parametrize("name", ["length_3"])
def test_a_run_matches_one_written_independently_with_nn_multihead_attention(name):
    r = run_of(name)
    losses, accuracy, maps, dropped = independent_training(*SETTINGS[name])
    assert r.losses == pytest.approx(losses, rel=1e-3, abs=1e-5)
    assert r.final.token_accuracy == pytest.approx(accuracy, abs=1 / (tm.HELD_OUT * r.length))
    torch.testing.assert_close(torch.tensor(r.final.maps), maps, atol=1e-4, rtol=1e-3)
    assert r.dropped == dropped > 0, "with 3 tokens (1000 sequences) training batches often hold a held-out one"


def test_scores_are_read_from_the_maps_and_the_model_outputs():
    torch.manual_seed(0)
    model = tm.TinyAttention(4, 2)
    x, y = tm.make_batch(torch.Generator().manual_seed(5), 64, 4, "reverse")
    scores = tm.evaluate(model, x, y, "reverse")
    with torch.no_grad():
        logits, weights = model(x)
    per_sequence = [all(logits[b, i].argmax() == y[b, i] for i in range(4)) for b in range(64)]
    assert scores["sequence_accuracy"] == pytest.approx(sum(per_sequence) / 64)
    for h in range(2):
        on = [weights[b, h, i, 3 - i].item() for b in range(64) for i in range(4)]
        assert scores["head_mass"][h] == pytest.approx(sum(on) / len(on), rel=1e-5)
        blanks = [weights[b, h, i, 4:].sum().item() for b in range(64) for i in range(4)]
        assert scores["blank_mass"][h] == pytest.approx(sum(blanks) / len(blanks), rel=1e-5)
    best = [max(weights[:, h, i, 3 - i].mean().item() for h in range(2)) for i in range(4)]
    assert scores["best_head_mass"] == pytest.approx(sum(best) / 4, rel=1e-5)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_map_row_is_a_distribution_and_the_run_is_recorded_at_every_tenth(name):
    r = run_of(name)
    assert [c.step for c in r.checkpoints] == [i * r.steps // tm.CHECKPOINTS for i in range(tm.CHECKPOINTS + 1)]
    assert len(r.losses) == r.steps
    for c in r.checkpoints:
        sums = torch.tensor(c.maps).sum(dim=-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))
    start = r.checkpoints[0]
    assert max(start.head_mass) < 3 * r.uniform, "before training no head has found the pattern"


def test_the_default_run_learns_the_task_and_a_head_finds_the_anti_diagonal():
    r = run_of("defaults")
    assert r.final.token_accuracy == 1.0 and r.final.sequence_accuracy == 1.0
    assert max(r.final.head_mass) > 0.95 and r.final.best_head_mass > 0.95
    assert r.checkpoints[0].token_accuracy < 0.2


# ---- the figure ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 4, tm.CHECKPOINTS])
def test_the_figure_draws_the_chosen_checkpoint(index):
    r = run_of("four_heads")
    fig = training_figure(r, index)
    c = r.checkpoints[index]
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == r.heads
    for h, trace in enumerate(heatmaps):
        assert [list(row) for row in trace.z] == [list(row) for row in c.maps[h]]
    outlined = [(s.x0 + 0.5, s.y0 + 0.5) for s in fig.layout.shapes if s.type == "rect" and s.xref == "x3"]
    assert outlined == [(src, row) for row, src in enumerate(r.expected)]
    marker = [s.x0 for s in fig.layout.shapes if s.type == "line" and s.xref in ("x", "x2") and s.x0 == s.x1]
    assert marker == [c.step, c.step]
    assert f"step {c.step} of {r.steps}" in fig.layout.title.text
    titles = [a.text for a in fig.layout.annotations if a.text.startswith("head ")]
    assert titles == [f"head {h}:<br>{tm.pct(m)} on the pattern" for h, m in enumerate(c.head_mass, 1)]


@pytest.mark.parametrize("name", ["defaults", "too_short", "four_heads"])
def test_every_head_count_titles_its_maps_in_the_same_words(name):
    """1, 2 and 4 heads: each map says '<share> on the pattern', the share of the checkpoint's head_mass; only the
    line break differs (4 narrow maps)."""
    r = run_of(name)
    for index in (0, tm.CHECKPOINTS):
        c = r.checkpoints[index]
        fig = training_figure(r, index)
        titles = [a.text.replace("<br>", " ") for a in fig.layout.annotations if a.text.startswith("head ")]
        assert titles == [f"head {h}: {tm.pct(m)} on the pattern" for h, m in enumerate(c.head_mass, 1)]
        assert titles == [tm.head_share(h, m) for h, m in enumerate(c.head_mass, 1)]
        assert ("<br>" in fig.layout.annotations[-1].text) == (r.heads > 2)


# ---- the sentences against their numbers ------------------------------------------------------------------------


def percent(text: str) -> float:
    return float(text.rstrip("%")) / 100


def close_to_shown(value: float, shown: str) -> bool:
    """A share printed as a whole percent (or one decimal) is the value rounded."""
    decimals = 1 if "." in shown else 0
    return abs(value - percent(shown)) <= 0.5 * 10 ** -(2 + decimals) + 1e-12


@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_verdict_states_the_held_out_numbers(name):
    r = run_of(name)
    learned, said = tm.verdict(r)
    assert learned == (r.final.token_accuracy >= tm.LEARNED)
    assert said.startswith("Learned:" if learned else "Not learned yet:")
    tokens, sequences = re.search(r"writes ([\d.]+%) of the output tokens.*gets ([\d.]+%) of those", said).groups()
    assert close_to_shown(r.final.token_accuracy, tokens) and close_to_shown(r.final.sequence_accuracy, sequences)
    assert f"after {r.steps} steps" in said and f"{tm.HELD_OUT} held-out sequences" in said
    assert "chance is 10%" in said and tm.VOCAB == 10
    hints = {"more training steps": r.steps < max(tm.STEP_CHOICES), "larger learning rate": r.lr < max(tm.LR_CHOICES)}
    for hint, room in hints.items():
        assert (hint in said.lower()) == (room and not learned), (hint, said)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_pattern_sentences_hold_for_the_run(name):
    r, c = run_of(name), run_of(name).final
    lines = tm.pattern_sentences(r)
    shares = re.findall(r"head (\d) ([\d.]+%)", lines[0])
    assert [int(h) for h, _ in shares] == list(range(1, r.heads + 1))
    assert all(close_to_shown(c.head_mass[int(h) - 1], s) for h, s in shares)
    uniform = re.search(r"evenly over the (\d+) positions would put ([\d.]+%)", lines[0]).groups()
    assert int(uniform[0]) == 2 * r.length and close_to_shown(1 / (2 * r.length), uniform[1])
    assert ("anti-diagonal" in lines[0]) == (r.task == "reverse")
    found = [h for h, m in enumerate(c.head_mass, 1) if m >= tm.FOUND]
    said = " ".join(lines[1:])
    if len(found) == r.heads:
        assert "found the pattern" in lines[1] and lines[1].startswith(("Every head", "The head"))
    elif found:
        named = [int(n) for n in re.findall(r"\d+", lines[1].split(" found")[0])]
        assert named == found
    else:
        assert lines[1] == "No head puts 90% of its attention on the pattern."
    if r.heads > 1:
        best = re.search(r"puts ([\d.]+%) there on average", said).group(1)
        assert close_to_shown(c.best_head_mass, best)
        assert ("can be right without every head" in said) == (c.token_accuracy >= tm.LEARNED
                                                                 and len(found) < r.heads)
    match = re.search(r"From step (\d+) on, every checkpoint gets at least 99% of the held-out output tokens right",
                      said)
    scores = [(k.step, k.token_accuracy) for k in r.checkpoints]
    if match:
        step = int(match.group(1))
        assert all(a >= tm.LEARNED for s, a in scores if s >= step)
        assert all(a < tm.LEARNED for s, a in scores if s == step - r.steps // tm.CHECKPOINTS)
    else:
        assert scores[-1][1] < tm.LEARNED


def test_the_runs_chosen_here_cover_every_kind_of_sentence():
    """Learned and not, every head or some heads or none finding the pattern: each branch is read above."""
    verdicts = {tm.verdict(run_of(n))[0] for n in SETTINGS}
    kinds = {tm.pattern_sentences(run_of(n))[1].split(" ")[0] for n in SETTINGS}
    assert verdicts == {True, False}
    assert {"No", "Head", "Every"} <= kinds or {"No", "Heads", "Every"} <= kinds, kinds


@pytest.mark.parametrize("index", [0, 3, tm.CHECKPOINTS])
def test_the_checkpoint_sentence_reads_the_checkpoint(index):
    r = run_of("defaults")
    c = r.checkpoints[index]
    said = tm.checkpoint_sentence(r, index)
    step, accuracy, shares = re.fullmatch(r"At step (\d+) of \d+: ([\d.]+%) of held-out output tokens right; "
                                          r"attention on the expected positions per head: (.*)\.", said).groups()
    assert int(step) == c.step and close_to_shown(c.token_accuracy, accuracy)
    assert all(close_to_shown(m, s) for m, s in zip(c.head_mass, shares.split(", "), strict=True))


@pytest.mark.parametrize("name", ["defaults", "length_3"])
def test_the_provenance_sentence_counts_what_was_dropped(name):
    r = run_of(name)
    said = tm.provenance_sentence(r)
    assert f"in {r.seconds:.2f} s ({r.steps} Adam steps, each on a fresh batch of {tm.BATCH} random sequences)" in said
    if r.dropped:
        assert f"{r.dropped} training sequences that equalled one of them were dropped from their batches" in said
    else:
        assert "none of the training sequences happened to be one of them" in said


def test_pct_never_rounds_a_share_to_a_whole_it_is_not():
    assert tm.pct(0.9996) == "100.0%" and tm.pct(1.0) == "100%" and tm.pct(0.0004) == "0.0%"
    assert tm.pct(0.003) == "0.3%" and tm.pct(0.0) == "0%" and tm.pct(0.68) == "68%"


# ---- bad settings ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("change, message", [
    (dict(task="sort"), "Task must be one of reverse, copy; got `sort`."),
    (dict(heads=3), "Heads must be one of 1, 2, 4; got `3`."),
    (dict(steps=7), "Training steps must be one of 50, 100, 150, 200, 300, 400; got `7`."),
    (dict(length=11), "Sequence length must be a whole number from 3 to 10; got `11`."),
    (dict(length=2.5), "Sequence length must be a whole number from 3 to 10; got `2.5`."),
    (dict(lr=0.5), "Learning rate must be one of 0.001, 0.003, 0.01; got `0.5`."),
    (dict(seed=-5), "Seed must be a whole number from 0 to 9999; got `-5`."),
])
def test_bad_settings_are_sentences(change, message):
    with pytest.raises(InputError) as error:
        tm.tiny_model(**{**tm.DEFAULTS, **change})
    assert str(error.value) == message


# ---- the view ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def at():
    return open_page(PAGE, query={"tf_tab": "Tiny model"})


def page_run(*settings) -> tm.TinyRun:
    """The run the page computed (ui.compute's cache: the same object, so the same training time)."""
    return compute(tm.tiny_model, *(settings or SETTINGS["defaults"]))


def shown_text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] +
                     [s.value for s in at.success] + [w.value for w in at.warning])


def test_the_view_opens_on_its_figure_and_says_what_the_run_measured(at):
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    r = page_run()
    text = shown_text(at)
    assert tm.verdict(r)[1] in text and tm.checkpoint_sentence(r, tm.CHECKPOINTS) in text
    assert "\n".join(f"- {line}" for line in tm.pattern_sentences(r)) in text
    assert tm.provenance_sentence(r) in text


def test_moving_the_step_slider_shows_a_saved_checkpoint_and_retrains_nothing(at, monkeypatch):
    calls = []
    real = tm.train_tiny
    monkeypatch.setattr(tm, "train_tiny", lambda *a: calls.append(a) or real(*a))
    at.select_slider(key="tf_tiny_at").set_value(2).run()
    assert_clean(at)
    assert calls == []
    r = page_run()
    assert tm.checkpoint_sentence(r, 2) in shown_text(at)


def test_changing_the_settings_retrains_and_stays_clean(at):
    at.selectbox(key="tf_tiny_task").set_value("copy")
    at.selectbox(key="tf_tiny_heads").set_value(1)
    at.select_slider(key="tf_tiny_steps").set_value(50)
    at.slider(key="tf_tiny_length").set_value(4)
    at.select_slider(key="tf_tiny_lr").set_value(0.01)
    at.run()
    assert_clean(at)
    r = page_run("copy", 1, 50, 4, 0.01, 0)
    assert tm.verdict(r)[1] in shown_text(at) and "step 10 of 50" in shown_text(at)


def test_a_link_with_an_impossible_value_still_opens_the_view():
    at = open_page(PAGE, query={"tf_tab": "Tiny model", "tf_tiny_steps": "7", "tf_tiny_heads": "3",
                                "tf_tiny_at": "40", "tf_tiny_seed": "-5"})
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1


def test_uniform_share_is_one_over_the_positions_read():
    r = run_of("defaults")
    assert r.uniform == 1 / (2 * r.length) and math.isclose(r.uniform * 2 * r.length, 1)


def test_a_run_not_learned_at_the_largest_settings_suggests_nothing_it_cannot_offer():
    stuck = dataclasses.replace(run_of("too_short"), steps=max(tm.STEP_CHOICES), lr=max(tm.LR_CHOICES))
    learned, said = tm.verdict(stuck)
    assert not learned and said.endswith("entirely right.") and "(settings)" not in said
    only_lr = dataclasses.replace(stuck, lr=min(tm.LR_CHOICES))
    assert tm.verdict(only_lr)[1].endswith(" A larger learning rate (settings) may get it there.")


def test_a_shared_link_opens_the_checkpoint_it_names():
    """The step slider writes its label to the URL (`step 30`): a link opens that checkpoint of that run."""
    at = open_page(PAGE, query={"tf_tab": "Tiny model", "tf_tiny_at": "step 30", "tf_tiny_steps": "100"})
    assert_clean(at)
    assert not at.warning or not any("cannot use" in w.value for w in at.warning)
    r = page_run("reverse", 2, 100, 8, 0.003, 0)
    assert tm.checkpoint_sentence(r, 3) in shown_text(at)
