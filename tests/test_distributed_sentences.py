"""The distributed page's sentences against what it draws: reduce's non-root scratch, FSDP2's padding and backward
order, the Launch tab's per-rank pipeline bytes and precision accounting, and a broken upload's message."""

import json
import re

import torch

from demos.distributed import calculators
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
    assert "rank 1's is undefined scratch (grey)" in said
    trace = _chart(at, "reduce")["data"][0]
    rank0 = [(t, c) for t, c, y in zip(trace["text"], trace["marker"]["color"], trace["y"], strict=True) if y == 0]
    rank1 = [(t, c) for t, c, y in zip(trace["text"], trace["marker"]["color"], trace["y"], strict=True) if y == -1]
    length = len(rank0) // 2  # before, then after
    assert all(t == "?" and c == COLORS["idle"] for t, c in rank1[length:]), "rank 1's buffer after reduce: scratch"
    before = [[float(t) for t, _ in rank0[:length]], [float(t) for t, _ in rank1[:length]]]
    assert [float(t) for t, _ in rank0[length:]] == [a + b for a, b in zip(*before, strict=True)]


def test_fsdp_sentences_follow_the_recorded_collectives():
    at = open_page(PAGE, query={"dist_tab": "FSDP & ZeRO"})
    at.button(key="dist_fsdp_button").click().run()
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "collective" in d.value.columns)
    padding = next(m.value for m in at.markdown if m.value.startswith("Padding:"))
    order = next(m.value for m in at.markdown if m.value.startswith("Backward order:"))
    backward = ["AG" if "allgather" in c else "RS" for c in table[table["phase"] == "backward"]["collective"]]
    assert order.startswith(f"Backward order: {', '.join(backward)} (")
    assert backward.index("RS") >= 2 and f"the {backward.index('RS')} all-gathers before" in order
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
    boxes = [c for c in at.code if "mp.spawn" in c.value or "init_process_group(\"gloo\")" in c.value]
    assert len(boxes) == 2 and all(c.proto.wrap_lines for c in boxes), "half-width code boxes wrap instead of cutting"
    rows = next(f for f in map(shown_table, at.table) if "strategy" in f.columns).set_index("strategy")
    world, tokens, width = 2, 2048, 64  # the page's defaults: 2 ranks, the MLP's width slider
    act = tokens * width * 2  # one activation tensor in 2-byte precision
    assert rows.loc["Pipeline parallel", "communication per step"] == calculators.human_bytes(min(2, world - 1) * act)
    human = calculators.human_bytes
    assert (f"{2 * (world - 1)} tensors of {human(act)} over all {world - 1} boundaries "
            f"({human(2 * (world - 1) * act)} in total)") in rows.loc["Pipeline parallel", "what is sent"]
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
