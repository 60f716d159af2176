// The presenter bar, mounted once at the top of a page in whiteboard mode: keyboard shortcuts for the step reveal
// and the page's figures and sections, and a blank board that opens over the right of the page.
// data: {page, colors: JSON text of [{name, hex}]}
// Keys (ignored while typing in a field; arrows also while a control that moves with them has the focus): → /
// PageDown the next step of the step-by-step block in view (a question card's reveal included), else the next
// figure framed at the top of the screen, else the next section; ← / PageUp the same backwards; ] and [ next and
// previous section; B opens or closes the board.

const TYPING = "input, textarea, select, [contenteditable=true]";
// Controls whose own arrow keys move them (a focused tab, as after a click on it, moves to its neighbour): the
// arrows are theirs, the other keys still the presenter's.
const OWN_ARROWS = `${TYPING}, [role=slider], [role=radiogroup], [role=listbox], [role=combobox], [role=menu], ` +
  "[role=tablist]";
const ARROWS = new Set(["ArrowRight", "ArrowLeft", "PageDown", "PageUp"]);

const FRAME_TOP = 90; // px: below the app's header strip

// Containers pages/ui marks for this layer (MARKS, from pages/ui/marks.py, is prepended to this script).
const marked = (...names) => names.map((n) => `[class*='st-key-${MARKS[n]}']`).join(", ");

function keyedChild(scope, suffix) {
  return [...scope.querySelectorAll("[class*='st-key-']")]
    .find((n) => [...n.classList].some((c) => c.startsWith("st-key-") && c.endsWith(suffix)));
}

// The step-by-step blocks on screen (ui.steps marks their container; a question card's
// reveal is one), in screen order: → reveals the next step of the first that has one, ← goes back in the last.
function clickStep(direction) {
  const onScreen = [...document.querySelectorAll(marked("steps"))].filter((b) => {
    const r = b.getBoundingClientRect();
    return r.height > 0 && r.bottom > FRAME_TOP && r.top < innerHeight;
  }).sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
  if (direction < 0) onScreen.reverse();
  for (const block of onScreen) {
    const control = keyedChild(block, direction > 0 ? "_next" : "_prev");
    const b = control && control.querySelector("button:not([disabled])");
    if (b) { b.click(); return true; }
  }
  return false;
}

// Figures and question cards, marked by pages/ui (figures.py, quiz.py), in the order they show on screen.
const FIGURES = marked("figure", "card", "corner");

// A figure's key controls (ui.key_controls) sit in one row just above it: a figure is framed with that row.
const KEY_ROW = marked("keys");
const KEY_ROW_GAP = 40; // px: at most this far above the figure

function topWithKeyRow(figure) {
  const top = figure.getBoundingClientRect().top;
  const rows = [...document.querySelectorAll(KEY_ROW)].map((r) => r.getBoundingClientRect())
    .filter((r) => r.height > 0 && r.bottom <= top + 1 && r.bottom >= top - KEY_ROW_GAP);
  return Math.min(top, ...rows.map((r) => r.top));
}

function figuresOnScreenOrder() {
  return [...document.querySelectorAll(FIGURES)]
    .filter((f) => f.getClientRects().length && !f.parentElement.closest(FIGURES))
    .map((f) => ({ f, top: topWithKeyRow(f) }))
    .sort((a, b) => a.top - b.top);
}

function scroller(node) {
  for (let n = node.parentElement; n; n = n.parentElement) {
    const overflow = getComputedStyle(n).overflowY;
    if ((overflow === "auto" || overflow === "scroll") && n.scrollHeight > n.clientHeight) return n;
  }
  return document.scrollingElement;
}

// Frame the next (or previous) figure: its top just under the header strip, so it owns the screen; a first figure
// that fits under the page's title and tabs is framed with them (the page's top).
function frameFigure(direction) {
  const figures = figuresOnScreenOrder();
  if (!figures.length) return false;
  const box = scroller(figures[0].f);
  const now = box.scrollTop, end = box.scrollHeight - box.clientHeight;
  const stops = figures.map((x, i) => {
    const fitsAtTop = i === 0 && now + x.f.getBoundingClientRect().bottom <= innerHeight;
    return fitsAtTop ? 0 : Math.min(end, Math.max(0, now + x.top - FRAME_TOP));
  });
  const stop = direction > 0 ? stops.find((y) => y > now + 5) : stops.filter((y) => y < now - 5).pop();
  if (stop === undefined) return false;
  box.scrollTo({ top: stop });
  return true;
}

// The page's section tabs (ui.sections marks their container), else the first tabs.
function sectionTabs() {
  const own = document.querySelector(`${marked("sections")} [role=tablist]`);
  return own || document.querySelector("[data-testid=stMain] [role=tablist]");
}

