"""Whiteboard (presenter) mode in the real browser: every view opens on its figure whole on a 1280x720 screen, drawing
on each kind of figure, downloads, keys that reveal and frame figure by figure, the board, screenshots."""

import io
import json
import re
from contextlib import contextmanager

import pytest
from PIL import Image
from playwright.sync_api import expect

from demos.style import PEN_COLORS
from harness.browser import (
    act,
    artifacts_dir,
    next_frames,
    open_page,
    rerun,
    tab_drawn,
    wait_charts,
    wait_every_chart_drawn,
    wait_loaded,
    wait_still,
)
from pages.ui import marks

pytestmark = pytest.mark.browser

SCREEN = {"width": 1280, "height": 720}  # a projector
TALL = {"width": 1400, "height": 900}
KIND_SELECTOR = {
    "plotly": "[data-testid=stPlotlyChart] .js-plotly-plot",
    "vega": "[data-testid=stVegaLiteChart] svg.marks",
    "graphviz": "[data-testid=stGraphVizChart] svg",
}
# One page per kind of figure, its first figure of that kind, and how to change that figure's inputs.
DRAW_CASES = {
    "plotly": ("tensors", ("Shape A", "5, 1, 4")),
    "vega": ("home", ("Logits", "3, 0, -1")),
    "graphviz": ("autograd", None),
}
RED = tuple(int(PEN_COLORS["red"][i:i + 2], 16) for i in (1, 3, 5))


def open_view(browser, url: str, viewport=SCREEN, scheme: str = "light"):
    return open_page(browser, url, viewport=viewport, color_scheme=scheme, accept_downloads=True)


def pick_figure(page, kind: str) -> dict:
    """Mark the first figure of `kind`, its tools and its ink canvas (data-test-pick); returns the figure's id.

    The figure's tools are a component that can mount a moment after the chart, so this waits for both."""
    assert wait_charts(page, 1, timeout=60) >= 1
    page.wait_for_selector(KIND_SELECTOR[kind], timeout=60_000)
    picked = page.wait_for_function(
        """sel => {
             const chart = document.querySelector(sel);
             const block = chart && chart.closest('[data-testid=stVerticalBlock]');
             const tools = block && block.querySelector('[data-testid=wbFigureTools]');
             if (!tools) return null;
             document.querySelectorAll('[data-test-pick]').forEach(n => n.removeAttribute('data-test-pick'));
             chart.setAttribute('data-test-pick', 'chart');
             tools.setAttribute('data-test-pick', 'tools');
             return {id: tools.dataset.figure};
           }""",
        arg=KIND_SELECTOR[kind],
        timeout=60_000,
    )
    return picked.json_value()


def strokes(page, figure_id: str) -> list:
    saved = page.evaluate("id => sessionStorage.getItem('wb-ink:' + id)", figure_id)
    return json.loads(saved)["strokes"] if saved else []


def drag(page, box: dict, start: tuple, end: tuple, steps: int = 12) -> None:
    """Press, move and release the mouse between two points given as fractions of `box`."""
    def at(p):
        return box["x"] + box["width"] * p[0], box["y"] + box["height"] * p[1]
    page.mouse.move(*at(start))
    page.mouse.down()
    for i in range(1, steps + 1):
        x = start[0] + (end[0] - start[0]) * i / steps
        y = start[1] + (end[1] - start[1]) * i / steps
        page.mouse.move(*at((x, y)))
    page.mouse.up()


def canvas_box(page) -> dict:
    canvas = page.locator("[data-test-pick=chart]").locator(
        "xpath=ancestor::*[@data-testid='stVerticalBlock'][1]").locator("[data-testid=wbInkCanvas]")
    canvas.evaluate("c => c.scrollIntoView({block: 'center'})")
    wait_still(page)
    box = canvas.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 150, f"the ink layer covers the figure: {box}"
    return box


def has_color_near(image: Image.Image, x: int, y: int, color: tuple, radius: int = 8, tol: int = 40) -> bool:
    rgb = image.convert("RGB")
    for dx in range(-radius, radius + 1):
        for dy in range(-radius, radius + 1):
            px = rgb.getpixel((min(max(x + dx, 0), rgb.width - 1), min(max(y + dy, 0), rgb.height - 1)))
            if all(abs(a - b) <= tol for a, b in zip(px, color, strict=True)):
                return True
    return False


def download(page, button) -> bytes:
    with page.expect_download(timeout=30_000) as info:
        button.click()
    return open(info.value.path(), "rb").read()


