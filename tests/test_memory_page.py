"""The memory page in AppTest: defaults, moved widgets, heavy buttons, and bad input shown as a sentence."""

import torch

from demos.memory import stream_recorder, training
from demos.memory.allocator import fmt_bytes
from demos.memory.questions import QUESTIONS
from tests.conftest import assert_clean, open_page

PAGE = "pages/memory.py"


def test_defaults_are_clean_and_say_what_ran():
    at = open_page(PAGE)
    assert_clean(at)
    if torch.cuda.is_available():
        assert any("the steps ran on the GPU" in m.value for m in at.success)
    else:
        assert any("meta tensors" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) >= 2, "the training-step tab: timeline and peak holders"
    trap = training.logging_trap()  # the validation-loop trap below the timeline, at the page's settings
    kept = [m for m in at.metric if m.label == "Kept after 3 batches"]
    assert [m.value for m in kept] == [fmt_bytes(trap.kept_graph[-1]), fmt_bytes(trap.no_grad[-1])]
    assert training.trap_caption(trap) in [c.value for c in at.caption]


def test_streams_tab_shows_the_shipped_recording_with_its_provenance_and_lessons():
    at = open_page(PAGE, query={"mem_tab": "Streams & transfers"})
    assert_clean(at)
    recording = stream_recorder.load_recording()
    p = recording["provenance"]
    assert any(f"Recorded on **{p['gpu']}**, driver {p['driver']}, torch {p['torch']}" in c.value for c in at.caption)
    lessons = stream_recorder.lessons(stream_recorder.summarize(recording))
    assert lessons and any(all(line in m.value for line in lessons) for m in at.markdown)


def test_moving_the_main_widgets():
    at = open_page(PAGE)
    at.selectbox(key="mem_model").set_value("Transformer tiny (2 x 128)").run()
    at.selectbox(key="mem_dtype").set_value("bf16 autocast").run()
    at.toggle(key="mem_ckpt").set_value(True).run()
    at.toggle(key="mem_none").set_value(False).run()
    at.selectbox(key="mem_opt").set_value("SGD momentum").run()
    at.slider(key="mem_steps").set_value(3).run()
    at.selectbox(key="mem_card").set_value("H200 141 GB").run()
    assert_clean(at)
    at.selectbox(key="mem_model").set_value("Small CNN (CIFAR 32x32)").run()
    at.number_input(key="mem_batch").set_value(64).run()
    at.button(key="mem_sweep_button").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) >= 3, "timeline, peak holders and the batch sweep"
    at.selectbox(key="mem_card").set_value("T4 16 GB").run()
    assert len(at.get("plotly_chart")) >= 3, "the sweep stays: the card only moves its OOM line"
    at.slider(key="mem_steps").set_value(1).run()
    assert len(at.get("plotly_chart")) == 2, "a sweep of other steps is not shown as this one"


def test_allocator_script_and_bad_script():
    at = open_page(PAGE, query={"mem_tab": "Caching allocator"})
    at.selectbox(key="mem_preset").set_value("Reuse from the cache").run()
    at.button(key="mem_preset_load").click().run()
    assert_clean(at)
    assert "empty_cache()" in at.text_area(key="mem_script").value
    slider = next(w for w in at.select_slider if w.key.startswith("mem_alloc_at_"))
    slider.set_value(2).run()
    assert_clean(at)
    at.text_area(key="mem_script").set_value("a = 3 parsecs").run()
    assert any("Line 1" in e.value for e in at.error)
    assert not at.exception


def test_dynamo_section_and_bad_shapes():
    at = open_page(PAGE, query={"mem_tab": "torch.compile"})
    at.button(key="mem_explain_button").click().run()
    assert_clean(at)
    assert any("2 graphs, 1 break" in m.value for m in at.markdown)
    title = next(m.value for m in at.markdown if m.value.startswith("**Eager vs compiled**"))
    assert "seconds" not in title, "the compile time is measured below the title, not promised in it"
    at.select_slider(key="mem_size").set_value(64).run()
    assert any("2 graphs, 1 break" in m.value for m in at.markdown), "another section's widget keeps the result"
    at.text_input(key="mem_shapes").set_value("8; banana").run()
    assert any("is not a whole number" in e.value for e in at.error)
    assert not at.exception


