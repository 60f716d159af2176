"""The distributed page: defaults, real runs from its buttons, moved widgets, and bad input shown as a sentence."""

import pytest

from tests.conftest import assert_clean, open_page, step_reveal, switch_tab

PAGE = "pages/distributed.py"


@pytest.fixture(scope="module")
def at():
    return open_page(PAGE)


def open_tab(tab: str, **query):
    return open_page(PAGE, query={"dist_tab": tab, **query})


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def run_lines(at) -> list[str]:
    """The line naming each run on screen: its st.status on first sight in a session, then a caption."""
    return [s.label for s in at.status] + [c.value for c in at.caption if ": live run: " in c.value]


def live_runs(at, world: int = 2) -> list[str]:
    return [line for line in run_lines(at) if f"live run: {world} gloo ranks" in line]


def charts(at) -> int:
    return len(at.get("plotly_chart")) + len(at.get("graphviz_chart"))


def test_defaults_are_clean_and_only_the_open_tab_runs(at):
    assert_clean(at)
    assert at.button(key="dist_collectives_button")
    assert not any("bubble" in c.value for c in at.caption), "the pipeline tab is closed: nothing of it is sent"
    assert any("bubble" in c.value for c in open_tab("Tensor & pipeline").caption)


# Each tab that opens on its default run: what its figure and numbers are, read from the page without a press.
OPENS_ON_A_RUN = {
    "Collectives": ("collectives", 4),  # the chosen collective, the reduce trap's two, the ring's bytes
    "DDP": ("DDP", 1),
    "DistributedSampler": ("DistributedSampler", 3),
    "Tensor & pipeline": ("tensor parallel", 2),  # the TP graph and the pipeline chart
    "Launch": ("launch", 1),
}


@pytest.mark.parametrize("tab", OPENS_ON_A_RUN)
def test_each_tab_opens_on_its_default_run_without_a_press(tab):
    label, figures = OPENS_ON_A_RUN[tab]
    at = open_tab(tab)
    assert_clean(at)
    assert [s.label.split(":")[0] for s in at.status] == [label], "exactly this tab's run, and it ran"
    assert live_runs(at), "real ranks ran the default case"
    ran = live_runs(at)
    at.run()
    assert not at.status and live_runs(at) == ran, "a rerun shows the same cached run (same pids), without a status"
    assert charts(at) == figures
    assert not any("Press the button" in i.value for i in at.info)
    assert not [k for k in ("dist_collectives", "dist_ddp", "dist_sampler", "dist_tensor_parallel", "dist_env")
                if k in at.session_state], "nothing was pressed"