def rerun_drawn(page) -> None:
    """A rerun with the same inputs (the r key), drawn to its end: the figure tools have had their update."""
    rerun(page)
    next_frames(page)


@pytest.mark.parametrize("kind", list(DRAW_CASES))
def test_draw_on_a_figure_and_download_it_annotated(server, browser, kind):
    """Pen, arrow, text, highlighter, eraser and undo on a figure; the annotated PNG has the figure and the ink."""
    slug, change = DRAW_CASES[kind]
    context, page = open_view(browser, f"{server}/{slug}?whiteboard=true")
    try:
        figure = pick_figure(page, kind)["id"]
        tools = page.locator("[data-test-pick=tools]")
        tools.get_by_role("button", name="Draw on this figure").click()
        bar = page.get_by_role("toolbar", name="Drawing tools")
        drag(page, canvas_box(page), (0.30, 0.45), (0.60, 0.55))  # pen, red: the first palette colour
        bar.get_by_role("button", name="Arrow", exact=True).click()
        drag(page, canvas_box(page), (0.20, 0.80), (0.45, 0.65), steps=4)
        bar.get_by_role("button", name="Highlighter", exact=True).click()
        bar.get_by_role("button", name=f"Colour: {list(PEN_COLORS)[1]}").click()
        drag(page, canvas_box(page), (0.10, 0.30), (0.25, 0.30))
        bar.get_by_role("button", name="Text", exact=True).click()
        box = canvas_box(page)
        page.mouse.click(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.25)
        page.get_by_test_id("wbInkText").fill("look here")
        page.keyboard.press("Enter")
        page.screenshot(path=str(artifacts_dir("screenshots") / f"draw-{kind}.png"))
        assert [s["tool"] for s in strokes(page, figure)] == ["pen", "arrow", "highlighter", "text"]
        assert strokes(page, figure)[3]["text"] == "look here"

        bar.get_by_role("button", name="Eraser", exact=True).click()
        drag(page, canvas_box(page), (0.12, 0.28), (0.23, 0.32), steps=6)  # across the highlighter stroke only
        assert [s["tool"] for s in strokes(page, figure)] == ["pen", "arrow", "text"]
        bar.get_by_role("button", name="Undo the last change").click()
        assert [s["tool"] for s in strokes(page, figure)] == ["pen", "arrow", "highlighter", "text"]

        box = canvas_box(page)
        png = Image.open(io.BytesIO(download(page, bar.get_by_role(
            "button", name="Download the figure with the drawing as one PNG"))))
        scale = png.width / box["width"]
        assert scale == pytest.approx(2, abs=0.05) and png.height == pytest.approx(box["height"] * scale, abs=3)
        assert has_color_near(png, int(box["width"] * 0.45 * scale), int(box["height"] * 0.5 * scale), RED), \
            "the pen stroke is in the annotated PNG"
        colors = png.convert("RGB").getcolors(1 << 20) or []
        assert len(colors) > 50, "the figure itself is in the PNG, not only the ink"
        png.save(artifacts_dir("downloads") / f"{kind}-annotated.png")

        svg = download(page, tools.get_by_role("button", name="Download this figure (and its drawing) as SVG"))
        text = svg.decode("utf-8")
        assert text.startswith("<svg") and "look here" in text and 'class="wb-ink"' in text
        assert "@font-face" in text or kind == "graphviz", "the page font travels with the SVG"

        rerun_drawn(page)
        assert len(strokes(page, figure)) == 4, "a rerun with the same inputs keeps the drawing"
        if change:
            label, value = change
            box_input = page.get_by_label(label, exact=True)
            box_input.fill(value)
            # new inputs draw a new figure: the old drawing is dropped, not laid over it
            act(page, lambda: box_input.press("Enter"), lambda: page.wait_for_function(
                "id => sessionStorage.getItem('wb-ink:' + id) === null", arg=figure, timeout=60_000))
    finally:
        context.close()


def test_figures_download_as_png_and_svg_outside_whiteboard_mode(server, browser):
    context, page = open_view(browser, f"{server}/tensors", viewport=TALL)
    try:
        pick_figure(page, "plotly")
        tools = page.locator("[data-test-pick=tools]")
        assert tools.get_by_role("button", name="Draw on this figure").is_hidden(), "Draw is a whiteboard tool"
        png = Image.open(io.BytesIO(download(page, tools.get_by_role("button", name=re.compile("as PNG")))))
        assert png.width > 400 and png.height > 150
        svg = download(page, tools.get_by_role("button", name=re.compile("as SVG"))).decode("utf-8")
        assert svg.startswith("<svg") and "dim -1" in svg, "the SVG holds the figure's own labels"
    finally:
        context.close()


