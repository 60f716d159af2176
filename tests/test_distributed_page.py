"""The distributed page: defaults, real runs from its buttons, moved widgets, and bad input shown as a sentence."""

import pytest

from tests.conftest import assert_clean, open_page

PAGE = "pages/distributed.py"


@pytest.fixture(scope="module")
def at():
    return open_page(PAGE)


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_defaults_are_clean_and_show_the_calculators(at):
    assert_clean(at)
    assert at.button(key="dist_collectives_run")
    assert any("bubble" in c.value for c in at.caption)


def test_collectives_and_ddp_run_on_real_ranks(at):
    at.button(key="dist_collectives_run").click().run()
    assert_clean(at)
    assert any("live run: 2 gloo ranks" in s.label for s in at.status)
    at.segmented_control(key="dist_live_op").set_value("all_to_all").run()
    assert_clean(at)
    at.button(key="dist_ddp_run").click().run()
    assert_clean(at)
    assert any(m.label.startswith("max |DDP grad") for m in at.metric)


def test_other_sections_run_with_three_ranks():
    at = open_page(PAGE, query={"dist_world": "3", "dist_d_in": "12", "dist_d_out": "6"})
    for key in ("dist_sampler_run", "dist_fsdp_run", "dist_tensor_parallel_run", "dist_env_run"):
        at.button(key=key).click().run()
        assert_clean(at)
    assert sum("live run: 3 gloo ranks" in s.label for s in at.status) == 4


def test_bad_text_is_a_sentence_not_a_traceback():
    at = open_page(PAGE)
    at.text_input(key="dist_ring").input("10 million").run()
    assert not at.exception
    assert any("Ring message size: `10 million` is not a whole number" in e for e in errors(at))
    at.text_input(key="dist_ring").input("2000000").run()
    assert any("Ring message size: `2000000` is out of range; it must be from 1 to 1000000." in e
               for e in errors(at))
    at.text_input(key="dist_bucket").input("0").run()
    assert any("bucket_cap_mb: `0` is out of range" in e for e in errors(at))
    at.text_input(key="dist_bucket").input("lots").run()
    assert any("bucket_cap_mb: `lots` is not a number" in e for e in errors(at))
    assert not at.exception


@pytest.mark.parametrize("world", [2, 3, 4])
def test_tensor_parallel_offers_only_features_that_split_evenly(world):
    at = open_page(PAGE, query={"dist_world": str(world), "dist_d_in": "10"})  # 10 does not split into 3 or 4
    assert_clean(at)
    for key in ("dist_d_in", "dist_d_out"):
        offered = [int(o) for o in at.select_slider(key=key).options]
        assert offered and all(n % world == 0 for n in offered) and len(offered) == 256 // world
    assert at.select_slider(key="dist_d_in").value == (10 if world == 2 else 6 if world == 3 else 8)


def test_ddp_micro_batches_never_exceed_the_samples_per_rank():
    at = open_page(PAGE, query={"dist_ddp_per_rank": "3", "dist_micro": "8"})
    assert_clean(at)
    assert at.select_slider(key="dist_micro").options == ["1", "2", "3"]
    assert at.select_slider(key="dist_micro").value == 3


def test_pipeline_and_zero_widgets_move(at):
    at.slider(key="dist_stages").set_value(8).run()
    at.slider(key="dist_pp_micro").set_value(1).run()
    at.selectbox(key="dist_model").set_value("GPT-2 XL shape (48 × 1600)").run()
    at.selectbox(key="dist_precision").set_value("fp32 + Adam (4 + 4 + 8 bytes)").run()
    assert_clean(at)


def test_whiteboard_mode_reveals_ddp_steps():
    at = open_page(PAGE)
    at.session_state["whiteboard"] = True
    at.run()
    at.button(key="dist_ddp_run").click().run()
    at.button(key="dist_ddp_steps_next").click().run()
    assert_clean(at)


def test_result_files_load_or_are_refused_with_a_sentence():
    import json

    from demos.distributed.launcher import run_ranks

    record, _ = run_ranks("tensor_parallel", 2, {"d_in": 4, "d_out": 4, "batch": 1, "seed": 0})
    at = open_page(PAGE)
    at.file_uploader(key="dist_upload").set_value(("result.json", json.dumps(record).encode(), "application/json"))
    at.run()
    assert_clean(at)
    assert any("loaded file result.json: 2 ranks" in c.value for c in at.caption)
    at.file_uploader(key="dist_upload").set_value(("bad.json", b'{"format": 1}', "application/json")).run()
    assert not at.exception
    assert any("not a result file of this page" in e for e in errors(at))
