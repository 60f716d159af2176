"""A learner's progress: the concepts ticked per topic and the questions to ask again, as a file and as a link.

Both forms are visitor input when they come back (an upload, a shared URL): each is size-capped, every field
is checked, and anything else is one InputError sentence. Nothing in them is ever executed or unpickled.

The file is readable JSON with concept names. The link is compact: `1.` (its version) and then base64url of
zlib-compressed JSON holding concept *indices* per topic, so a whole tracker fits in a short URL. A change to
the order of a topic's concepts must come with a new link version (a test pins a version-1 link).
"""

import base64
import binascii
import json
import re
import zlib
from dataclasses import dataclass, field

from demos.errors import InputError, quoted

FORMAT = "pytorch-whiteboard-tracker"
VERSION = 1
MAX_BYTES = 100_000  # a tracker file
LINK_VERSION = 1
MAX_LINK = 2_000  # characters of a progress link's value
MAX_LINK_JSON = 20_000  # bytes a link may decompress to: a zip bomb stops here
MAX_REVIEW = 50  # questions waiting to be asked again
QUESTION_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}([/@][a-z0-9_]{1,40})?")

Known = dict[str, tuple[str, ...]]  # topic slug -> its concepts, in the tracker's order


@dataclass(frozen=True)
class Progress:
    """Ticked concepts per topic (only known ones) and question ids to ask again, oldest first."""

    done: dict[str, tuple[str, ...]] = field(default_factory=dict)
    review: tuple[str, ...] = ()

    def ticked(self) -> int:
        return sum(len(c) for c in self.done.values())


# ---- the file ---------------------------------------------------------------------------------------------------


def export_tracker(done: dict[str, list[str]], review: tuple[str, ...] = ()) -> str:
    """The tracker as JSON text: {"format", "version", "done": {topic: [concept, ...]}, "review": [id, ...]}."""
    clean = {topic: sorted(set(concepts)) for topic, concepts in sorted(done.items()) if concepts}
    doc = {"format": FORMAT, "version": VERSION, "done": clean}
    if review:
        doc["review"] = list(review)
    return json.dumps(doc, indent=2, ensure_ascii=False)


def import_tracker(data: bytes | str, known: Known) -> Progress:
    """Parse a tracker file, keeping only topics and concepts this app knows; anything malformed is an InputError."""
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise InputError(f"That file is larger than a tracker can be ({MAX_BYTES // 1000} kB at most).")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("That file is not text: a tracker file is JSON.") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"That file is larger than a tracker can be ({MAX_BYTES // 1000} kB at most).")
    doc = _json(data, "That file is not valid JSON, so it is not a tracker file.")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("That JSON file is not a PyTorch Whiteboard tracker (its 'format' field is missing or wrong).")
    if doc.get("version") != VERSION:
        version = quoted(doc.get("version"))
        raise InputError(f"This tracker file has version {version}; this app reads version {VERSION}.")
    done = doc.get("done")
    if not isinstance(done, dict):
        raise InputError("The tracker's 'done' field must map each topic to a list of concepts.")
    result = {}
    for topic, concepts in done.items():
        if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
            raise InputError(f"The tracker's entry for {quoted(topic)} must be a list of concept names.")
        if topic in known:
            ticked = tuple(c for c in known[topic] if c in concepts)
            if ticked:
                result[topic] = ticked
    return Progress(result, _review(doc.get("review", []), "The tracker's"))


# ---- the link ---------------------------------------------------------------------------------------------------


def progress_link_value(progress: Progress, known: Known) -> str:
    """The progress as a short URL-safe text: version, then base64url(zlib(JSON of concept indices))."""
    done = {
        topic: [known[topic].index(c) for c in concepts]
        for topic, concepts in sorted(progress.done.items())
        if topic in known and concepts
    }
    doc = {"d": done, "r": list(progress.review)}
    packed = zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)
    return f"{LINK_VERSION}." + base64.urlsafe_b64encode(packed).decode().rstrip("=")


def read_progress_link(value: object, known: Known) -> Progress:
    """The progress a link holds, or an InputError: too long, another version, damaged, or fields out of shape."""
    if not isinstance(value, str):
        raise InputError("A progress link holds one value; this one holds several.")
    if len(value) > MAX_LINK:
        raise InputError(f"That progress link is too long to be one ({MAX_LINK} characters at most).")
    version, dot, body = value.strip().partition(".")
    if not dot or not re.fullmatch(r"\d{1,3}", version) or not re.fullmatch(r"[A-Za-z0-9_-]+", body):
        raise InputError(f"That is not a progress link: it should look like `{LINK_VERSION}.eNq…`.")
    if int(version) != LINK_VERSION:
        raise InputError(f"That progress link has version {int(version)}; this app reads version {LINK_VERSION}.")
    doc = _json(_unpack(body), "That progress link is damaged: it does not decode.")
    if not isinstance(doc, dict) or not set(doc) <= {"d", "r"} or not isinstance(doc.get("d", {}), dict):
        raise InputError("That progress link is damaged: its fields are not a tracker's.")
    return Progress(_done_by_index(doc.get("d", {}), known), _review(doc.get("r", []), "The link's"))


def _unpack(body: str) -> str:
    """base64url, then zlib with a cap on the output: a damaged or oversized payload is an InputError."""
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        inflate = zlib.decompressobj()
        text = inflate.decompress(packed, MAX_LINK_JSON)
    except (binascii.Error, ValueError, zlib.error):
        raise InputError("That progress link is damaged: it does not decode.") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise InputError("That progress link is damaged or too large to be one.")
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("That progress link is damaged: it does not decode.") from None


def _done_by_index(done: dict, known: Known) -> dict[str, tuple[str, ...]]:
    result = {}
    for topic, indices in done.items():
        if not isinstance(indices, list) or not all(type(i) is int for i in indices):
            raise InputError(f"That progress link is damaged: the entry for {quoted(topic)} is not a list of numbers.")
        concepts = known.get(topic, ())
        ticked = tuple(c for i, c in enumerate(concepts) if i in set(indices))
        if ticked:
            result[topic] = ticked
    return result


# ---- shared checks ----------------------------------------------------------------------------------------------


def _json(text: str, message: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # ValueError covers JSONDecodeError and integers of thousands of digits
        raise InputError(message) from None


def _review(ids: object, whose: str) -> tuple[str, ...]:
    """Question ids to ask again: a list of at most MAX_REVIEW short ids, duplicates dropped, order kept."""
    if not isinstance(ids, list) or not all(isinstance(q, str) for q in ids):
        raise InputError(f"{whose} 'review' field must be a list of question ids.")
    if len(ids) > MAX_REVIEW:
        raise InputError(f"{whose} review list has {len(ids)} questions; at most {MAX_REVIEW} are kept.")
    bad = next((q for q in ids if not QUESTION_ID.fullmatch(q)), None)
    if bad is not None:
        raise InputError(f"{whose} review list names {quoted(bad)}, which is not a question id.")
    return tuple(dict.fromkeys(ids))
