"""The distributed page's sentences are derived from what it draws: the ZeRO calculator's GPT-2 count (equal to the
Memory page's and to a model built here in torch), the ring's cost, and the DDP bucket story of a real run."""

import re

import pytest
import torch
import torch.nn as nn

from demos.distributed import calculators, runs, stories, views
from tests.conftest import assert_clean, open_page

PAGE = "pages/distributed.py"
GPT2_SMALL = "GPT-2 small shape (12 × 768)"
DEFAULTS = {"layers": 3, "width": 64, "per_rank": 8, "bucket_cap_mb": "0.02", "micro_batches": 4, "head_first": True,
            "seed": 0}  # the DDP tab's widget defaults


def gpt2_small_in_torch() -> int:
    """GPT-2 small from torch modules, written out here: token and position embeddings, 12 pre-norm blocks with
    biases, a final LayerNorm, and an output head tied to the token embedding (so counted once)."""
    d, vocab, context = 768, 50257, 1024
    with torch.device("meta"):
        parts = [nn.Embedding(vocab, d), nn.Embedding(context, d), nn.LayerNorm(d)]
        for _ in range(12):
            parts += [nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d), nn.Linear(d, 4 * d),
                      nn.Linear(4 * d, d)]
    return sum(p.numel() for m in parts for p in m.parameters())


def test_gpt2_small_count_is_the_same_on_both_pages_and_equals_torch():
    built = gpt2_small_in_torch()
    assert built == 124_439_808  # the published (Hugging Face) count of GPT-2 small
    at = open_page(PAGE, query={"dist_tab": "FSDP & ZeRO", "dist_model": GPT2_SMALL})
    assert_clean(at)
    shown = [int(m.group(1).replace(",", "")) for c in at.caption
             if (m := re.search(r"Parameter count ([\d,]+) from torch", c.value))]
    assert shown == [built]
    memory = open_page("pages/memory.py")  # its default model is GPT-2 small
    assert_clean(memory)
    params = next(m for m in memory.metric if m.label == "Parameters")
    assert params.proto.help == f"{built:,} parameters"
    assert calculators.model_param_count(GPT2_SMALL, 1, 8)[0] == built


@pytest.fixture(scope="module")
def ddp_runs():
    """Real runs at the page's defaults, with the head registered first (the default) and last."""
    return {flag: runs.run_demo("ddp", 2, {**DEFAULTS, "head_first": flag}) for flag in (True, False)}


def test_bucket_sentences_compare_each_real_bucket_with_the_cap(ddp_runs):
    view = views.ddp_view(ddp_runs[True])
    cap = views.bucket_cap_bytes(0.02)
    assert cap == 20_971
    story = stories.ddp_story(view, 0.02)
    rebuilt = view["iterations"][-1]["buckets"]
    assert [b["bytes"] for b in rebuilt] == [33_540, 16_640]  # measured: bucket 0 passes the cap
    sizes = {n: 4 * k for n, _, k in view["params"]}
    for b in rebuilt[:-1]:  # every bucket but the last was closed by the parameter that took it to the cap
        assert b["bytes"] >= cap > b["bytes"] - sizes[b["params"][-1]]
        assert (f"holds {b['bytes']:,} B, {b['bytes'] - cap:,} B over the cap: it held "
                f"{b['bytes'] - sizes[b['params'][-1]]:,} B, under the cap, until `{b['params'][-1]}`") in story[0]
    assert f"holds the {rebuilt[-1]['bytes']:,} B left over, under the cap" in story[0]
    assert "at most" not in story[0]


@pytest.mark.parametrize("cap_mb, cap", [(0.02, 20_971), (25.0, 26_214_400)])
def test_bucket_cap_is_called_mib_as_ddp_reads_it(ddp_runs, cap_mb, cap):
    """'0.02 MB = 20,971 B' and '25 MB = 26,214,400 B' are MiB: DDP multiplies bucket_cap_mb by 2**20."""
    from torch.nn.parallel.distributed import _MB_TO_BYTES
    assert views.bucket_cap_bytes(cap_mb) == int(cap_mb * _MB_TO_BYTES) == cap and _MB_TO_BYTES == 2**20
    said = stories.ddp_story(views.ddp_view(ddp_runs[True]), cap_mb)[0]
    assert f"`bucket_cap_mb={cap_mb:g}`, which DDP reads as MiB: int({cap_mb:g} × 2**20) = {cap:,} B" in said
    assert " MB" not in said


