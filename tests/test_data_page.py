"""The data loading page: defaults, moved widgets, bad input as a sentence, and the process-backed buttons."""

import json
import re

import psutil
import pytest
import torch
from torch.utils.data import RandomSampler

from demos.data import recording, timeline
from demos.data.timeline import sample_choices
from tests.conftest import assert_clean, open_page

PAGE = "pages/data-loading.py"
SMALL_WORKLOAD = {"dl_samples": 8, "dl_io": 5, "dl_cpu": 1, "dl_step": 5}


STREAMS = {"dl_tab": "IterableDataset"}
SAMPLERS = {"dl_tab": "Samplers"}
BATCHES = {"dl_tab": "collate_fn & pin_memory"}


@pytest.fixture(scope="module")
def at():
    """The page at its defaults (the Workers tab): it opens on the recording of its two default runs."""
    return open_page(PAGE)


@pytest.fixture(scope="module")
def streams():
    """The IterableDataset tab, opened from a link: its process-backed demo runs its default case."""
    return open_page(PAGE, query=STREAMS)


def recorded_notes(at) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith(":material/history: **Recorded**")]


def test_defaults_open_on_the_recorded_runs_with_their_provenance_without_a_press(at):
    """A fresh server opens the tab at once: both default runs are read from the recording that this app's own code
    made (demos/data/recording.py), each figure with where and when it ran, and nothing runs until a press."""
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2, "worker Gantt and two epochs; the other tabs are not drawn"
    assert not any("Press the button" in i.value for i in at.info)
    assert not [k for k in ("dl_timeline", "dl_epochs") if k in at.session_state], "nothing pressed"
    assert not at.status, "no run: the recording"
    p = recording.default_runs().provenance
    notes = recorded_notes(at)
    assert len(notes) == 2 and all(f"`{p['command']}` on {p['date']}, host `{p['host']}`" in n for n in notes)
    assert [n.endswith(f"Press **{button}** to run them here.") for n, button in zip(
        notes, ("Run both loaders", "Run two epochs, off and on"), strict=True)] == [True, True]
    axes = [json.loads(c.proto.spec)["layout"]["xaxis2"]["title"]["text"] for c in at.get("plotly_chart")]
    assert axes == [f"time since the run started (ms) · {recording.recorded_on(p)}"] * 2, "on the figures too"
    assert {m.label for m in at.metric} >= {"samples/s", "starved", "speedup", "epoch 1 first batch, persistent off"}
    said = next(m.value for m in at.markdown if m.value.startswith("Epoch 1's first batch came after"))
    assert "persistent_workers=False: 2 new workers started and ran the dataset's 300 ms setup again" in said


RAN: list = []  # the arguments compare() was called with by the page, below


def compare_recorded(*args):
    """Stands in for compare(): the recorded comparison, and a note that the page asked for a run."""
    RAN.append(args)
    return recording.default_runs().comparison


def test_a_press_at_the_defaults_runs_them_instead_of_the_recording(monkeypatch):
    monkeypatch.setattr(timeline, "compare", compare_recorded)  # the real run: test_buttons_run_real_workers...
    at = open_page(PAGE)
    at.button(key="dl_timeline_button").click().run()
    assert_clean(at)
    assert RAN == [timeline.default_cases()[0]] and at.session_state["dl_timeline"] == RAN[0]
    assert [s.label for s in at.status] == ["Running real DataLoaders done"]
    assert len(recorded_notes(at)) == 1 and recorded_notes(at)[0].endswith("Run two epochs, off and on** to run "
                                                                          "them here."), "the epochs: still recorded"
    axis = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["xaxis2"]["title"]["text"]
    assert axis == "time since the run started (ms)", "a run here is not marked as recorded"


def test_the_streams_tab_opens_on_its_default_run(streams):
    assert_clean(streams)
    assert len(streams.get("plotly_chart")) == 1 and "dl_streams" not in streams.session_state
    assert [s.label for s in streams.status] == ["Loading streams with real workers done"]
    workers, length = 3, 12  # each unsharded worker iterates the whole stream
    assert any(m.value == f"{workers * length} ({(workers - 1) * length})" for m in streams.metric)
    assert any(m.value == f"{length} (0)" for m in streams.metric), "sharded: every sample once"


