// Figure tools, mounted right under each figure (inside the same container): PNG and SVG downloads of the figure
// as drawn in this browser, and in whiteboard mode a Draw button that opens an ink layer over the figure.
// data: {kind: "plotly" | "vega" | "graphviz", id, fp, draw, name, colors: JSON text of [{name, hex}]}

function mountFigureTools(root) {
  const t = { alive: true, data: null, fp: null, editing: false, observer: null, target: null };
  const bar = el("div", { class: "wb-figtools", "data-testid": "wbFigureTools" });
  const drawButton = button("Draw", "Draw on this figure", () => setEditing(!t.editing), "wb-draw");
  const pngButton = button("PNG", "Download this figure (and its drawing) as PNG", () => save("png"));
  const svgButton = button("SVG", "Download this figure (and its drawing) as SVG", () => save("svg"));
  bar.append(drawButton, pngButton, svgButton);
  root.appendChild(bar);

  const layer = el("div", { class: "wb-ink-layer" });
  const ink = createInk(layer, { onChange: (strokes) => saveStrokes(t.data.id, t.fp, strokes) });
  const done = button("Done", "Stop drawing (the drawing stays)", () => setEditing(false), "wb-primary");
  const annotated = button("Download", "Download the figure with the drawing as one PNG", () => save("png", "-annotated"));
  let inkBar = null;

  const block = () => root.closest("[data-testid=stVerticalBlock]");

  function place() {
    const b = block();
    const target = figureElement(b, t.data.kind);
    if (!b || !target || !t.data.draw) { layer.style.display = "none"; return; }
    if (layer.parentElement !== b) { b.style.position = "relative"; b.appendChild(layer); }
    if (target !== t.target) {
      if (t.observer) t.observer.disconnect();
      t.observer = new ResizeObserver(() => place());
      t.observer.observe(target);
      t.target = target;
    }
    const outer = b.getBoundingClientRect(), r = target.getBoundingClientRect();
    Object.assign(layer.style, {
      display: "block", left: `${r.left - outer.left}px`, top: `${r.top - outer.top}px`,
      width: `${r.width}px`, height: `${r.height}px`,
    });
    if (Math.round(r.width) !== Math.round(ink.w) || Math.round(r.height) !== Math.round(ink.h)) ink.setSize(r.width, r.height);
  }

  function setEditing(on) {
    t.editing = on && t.data.draw;
    ink.setEditing(t.editing);
    drawButton.setAttribute("aria-pressed", String(t.editing));
    if (t.editing && !inkBar) {
      inkBar = inkToolbar(ink, JSON.parse(t.data.colors), [annotated, done]);
      root.appendChild(inkBar);
    }
    if (inkBar) inkBar.style.display = t.editing ? "" : "none";
    if (t.editing) place();
  }

  async function save(format, suffix = "") {
    const target = figureElement(block(), t.data.kind);
    if (!target) return;
    const svg = await figureSvg(t.data.kind, target, t.data.draw ? ink.strokes : []);
    const name = `${t.data.name}${suffix}`;
    if (format === "svg") download(new Blob([svg.text], { type: "image/svg+xml" }), `${name}.svg`);
    else download(await svgToPng(svg), `${name}.png`);
  }

  t.update = (data) => {
    t.data = data;
    bar.dataset.figure = data.id;
    drawButton.style.display = data.draw ? "" : "none";
    if (!data.draw) { setEditing(false); place(); return; } // outside whiteboard mode no drawing is shown
    if (data.fp !== t.fp) { // first shown, or the figure changed with its inputs
      t.fp = data.fp;
      ink.setStrokes(loadStrokes(data.id, data.fp));
    }
    requestAnimationFrame(place);
  };
  t.destroy = () => {
    t.alive = false;
    if (t.observer) t.observer.disconnect();
    window.removeEventListener("resize", place);
    layer.remove();
  };
  window.addEventListener("resize", place);
  return t;
}

export default function (component) {
  const { data, parentElement } = component;
  let tools = parentElement.__wbTools;
  if (!tools || !tools.alive) tools = parentElement.__wbTools = mountFigureTools(parentElement);
  tools.update(data);
  // Unmounted for good only if the element left the page (a re-render may call this and keep the element).
  return () => setTimeout(() => { if (!parentElement.isConnected) tools.destroy(); }, 0);
}