def test_the_launch_figure_shows_what_each_rank_read():
    """Every rank's node holds the environment that rank reported, the same values as the table beside it."""
    at = open_tab("Launch")
    dot = at.get("graphviz_chart")[0].proto.spec
    rows = at.dataframe[0].value
    assert list(rows["RANK"]) == ["0", "1"] and set(rows["WORLD_SIZE"]) == {"2"}
    for _, row in rows.iterrows():
        env = "".join(f"{k}={row[k]}\\l" for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
        assert f"rank {row['dist.get_rank()']}, pid {row['pid']}\\l{env}" in dot
    assert "process group\\nbackend gloo, world size 2" in dot


def test_a_changed_setting_waits_for_its_button_and_the_default_comes_back():
    at = open_tab("DistributedSampler", dist_dataset="12")
    assert_clean(at)
    assert not run_lines(at) and charts(at) == 0
    assert any("Press the button to start 2 real processes" in i.value for i in at.info)
    at.slider(key="dist_dataset").set_value(10).run()
    assert live_runs(at) and charts(at) == 3, "back at the default: its cached run, without a press"
    at = open_tab("DistributedSampler", dist_world="3")
    assert not run_lines(at) and any("Press the button to start 3 real processes" in i.value for i in at.info)


def test_collectives_and_ddp_run_on_real_ranks(at):
    at.button(key="dist_collectives_button").click().run()
    assert_clean(at)
    assert live_runs(at)
    at.segmented_control(key="dist_live_op").set_value("all_to_all").run()
    assert_clean(at)
    assert live_runs(at), "a view of the result keeps the result"
    switch_tab(at, "dist_tab", "DDP").button(key="dist_ddp_button").click().run()
    assert_clean(at)
    assert any(m.label.startswith("max |DDP grad") for m in at.metric)
    said = [m.value for m in at.markdown if m.value.startswith("With all") and "inside `no_sync()`" in m.value]
    assert said and "ran 0 all_reduces" in said[0], "the no_sync trap's sentence, read from this run"


def test_a_run_stays_through_unrelated_reruns_until_its_own_inputs_change():
    at = open_tab("DistributedSampler")
    at.button(key="dist_sampler_button").click().run()
    assert live_runs(at)
    at.toggle(key="whiteboard").set_value(True).run()
    assert live_runs(at), "an unrelated rerun keeps the result"
    at.slider(key="dist_dataset").set_value(12).run()
    assert not run_lines(at) and "settings changed" in at.button(key="dist_sampler_button").help, \
        "whiteboard mode: the key row's button says the settings changed"
    at.toggle(key="whiteboard").set_value(False).run()
    assert not run_lines(at) and any("settings changed" in i.value for i in at.info)
    at.slider(key="dist_dataset").set_value(10).run()
    assert live_runs(at), "the settings that ran: shown again"


@pytest.mark.parametrize(("tab", "demo"), [("DistributedSampler", "sampler"), ("FSDP & ZeRO", "fsdp"),
                                           ("Tensor & pipeline", "tensor_parallel"), ("Launch", "env")])
def test_other_sections_run_with_three_ranks(tab, demo):
    at = open_tab(tab, dist_world="3", dist_d_in="12", dist_d_out="6")
    at.button(key=f"dist_{demo}_button").click().run()
    assert_clean(at)
    assert live_runs(at, world=3)


def test_the_launch_tab_shares_the_model_choice_with_fsdp():
    at = open_tab("Launch", dist_model="GPT-2 XL shape (48 × 1600)")
    assert_clean(at)
    assert at.selectbox(key="dist_model").value == "GPT-2 XL shape (48 × 1600)"
    assert any(m.value.startswith("GPT-2 XL shape") for m in at.markdown)
    at = open_tab("Launch", dist_fsdp_layers="5")
    assert at.slider(key="dist_fsdp_layers").value == 5, "the page's MLP: its shape sliders are drawn here too"
    assert any("Tower(5, 64)" in m.value for m in at.markdown)


def test_bad_text_is_a_sentence_not_a_traceback():
    at = open_page(PAGE)
    at.text_input(key="dist_ring").input("10 million").run()
    assert not at.exception
    assert any("Ring message size: `10 million` is not a whole number" in e for e in errors(at))
    at.text_input(key="dist_ring").input("2000000").run()
    assert any("Ring message size: `2000000` is out of range; it must be from 1 to 1000000." in e
               for e in errors(at))
    at = open_tab("DDP")
    at.text_input(key="dist_bucket").input("0").run()
    assert any("bucket_cap_mb: `0` is out of range" in e for e in errors(at))
    at.text_input(key="dist_bucket").input("lots").run()
    assert any("bucket_cap_mb: `lots` is not a number" in e for e in errors(at))
    assert not at.exception


@pytest.mark.parametrize("world", [2, 3, 4])
def test_tensor_parallel_offers_only_features_that_split_evenly(world):
    at = open_tab("Tensor & pipeline", dist_world=str(world), dist_d_in="10")  # 10 does not split into 3 or 4
    assert_clean(at)
    for key in ("dist_d_in", "dist_d_out"):
        offered = [int(o) for o in at.select_slider(key=key).options]
        assert offered and all(n % world == 0 for n in offered) and len(offered) == 256 // world
    assert at.select_slider(key="dist_d_in").value == (10 if world == 2 else 6 if world == 3 else 8)


def test_ddp_micro_batches_never_exceed_the_samples_per_rank():
    at = open_tab("DDP", dist_ddp_per_rank="3", dist_micro="8")
    assert_clean(at)
    assert at.select_slider(key="dist_micro").options == ["1", "2", "3"]
    assert at.select_slider(key="dist_micro").value == 3


def test_pipeline_and_zero_widgets_move():
    at = open_tab("Tensor & pipeline")
    at.slider(key="dist_stages").set_value(8).run()
    at.slider(key="dist_pp_micro").set_value(1).run()
    assert_clean(at)
    at = switch_tab(at, "dist_tab", "FSDP & ZeRO")
    at.selectbox(key="dist_model").set_value("GPT-2 XL shape (48 × 1600)").run()
    at.selectbox(key="dist_precision").set_value("fp32 + Adam (4 + 4 + 8 bytes)").run()
    assert_clean(at)


def test_whiteboard_mode_reveals_ddp_steps():
    """In whiteboard mode the DDP story opens on its first step; Next step adds the second, which tells the bucket
    count of iteration 1 that the run measured (the metric above it)."""
    at = open_tab("DDP", whiteboard="true")
    at.button(key="dist_ddp_button").click().run()
    caption, steps = step_reveal(at, "DDP hooks each parameter")
    total = int(caption.rsplit(" ", 1)[1])
    assert caption == f"Step 1 of {total}" and total > 2 and len(steps) == 1
    at.button(key="dist_ddp_steps_next").click().run()
    assert_clean(at)
    caption, shown = step_reveal(at, "DDP hooks each parameter")
    assert caption == f"Step 2 of {total}"
    assert len(shown) == 2 and shown[0] == steps[0]
    buckets = next(m.value for m in at.metric if m.label == "buckets, iteration 1")
    said = {"0": "Iteration 1 recorded no bucket", "1": "Iteration 1 is a single bucket"}
    assert shown[1].startswith(said.get(buckets, f"Iteration 1 used {buckets} buckets")), (buckets, shown[1])


def test_result_files_load_or_are_refused_with_a_sentence():
    import json

    from demos.distributed.launcher import run_ranks

    record, _ = run_ranks("tensor_parallel", 2, {"d_in": 4, "d_out": 4, "batch": 1, "seed": 0})
    at = open_tab("Launch")
    at.file_uploader(key="dist_upload").set_value(("result.json", json.dumps(record).encode(), "application/json"))
    at.run()
    assert_clean(at)
    assert any("loaded file `result.json`: 2 ranks" in c.value for c in at.caption)
    at.file_uploader(key="dist_upload").set_value(("bad.json", b'{"format": 1}', "application/json")).run()
    assert not at.exception
    assert any("not a result file of this page" in e for e in errors(at))
