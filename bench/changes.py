"""What a visitor waits for after moving a control: a change of one of the view's own widgets, timed in the browser
until the view has redrawn.

The widget is a control of the view's first key row (ui.key_controls) that has one that can be changed without
typing: a slider, a toggle or checkbox, a number's step buttons, a radio or segmented choice, or a select box, in
that order of preference. It goes back and forth between its setting and a neighbouring one; one round trip is made
untimed first, so every timed change finds both results computed: what is timed is the view's rerun (its fragment,
or the page), not the first computation of a new setting, until the last change it made to the page (a document
observer: a fast run that the frontend draws in one go never shows a running state). A view with no such control
in a key row is left out.
"""

import statistics
from dataclasses import dataclass

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from harness.browser import APP, IDLE, settle, wait_every_chart_drawn
from pages.ui import marks

KEY_ROWS = f"[class*=st-key-keys-], {marks.selector(marks.KEYS)}"
KINDS = (("slider", "input[type=range]"), ("toggle", "[data-testid=stCheckbox] input"),
         ("number", "[data-testid=stNumberInput]"), ("radio", "[data-testid=stRadio]"),
         ("segmented", "[data-testid=stButtonGroup]"), ("select", "[data-testid=stSelectbox]"))
OPTIONS = {"radio": "[role=radiogroup] label", "segmented": "button", "select": "[role=listbox] [role=option]"}


@dataclass
class Mover:
    """One control and its two settings: `there` moves it to the other one, `back` returns it."""

    page: object
    kind: str
    element: object
    away: int | str | None = 0  # the way there: +1/-1 (slider, number), an option's index or a select box's option

    def __post_init__(self):
        if self.kind == "slider":
            at_max = self.element.get_attribute("value") == self.element.get_attribute("max")
            self.away = -1 if at_max else 1
        elif self.kind == "number":
            self.away = 1 if self.element.locator("[data-testid=stNumberInputStepUp]").is_enabled() else -1
        elif self.kind == "select":  # by name, chosen when the list is first opened for a change
            self.home, self.away = self.element.locator("input").input_value(), None
        elif self.kind in OPTIONS:
            options = self._options()
            chosen = [self._is_chosen(options.nth(i)) for i in range(options.count())]
            self.home = chosen.index(True) if True in chosen else 0
            self.away = 1 if self.home == 0 else self.home - 1

    def move(self, there: bool) -> None:
        if self.kind == "slider":
            self.element.focus()
            self.element.press("ArrowRight" if (self.away > 0) == there else "ArrowLeft")
        elif self.kind == "toggle":
            self.element.click(force=True)
        elif self.kind == "number":
            up = (self.away > 0) == there
            self.element.locator(f"[data-testid=stNumberInputStep{'Up' if up else 'Down'}]").click()
        elif self.kind == "select":
            names = self._options().all_inner_texts()
            if self.away is None:
                self.away = next(name for name in names if name.strip() != self.home.strip())
            self.page.get_by_role("option", name=self.away if there else self.home, exact=True).click()
        else:
            self._options().nth(self.away if there else self.home).click()

    def _options(self):
        if self.kind == "select":
            listbox = self.page.locator("[role=listbox]")
            listbox.wait_for(state="hidden", timeout=10_000)  # the last choice's list has finished closing
            self.element.locator("input").click()
            listbox.wait_for(state="visible", timeout=10_000)
            return self.page.locator(OPTIONS["select"])
        return self.element.locator(OPTIONS[self.kind])

    def _is_chosen(self, option) -> bool:
        if self.kind == "radio":
            return option.locator("input").is_checked()
        return "Active" in (option.get_attribute("kind") or "")


def view_mover(page) -> Mover | None:
    """The view's own control to change: in its first key row with a changeable control, the first (in page order)
    of the kind listed first in KINDS (a slider before a select box: a select box may load a preset that moves
    other fields)."""
    rows = page.locator(KEY_ROWS)
    for i in range(rows.count()):
        row = rows.nth(i)
        if not row.is_visible():
            continue
        found = [(rank, box["y"], box["x"], kind, element) for rank, (kind, selector) in enumerate(KINDS)
                 for element in row.locator(selector).all()
                 if element.is_visible() and (box := element.bounding_box())]
        if found:
            *_, kind, element = min(found, key=lambda f: f[:3])
            return Mover(page, kind, by_widget_key(page, element, dict(KINDS)[kind]))
    return None


def by_widget_key(page, element, selector: str):
    """The same control found by its widget's key (st-key-<key>) instead of by position: a rerun may add or remove
    rows and controls above it, which would make a positional locator point at another control."""
    key_class = element.evaluate(
        "e => [...e.closest('.stElementContainer, [class*=st-key-]').classList].find(c => c.startsWith('st-key-'))")
    return page.locator(f".{key_class}").locator(selector).first if key_class else element


# The page's clock at the last change in the app's main area (an element drawn, a figure's SVG, a class): the
# frontend shows a run's state only when it does not draw the whole run in one go, so the end of what a change
# redrew is read from the document itself.
WATCH_DOCUMENT = """() => { if (!window.__wbLastMutation) { window.__wbLastMutation = [0];
  const inMain = node => (node.closest ? node : node.parentElement)?.closest("[data-testid=stMain]");
  new MutationObserver(records => {
    if (records.some(r => inMain(r.target))) window.__wbLastMutation[0] = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true}); } }"""
QUIET_MS = 300  # no change for this long, the app idle and every chart drawn: the view has redrawn


def change_once(page, mover: Mover, there: bool) -> float:
    """ms from the change (page clock, just before it) to the last change it made to the document."""
    page.evaluate(WATCH_DOCUMENT)
    settle(page)
    start = page.evaluate("() => performance.now()")
    mover.move(there)
    page.wait_for_function(
        f"""s => window.__wbLastMutation[0] > s && performance.now() - window.__wbLastMutation[0] > {QUIET_MS}
                 && document.querySelector('{APP}').getAttribute('data-test-script-state') === '{IDLE}'""",
        arg=start, timeout=20_000)
    wait_every_chart_drawn(page)
    return page.evaluate("() => window.__wbLastMutation[0]") - start


def change_ms(page, changes: int) -> dict | None:
    """Median and max ms of `changes` timed changes of the view's own control, after one untimed round trip."""
    mover = view_mover(page)
    if mover is None:
        return None
    try:
        return timed_changes(page, mover, changes)
    except PlaywrightTimeout:  # reported as a failed row, not a crash: the other views are still measured
        return {"widget": f"{mover.kind}: no redraw seen within 20 s", "median_ms": float("inf"),
                "max_ms": float("inf")}


def timed_changes(page, mover: Mover, changes: int) -> dict:
    change_once(page, mover, True)
    change_once(page, mover, False)
    times = [change_once(page, mover, i % 2 == 0) for i in range(changes)]
    if changes % 2:
        change_once(page, mover, False)  # back to the view's own setting
    return {"widget": mover.kind, "median_ms": statistics.median(times), "max_ms": max(times)}
