"""What a visitor waits for after moving a control: a change of one of the view's own widgets, timed in the browser
until the view has redrawn.

The widget is the first control of the view's first key row (ui.key_controls) that can be changed without typing:
a slider, a toggle or checkbox, a number's step buttons, a radio or segmented choice, or a select box. It goes
back and forth between its setting and a neighbouring one; one round trip is made untimed first, so every timed
change finds both results computed: what is timed is the view's rerun (its fragment, or the page), not the first
computation of a new setting. A view with no such control in a key row is left out.
"""

import statistics
from dataclasses import dataclass

from harness.browser import run_mark, wait_every_chart_drawn, wait_run
from pages.ui import marks

KEY_ROWS = f"[class*=st-key-keys-], {marks.selector(marks.KEYS)}"
KINDS = (("slider", "input[type=range]"), ("toggle", "[data-testid=stCheckbox] input"),
         ("number", "[data-testid=stNumberInput]"), ("radio", "[data-testid=stRadio]"),
         ("segmented", "[data-testid=stButtonGroup]"), ("select", "[data-testid=stSelectbox]"))
OPTIONS = {"radio": "label", "segmented": "button", "select": "[role=listbox] [role=option]"}


@dataclass
class Mover:
    """One control and its two settings: `there` moves it to the other one, `back` returns it."""

    page: object
    kind: str
    element: object
    away: int = 0  # option index (choices) or +1/-1 (slider, number) for the way there

    def __post_init__(self):
        if self.kind == "slider":
            at_max = self.element.get_attribute("value") == self.element.get_attribute("max")
            self.away = -1 if at_max else 1
        elif self.kind == "number":
            self.away = 1 if self.element.locator("[data-testid=stNumberInputStepUp]").is_enabled() else -1
        elif self.kind in OPTIONS:
            options = self._options()
            chosen = [self._is_chosen(options.nth(i)) for i in range(options.count())]
            self.home = chosen.index(True) if True in chosen else 0
            self.away = 1 if self.home == 0 else self.home - 1
            if self.kind == "select":
                self.page.keyboard.press("Escape")

    def move(self, there: bool) -> None:
        if self.kind == "slider":
            self.element.focus()
            self.element.press("ArrowRight" if (self.away > 0) == there else "ArrowLeft")
        elif self.kind == "toggle":
            self.element.click(force=True)
        elif self.kind == "number":
            up = (self.away > 0) == there
            self.element.locator(f"[data-testid=stNumberInputStep{'Up' if up else 'Down'}]").click()
        else:
            self._options().nth(self.away if there else self.home).click()

    def _options(self):
        if self.kind == "select":
            self.element.locator("input").click()
            return self.page.locator(OPTIONS["select"])
        return self.element.locator(OPTIONS[self.kind])

    def _is_chosen(self, option) -> bool:
        if self.kind == "radio":
            return option.locator("input").is_checked()
        if self.kind == "select":
            return option.get_attribute("aria-selected") == "true"
        return "Active" in (option.get_attribute("kind") or "")


def view_mover(page) -> Mover | None:
    """The view's own control to change: the first changeable one, in page order, of its first key row."""
    rows = page.locator(KEY_ROWS)
    for i in range(rows.count()):
        row = rows.nth(i)
        if not row.is_visible():
            continue
        found = [(box["y"], box["x"], kind, element) for kind, selector in KINDS
                 for element in row.locator(selector).all()
                 if element.is_visible() and (box := element.bounding_box())]
        if found:
            _, _, kind, element = min(found, key=lambda f: (f[0], f[1]))
            return Mover(page, kind, element)
    return None


def change_once(page, mover: Mover, there: bool) -> float:
    """ms from the change (page clock, just before it) to the end of the run it started, every chart drawn."""
    mark = run_mark(page)
    start = page.evaluate("() => performance.now()")
    mover.move(there)
    _, finished = wait_run(page, mark)
    wait_every_chart_drawn(page)
    return finished - start


def change_ms(page, changes: int) -> dict | None:
    """Median and max ms of `changes` timed changes of the view's own control, after one untimed round trip."""
    mover = view_mover(page)
    if mover is None:
        return None
    change_once(page, mover, True)
    change_once(page, mover, False)
    times = [change_once(page, mover, i % 2 == 0) for i in range(changes)]
    if changes % 2:
        change_once(page, mover, False)  # back to the view's own setting
    return {"widget": mover.kind, "median_ms": statistics.median(times), "max_ms": max(times)}
