"""The whiteboard layer, and the one place its marks are named.

Whiteboard (presenter) mode changes no page's code. pages/ui wraps each part of a page that the presenter works
with in a container whose key starts with one of the marks below; Streamlit turns the key `wbfig-x` into the CSS
class `st-key-wbfig-x`. In whiteboard mode the page loads assets/css/whiteboard.css, whose `$figure`, `$keys`, ...
are filled in from MARKS here (`stylesheet`), so it can put a view's figure first, its key row just above it and
fold the rest; and assets/js/presenter.js, which gets the same MARKS as a constant (`script_constant`), finds the
figures, step blocks and section tabs that the → ← ] [ keys move between. In normal mode the same containers are
plain (ui.key_controls and ui.settings give them other keys), so nothing else changes.
"""

import json
from string import Template

SECTIONS = "wbsections-"  # ui.sections: the page's tab set; ] and [ switch its tabs
KEYS = "wbkeys-"  # ui.key_controls: a figure's few controls, one compact row just above it
SETTINGS = "wbsettings-"  # ui.settings: a view's other controls, folded into one line under its figure
STEPS = "wbsteps-"  # ui.steps: an explanation that → reveals one step at a time
FIGURE = "wbfig-"  # ui.plot / vega / graph: a figure (with its tools), shown first; → frames the next one
PAIR = "wbpair-"  # ui.figure_pair: two figures read together, kept side by side
CARD = "wbcard-"  # ui.predict_then_run: a question card, shown first like a figure
CORNER = "wbcorner-"  # ui.interview_corner: its card, framed like a figure but left in place
CARD_NAV = "wbcardnav-"  # Practice: the drill's own row (Skip, Next, End now), right under its card

MARKS = {"sections": SECTIONS, "keys": KEYS, "settings": SETTINGS, "steps": STEPS, "figure": FIGURE, "pair": PAIR,
         "card": CARD, "corner": CORNER, "card_nav": CARD_NAV}


def selector(mark: str, key: str = "") -> str:
    """A CSS selector of the containers with `mark` (and a key starting with `key`), for tests and the benchmark."""
    return f"[class*=st-key-{mark}{key}]"


def stylesheet(css: str) -> str:
    """A stylesheet with its `$name` placeholders filled with the marks (an unknown name raises KeyError)."""
    return Template(css).substitute(MARKS)


def script_constant() -> str:
    """The marks as a JavaScript constant, prepended to presenter.js: `MARKS.figure` is "wbfig-"."""
    return f"const MARKS = {json.dumps(MARKS)};\n"
