// Ink: a drawing layer of vector strokes over a figure or a blank board, and figure capture as SVG/PNG.
// Shared by the figure tools and the presenter bar (pages/ui/ink.py joins this file with each component's own).
// Strokes are stored in coordinates relative to the layer (0..1 of its width and height), so a drawing
// follows its figure when the figure is resized; sessionStorage keeps them across reruns and reloads.

const SVG_NS = "http://www.w3.org/2000/svg";
const TOOLS = [
  ["pen", "Pen"], ["highlighter", "Highlighter"], ["line", "Line"], ["arrow", "Arrow"],
  ["text", "Text"], ["eraser", "Eraser"],
];
const WIDTH = { pen: 0.004, highlighter: 0.022, line: 0.004, arrow: 0.004 }; // of the layer's width
const HIGHLIGHT_ALPHA = 0.35;
const TEXT_SIZE = 0.022; // of the layer's width
const MIN_TEXT_PX = 16;
const ERASE_RADIUS_PX = 14;

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function button(label, title, onClick, cls = "") {
  const b = el("button", { type: "button", title, "aria-label": title, class: `wb-btn ${cls}` }, label);
  b.addEventListener("click", (e) => { e.preventDefault(); onClick(e); });
  return b;
}

function pageBackground() {
  const app = document.querySelector("[data-testid=stApp]") || document.body;
  const bg = getComputedStyle(app).backgroundColor;
  return bg && bg !== "rgba(0, 0, 0, 0)" ? bg : "#ffffff";
}

function pageTextColor() {
  const app = document.querySelector("[data-testid=stApp]") || document.body;
  return getComputedStyle(app).color || "#1f2328";
}

// The drawing saved for `id` if it was drawn on the same content (fingerprint `fp`); one drawn on other content is
// dropped: a drawing belongs to the figure it was drawn on.
function loadStrokes(id, fp) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(`wb-ink:${id}`) || "null");
    if (saved && saved.fp === fp) return saved.strokes;
    sessionStorage.removeItem(`wb-ink:${id}`);
  } catch (e) { /* unreadable or no storage: start blank */ }
  return [];
}

function saveStrokes(id, fp, strokes) {
  try {
    if (strokes.length) sessionStorage.setItem(`wb-ink:${id}`, JSON.stringify({ fp, strokes }));
    else sessionStorage.removeItem(`wb-ink:${id}`);
  } catch (e) { /* storage full or disabled: the drawing lives until the page reloads */ }
}