def test_a_changed_setting_waits_for_its_button(at, streams):
    at.slider(key="dl_epoch_setup").set_value(250).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1 and not at.status
    assert [i.value for i in at.info if "press the button" in i.value] == [
        "Uses the workload above; press the button to run two epochs twice."]
    at.slider(key="dl_epoch_setup").set_value(300).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2, "back at the defaults: their recording, without a press"
    streams.slider(key="dl_stream_len").set_value(7).run()
    assert len(streams.get("plotly_chart")) == 0 and [i.value for i in streams.info] == [
        "Press the button to load the unsharded and the sharded stream with real workers."]
    streams.slider(key="dl_stream_len").set_value(12).run()
    assert_clean(streams)
    assert len(streams.get("plotly_chart")) == 1


def test_moving_sampler_and_collate_widgets_and_typing_bad_input():
    at = open_page(PAGE, query=SAMPLERS)
    at.slider(key="dl_order_len").set_value(20)
    at.slider(key="dl_dist_ranks").set_value(3)
    at.toggle(key="dl_dist_shuffle").set_value(False).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3, "orders, weighted, distributed"
    at.text_input(key="dl_class_sizes").input("900, 0").run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Class sizes, entry 2: 0 is out of range; it must be from 1 to 10000."]
    at.text_input(key="dl_class_sizes").input("900, ten").run()
    assert [e.value for e in at.error] == ["Class sizes, entry 2: `ten` is not a whole number from 1 to 10000."]
    at = open_page(PAGE, query=BATCHES)
    at.slider(key="dl_bucket_n").set_value(256)
    at.slider(key="dl_pin_mb").set_value(4).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2, "padding, buckets"
    at.text_input(key="dl_lengths").input("3, x").run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Sequence lengths, entry 2: `x` is not a number such as 3, -0.5 or 1e-3."]
    at.text_input(key="dl_lengths").input("3, 4").run()
    assert_clean(at)


def test_sampler_caption_counts_the_red_cells_torch_drew():
    """Red marks a repeat (not its first draw); the caption's counts are the figure's red cells and torch's."""
    at = open_page(PAGE, query=SAMPLERS)
    at.slider(key="dl_order_len").set_value(12).run()
    assert_clean(at)
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "RandomSampler(replacement=True)" in json.dumps(json.loads(c.proto.spec)["data"][0].get("y", [])))
    rows = dict(zip(spec["data"][0]["y"], spec["data"][0]["z"], strict=True))
    drawn = list(RandomSampler(range(12), replacement=True, generator=torch.Generator().manual_seed(0)))
    repeats = len(drawn) - len(set(drawn))
    assert sum(rows["RandomSampler(replacement=True)"]) == repeats > 0
    assert sum(rows["RandomSampler"]) == 0
    caption = next(c.value for c in at.caption if c.value.startswith("Red cells"))
    assert f"RandomSampler(replacement=True): {repeats} of 12" in caption


def test_samples_are_offered_only_where_the_run_fits_the_budget():
    at = open_page(PAGE)
    at.slider(key="dl_io").set_value(100).run()
    assert_clean(at)
    offered = [int(o) for o in at.select_slider(key="dl_samples").options]
    assert offered == list(sample_choices(100, 1, 40, 4)) and max(offered) < 40
    assert at.select_slider(key="dl_samples").value == max(offered), "40 no longer fits: the largest that does"
    at.slider(key="dl_a_batch").set_value(1).run()  # more batches, more steps: fewer samples fit
    assert_clean(at)
    assert [int(o) for o in at.select_slider(key="dl_samples").options] == list(sample_choices(100, 1, 40, 1))


def test_an_over_budget_url_falls_back_to_a_count_that_fits():
    at = open_page(PAGE, query={"dl_samples": "64", "dl_io": "100", "dl_step": "200"})
    assert_clean(at)
    assert at.select_slider(key="dl_samples").value in sample_choices(100, 1, 200, 4)


