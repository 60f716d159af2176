"""The Streams tab's code panel: the recorder file that made the recording the tab draws, shown whole.

stream_recorder.py is itself the snippet (it runs alone on a machine with a GPU, without this package), so the
entry point that hands it to the page is registered here rather than in that file."""

from demos.memory import stream_recorder
from demos.shown import Script, entry


@entry()
def recorder_code() -> Script:
    """stream_recorder.py, whole: the recorder that made the shipped recording."""
    return stream_recorder.recorder_script()
