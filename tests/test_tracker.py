"""Tracker files: export then import is the identity; anything else is refused with a sentence."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demos.errors import InputError
from demos.tracker import FORMAT, MAX_BYTES, VERSION, export_tracker, import_tracker

KNOWN = {"tensors": ("Broadcasting rules", "einsum"), "autograd": ("Leaves and retain_grad",)}


def test_round_trip():
    done = {"tensors": ["einsum", "Broadcasting rules"], "autograd": []}
    assert import_tracker(export_tracker(done).encode(), KNOWN) == {"tensors": ["Broadcasting rules", "einsum"]}


def test_unknown_topics_and_concepts_are_dropped_not_fatal():
    doc = {"format": FORMAT, "version": VERSION, "done": {"tensors": ["einsum", "gone"], "old-topic": ["x"]}}
    assert import_tracker(json.dumps(doc), KNOWN) == {"tensors": ["einsum"]}


@pytest.mark.parametrize(
    "data, words",
    [
        (b"\xff\xfe", "not text"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a PyTorch Whiteboard tracker"),
        (json.dumps({"format": "other"}).encode(), "not a PyTorch Whiteboard tracker"),
        (json.dumps({"format": FORMAT, "version": 99, "done": {}}).encode(), "version 99"),
        (json.dumps({"format": FORMAT, "version": VERSION, "done": []}).encode(), "'done' field"),
        (json.dumps({"format": FORMAT, "version": VERSION, "done": {"tensors": "einsum"}}).encode(), "list"),
        (json.dumps({"format": FORMAT, "version": VERSION, "done": {"tensors": [1]}}).encode(), "list"),
        (b" " * (MAX_BYTES + 1), "larger"),
        (b"[" * 99_000, "not valid JSON"),
    ],
)
def test_malformed_files_are_refused(data, words):
    with pytest.raises(InputError, match=words):
        import_tracker(data, KNOWN)


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_parse_or_raise_input_error(data):
    try:
        result = import_tracker(data, KNOWN)
    except InputError:
        return
    assert all(topic in KNOWN and set(c) <= set(KNOWN[topic]) for topic, c in result.items())
