"""The study tracker's file format: which concepts of which topic a learner has ticked."""

import json

from demos.errors import InputError

FORMAT = "pytorch-whiteboard-tracker"
VERSION = 1
MAX_BYTES = 100_000


def export_tracker(done: dict[str, list[str]]) -> str:
    """The tracker as JSON text: {"format", "version", "done": {topic: [concept, ...]}}."""
    clean = {topic: sorted(set(concepts)) for topic, concepts in sorted(done.items()) if concepts}
    return json.dumps({"format": FORMAT, "version": VERSION, "done": clean}, indent=2, ensure_ascii=False)


def import_tracker(data: bytes | str, known: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Parse a tracker file, keeping only topics and concepts this app knows; anything malformed is an InputError."""
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise InputError(f"That file is larger than a tracker can be ({MAX_BYTES // 1000} kB at most).")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("That file is not text: a tracker file is JSON.") from None
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, RecursionError):
        raise InputError("That file is not valid JSON, so it is not a tracker file.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("That JSON file is not a PyTorch Whiteboard tracker (its 'format' field is missing or wrong).")
    if doc.get("version") != VERSION:
        raise InputError(f"This tracker file has version {doc.get('version')!r}; this app reads version {VERSION}.")
    done = doc.get("done")
    if not isinstance(done, dict):
        raise InputError("The tracker's 'done' field must map each topic to a list of concepts.")
    result = {}
    for topic, concepts in done.items():
        if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
            raise InputError(f"The tracker's entry for '{topic}' must be a list of concept names.")
        if topic in known:
            result[topic] = [c for c in concepts if c in known[topic]]
    return result