// One drawing surface: a canvas plus the strokes drawn on it. `host` receives the canvas; the caller sizes it.
function createInk(host, { onChange } = {}) {
  const canvas = el("canvas", { class: "wb-ink-canvas", "data-testid": "wbInkCanvas" });
  host.appendChild(canvas);
  const ctx = canvas.getContext("2d");
  const ink = {
    canvas, strokes: [], history: [], tool: "pen", color: "#d62728", editing: false, w: 1, h: 1,
    live: null, textBox: null,
  };

  ink.setSize = (w, h) => {
    if (w < 2 || h < 2) return;
    const dpr = window.devicePixelRatio || 1;
    ink.w = w; ink.h = h;
    canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ink.render();
  };
  ink.setStrokes = (strokes) => { ink.strokes = strokes; ink.history = []; ink.render(); };
  ink.setEditing = (on) => {
    ink.editing = on;
    canvas.style.pointerEvents = on ? "auto" : "none";
    canvas.classList.toggle("wb-ink-editing", on);
    if (!on) closeText(true);
  };
  ink.render = () => {
    ctx.clearRect(0, 0, ink.w, ink.h);
    for (const s of ink.strokes) paint(ctx, s, ink.w, ink.h);
    if (ink.live && ink.live.pts) paint(ctx, ink.live, ink.w, ink.h); // a line being drawn (the eraser has none)
  };
  const changed = () => { ink.render(); if (onChange) onChange(ink.strokes); };
  const remember = () => { ink.history.push(JSON.stringify(ink.strokes)); if (ink.history.length > 100) ink.history.shift(); };
  ink.undo = () => { if (ink.history.length) { ink.strokes = JSON.parse(ink.history.pop()); changed(); } };
  ink.clear = () => { if (ink.strokes.length) { remember(); ink.strokes = []; changed(); } };

  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [(e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height];
  };
  const near = (s, [x, y]) => {
    const R = ERASE_RADIUS_PX;
    if (s.tool === "text") {
      const size = Math.max(MIN_TEXT_PX, s.size * ink.w);
      const width = size * 0.6 * s.text.length;
      const px = s.x * ink.w, py = s.y * ink.h;
      return x * ink.w > px - R && x * ink.w < px + width + R && y * ink.h > py - size - R && y * ink.h < py + R;
    }
    return s.pts.some(([a, b], i) => {
      const [c, d] = s.pts[Math.min(i + 1, s.pts.length - 1)];
      return segmentDistance(x * ink.w, y * ink.h, a * ink.w, b * ink.h, c * ink.w, d * ink.h) < R + 2;
    });
  };
  const erase = (p) => {
    const kept = ink.strokes.filter((s) => !near(s, p));
    if (kept.length !== ink.strokes.length) { ink.strokes = kept; changed(); }
  };

  canvas.addEventListener("pointerdown", (e) => {
    if (!ink.editing || e.button !== 0) return;
    e.preventDefault();
    const p = at(e);
    if (ink.tool === "text") { openText(p); return; }
    canvas.setPointerCapture(e.pointerId);
    remember();
    if (ink.tool === "eraser") { ink.live = { tool: "eraser" }; erase(p); return; }
    ink.live = { tool: ink.tool, color: ink.color, width: WIDTH[ink.tool], pts: [p, p] };
    ink.render();
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!ink.live) return;
    const p = at(e);
    if (ink.live.tool === "eraser") { erase(p); return; }
    if (ink.live.tool === "pen" || ink.live.tool === "highlighter") ink.live.pts.push(p);
    else ink.live.pts[1] = p;
    ink.render();
  });
  const finish = () => {
    if (!ink.live) return;
    const s = ink.live;
    ink.live = null;
    if (s.tool === "eraser") {
      if (ink.history.length && ink.history[ink.history.length - 1] === JSON.stringify(ink.strokes)) ink.history.pop();
      return;
    }
    ink.strokes.push(s);
    changed();
  };
  canvas.addEventListener("pointerup", finish);
  canvas.addEventListener("pointercancel", finish);

  function openText([x, y]) {
    closeText(true);
    const box = el("input", { type: "text", class: "wb-ink-text", "aria-label": "Text to place", "data-testid": "wbInkText" });
    const size = Math.max(MIN_TEXT_PX, TEXT_SIZE * ink.w);
    Object.assign(box.style, {
      left: `${canvas.offsetLeft + x * ink.w}px`, top: `${canvas.offsetTop + y * ink.h - size}px`,
      fontSize: `${size}px`, color: ink.color,
    });
    box.dataset.x = x; box.dataset.y = y; box.dataset.color = ink.color;
    host.appendChild(box);
    ink.textBox = box;
    box.addEventListener("keydown", (e) => {
      e.stopPropagation(); // typing must not trigger the presenter's shortcuts
      if (e.key === "Enter") closeText(true);
      if (e.key === "Escape") closeText(false);
    });
    box.addEventListener("blur", () => closeText(true));
    box.focus();
  }
  function closeText(keep) {
    const box = ink.textBox;
    if (!box) return;
    ink.textBox = null;
    const text = box.value.trim();
    box.remove();
    if (keep && text) {
      remember();
      ink.strokes.push({ tool: "text", color: box.dataset.color, text,
                         x: +box.dataset.x, y: +box.dataset.y, size: TEXT_SIZE });
      changed();
    }
  }
  return ink;
}

function segmentDistance(px, py, ax, ay, bx, by) {
  const dx = bx - ax, dy = by - ay;
  const len = dx * dx + dy * dy;
  const t = len ? Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / len)) : 0;
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

function arrowHead(x0, y0, x1, y1, size) {
  const a = Math.atan2(y1 - y0, x1 - x0);
  return [[x1 - size * Math.cos(a - 0.45), y1 - size * Math.sin(a - 0.45)],
          [x1 - size * Math.cos(a + 0.45), y1 - size * Math.sin(a + 0.45)]];
}

// Draw one stroke on a 2D context of w x h CSS pixels.
function paint(ctx, s, w, h) {
  ctx.save();
  if (s.tool === "text") {
    const size = Math.max(MIN_TEXT_PX, s.size * w);
    ctx.font = `600 ${size}px "Source Sans", "Source Sans Pro", sans-serif`;
    ctx.lineWidth = Math.max(3, size / 6);
    ctx.strokeStyle = pageBackground();
    ctx.lineJoin = "round";
    ctx.strokeText(s.text, s.x * w, s.y * h);
    ctx.fillStyle = s.color;
    ctx.fillText(s.text, s.x * w, s.y * h);
    ctx.restore();
    return;
  }
  const pts = s.pts.map(([x, y]) => [x * w, y * h]);
  ctx.strokeStyle = s.color;
  ctx.lineWidth = Math.max(2, s.width * w);
  ctx.lineCap = "round"; ctx.lineJoin = "round";
  if (s.tool === "highlighter") ctx.globalAlpha = HIGHLIGHT_ALPHA;
  ctx.beginPath();
  ctx.moveTo(pts[0][0], pts[0][1]);
  for (const [x, y] of pts.slice(1)) ctx.lineTo(x, y);
  if (s.tool === "arrow") {
    const [a, b] = pts;
    for (const [x, y] of arrowHead(a[0], a[1], b[0], b[1], ctx.lineWidth * 4)) { ctx.moveTo(b[0], b[1]); ctx.lineTo(x, y); }
  }
  ctx.stroke();
  ctx.restore();
}