def step_caption(page):
    return page.locator(marks.selector(marks.STEPS, "tensors_bc_steps") + " [data-testid=stCaptionContainer]")


def press_key(page, key: str, outcome) -> None:
    """A presenter key that reruns the script (a step, a section), pressed once the presenter bar is mounted and
    the app idle; waits for its outcome and the run's end."""
    expect(page.get_by_test_id("wbPresenter")).to_be_attached()
    act(page, lambda: page.keyboard.press(key), outcome)


def test_presenter_keys_move_steps_and_sections_and_open_the_board(server, browser):
    context, page = open_view(browser, f"{server}/tensors?whiteboard=true")
    try:
        wait_loaded(page)
        assert page.get_by_test_id("stSidebar").get_attribute("aria-expanded") != "true"
        assert page.get_by_test_id("stExpandSidebarButton").is_visible(), "the sidebar is folded"
        page.locator(marks.selector(marks.STEPS, "tensors_bc_steps")).scroll_into_view_if_needed()
        assert step_caption(page).inner_text().startswith("Step 1 of")
        for key, expected in (("ArrowRight", "Step 2 of"), ("ArrowRight", "Step 3 of"), ("ArrowLeft", "Step 2 of")):
            press_key(page, key, lambda e=expected: expect(step_caption(page)).to_have_text(re.compile(f"^{e}")))
        tabs = page.locator(marks.selector(marks.SECTIONS) + " [role=tab]")
        memory, broadcasting = tabs.filter(has_text="Memory layout"), tabs.filter(has_text="Broadcasting")
        press_key(page, "]", lambda: tab_drawn(memory))
        page.wait_for_url(re.compile("tensors_tab=Memory"))
        memory.focus()  # as a click on the tab leaves it: [ and ] still switch sections (the arrows are the tabs')
        press_key(page, "[", lambda: tab_drawn(broadcasting))

        widths = "() => [...document.querySelectorAll('[data-testid=stMainBlockContainer], [role=tab]')]" \
                 ".map(n => Math.round(n.getBoundingClientRect().width))"
        before = page.evaluate(widths)
        page.keyboard.press("b")
        board = page.get_by_test_id("wbBoard")
        assert board.is_visible()
        assert page.evaluate(widths) == before, "the board opens over the page: the page and its tabs keep their width"
        area = board.get_by_test_id("wbInkCanvas").bounding_box()
        drag(page, area, (0.2, 0.2), (0.8, 0.6))
        board.get_by_role("button", name="Arrow", exact=True).click()
        drag(page, area, (0.2, 0.8), (0.5, 0.7), steps=4)
        board.get_by_role("button", name="Text", exact=True).click()
        page.mouse.click(area["x"] + area["width"] * 0.55, area["y"] + area["height"] * 0.72)
        page.get_by_test_id("wbInkText").fill("(2, 3) + (3,) -> (2, 3)")
        page.keyboard.press("Enter")
        assert page.evaluate("() => JSON.parse(sessionStorage.getItem('wb-ink:board:tensors')).strokes.length") == 3
        page.screenshot(path=str(artifacts_dir("screenshots") / "board.png"))
        png = Image.open(io.BytesIO(download(page, board.get_by_role("button", name="Download the board as PNG"))))
        assert has_color_near(png, int(png.width * 0.5), int(png.height * (0.2 + 0.4 * 0.5)), RED)
        page.keyboard.press("b")
        assert board.is_hidden()
    finally:
        context.close()


def card_step_caption(key: str) -> str:
    return marks.selector(marks.STEPS, f"{key}_reveal") + " [data-testid=stCaptionContainer]"


def reveal_with_right_arrow(page, key: str) -> None:
    """→ twice on a question card at its first step: torch's answer, then why (each a run)."""
    caption = page.locator(card_step_caption(key))
    expect(caption).to_have_text(re.compile("^Step 1 of 3"))
    for expected in ("Step 2 of 3", "Step 3 of 3"):
        press_key(page, "ArrowRight", lambda e=expected: expect(caption).to_have_text(re.compile(f"^{e}")))


def press_to_scroll(page, key: str) -> None:
    """A key that only scrolls: press it and wait for the scroll position to settle."""
    expect(page.get_by_test_id("wbPresenter")).to_be_attached()
    page.keyboard.press(key)
    wait_still(page)


@contextmanager
def presenting(browser, address: str):
    """A 1280x720 whiteboard-mode view, loaded with every chart drawn; closed afterwards."""
    context, page = open_view(browser, address)
    try:
        wait_loaded(page)
        wait_every_chart_drawn(page)
        yield page
    finally:
        context.close()


