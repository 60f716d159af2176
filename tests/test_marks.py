"""The whiteboard layer's marks are named once (pages/ui/marks.py): the stylesheet and the presenter script take
them from there, and no file spells one out."""

import re

from demos.registry import ROOT
from pages.ui import marks

SPELLED = re.compile(r"\bwb(?:sections|keys|settings|steps|fig|pair|card|corner|cardnav)-")
SOURCES = [*(ROOT / "pages").rglob("*.py"), *(ROOT / "assets").rglob("*.css"), *(ROOT / "assets").rglob("*.js")]


def test_every_mark_is_filled_into_the_stylesheet_or_used_by_the_presenter():
    css = (ROOT / "assets" / "css" / "whiteboard.css").read_text()
    js = (ROOT / "assets" / "js" / "presenter.js").read_text()
    filled = marks.stylesheet(css)
    assert "$" not in filled
    used = {name for name, prefix in marks.MARKS.items() if f"st-key-{prefix}" in filled or f'"{name}"' in js}
    assert used == set(marks.MARKS) - {"settings"}  # an expander folds itself: its mark needs no style


def test_the_presenter_script_gets_the_marks_as_a_constant():
    constant = marks.script_constant()
    assert constant.startswith("const MARKS = {") and '"figure": "wbfig-"' in constant


def test_no_file_spells_a_mark_out():
    spelled = [f"{path.relative_to(ROOT)}:{n}" for path in SOURCES if path.name != "marks.py"
               for n, line in enumerate(path.read_text().splitlines(), 1) if SPELLED.search(line)]
    assert spelled == []
