// The GraphWidget's view (anywidget): the SVG Graphviz drew in Python, with pan and zoom,
// click to open or close a group, hover for an instruction's attributes and source line,
// search, and SVG / PNG export of the current view.  All semantics stay in Python: this
// file only shows `svg`, reads `nodes` (svg id -> what the node is) and sends events.

const STYLE = `
.xe-graph-widget { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, sans-serif; color: #263238;
  border: 1px solid #cfd8dc; border-radius: 6px; overflow: hidden; background: #fff; }
.xe-graph-widget .xe-bar { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; padding: 6px 8px;
  border-bottom: 1px solid #eceff1; background: #fafafa; }
.xe-graph-widget input.xe-search { flex: 1 1 220px; min-width: 160px; font-size: 13px; padding: 4px 8px;
  border: 1px solid #b0bec5; border-radius: 4px; }
.xe-graph-widget button { font-size: 13px; padding: 3px 9px; border: 1px solid #b0bec5; border-radius: 4px;
  background: #fff; cursor: pointer; color: #263238; }
.xe-graph-widget button:hover { background: #eceff1; }
.xe-graph-widget .xe-status { font-size: 12px; color: #546e7a; margin-left: 4px; }
.xe-graph-widget .xe-run { font-size: 13px; color: #37474f; }
.xe-graph-widget input.xe-invocation { width: 4.5em; font-size: 13px; padding: 3px 4px; border: 1px solid #b0bec5; border-radius: 4px; }
.xe-graph-widget .xe-error { color: #c62828; font-size: 13px; padding: 4px 8px; white-space: pre-wrap; }
.xe-graph-widget .xe-body { position: relative; }
.xe-graph-widget .xe-results { position: absolute; z-index: 5; left: 8px; top: 4px; max-height: 60%; overflow: auto;
  background: #fff; border: 1px solid #b0bec5; border-radius: 4px; box-shadow: 0 2px 8px rgba(0,0,0,.15);
  min-width: 320px; max-width: 70%; }
.xe-graph-widget .xe-result { padding: 3px 8px; cursor: pointer; border-bottom: 1px solid #eceff1; font-size: 13px; }
.xe-graph-widget .xe-result:hover { background: #e3f2fd; }
.xe-graph-widget .xe-result .xe-where { color: #607d8b; font-size: 12px; }
.xe-graph-widget .xe-view { overflow: hidden; cursor: grab; background: #fff; touch-action: none; }
.xe-graph-widget .xe-view.xe-dragging { cursor: grabbing; }
.xe-graph-widget .xe-canvas { transform-origin: 0 0; display: inline-block; }
.xe-graph-widget .xe-canvas svg { display: block; }
.xe-graph-widget g.node.xe-toggle { cursor: pointer; }
.xe-graph-widget g.node.xe-toggle:hover polygon, .xe-graph-widget g.node.xe-toggle:hover path { stroke: #1565c0; stroke-width: 2.5; }
.xe-graph-widget g.cluster.xe-toggle > text { cursor: pointer; }
.xe-graph-widget g.node.xe-found polygon, .xe-graph-widget g.node.xe-found path { stroke: #ff6d00; stroke-width: 3; }
.xe-graph-widget .xe-tip { position: absolute; z-index: 6; pointer-events: none; background: #263238; color: #fff;
  font-size: 12px; padding: 6px 8px; border-radius: 4px; max-width: 460px; white-space: pre-wrap;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; display: none; }
`;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function download(name, blob) {
  const a = el("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

function render({ model, el: root }) {
  const style = el("style");
  style.textContent = STYLE;
  const box = el("div", "xe-graph-widget");
  const bar = el("div", "xe-bar");
  const search = el("input", "xe-search");
  search.type = "search";
  search.placeholder = "search: name, opcode, shape (f32[64,64]), scope…";
  search.setAttribute("aria-label", "search instructions");
  const buttons = {};
  for (const [key, label, title] of [["fit", "fit", "fit the graph in the view"], ["in", "+", "zoom in"],
                                     ["out", "−", "zoom out"], ["collapse", "collapse all", "back to the first picture"],
                                     ["svg", "SVG", "download this view as SVG"],
                                     ["png", "PNG", "download this view as PNG"]]) {
    const b = el("button", "xe-" + key, label);
    b.title = title;
    buttons[key] = b;
  }
  const status = el("span", "xe-status");
  // which run the values show, when some instruction ran more than once (a loop body)
  const runBox = el("label", "xe-run", "run ");
  const run = el("input", "xe-invocation");
  run.type = "number"; run.min = "0"; run.step = "1";
  run.setAttribute("aria-label", "invocation shown");
  run.title = "which run of a loop body the values show (0 = the first)";
  runBox.append(run);
  bar.append(search, runBox, buttons.fit, buttons.in, buttons.out, buttons.collapse, buttons.svg, buttons.png, status);
  const error = el("div", "xe-error");
  const body = el("div", "xe-body");
  const results = el("div", "xe-results");
  results.style.display = "none";
  const view = el("div", "xe-view");
  const canvas = el("div", "xe-canvas");
  const tip = el("div", "xe-tip");
  view.append(canvas);
  body.append(results, view, tip);
  box.append(bar, error, body);
  root.append(style, box);

  let scale = 1, tx = 0, ty = 0, svgSize = { w: 1, h: 1 };
  let anchor = null;  // {id, x, y}: keep this node where it was on screen after a redraw

  const apply = () => { canvas.style.transform = `translate(${tx}px, ${ty}px) scale(${scale})`; };
  const height = () => model.get("height") || 560;
  const fit = () => {
    const w = view.clientWidth || 800, h = height();
    scale = Math.min(1, w / svgSize.w, h / svgSize.h);
    tx = (w - svgSize.w * scale) / 2;
    ty = Math.max(0, (h - svgSize.h * scale) / 2);
    apply();
  };
  // the first view of a picture: at its own size (the smallest text 8 points, 10.7 px),
  // its top-left corner shown when it is bigger than the view (the legend and the entry's
  // parameters, where reading starts; centred it was cut on both sides); "fit" shows all of it
  const start = () => {
    const w = view.clientWidth || 800, h = height();
    scale = 1;
    tx = svgSize.w * scale > w ? 0 : (w - svgSize.w * scale) / 2;
    ty = svgSize.h * scale > h ? 0 : (h - svgSize.h * scale) / 2;
    apply();
  };
  const centerOn = (node) => {
    const w = view.clientWidth || 800, h = height();
    const vr = view.getBoundingClientRect(), nr = node.getBoundingClientRect();
    tx += w / 2 - (nr.left + nr.width / 2 - vr.left);
    ty += h / 2 - (nr.top + nr.height / 2 - vr.top);
    apply();
  };
  const zoomAt = (factor, cx, cy) => {
    const next = Math.min(4, Math.max(0.05, scale * factor));
    tx = cx - (cx - tx) * (next / scale);
    ty = cy - (cy - ty) * (next / scale);
    scale = next;
    apply();
  };

  function draw() {
    const text = model.get("svg");
    view.style.height = height() + "px";
    canvas.innerHTML = text;
    const svg = canvas.querySelector("svg");
    error.textContent = model.get("error") || "";
    status.textContent = model.get("status") || "";
    if (!svg) return;
    // Graphviz sizes the svg in points; keep that size, the view scales it
    svgSize = { w: svg.width.baseVal.value || 800, h: svg.height.baseVal.value || 600 };
    const info = model.get("nodes") || {};
    for (const t of svg.querySelectorAll("g.node > title, g.cluster > title, g.node a, g.node g[id^=a_]")) {
      // the native tooltips would cover ours
      if (t.tagName === "title") t.remove(); else t.removeAttribute("xlink:title");
    }
    for (const [id, data] of Object.entries(info)) {
      const g = svg.getElementById(id);
      if (g && data.toggles && data.toggles.length) g.classList.add("xe-toggle");
    }
    const focus = model.get("focus");
    const target = focus ? svg.getElementById(focus) : null;
    if (anchor) {
      const again = svg.getElementById(anchor.id) || target;
      if (again) {
        const vr = view.getBoundingClientRect(), nr = again.getBoundingClientRect();
        tx += anchor.x - (nr.left - vr.left);
        ty += anchor.y - (nr.top - vr.top);
        apply();
      } else start();
      anchor = null;
    } else if (target) {
      if (scale < 0.6) { scale = 0.8; apply(); }
      centerOn(target);
    } else start();
    if (target) target.classList.add("xe-found");
  }

  function nodeOf(event, click) {
    const g = event.target.closest ? event.target.closest("g.node, g.cluster") : null;
    if (!g) return null;
    // a cluster closes from its title only: a click on its background is too easy to make
    if (click && g.classList.contains("cluster") && !(event.target.tagName === "text" && event.target.parentNode === g)) return null;
    const data = (model.get("nodes") || {})[g.id];
    return data ? { g, data } : null;
  }

  // -- events ----------------------------------------------------------------------------------
  let drag = null, moved = false;
  view.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, tx, ty };
    moved = false;
  });
  window.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { moved = true; view.classList.add("xe-dragging"); }
    tx = drag.tx + dx; ty = drag.ty + dy;
    apply();
  });
  window.addEventListener("pointerup", () => { drag = null; view.classList.remove("xe-dragging"); });
  view.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = view.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  view.addEventListener("click", (e) => {
    if (moved) return;
    const hit = nodeOf(e, true);
    if (!hit || !hit.data.toggles || !hit.data.toggles.length) return;
    const vr = view.getBoundingClientRect(), nr = hit.g.getBoundingClientRect();
    // the group opens where it was: its cluster (or, closing, its node) lands at the same place
    anchor = { id: hit.data.anchor || hit.g.id, x: nr.left - vr.left, y: nr.top - vr.top };
    status.textContent = "drawing…";
    model.send({ event: "toggle", id: hit.g.id });
  });
  view.addEventListener("mousemove", (e) => {
    const hit = nodeOf(e);
    if (!hit || !hit.data.tip) { tip.style.display = "none"; return; }
    tip.textContent = hit.data.tip;
    const r = body.getBoundingClientRect();
    tip.style.left = Math.min(e.clientX - r.left + 14, r.width - 300) + "px";
    tip.style.top = (e.clientY - r.top + 14) + "px";
    tip.style.display = "block";
  });
  view.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  let timer = null, picked = false;  // picked: a result was clicked; the list stays shut until typing
  search.addEventListener("input", () => {
    picked = false;
    clearTimeout(timer);
    timer = setTimeout(() => { model.set("query", search.value); model.save_changes(); }, 200);
  });
  search.addEventListener("focus", () => { if (search.value.trim()) { picked = false; showResults(); } });
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const first = results.querySelector(".xe-result");
      if (first) first.click();
    } else if (e.key === "Escape") {
      picked = true;
      results.style.display = "none";
    }
  });
  function showResults() {
    const found = model.get("results") || [];
    results.innerHTML = "";
    if (!search.value.trim() || picked) { results.style.display = "none"; return; }
    if (!found.length) {
      results.append(el("div", "xe-result", "no instruction matches"));
    }
    for (const r of found) {
      const row = el("div", "xe-result");
      row.append(el("b", "", r.name), document.createTextNode(` ${r.opcode} ${r.shape} `),
                 el("span", "xe-where", r.where));
      row.title = r.where;
      row.addEventListener("click", () => {
        picked = true;
        results.style.display = "none";
        status.textContent = "drawing…";
        model.send({ event: "reveal", index: r.index });
      });
      results.append(row);
    }
    if (model.get("more_results")) results.append(el("div", "xe-result xe-where", "… more: refine the search"));
    results.style.display = "block";
  }

  buttons.fit.addEventListener("click", fit);
  buttons.in.addEventListener("click", () => zoomAt(1.25, view.clientWidth / 2, height() / 2));
  buttons.out.addEventListener("click", () => zoomAt(0.8, view.clientWidth / 2, height() / 2));
  buttons.collapse.addEventListener("click", () => { status.textContent = "drawing…"; model.send({ event: "reset" }); });
  buttons.svg.addEventListener("click", () => {
    download((model.get("filename") || "graph") + ".svg", new Blob([model.get("svg")], { type: "image/svg+xml" }));
  });
  buttons.png.addEventListener("click", () => {
    const img = new Image();
    const url = URL.createObjectURL(new Blob([model.get("svg")], { type: "image/svg+xml" }));
    img.onload = () => {
      const k = 2;  // twice the points: sharp on high-density screens
      const c = document.createElement("canvas");
      c.width = svgSize.w * k; c.height = svgSize.h * k;
      const ctx = c.getContext("2d");
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
      ctx.drawImage(img, 0, 0, c.width, c.height);
      URL.revokeObjectURL(url);
      c.toBlob((blob) => download((model.get("filename") || "graph") + ".png", blob), "image/png");
    };
    img.src = url;
  });

  const showRun = () => {
    const most = model.get("max_invocation") || 0;
    runBox.style.display = most > 0 ? "" : "none";
    run.max = String(most);
    run.value = String(model.get("invocation") || 0);
    runBox.title = `values of run ${run.value} of 0..${most} (a loop body's iteration)`;
  };
  run.addEventListener("change", () => {
    const k = parseInt(run.value, 10);
    if (Number.isNaN(k)) { showRun(); return; }
    status.textContent = "drawing…";
    model.send({ event: "invocation", k });
  });
  showRun();
  model.on("change:invocation", showRun);
  model.on("change:max_invocation", showRun);
  model.on("change:svg", draw);
  model.on("change:focus", draw);
  model.on("change:error", () => { error.textContent = model.get("error") || ""; status.textContent = model.get("status") || ""; });
  model.on("change:status", () => { status.textContent = model.get("status") || ""; });
  model.on("change:results", showResults);
  model.on("change:height", draw);
  // first draw once the element is in the page (its width is known then)
  requestAnimationFrame(draw);
  return () => { clearTimeout(timer); };
}

export default { render };
