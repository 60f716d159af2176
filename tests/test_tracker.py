"""Progress files and links: export then import is the identity; anything else is refused with one sentence."""

import base64
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tracker import (
    FORMAT,
    MAX_BYTES,
    MAX_LINK,
    MAX_REVIEW,
    VERSION,
    Progress,
    export_tracker,
    import_tracker,
    progress_link_value,
    read_progress_link,
)

KNOWN = {"tensors": ("Broadcasting rules", "einsum"), "autograd": ("Leaves and retain_grad",)}


def test_file_round_trip():
    done = {"tensors": ["einsum", "Broadcasting rules"], "autograd": []}
    progress = import_tracker(export_tracker(done, ("tensors/broadcast",)).encode(), KNOWN)
    assert progress == Progress({"tensors": ("Broadcasting rules", "einsum")}, ("tensors/broadcast",))


def test_unknown_topics_and_concepts_are_dropped_not_fatal():
    doc = {"format": FORMAT, "version": VERSION, "done": {"tensors": ["einsum", "gone"], "old-topic": ["x"]}}
    assert import_tracker(json.dumps(doc), KNOWN).done == {"tensors": ("einsum",)}


def _doc(**fields) -> bytes:
    return json.dumps({"format": FORMAT, "version": VERSION, "done": {}, **fields}).encode()


@pytest.mark.parametrize(
    "data, words",
    [
        (b"\xff\xfe", "not text"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a PyTorch Whiteboard tracker"),
        (json.dumps({"format": "other"}).encode(), "not a PyTorch Whiteboard tracker"),
        (_doc(version=99), "version `99`"),
        (_doc(done=[]), "'done' field"),
        (_doc(done={"tensors": "einsum"}), "list"),
        (_doc(done={"tensors": [1]}), "list"),
        (b" " * (MAX_BYTES + 1), "larger"),
        (b"[" * 99_000, "not valid JSON"),
        (b'{"format": "pytorch-whiteboard-tracker", "version": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b'{"format": "pytorch-whiteboard-tracker", "version": 1, "done": {"tensors": [' + b"7" * 5000 + b"]}}",
         "not valid JSON"),
        (_doc(review="tensors/broadcast"), "'review' field"),
        (_doc(review=["x"] * (MAX_REVIEW + 1)), "at most"),
        (_doc(review=["![t](http://evil/p.png)"]), "not a question id"),
    ],
)
def test_malformed_files_are_refused(data, words):
    with pytest.raises(InputError, match=words):
        import_tracker(data, KNOWN)


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_parse_or_raise_input_error(data):
    try:
        result = import_tracker(data, KNOWN)
    except InputError:
        return
    assert all(topic in KNOWN and set(c) <= set(KNOWN[topic]) for topic, c in result.done.items())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)


@given(st.dictionaries(st.sampled_from(["done", "review", "version", "format", "x"]), JSON, max_size=5))
def test_any_json_fields_in_a_file_parse_or_raise_input_error(fields):
    doc = {"format": FORMAT, "version": VERSION, **fields}
    try:
        import_tracker(json.dumps(doc).encode(), KNOWN)
    except InputError:
        pass


# ---- the progress link --------------------------------------------------------------------------------------


def test_link_round_trip_is_compact():
    progress = Progress({"tensors": ("Broadcasting rules", "einsum"), "autograd": ("Leaves and retain_grad",)},
                        ("tensors/broadcast", "broadcast_shape@123456"))
    value = progress_link_value(progress, KNOWN)
    assert value.startswith("1.") and len(value) < 150
    assert read_progress_link(value, KNOWN) == progress


PINNED = "1.eNqrVkpRsqpWyk3NzS-qVLKKNozVUSpJzSvOLyoG8kxia3WUioCM2FoAF_oNSw"


def test_a_version_1_link_keeps_meaning_the_same_concepts():
    """Pinned: if a topic's concepts are reordered, old links would tick other concepts: bump LINK_VERSION."""
    from demos.registry import TOPICS

    known = {t.slug: t.concepts for t in TOPICS}
    value = progress_link_value(Progress({"tensors": ("einsum",), "memory": ("Caching allocator",)}), known)
    assert value == PINNED
    assert read_progress_link(value, known).done == {"tensors": ("einsum",), "memory": ("Caching allocator",)}


def _link(doc) -> str:
    raw = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    return "1." + base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")


@pytest.mark.parametrize(
    "value, words",
    [
        ("", "not a progress link"),
        ("hello", "not a progress link"),
        ("1.abc!def", "not a progress link"),
        ("2" + PINNED[1:], "version 2"),
        ("1." + "A" * (MAX_LINK + 1), "too long"),
        (PINNED[:30] + ("x" if PINNED[30] != "x" else "y") + PINNED[31:], "damaged"),  # one character changed
        (PINNED[:-6], "damaged"),  # cut short
        (_link([1, 2]), "damaged"),
        (_link({"d": {"tensors": "0"}}), "not a list of numbers"),
        (_link({"d": {"tensors": [True]}}), "not a list of numbers"),
        (_link({"d": {}, "x": 1}), "damaged"),
        (_link(b'{"d": {"tensors": [' + b"1" * 5000 + b"]}}"), "damaged"),
        (_link(b"[" * 10_000), "damaged"),
        (_link(b" " * 1_000_000), "too large"),  # a zip bomb: tiny link, huge JSON
        (_link({"r": ["[x](http://evil)"]}), "not a question id"),
    ],
)
def test_bad_and_tampered_links_are_one_sentence(value, words):
    with pytest.raises(InputError, match=words):
        read_progress_link(value, KNOWN)


@given(st.text(max_size=400))
def test_any_link_text_parses_or_raises_input_error(text):
    try:
        read_progress_link(text, KNOWN)
    except InputError:
        pass


@given(JSON)
def test_any_json_inside_a_well_formed_link_parses_or_raises_input_error(doc):
    try:
        result = read_progress_link(_link(doc), KNOWN)
    except InputError:
        return
    assert all(topic in KNOWN and set(c) <= set(KNOWN[topic]) for topic, c in result.done.items())


def test_a_link_holding_a_lone_surrogate_is_refused_with_a_sentence_a_page_can_send():
    value = "1.eNqrVkpRsqqu1VEqUrKKVoopTbEwMFCKrQUAURMGuA"  # {"d":{},"r":["\\ud800"]}
    with pytest.raises(InputError) as err:
        read_progress_link(value, KNOWN)
    str(err.value).encode("utf-8")
    assert "\ufffd" in str(err.value)


def test_a_file_holding_a_lone_surrogate_is_refused_with_a_sentence_a_page_can_send():
    data = json.dumps({"format": FORMAT, "version": VERSION, "done": {}, "review": ["\ud800"]}).encode()
    with pytest.raises(InputError) as err:
        import_tracker(data, KNOWN)
    str(err.value).encode("utf-8")