// The same strokes as SVG elements (for the SVG download and for the PNG, which is the SVG rasterized).
function strokesSvg(strokes, w, h) {
  const g = document.createElementNS(SVG_NS, "g");
  g.setAttribute("class", "wb-ink");
  for (const s of strokes) {
    if (s.tool === "text") {
      const size = Math.max(MIN_TEXT_PX, s.size * w);
      const t = document.createElementNS(SVG_NS, "text");
      for (const [k, v] of Object.entries({
        x: s.x * w, y: s.y * h, fill: s.color, "font-size": size, "font-weight": 600,
        "font-family": "Source Sans, Source Sans Pro, sans-serif", stroke: pageBackground(),
        "stroke-width": Math.max(3, size / 6), "paint-order": "stroke", "stroke-linejoin": "round",
      })) t.setAttribute(k, v);
      t.textContent = s.text;
      g.appendChild(t);
      continue;
    }
    const pts = s.pts.map(([x, y]) => [x * w, y * h]);
    const lw = Math.max(2, s.width * w);
    let d = `M${pts[0][0]},${pts[0][1]}` + pts.slice(1).map(([x, y]) => `L${x},${y}`).join("");
    if (s.tool === "arrow") {
      const [a, b] = pts;
      for (const [x, y] of arrowHead(a[0], a[1], b[0], b[1], lw * 4)) d += `M${b[0]},${b[1]}L${x},${y}`;
    }
    const p = document.createElementNS(SVG_NS, "path");
    for (const [k, v] of Object.entries({
      d, fill: "none", stroke: s.color, "stroke-width": lw, "stroke-linecap": "round", "stroke-linejoin": "round",
      "stroke-opacity": s.tool === "highlighter" ? HIGHLIGHT_ALPHA : 1,
    })) p.setAttribute(k, v);
    g.appendChild(p);
  }
  return g;
}

// ---- figure capture -------------------------------------------------------------------------------------------

const STYLE_PROPS = [
  "fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "stroke-dasharray", "stroke-linecap",
  "stroke-linejoin", "opacity", "font-family", "font-size", "font-weight", "font-style", "text-anchor",
  "dominant-baseline", "visibility",
];

// Copy the computed style of every element of `src` onto its twin in `dst`: a standalone SVG has no page CSS.
function inlineStyles(src, dst) {
  if (src.nodeType !== 1) return;
  const cs = getComputedStyle(src);
  if (cs.display === "none") { dst.setAttribute("display", "none"); return; }
  const style = STYLE_PROPS.map((p) => {
    let v = cs.getPropertyValue(p);
    if (p === "font-family" && v && !/sans-serif|serif|monospace/.test(v)) v += ", sans-serif";
    return v ? `${p}:${v}` : "";
  }).filter(Boolean).join(";");
  dst.setAttribute("style", style);
  const a = src.children, b = dst.children;
  for (let i = 0; i < a.length && i < b.length; i++) inlineStyles(a[i], b[i]);
}

const FIGURE_SELECTORS = {
  plotly: "[data-testid=stPlotlyChart] .js-plotly-plot",
  vega: "[data-testid=stVegaLiteChart] svg.marks",
  graphviz: "[data-testid=stGraphVizChart] svg",
};

function figureElement(block, kind) {
  return block ? block.querySelector(FIGURE_SELECTORS[kind]) : null;
}

// The page's own @font-face rules for the families used in `svg`, their files inlined as data URLs: an SVG shown
// as an image (and an SVG file opened elsewhere) cannot load the page's web fonts, and another font's metrics would
// make labels overlap.
const fontData = new Map();
async function inlineFontRule(rule, base) {
  const match = rule.cssText.match(/url\(["']?([^"')]+)["']?\)/);
  if (!match) return "";
  const url = new URL(match[1], base).href;
  if (!fontData.has(url)) {
    fontData.set(url, fetch(url).then((r) => r.blob()).then((blob) => new Promise((resolve) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.readAsDataURL(blob);
    })).catch(() => ""));
  }
  const data = await fontData.get(url);
  return data ? rule.cssText.replace(/src:[^;]+;/, `src: url(${data});`) : "";
}