def test_buttons_run_real_workers_and_leave_no_process():
    before = [p.pid for p in psutil.Process().children(recursive=True)]
    at = open_page(PAGE)
    for key, value in SMALL_WORKLOAD.items():
        (at.select_slider if key == "dl_samples" else at.slider)(key=key).set_value(value)
    at.slider(key="dl_b_workers").set_value(2).run()
    at.button(key="dl_timeline_button").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1, "the new timeline; the epochs wait for their button"
    assert {m.label for m in at.metric} >= {"samples/s", "starved", "speedup"}
    verdicts = [m.value for m in at.markdown if m.value.startswith(("Starved", "The first batch came after"))]
    assert len(verdicts) == 2 and verdicts[0].startswith("Starved: without workers")
    assert "starting 2 workers" in verdicts[1] and ("Kept up" in verdicts[1] or "Still starved" in verdicts[1])
    at.button(key="dl_epochs_button").click().run()
    assert_clean(at)
    off, on = (int(next(m.value for m in at.metric if m.label == f"epoch 1 first batch, persistent {k}")
                   .removesuffix(" ms")) for k in ("off", "on"))
    said = next(m.value for m in at.markdown if m.value.startswith("Epoch 1's first batch came after"))
    assert said.startswith(f"Epoch 1's first batch came after {off} ms with persistent_workers=False: 2 new "
                           "workers started and ran the dataset's 300 ms setup again")
    assert f"With persistent_workers=True it came after {on} ms" in said and "(setups in epoch 1: 0)" in said
    saved = int(re.search(r"saved (\d+) ms", said).group(1))
    assert off - on > 300 and abs(saved - (off - on)) <= 1, "the setup, paid again without persistent workers"
    assert len(at.get("plotly_chart")) == 2
    at = open_page(PAGE, query={**STREAMS, "dl_stream_len": "6"})
    at.button(key="dl_streams_button").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    assert any(m.value == "18 (12)" for m in at.metric), "3 workers x 6 samples, 12 of them duplicates"
    at.slider(key="dl_stream_len").set_value(7).run()
    assert any("settings changed" in i.value for i in at.info)
    # no process of its own is left (one that was already there may have ended meanwhile: a warm helper's idle stop)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= set(before)


def test_the_device_to_host_trap_says_what_this_host_can_run():
    """Without CUDA the trap is not faked: the page says why, and its snippet prints the same sentence; with CUDA
    the trap measures both reads (the page's CUDA branch is driven on any host by the test below)."""
    import subprocess
    import sys

    from demos.data.pinning import d2h_code, d2h_trap

    code = d2h_code()
    read_early = code.index("early = y.sum().item()")
    assert read_early < code.index("torch.cuda.synchronize()", read_early) < code.index("D2HResult(expected, early")
    if torch.cuda.is_available():
        d = d2h_trap()
        assert d.read_after_sync == d.expected == 64 * 2**20 // 4
        return
    at = open_page(PAGE, query=BATCHES)
    assert_clean(at)
    assert d2h_trap() is None
    said = next(i.value for i in at.info if i.value.startswith("No CUDA GPU here"))
    assert "device-to-host copy is only asynchronous on a GPU" in said
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "No CUDA GPU here: a device-to-host copy" in done.stdout


def test_on_a_gpu_the_trap_shows_both_reads_and_a_sentence_true_of_them(monkeypatch):
    """The CUDA branch on any host: the measured reads (patched in) become two metrics and a sentence true of them."""
    from demos.data import pinning
    from pages.ui.compute import clear

    total, early = 16_777_216.0, 12_000_000.0
    clear()  # the page caches the trap's result; this host's (None) may be in it
    monkeypatch.setattr(pinning, "d2h_trap", lambda megabytes: pinning.D2HResult(total, early, total))
    at = open_page(PAGE, query=BATCHES)
    assert_clean(at)
    values = {m.label: m.value for m in at.metric}
    assert values["sum read before synchronize (trap)"] == "12,000,000"
    assert values["sum read after synchronize"] == "16,777,216"
    said = next(c.value for c in at.caption if "early read" in c.value)
    assert said == pinning.d2h_verdict(pinning.D2HResult(total, early, total))
    assert said.startswith("The early read summed 12,000,000 where the GPU's values sum to 16,777,216 (-4,777,216)")
    assert "%" not in said, "a sum of stale or uninitialized bytes says nothing about how many values arrived"
    prose = next(m.value for m in at.markdown if "non_blocking=True)` returns before" in m.value)
    assert "part of the old contents" not in prose and "stale bytes of an earlier tensor" in prose
    assert "or uninitialized memory" in prose
    assert not any(i.value.startswith("No CUDA GPU here") for i in at.info)
    clear()


def test_the_trap_sentence_reads_an_early_sum_above_the_gpus_as_stale_memory_too():
    """Stale bytes of an earlier tensor can sum to more than the copy would: no 'had not arrived' fraction."""
    from demos.data.pinning import D2HResult, d2h_verdict

    said = d2h_verdict(D2HResult(1_000.0, 1_700.5, 1_000.0))
    assert said.startswith("The early read summed 1,700 where the GPU's values sum to 1,000 (+700), and nothing raised")
    assert "stale bytes of an earlier tensor or uninitialized memory" in said and said.endswith("sums right.")
    assert d2h_verdict(D2HResult(1_000.0, 0.0, 999.0)).endswith("After synchronize it summed 999.")


def test_the_trap_sentence_when_the_early_read_won_the_race():
    from demos.data.pinning import D2HResult, d2h_verdict

    said = d2h_verdict(D2HResult(100.0, 100.0, 100.0))
    assert "saw every value" in said and "race is still there" in said