def test_right_arrow_reveals_question_cards_step_by_step_and_frames_figure_by_figure(server, browser):
    """→ on Practice and Home reveals the card's steps (predict out loud, torch's answer, why); on Home it first
    frames the card under the figure; on a tab with two figures it frames the second, ← brings back the first."""
    with presenting(browser, f"{server}/practice?whiteboard=true") as page:
        card = boxes_on_screen_order(page)[0]
        assert "st-key-" + marks.CARD in card["what"] and whole_on_screen(card), card
        key = card["what"].removeprefix("st-key-" + marks.CARD)
        reveal_with_right_arrow(page, key)
        assert "returned" in page.locator(marks.selector(marks.CARD, key)).inner_text()

    with presenting(browser, f"{server}/home?whiteboard=true") as page:
        figure, card = boxes_on_screen_order(page)[:2]
        assert figure["what"] == "stVegaLiteChart" and whole_on_screen(figure), figure
        assert card["what"] == "st-key-" + marks.CARD + "home_quiz" and card["top"] > SCREEN["height"] / 2, card
        press_to_scroll(page, "ArrowRight")  # frames the next figure: the quiz card
        card = boxes_on_screen_order(page, marks.selector(marks.CARD, "home_quiz"))[0]
        assert whole_on_screen(card, top=FRAME_TOP) and card["top"] <= FRAME_TOP + 30, card
        reveal_with_right_arrow(page, "home_quiz")

    with presenting(browser, f"{server}/tensors?whiteboard=true") as page:
        first, second = boxes_on_screen_order(page, "[data-testid=stPlotlyChart]")[:2]
        assert whole_on_screen(first) and second["top"] > SCREEN["height"], (first, second)
        press_to_scroll(page, "ArrowRight")
        first, second = boxes_on_screen_order(page, "[data-testid=stPlotlyChart]")[:2]
        assert first["bottom"] <= FRAME_TOP, "the second figure replaces the first on the screen"
        top = framed_top(page, second)  # its key row, if it has one, is framed with it
        assert whole_on_screen(second, top=FRAME_TOP) and FRAME_TOP - 1 <= top <= FRAME_TOP + 40, (top, second)
        page.screenshot(path=str(artifacts_dir("screenshots") / "presenter-second-figure.png"))
        press_to_scroll(page, "ArrowLeft")
        first = boxes_on_screen_order(page, "[data-testid=stPlotlyChart]")[0]
        assert whole_on_screen(first, top=FRAME_TOP), first


def _metric_and_table_sizes(page) -> dict:
    return page.evaluate(
        """() => {
             const px = (n) => parseFloat(getComputedStyle(n).fontSize);
             const body = document.querySelector('[data-testid=stMarkdownContainer] p');
             const all = (sel) => [...document.querySelectorAll(sel)].filter(n => n.offsetParent);
             return {
               body: body ? px(body) : 16,
               metrics: all('[data-testid=stMetricValue]').map(px),
               cells: all('[data-testid=stTable] td').map(px),
               clipped: all('[data-testid=stMetricLabel] *').filter(n => n.scrollWidth > n.clientWidth + 1)
                          .map(n => n.innerText),
               overflow: document.documentElement.scrollWidth - innerWidth,
               titles: [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
                 const box = plot.getBoundingClientRect();
                 return [...plot.querySelectorAll('.g-gtitle text, .annotation-text')].filter(t => {
                   const r = t.getBoundingClientRect();
                   return r.width && (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1);
                 }).map(t => t.textContent);
               }),
             };
           }"""
    )


# What a presenter frames: a figure, or a question card (Practice, Home); an interview corner's card (marks.CORNER)
# sits below its view's figure and does not count as the view's first figure.
FIGURE_OR_CARD = ("[data-testid=stPlotlyChart], [data-testid=stVegaLiteChart], [data-testid=stGraphVizChart], "
                  + marks.selector(marks.CARD))
# Two figures read together (ui.figure_pair: Autograd's expression beside the graph torch recorded).
PAIRED_FIGURES = (marks.selector(marks.PAIR) + " :is([data-testid=stPlotlyChart], [data-testid=stVegaLiteChart], "
                  "[data-testid=stGraphVizChart])")