// A page without section tabs: its next or previous header (st.header) scrolled to the top of the screen.
function scrollToHeader(direction) {
  const headers = [...document.querySelectorAll("[data-testid=stMain] h2")];
  const ahead = direction > 0
    ? headers.find((h) => h.getBoundingClientRect().top > FRAME_TOP + 5)
    : headers.filter((h) => h.getBoundingClientRect().top < FRAME_TOP - 5).pop();
  if (!ahead) return false;
  ahead.scrollIntoView({ block: "start" }); // whiteboard.css keeps it clear of the header strip
  return true;
}

function switchSection(direction) {
  const list = sectionTabs();
  if (!list) return scrollToHeader(direction);
  const tabs = [...list.querySelectorAll("[role=tab]")];
  const i = tabs.findIndex((tab) => tab.getAttribute("aria-selected") === "true");
  const next = tabs[i + direction];
  if (!next) return false;
  next.click();
  scroller(list).scrollTo({ top: 0 }); // the new section opens on its figure, under the title and tabs
  return true;
}

function mountBoard(colors, page) {
  const id = `board:${page}`;
  const panel = el("aside", { class: "wb-board", "data-testid": "wbBoard", "aria-label": "Blank board" });
  const head = el("div", { class: "wb-board-head" });
  head.appendChild(el("strong", {}, "Board"));
  const area = el("div", { class: "wb-board-area" });
  panel.append(head, area);
  document.body.appendChild(panel);
  const ink = createInk(area, { onChange: (strokes) => saveStrokes(id, "board", strokes) });
  ink.setStrokes(loadStrokes(id, "board"));
  ink.setEditing(true);
  const save = async () => {
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("xmlns", SVG_NS);
    for (const [k, v] of Object.entries({ width: ink.w, height: ink.h, viewBox: `0 0 ${ink.w} ${ink.h}` })) svg.setAttribute(k, v);
    svg.appendChild(strokesSvg(ink.strokes, ink.w, ink.h));
    download(await svgToPng({ text: new XMLSerializer().serializeToString(svg), w: ink.w, h: ink.h }), "board.png");
  };
  const board = { panel, ink, open: false };
  const close = button("Close", "Close the board (B)", () => board.toggle(false));
  head.appendChild(inkToolbar(ink, colors, [button("Download", "Download the board as PNG", save), close]));
  const resize = () => { if (board.open) ink.setSize(area.clientWidth, area.clientHeight); };
  new ResizeObserver(resize).observe(area);
  board.toggle = (on = !board.open) => {
    board.open = on;
    panel.style.display = on ? "flex" : "none";
    Object.assign(panel.style, { background: pageBackground(), color: pageTextColor() });
    document.body.classList.toggle("wb-board-open", on);
    sessionStorage.setItem("wb-board-open", on ? "1" : "");
    resize();
  };
  board.destroy = () => { document.body.classList.remove("wb-board-open"); panel.remove(); };
  return board;
}

function mountPresenter(root, data) {
  const p = { alive: true };
  const bar = el("div", { class: "wb-presenter", "data-testid": "wbPresenter" });
  const keys = el("span", { class: "wb-keys" });
  keys.innerHTML = "<kbd>→</kbd> next step or figure <kbd>←</kbd> previous <kbd>]</kbd> next section " +
    "<kbd>[</kbd> previous section <kbd>B</kbd> board";
  p.page = data.page;
  p.board = mountBoard(JSON.parse(data.colors), data.page);
  const boardButton = button("Board", "Open a blank board over the page (B)", () => p.board.toggle());
  bar.append(keys, boardButton);
  root.appendChild(bar);

  const onKey = (e) => {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target.closest && e.target.closest(ARROWS.has(e.key) ? OWN_ARROWS : TYPING)) return;
    if (e.target.closest && e.target.closest(".wb-ink-editing")) return;
    const k = e.key;
    let handled = false;
    if (k === "ArrowRight" || k === "PageDown") handled = clickStep(+1) || frameFigure(+1) || switchSection(+1);
    else if (k === "ArrowLeft" || k === "PageUp") handled = clickStep(-1) || frameFigure(-1) || switchSection(-1);
    else if (k === "]") handled = switchSection(+1);
    else if (k === "[") handled = switchSection(-1);
    else if (k === "b" || k === "B") { p.board.toggle(); handled = true; }
    if (handled) e.preventDefault();
  };
  document.addEventListener("keydown", onKey);
  if (sessionStorage.getItem("wb-board-open")) p.board.toggle(true);
  p.update = (d) => { // another page in the same place: its own board
    if (d.page === p.page) return;
    const open = p.board.open;
    p.board.destroy();
    p.page = d.page;
    p.board = mountBoard(JSON.parse(d.colors), d.page);
    if (open) p.board.toggle(true);
  };
  p.destroy = () => { p.alive = false; document.removeEventListener("keydown", onKey); p.board.destroy(); };
  return p;
}

export default function (component) {
  const { data, parentElement } = component;
  let p = parentElement.__wbPresenter;
  if (!p || !p.alive) p = parentElement.__wbPresenter = mountPresenter(parentElement, data);
  p.update(data);
  return () => setTimeout(() => { if (!parentElement.isConnected) p.destroy(); }, 0);
}