def test_interview_answer_check():
    at = open_page(PAGE)
    at.radio(key="memory_q_pick").set_value(next(i for i, q in enumerate(QUESTIONS) if q.key == "round_up")).run()
    at.text_input(key="memory_q_round_up_typed").set_value("1024").run()
    at.button(key="memory_q_round_up_run").click().run()
    assert_clean(at)
    assert any("Correct" in s.value for s in at.success)


def test_the_allocator_tab_shows_torchs_oom_message_for_the_default_script():
    from demos.memory.cache_demo import PRESETS, run_script
    at = open_page(PAGE, query={"mem_tab": "Caching allocator"})
    assert_clean(at)
    oom = run_script(PRESETS["Fragmentation"], 128, False).oom
    assert "Including non-PyTorch memory, this process has 100.00 MiB memory in use." in oom
    assert [c.value for c in at.code].count(oom) == 1, "the classic run's message; expandable segments fit"
    assert any("c10/cuda/CUDACachingAllocator.cpp" in c.value for c in at.caption)


def test_a_link_carries_the_allocator_script():
    script = "a = 40 MiB\nb = 30 MiB\ndel a"
    at = open_page(PAGE, query={"mem_tab": "Caching allocator", "mem_script": script})
    assert_clean(at)
    assert at.text_area(key="mem_script").value == script


def test_why_callouts_appear_only_with_their_surprise():
    """A peak in optimizer.step() gets its 'why' (numbers from the same run); a peak in backward gets none."""
    from demos.memory.allocator import fmt_bytes
    from demos.memory.surprises import unfused_spec
    from demos.memory.training import RunSpec, simulate

    query = {"mem_model": "Transformer tiny (2 x 128)", "mem_batch": "1", "mem_seq": "8", "mem_steps": "1"}
    at = open_page(PAGE, query=query)
    assert_clean(at)
    why = [i.value for i in at.info if i.value.startswith("Why the peak")]
    spec = RunSpec(model="Transformer tiny (2 x 128)", batch=1, seq_len=8, steps=1)
    t, unfused = simulate(spec), simulate(unfused_spec(spec))
    assert len(why) == 1 and f"Why the peak ({fmt_bytes(t.peak)})" in why[0]
    assert f"the peak is {fmt_bytes(unfused.peak)}" in why[0]
    at = open_page(PAGE, query={**query, "mem_batch": "64", "mem_seq": "256"})
    assert_clean(at)
    assert not [i.value for i in at.info if i.value.startswith("Why")]


def test_compile_tab_states_fullgraph_and_the_recompile_limit_from_what_ran():
    from demos.memory.compiling import strict_compile
    from pages.ui.tables import literal
    at = open_page(PAGE, query={"mem_tab": "torch.compile", "mem_shapes": "8; 16; 32; 64"})
    at.button(key="mem_explain_button").click().run()
    assert_clean(at)
    s = strict_compile("8; 16; 32; 64")
    table = next(t.value for t in at.table if literal("torch.compile(fn, fullgraph=True)") in t.value.columns)
    assert table.values.tolist() == [[literal(k), literal(v)] for k, v in s.fullgraph.items()]
    sentence = next(m.value for m in at.markdown if m.value.startswith("**Recompile limit**"))
    assert f"is {s.default_limit} by default" in sentence and f"the limit set to {s.limit}" in sentence
    assert f"the 4 calls above compiled {s.compiled} graphs" in sentence
    assert f"{4 - s.compiled} shape ran eagerly" in sentence
    if s.fullgraph[".item()"] == "one graph, no error":  # explain() shows it breaking: the page says why not here
        assert any(c.value.startswith(".item(): explain() split it at a break") for c in at.caption)