FRAME_TOP = 90  # px: the app's header strip is above this line (assets/js/presenter.js)
KEY_ROW = marks.selector(marks.KEYS)  # a figure's few key controls (ui.key_controls)
KEY_ROW_HEIGHT = 90  # px: one compact row of labelled fields
# Every control a visitor can set; in whiteboard mode each sits in a figure's key row, a question card (or the
# drill's row under it), a step-by-step reveal, or folded away (ui.settings, an expander).
CONTROLS = ", ".join(f"[data-testid=stMain] [data-testid={kind}]" for kind in (
    "stTextInput", "stNumberInput", "stTextArea", "stSlider", "stSelectbox", "stMultiSelect", "stRadio",
    "stCheckbox", "stButtonGroup", "stButton", "stDownloadButton", "stFileUploader"))
PLACED = ", ".join(marks.selector(mark) for mark in (marks.KEYS, marks.CARD, marks.CARD_NAV, marks.CORNER, marks.STEPS))


def boxes_on_screen_order(page, selector: str = FIGURE_OR_CARD) -> list[dict]:
    """The boxes of the shown elements matching `selector`, top first, in viewport pixels (as the browser laid
    them out after whiteboard.css reordered the page)."""
    return page.evaluate(
        """sel => [...document.querySelectorAll(sel)]
             .filter(e => e.getClientRects().length && e.getBoundingClientRect().height > 0)
             .map(e => { const r = e.getBoundingClientRect();
                         return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                                 what: (e.className.match(/st-key-wb\\S+/) || [e.dataset.testid])[0]}; })
             .sort((a, b) => a.top - b.top)""",
        selector,
    )


def framed_top(page, figure: dict) -> float:
    """Where a presenter's frame of `figure` starts: at the key row just above it (presenter.js KEY_ROW_GAP), or
    at the figure."""
    rows = [k for k in boxes_on_screen_order(page, KEY_ROW) if figure["top"] - 40 <= k["bottom"] <= figure["top"] + 1]
    return min([figure["top"], *(k["top"] for k in rows)])


def loose_controls(page) -> list[str]:
    """The controls shown in whiteboard mode outside a key row, a card or a step reveal (not folded away)."""
    return page.evaluate(
        """([controls, placed]) => [...document.querySelectorAll(controls)]
             .filter(e => e.checkVisibility({visibilityProperty: true}) && !e.closest(placed))
             .map(e => e.innerText.split('\\n')[0].slice(0, 50) || e.dataset.testid)""",
        [CONTROLS, PLACED],
    )


def whole_on_screen(box: dict, top: float = 0) -> bool:
    return box["top"] >= top - 1 and box["bottom"] <= SCREEN["height"] + 1 and box["left"] >= 0 \
        and box["right"] <= SCREEN["width"]


def assert_presentable(page, name: str, charts: int) -> None:
    """A view opened in whiteboard mode at 1280x720 (the URL has whiteboard=true) reads from the back of the room:
    the first figure (or question card) whole on the first screen, its key controls one compact row above it,
    nothing else loose, nothing sideways, metrics and tables at least body size, no metric label or figure title
    cut off. Saves the screen as a presenter sees it. tests/browser/test_shared_views.py calls this on the fresh
    open of every view's copied URL, so every view is opened once for both checks."""
    wait_loaded(page)
    wait_charts(page, charts, timeout=60)
    wait_every_chart_drawn(page)  # every chart of this view drawn before measuring
    assert page.locator("[data-testid=stException]").count() == 0
    page.screenshot(path=str(artifacts_dir("screenshots") / f"{name}-whiteboard-screen.png"))
    figures = boxes_on_screen_order(page)
    assert figures, "the view opens on a figure or a question card"
    assert whole_on_screen(figures[0]), f"the first figure is whole on the 1280x720 screen: {figures[0]}"
    keys = [k for k in boxes_on_screen_order(page, KEY_ROW) if k["top"] < figures[0]["top"]]
    assert all(whole_on_screen(k) and k["bottom"] - k["top"] <= KEY_ROW_HEIGHT for k in keys), \
        f"the figure's key controls are one compact row above it, on the screen: {keys}"
    assert not loose_controls(page), f"controls not folded away: {loose_controls(page)}"
    pair = boxes_on_screen_order(page, PAIRED_FIGURES)
    assert all(whole_on_screen(b) for b in pair), f"both figures of a pair are whole on the screen: {pair}"
    sizes = _metric_and_table_sizes(page)
    assert sizes["overflow"] <= 1, "nothing sticks out sideways at 1280 px"
    assert all(m >= sizes["body"] for m in sizes["metrics"]), sizes
    assert all(c >= 16 for c in sizes["cells"]), sizes
    assert not sizes["clipped"], f"metric labels cut off: {sizes['clipped']}"
    assert not sizes["titles"], f"figure titles or notes cut off at the figure's edge: {sizes['titles']}"
