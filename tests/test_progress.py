"""The tracker keeps its ticks for the whole session, and a progress link restores them (or changes nothing)."""

from demos.registry import TOPICS
from demos.tracker import Progress, export_tracker, progress_link_value
from tests.conftest import assert_clean, open_page

KNOWN = {t.slug: t.concepts for t in TOPICS if t.exists}


def ticked(at) -> set[str]:
    return {c.key for c in at.checkbox if c.key.startswith("track__") and c.value}


def test_ticks_survive_a_visit_to_another_page():
    at = open_page("pages/home.py")
    at.checkbox(key="track__tensors__0").check().run()
    at.switch_page("pages/tensors.py").run()
    at.switch_page("pages/home.py").run()
    assert_clean(at)
    assert ticked(at) == {"track__tensors__0"}
    at.checkbox(key="track__tensors__0").uncheck().run()
    assert ticked(at) == set()


def test_a_progress_link_restores_ticks_and_the_url_follows_new_ticks():
    link = progress_link_value(Progress({"autograd": ("Leaves and retain_grad",)}, ("tensors/broadcast",)), KNOWN)
    at = open_page("pages/home.py", query={"progress": link})
    assert_clean(at)
    assert ticked(at) == {"track__autograd__1"}
    assert "1 ticked concept and 1 question to review" in at.success[0].value
    at.checkbox(key="track__tensors__3").check().run()
    assert ticked(at) == {"track__autograd__1", "track__tensors__3"}, "the link is read once, not on every run"
    assert not at.success, "the loaded notice is shown once"
    newer = progress_link_value(
        Progress({"autograd": ("Leaves and retain_grad",), "tensors": ("Type promotion",)}, ("tensors/broadcast",)),
        KNOWN,
    )
    assert at.query_params["progress"] == newer, "a reload restores what is ticked now"


def test_a_tampered_progress_link_is_one_sentence_and_changes_nothing():
    good = progress_link_value(Progress({"autograd": ("Leaves and retain_grad",)}), KNOWN)
    at = open_page("pages/home.py")
    at.checkbox(key="track__tensors__0").check().run()
    for bad in (good[:-4] + "AAAA", "1.![x](http://evil/p.png)", "9" * 5000):
        at.query_params["progress"] = bad
        at.run()
        assert not at.exception
        assert len(at.error) == 1 and at.error[0].value.endswith("Nothing was changed.")
        assert "evil" not in at.error[0].value, "visitor text is never repeated as markup"
        assert ticked(at) == {"track__tensors__0"}


def test_an_imported_file_replaces_the_ticks():
    at = open_page("pages/home.py")
    at.checkbox(key="track__tensors__0").check().run()
    at.session_state["wb_progress"] = Progress()  # what the uploader's callback does with an empty file
    at.run()
    assert ticked(at) == set()
    assert '"done": {}' in export_tracker({})
