"""Memory's Streams and torch.compile tabs open on a figure: the shipped recording, and the compile tab's default
cases run without a press (cached once per server), checked against torch here; other settings wait."""

import contextlib
import io
import json

import torch

from demos.memory import stream_recorder
from demos.memory.compiling import PLANTED, fresh_dynamo
from tests.conftest import assert_clean, open_page

PAGE = "pages/memory.py"


def test_streams_tab_draws_the_shipped_recording_with_its_provenance():
    at = open_page(PAGE, query={"mem_tab": "Streams & transfers"})
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1 and not at.warning, "the recording draws without a press"
    p = stream_recorder.load_recording()["provenance"]
    assert any(c.value.startswith(f"Recorded on **{p['gpu']}**, driver {p['driver']}") for c in at.caption)


def test_compile_tab_runs_its_default_cases_on_open_and_waits_for_other_settings():
    at = open_page(PAGE, timeout=300, query={"mem_tab": "torch.compile"})
    assert_clean(at)
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    with fresh_dynamo():
        for name, fn in PLANTED.items():  # torch's own count of each planted function's graphs and breaks
            with contextlib.redirect_stdout(io.StringIO()):
                out = torch._dynamo.explain(fn)(x)
            g, b = out.graph_count, out.graph_break_count
            said = f"**{name}**: {g} graph{'s' * (g != 1)}, {b} break{'s' * (b != 1)}"
            assert any(m.value == said for m in at.markdown), said
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    eager_ms, compiled_ms = spec["data"][0]["y"]
    assert eager_ms > 0 and compiled_ms > 0
    assert spec["layout"]["title"]["text"].startswith("compile took")
    said = "Largest difference between eager and compiled outputs: "
    diff = next(c.value for c in at.caption if said in c.value)  # after the sentence on when compiling pays off
    assert float(diff.split(said)[1].rstrip(".")) < 1e-3, "the compiled block computes what eager computes"
    at.select_slider(key="mem_size").set_value(64).run()
    assert not at.get("plotly_chart"), "another matrix size waits for its button"
    at.text_input(key="mem_shapes").set_value("8; 16").run()
    assert not any(m.value.startswith("**print**") for m in at.markdown), "other shapes wait for theirs"