async function embedFonts(svg) {
  const used = new Set();
  svg.querySelectorAll("[style*=font-family], [font-family]").forEach((n) => {
    const family = (n.style.fontFamily || n.getAttribute("font-family")).split(",")[0].replace(/["']/g, "").trim();
    if (family) used.add(family);
  });
  const rules = [];
  for (const sheet of document.styleSheets) {
    let list;
    try { list = sheet.cssRules; } catch (e) { continue; }
    for (const rule of list) {
      if (!(rule instanceof CSSFontFaceRule) || rule.style.fontStyle === "italic") continue;
      const family = rule.style.getPropertyValue("font-family").replace(/["']/g, "").trim();
      if (used.has(family)) rules.push(inlineFontRule(rule, sheet.href || location.href));
    }
  }
  const css = (await Promise.all(rules)).filter(Boolean).join("\n");
  if (!css) return;
  const style = document.createElementNS(SVG_NS, "style");
  style.textContent = css;
  svg.insertBefore(style, svg.firstChild);
}

// The figure as one standalone <svg> (page background behind it, page fonts inlined), `strokes` drawn on top.
async function figureSvg(kind, target, strokes) {
  const box = target.getBoundingClientRect();
  const w = Math.round(box.width), h = Math.round(box.height);
  const out = document.createElementNS(SVG_NS, "svg");
  out.setAttribute("xmlns", SVG_NS);
  out.setAttributeNS("http://www.w3.org/2000/xmlns/", "xmlns:xlink", "http://www.w3.org/1999/xlink");
  for (const [k, v] of Object.entries({ width: w, height: h, viewBox: `0 0 ${w} ${h}` })) out.setAttribute(k, v);
  const bg = document.createElementNS(SVG_NS, "rect");
  for (const [k, v] of Object.entries({ width: w, height: h, fill: pageBackground() })) bg.setAttribute(k, v);
  out.appendChild(bg);
  const layers = kind === "plotly" ? [...target.querySelectorAll(".svg-container > svg.main-svg")] : [target];
  for (const layer of layers) {
    const copy = layer.cloneNode(true);
    inlineStyles(layer, copy);
    copy.querySelectorAll(".hoverlayer > *").forEach((n) => n.remove());
    const r = layer.getBoundingClientRect();
    const nested = document.createElementNS(SVG_NS, "svg");
    const viewBox = layer.getAttribute("viewBox");
    for (const [k, v] of Object.entries({ x: r.left - box.left, y: r.top - box.top, width: r.width, height: r.height })) {
      nested.setAttribute(k, v);
    }
    if (viewBox) nested.setAttribute("viewBox", viewBox);
    for (const name of ["preserveAspectRatio", "style"]) if (copy.getAttribute(name)) nested.setAttribute(name, copy.getAttribute(name));
    while (copy.firstChild) nested.appendChild(copy.firstChild);
    out.appendChild(nested);
  }
  if (strokes && strokes.length) out.appendChild(strokesSvg(strokes, w, h));
  await embedFonts(out);
  return { text: new XMLSerializer().serializeToString(out), w, h };
}

async function svgToPng({ text, w, h }, scale = 2) {
  const img = new Image();
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
  await img.decode();
  const c = document.createElement("canvas");
  c.width = Math.round(w * scale); c.height = Math.round(h * scale);
  const ctx = c.getContext("2d");
  ctx.fillStyle = pageBackground();
  ctx.fillRect(0, 0, c.width, c.height);
  ctx.drawImage(img, 0, 0, c.width, c.height);
  return new Promise((resolve) => c.toBlob(resolve, "image/png"));
}

function download(blob, name) {
  const a = el("a", { href: URL.createObjectURL(blob), download: name });
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 2000);
}

// The tool row of a drawing surface: tools, palette colours, undo, clear, and `extra` buttons at the end.
function inkToolbar(ink, colors, extra = []) {
  const bar = el("div", { class: "wb-ink-bar", role: "toolbar", "aria-label": "Drawing tools" });
  const toolButtons = TOOLS.map(([tool, label]) => {
    const b = button(label, label, () => select(tool), "wb-tool");
    b.dataset.tool = tool;
    bar.appendChild(b);
    return b;
  });
  const select = (tool) => {
    ink.tool = tool;
    toolButtons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.tool === tool)));
  };
  const swatches = el("span", { class: "wb-swatches" });
  const colorButtons = colors.map(({ name, hex }) => {
    const b = button("", `Colour: ${name}`, () => pick(hex), "wb-swatch");
    b.style.background = hex;
    b.dataset.color = hex;
    swatches.appendChild(b);
    return b;
  });
  const pick = (hex) => {
    ink.color = hex;
    colorButtons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.color === hex)));
  };
  bar.appendChild(swatches);
  bar.appendChild(button("Undo", "Undo the last change", () => ink.undo()));
  bar.appendChild(button("Clear", "Clear the drawing", () => ink.clear()));
  extra.forEach((b) => bar.appendChild(b));
  select(ink.tool);
  pick(colors.length ? colors[0].hex : ink.color);
  return bar;
}