def test_the_model_answer_describes_the_first_iteration_the_page_shows(ddp_runs):
    """The answer said buckets follow 'roughly reverse order of use'; the page's own first iteration is one bucket
    in registration order, and only the rebuilt buckets follow the order gradients became ready."""
    from pages.ui.quiz import model_answers
    answer = dict(model_answers("distributed"))["How does DDP overlap communication with the backward pass?"]
    assert "roughly reverse order of use" not in answer and "25 MB" not in answer
    assert "all parameters share one bucket, listed in registration order" in answer
    assert "26,214,400 bytes" in answer and views.bucket_cap_bytes(25) == 26_214_400
    view = views.ddp_view(ddp_runs[False])  # the head registered last: registration order is the forward order
    (first,) = view["iterations"][0]["buckets"]
    assert first["params"] == [name for name, _, _ in view["params"]], "one bucket, in registration order"
    rebuilt = [p for b in view["iterations"][-1]["buckets"] for p in b["params"]]
    assert rebuilt[:2] == ["head.weight", "head.bias"] or rebuilt[:2] == ["head.bias", "head.weight"], \
        "rebuilt in the order gradients became ready: the head's first, the reverse of forward"


def test_iteration_one_is_one_bucket_and_registration_order_only_reorders_its_names(ddp_runs):
    by_flag = {flag: views.ddp_view(run) for flag, run in ddp_runs.items()}
    firsts = {flag: v["iterations"][0]["buckets"] for flag, v in by_flag.items()}
    assert all(len(b) == 1 for b in firsts.values())
    assert firsts[True][0]["params"] != firsts[False][0]["params"]
    assert sorted(firsts[True][0]["params"]) == sorted(firsts[False][0]["params"])
    rebuilt = {flag: [(b["bytes"], b["params"]) for b in v["iterations"][-1]["buckets"]] for flag, v in by_flag.items()}
    assert rebuilt[True] == rebuilt[False], "the rebuilt buckets do not depend on the registration order"
    for flag, view in by_flag.items():
        story = stories.ddp_story(view, 0.02)
        b0 = firsts[flag][0]
        assert story[1].startswith(f"Iteration 1 is a single bucket of all 8 parameters ({b0['bytes']:,} B, over "
                                   "the cap)")
        assert f"started at {b0['start']:.2f} ms" in story[1]
        assert ("the head first because it was registered first" in story[1]) == flag
        assert "`head`, `fc2`, `fc1`, `fc0` (the reverse of the forward order" in story[2]
        assert ("not of the registration order, `fc2`, `fc1`, `fc0`, `head`" in story[2]) == flag
        last = view["iterations"][-1]
        assert f"{views.overlap_ms(last):.2f} ms" in story[3]


def test_ring_prose_gives_two_n_minus_one_over_n_and_what_the_ranks_measured():
    run = runs.run_demo("collectives", 3, dict(length=2, ring_numel=100_000, seed=0))
    rows = views.ring_rows(run)
    text = stories.ring_summary(run, rows)
    assert "whatever N is" not in text
    assert "2·2/3 × 400,000 B = 533,333 B, 1.33× the message" in text
    sent = sorted(r["sent bytes (measured)"] for r in rows)
    assert sent[0] != sent[-1]  # 100,000 elements make chunks of 33,334, 33,333 and 33,333
    assert f"The ranks measured {sent[0]:,} to {sent[-1]:,} B, not exactly the formula" in text


def test_the_page_draws_the_sentences_from_its_own_tables():
    at = open_page(PAGE, query={"dist_tab": "DDP"})
    at.button(key="dist_ddp_button").click().run()
    assert_clean(at)
    assert not [d for d in at.dataframe if "bytes − cap" in d.value.columns], "folded, the bucket tables are not sent"
    at.session_state["dist_ddp_buckets"] = True  # open the bucket tables' expander
    at.run()
    steps = next(m.value for m in at.markdown if m.value.startswith("1. DDP hooks"))
    tables = [d.value for d in at.dataframe if "bytes − cap" in d.value.columns]
    first, last = tables
    cap = 20_971
    assert (first["bytes"] - first["bytes − cap"] == cap).all()
    assert len(first) == 1 and f"a single bucket of all 8 parameters ({first['bytes'][0]:,} B, over the cap)" in steps
    # the table rounds to 3 decimals and the sentence to 2 from the full value: 1.8449 is 1.845 there, 1.84 here
    said = float(re.search(r"started at (\d+\.\d\d) ms", steps).group(1))
    assert abs(said - first["all_reduce start ms"][0]) <= 0.0051
    for b, over in zip(last["bytes"], last["bytes − cap"], strict=True):
        assert f"{b:,} B" in steps and (f"{over:,} B over the cap" in steps) == (over > 0)
    assert "at most `bucket_cap_mb`" not in steps
    at = open_page(PAGE)
    at.button(key="dist_collectives_button").click().run()
    assert_clean(at)
    ring = next(d.value for d in at.dataframe if "sent bytes (measured)" in d.value.columns)
    prose = next(m.value for m in at.markdown if "A ring all_reduce" in m.value)
    assert f"2·1/2 × {ring['message bytes'][0]:,} B = {ring['2(N-1)/N × size'][0]:,.0f} B, 1.00× the message" in prose
    assert f"Every rank measured exactly {ring['sent bytes (measured)'][0]:,} B" in prose
