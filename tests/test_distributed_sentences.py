"""The distributed page's sentences against what it draws: reduce's non-root scratch, FSDP2's padding and backward
order, the Launch tab's per-rank pipeline bytes and precision accounting, and a broken upload's message."""

import json
import re

import pytest
import torch

from demos.distributed import calculators, stories
from demos.distributed.results import MAX_DEPTH
from demos.style import COLORS
from tests.conftest import assert_clean, open_page, shown_table

PAGE = "pages/distributed.py"


def _chart(at, op: str) -> dict:
    """The first collective figure drawn for `op` (the trap's reduce figure when op is reduce)."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if any(a.get("text") == f"<b>{op}</b>" for a in s["layout"]["annotations"]))


def test_reduce_draws_non_root_results_as_undefined_scratch():
    at = open_page(PAGE)
    at.button(key="dist_collectives_button").click().run()
    assert_clean(at)
    said = next(m.value for m in at.markdown if m.value.startswith("**reduce(dst=0)**"))
    assert said == stories.reduce_caption(2) and "rank 1's is undefined scratch (grey)" in said
    trace = _chart(at, "reduce")["data"][0]
    rank0 = [(t, c) for t, c, y in zip(trace["text"], trace["marker"]["color"], trace["y"], strict=True) if y == 0]
    rank1 = [(t, c) for t, c, y in zip(trace["text"], trace["marker"]["color"], trace["y"], strict=True) if y == -1]
    length = len(rank0) // 2  # before, then after
    assert all(t == "?" and c == COLORS["idle"] for t, c in rank1[length:]), "rank 1's buffer after reduce: scratch"
    before = [[float(t) for t, _ in rank0[:length]], [float(t) for t, _ in rank1[:length]]]
    assert [float(t) for t, _ in rank0[length:]] == [a + b for a, b in zip(*before, strict=True)]


@pytest.mark.parametrize("query, metric", [
    ({}, None),  # the default: 10 indices over 2 ranks split evenly
    ({"dist_dataset": "11", "dist_drop_last": "true"}, "indices dropped"),
    ({"dist_dataset": "11"}, "padding repeats"),
], ids=["even", "drop-last", "padding"])
def test_sampler_caption_reads_the_split_it_draws(query, metric):
    at = open_page(PAGE, query={"dist_tab": "DistributedSampler", **query})
    if query:
        at.button(key="dist_sampler_button").click().run()
    assert_clean(at)
    said = next(c.value for c in at.caption if c.value.startswith("drop_last="))
    shown = {m.label: int(m.value) for m in at.metric}
    dataset, per_rank = shown["dataset"], shown["samples per rank"]
    assert f"{dataset} indices over 2 ranks" in said and "(drop_last=False)" not in said
    if metric is None:
        assert said.endswith(f"split evenly, {per_rank} each: every index is read exactly once, with no padding and "
                             "nothing dropped.")
    elif metric == "indices dropped":
        n = shown[metric]
        assert said.startswith("drop_last=True") and f"dropped {n} index on purpose" in said
        assert f"each rank reads {per_rank}. The ranks cover {dataset - n} of the {dataset} indices" in said
    else:
        assert said.startswith("drop_last=False") and f"pads with {shown[metric]} extra read of 1 index" in said
        assert f"to give every rank {per_rank}. The ranks cover all {dataset} indices" in said


def test_fsdp_sentences_follow_the_recorded_collectives():
    at = open_page(PAGE, query={"dist_tab": "FSDP & ZeRO"})
    at.button(key="dist_fsdp_button").click().run()
    assert_clean(at)
    assert not [d for d in at.dataframe if "collective" in d.value.columns], "a grid scrolls its last rows away"
    table = next(f for f in map(shown_table, at.table) if "collective" in f.columns)  # st.table: every row shown
    padding = next(m.value for m in at.markdown if m.value.startswith("Padding:"))
    order = next(m.value for m in at.markdown if m.value.startswith("Backward order:"))
    backward = ["AG" if "allgather" in c else "RS" for c in table[table["phase"] == "backward"]["collective"]]
    assert order.startswith(f"Backward order: {', '.join(backward)} (")
    first_rs = backward.index("RS")  # the first all-gather is needed by the first layer's backward, not prefetched
    assert "the first all-gather rebuilds those of the first layer to run backward" in order
    ahead = first_rs - 1
    assert ahead >= 1 and f"the {ahead} other all-gather{'s' * (ahead != 1)} before that reduce-scatter" in order
    assert f"the {first_rs} all-gathers before" not in order

    world, shard, out = (int(v.replace(",", "")) for v in
                         re.search(r"returns (\d) × ([\d,]+) = ([\d,]+) B, as the table records", padding).groups())
    gathers = table[table["collective"].str.contains("allgather")]
    assert out == world * shard and out in set(gathers["output bytes"])
    assert (gathers["output bytes"] == world * gathers["input bytes"].astype(int)).all()
    holds = int(re.search(r"holds ([\d,]+) B", padding).group(1).replace(",", ""))
    assert holds < out, "padding: the group holds fewer bytes than its all-gather returns"


def test_launch_tab_sentences_and_code_boxes():
    at = open_page(PAGE, query={"dist_tab": "Launch"})
    assert_clean(at)
    ranks = next(d.value for d in at.dataframe if "MASTER_PORT" in d.value.columns)
    said = next(c.value for c in at.caption if c.value.startswith("Every value is what the rank read"))
    assert said == stories.launch_caption(ranks.astype(str).to_dict("records"))
    assert f"MASTER_PORT={ranks['MASTER_PORT'][0]} as torchrun sets them, but these ranks never used them" in said
    boxes = [c for c in at.code if "mp.spawn" in c.value or "init_process_group(\"gloo\")" in c.value]
    assert len(boxes) == 2 and all(c.proto.wrap_lines for c in boxes), "half-width code boxes wrap instead of cutting"
    rows = next(f for f in map(shown_table, at.table) if "strategy" in f.columns).set_index("strategy")
    world, tokens, width = 2, 2048, 64  # the page's defaults: 2 ranks, the MLP's width slider
    act = tokens * width * 2  # one activation tensor in 2-byte precision
    assert rows.loc["Pipeline parallel", "communication per step"] == calculators.human_bytes(min(2, world - 1) * act)
    human = calculators.human_bytes
    assert (f"{2 * (world - 1)} tensors of {human(act)} over all {world - 1} boundaries "
            f"({human(2 * (world - 1) * act)} in total)") in rows.loc["Pipeline parallel", "what is sent"]
    tp = rows.loc["Tensor parallel", "what is sent"]  # the page's MLP: 3 Linear(64, 64) blocks and the head
    assert tp.startswith("1 all_reduce per pair of Linear layers (column- then row-parallel) forward, 1 backward: "
                         "4 over this MLP's 2 pairs of its 4 Linear layers, the last with the head")
    per_token = (64 + 1) + 2 * 64  # forward: fc1's and the head's outputs; backward: fc0's and fc2's input gradients
    assert rows.loc["Tensor parallel", "communication per step"] == calculators.human_bytes(
        2 * (world - 1) / world * tokens * per_token * 2)
    note = next(c.value for c in at.caption if "bytes per parameter" in c.value)
    assert note.startswith("2 + 2 + 12 = 16 bytes per parameter is the ZeRO paper's accounting")
    assert "Under `torch.autocast` parameters and gradients stay fp32" in note
    model = torch.nn.Linear(4, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(3, 4))
    out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and model.weight.dtype == model.weight.grad.dtype == torch.float32
    at.selectbox(key="dist_precision").set_value("fp32 + Adam (4 + 4 + 8 bytes)").run()
    note = next(c.value for c in at.caption if "bytes per parameter" in c.value)
    assert note.startswith("fp32 + Adam: 4 + 4 + 8 = 16 bytes per parameter")


def test_a_broken_upload_is_described_without_python_exception_names():
    at = open_page(PAGE, query={"dist_tab": "Launch"})
    for data, message in ((b"\xff\xfe{}", "The result file is not UTF-8 text (byte 1 is not valid there), so it "
                                          "cannot be JSON."),
                          (b'{"format": ', "The result file is not valid JSON: expecting value at line 1, column 12."),
                          (b"[" * 100_000, f"The result file is nested too deeply to read (this page's limit is "
                                           f"{MAX_DEPTH} levels).")):
        at.file_uploader(key="dist_upload").set_value(("result.json", data, "application/json")).run()
        assert not at.exception
        assert [e.value for e in at.error] == [message]
