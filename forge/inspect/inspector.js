/* forge run inspector: replays a recorded run on its diagram. No network, no libraries.
 * forgeInspector(root, data) builds the page inside `root` from the data forge wrote
 * (forge/inspect/page.py explains its tables). Only the visible rows of the timeline are
 * in the DOM, so a run of any length scrubs at the same speed. */
function forgeInspector(root, data) {
  "use strict";
  const ROW = 24;
  const records = data.records.map(function (row, index) {
    const edge = data.edges[row[0]];
    return {
      index: index, sequence: index + 1, step: row[1], source: edge[0], trigger: edge[1], dest: edge[2],
      element: edge[3], verdict: data.verdicts[row[2]], guards: data.guards[row[3]], detail: data.details[row[4]],
      duration: row[5], at: row[6]
    };
  });
  const stepTool = {}, stepStatus = {};
  records.forEach(function (r) {
    if (typeof r.detail.tool === "string" && !(r.step in stepTool)) stepTool[r.step] = r.detail.tool;
    if (r.trigger === "finish") stepTool[r.step] = "finish";
    if (typeof r.detail.status === "string") stepStatus[r.step] = r.detail.status;
  });

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k]; else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function options(select, values) {
    values.forEach(function (v) { select.appendChild(el("option", {value: v, text: v})); });
  }
  function distinct(map) {
    return Object.keys(map).map(function (k) { return map[k]; })
      .filter(function (v, i, all) { return all.indexOf(v) === i; }).sort();
  }

  const source = root.querySelector(".fi-diagram-source");
  const svg = source.querySelector("svg") || source.firstElementChild;
  const end = data.end;
  const banner = el("header", {class: "fi-banner fi-" + (end.finished ? (end.outcome || "ended") : end.running ? "running" : "unfinished")}, [
    el("div", {class: "fi-end"}, [
      el("span", {class: "fi-end-label", text: end.finished ? (end.outcome === "needs_input" ? "waits in" : "ended in") : end.running ? "running, now in" : "stopped in"}),
      el("strong", {class: "fi-end-state", text: end.state}),
      el("span", {class: "fi-end-outcome", text: end.outcome ? end.outcome.replace("_", " ") : ""})
    ]),
    el("p", {class: "fi-end-summary", text: end.summary}),
    el("p", {class: "fi-meta", text: [data.machine, "run " + (data.run_id || "(no id)"), data.started || "",
      records.length + (records.length === 1 ? " transition" : " transitions"),
      data.steps + (data.steps === 1 ? " step" : " steps"), data.took || ""].filter(Boolean).join(" · ")})
  ]);
  const zoomIn = el("button", {type: "button", class: "fi-zoom-in", title: "zoom in (+)", text: "+"});
  const zoomOut = el("button", {type: "button", class: "fi-zoom-out", title: "zoom out (-)", text: "−"});
  const zoomFit = el("button", {type: "button", class: "fi-zoom-fit", title: "fit the diagram to its box (0)", text: "fit"});
  const view = el("div", {class: "fi-view"}, [svg]);
  const diagram = el("div", {class: "fi-diagram"}, [el("div", {class: "fi-zoom"}, [zoomIn, zoomOut, zoomFit]), view]);
  // zoom: the drawing's width as a multiple of its box's; 1 fits it; drag to pan when it is larger
  let zoom = 1;
  function setZoom(z) {
    zoom = Math.max(1, Math.min(8, z));
    svg.style.maxWidth = zoom === 1 ? "" : "none";
    svg.style.width = zoom === 1 ? "" : Math.round(view.clientWidth * zoom) + "px";
    diagram.dataset.zoom = String(zoom);
  }
  // the drawing opens at a zoom where its states' names are READABLE px tall, panned to where
  // the run is (a wide machine fitted to a narrow box has 5 px text); "fit" shows all of it
  const READABLE = 13;
  function readableZoom() {
    let tallest = 0;
    svg.querySelectorAll("g.node[id^='state-'] text").forEach(function (t) {
      tallest = Math.max(tallest, t.getBoundingClientRect().height);
    });
    if (!tallest || tallest >= READABLE || !view.clientWidth) return 1;  // not laid out (hidden), or readable
    return READABLE / tallest * svg.getBoundingClientRect().width / view.clientWidth;
  }
  function reveal() {
    const state = marked[0];
    if (zoom === 1 || !state) return;
    const box = view.getBoundingClientRect(), at = state.getBoundingClientRect();
    if (at.left >= box.left && at.right <= box.right && at.top >= box.top && at.bottom <= box.bottom) return;
    view.scrollLeft += at.left + at.width / 2 - (box.left + box.width / 2);
    view.scrollTop += at.top + at.height / 2 - (box.top + box.height / 2);
  }
  zoomIn.addEventListener("click", function () { setZoom(zoom * 1.5); });
  zoomOut.addEventListener("click", function () { setZoom(zoom / 1.5); });
  zoomFit.addEventListener("click", function () { setZoom(1); });
  let drag = null;
  view.addEventListener("mousedown", function (event) {
    if (zoom === 1) return;
    drag = {x: event.clientX, y: event.clientY, left: view.scrollLeft, top: view.scrollTop};
    event.preventDefault();
  });
  window.addEventListener("mousemove", function (event) {
    if (!drag) return;
    view.scrollLeft = drag.left - (event.clientX - drag.x);
    view.scrollTop = drag.top - (event.clientY - drag.y);
  });
  window.addEventListener("mouseup", function () { drag = null; });
  const panel = el("aside", {class: "fi-panel", "aria-live": "polite"});
  const prev = el("button", {type: "button", class: "fi-prev", title: "previous transition (←)", text: "←"});
  const play = el("button", {type: "button", class: "fi-play", title: "play / pause (space)", text: "▶ play"});
  const next = el("button", {type: "button", class: "fi-next", title: "next transition (→)", text: "→"});
  const scrubber = el("input", {type: "range", class: "fi-scrubber", min: "0", max: String(records.length - 1),
    value: "0", "aria-label": "transition"});
  const position = el("span", {class: "fi-position"});
  const toolFilter = el("select", {class: "fi-tool", "aria-label": "filter by tool"}, [el("option", {value: "", text: "all tools"})]);
  const statusFilter = el("select", {class: "fi-status", "aria-label": "filter by status"}, [el("option", {value: "", text: "all statuses"})]);
  options(toolFilter, distinct(stepTool));
  options(statusFilter, distinct(stepStatus));
  const count = el("span", {class: "fi-count"});
  const controls = el("div", {class: "fi-controls"}, [prev, play, next, scrubber, position,
    el("label", {}, [toolFilter]), el("label", {}, [statusFilter]), count]);
  const rows = el("div", {class: "fi-rows"});
  const spacer = el("div", {class: "fi-spacer"}, [rows]);
  const list = el("div", {class: "fi-list", role: "listbox", tabindex: "0"}, [spacer]);
  root.replaceChildren(root.querySelector("style"), banner,
    el("div", {class: "fi-main"}, [diagram, panel]), controls, list);

  // a run that failed opens at the transition that ended it, one that waits for an answer at
  // the transition where it waits, one still under way where it is now (its page reloads as
  // it goes on); one that succeeded at its first
  let current = !end.finished || end.outcome === "failure" || end.outcome === "needs_input" ? records.length - 1 : 0;
  let shown = records, timer = null, lastRendered = "";
  let marked = [];

  function matches(r) {
    const tool = toolFilter.value, status = statusFilter.value;
    return (!tool || stepTool[r.step] === tool) && (!status || stepStatus[r.step] === status);
  }
  function summarise(d) {
    if (d.failed) return d.failed + " raised " + d.error;
    if (d.unknown_tool) return "no tool named " + d.unknown_tool;
    if (d.approval) return d.tool + ": approval " + d.approval;
    if (d.finish) return "finished: " + d.finish;
    if (d.tool && d.status) return d.tool + ": " + d.status + (d.attempts > 1 ? " after " + d.attempts + " attempts" : "") +
      (d.replayed ? " (replayed)" : "") + (d.error ? " — " + d.error : "");
    if (d.tool) return "chose " + d.tool + (d.arguments ? " " + d.arguments : "");
    if (d.status) return "observation: " + d.status + (d.payload !== undefined ? " · " + d.payload : "");
    if (d.decision) return "verified=" + d.verified + " → " + d.decision;
    if (d.error) return d.error;
    return "";
  }
  // child runs (a tool that runs another loop), by the transition that called them
  const childrenAt = {};
  (data.children || []).forEach(function (c) { (childrenAt[c.transition] = childrenAt[c.transition] || []).push(c); });
  function line(r) {
    const called = childrenAt[r.sequence] ? "  ⤷ child run " + childrenAt[r.sequence].map(function (c) { return c.name; }).join(", ") : "";
    return "#" + r.sequence + "  step " + r.step + "  " + r.source + " ─" + r.trigger + "→ " + r.dest + "  " + summarise(r.detail) + called;
  }
  function childLinks(r) {
    return (childrenAt[r.sequence] || []).map(function (c) {
      const link = el("button", {type: "button", class: "fi-child-link", "data-path": c.path,
        text: "open child run " + c.name + " · " + c.summary});
      link.addEventListener("click", function () {
        const folded = document.getElementById(c.anchor);
        if (!folded) return;
        folded.open = true;
        folded.scrollIntoView({block: "start"});
      });
      return link;
    });
  }

  function highlight(r) {
    marked.forEach(function (node) { node.classList.remove("fi-current", "fi-current-edge"); });
    marked = [];
    const state = svg && svg.querySelector("#" + CSS.escape("state-" + r.dest));
    const edge = svg && svg.querySelector("#" + CSS.escape(r.element));
    if (state) { state.classList.add("fi-current"); marked.push(state); }
    if (edge) { edge.classList.add("fi-current-edge"); marked.push(edge); }
    root.dataset.currentState = r.dest;
    root.dataset.current = String(r.sequence);
    // the page around the inspector (forge ui's fork form) follows the selected transition
    root.dispatchEvent(new CustomEvent("forge-inspector-select", {bubbles: true, detail: {sequence: r.sequence}}));
  }

  function field(name, value, pre) {
    if (value === undefined || value === null || value === "") return [];
    return [el("dt", {text: name}), el("dd", {class: "fi-field-" + name}, [pre ? el("pre", {text: String(value)}) : document.createTextNode(String(value))])];
  }
  function showPanel(r) {
    const d = r.detail;
    const guards = el("table", {class: "fi-guards"}, [el("caption", {text: r.guards.length ? "guards" : "no guards (unguarded)"})]
      .concat(r.guards.map(function (g) {
        return el("tr", {"data-guard": g[0], class: g[1] ? "fi-true" : "fi-false"},
          [el("td", {text: g[0]}), el("td", {class: "fi-guard-value", text: String(g[1])})]);
      })));
    let tries = null;
    if (Array.isArray(d.tries)) {
      tries = el("table", {class: "fi-tries"}, [el("caption", {text: "attempts"})].concat(d.tries.map(function (t) {
        if (t === null || typeof t !== "object") {  // a hand-edited or foreign trace: show what is there
          return el("tr", {}, [el("td", {text: JSON.stringify(t)})]);
        }
        return el("tr", {}, [el("td", {text: "#" + t.attempt}), el("td", {text: "after " + t.delay_s + " s"}),
          el("td", {text: t.error || "returned"})]);
      })));
    }
    const known = ["tool", "arguments", "status", "attempts", "tries", "replayed", "payload", "error", "verified",
      "decision", "finish", "failed", "approval", "messages"];
    const rest = Object.keys(d).filter(function (k) { return known.indexOf(k) < 0; });
    const dl = el("dl", {}, [].concat(
      field("verdict", r.verdict), field("tool", d.tool), field("arguments", d.arguments, true),
      field("status", d.status), field("attempts", d.attempts), field("replayed", d.replayed),
      field("approval", d.approval), field("payload", d.payload, true), field("finish", d.finish, true),
      field("failed", d.failed), field("error", d.error, true), field("verified", d.verified),
      field("decision", d.decision), field("messages", d.messages ? d.messages.length + " new" : undefined),
      [].concat.apply([], rest.map(function (k) { return field(k, JSON.stringify(d[k])); })),
      field("duration", r.duration + " ms"), field("at", r.at === null ? null : "+" + (r.at / 1000).toFixed(3) + " s")));
    panel.replaceChildren.apply(panel, [
      el("h2", {text: "#" + r.sequence + " · step " + r.step}),
      el("p", {class: "fi-move", text: r.source + " ─" + r.trigger + "→ " + r.dest})].concat(childLinks(r),
      [guards, dl, tries]).filter(Boolean));
  }

  function renderRows() {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
    const visible = Math.ceil((list.clientHeight || 240) / ROW) + 10;
    const last = Math.min(shown.length, first + visible);
    const key = first + ":" + last + ":" + current + ":" + shown.length;
    if (key === lastRendered) return;
    lastRendered = key;
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; i++) {
      const r = shown[i];
      fragment.appendChild(el("div", {class: "fi-row" + (r.index === current ? " fi-row-current" : "") +
        (r.detail.status && r.detail.status !== "ok" ? " fi-row-" + r.detail.status : ""),
        role: "option", "data-sequence": String(r.sequence), text: line(r)}));
    }
    rows.style.transform = "translateY(" + first * ROW + "px)";
    rows.replaceChildren(fragment);
  }

  function go(index) {
    current = Math.max(0, Math.min(records.length - 1, index));
    const r = records[current];
    scrubber.value = String(current);
    position.textContent = r.sequence + " / " + records.length;
    highlight(r);
    reveal();
    showPanel(r);
    const at = shown.indexOf(r);
    if (at >= 0) {
      const top = at * ROW;
      if (top < list.scrollTop || top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, top - ROW * 3);
    }
    lastRendered = "";
    renderRows();
  }
  function move(by) {
    if (shown.length === records.length) return go(current + by);
    const from = shown.findIndex(function (r) { return by > 0 ? r.index > current : r.index >= current; });
    let target;
    if (by > 0) target = from < 0 ? null : shown[from];
    else target = from < 0 ? shown[shown.length - 1] : shown[from - 1];
    if (target) go(target.index);
  }
  function applyFilters() {
    shown = toolFilter.value || statusFilter.value ? records.filter(matches) : records;
    spacer.style.height = shown.length * ROW + "px";
    count.textContent = shown.length === records.length ? records.length + " transitions" :
      shown.length + " of " + records.length + " transitions";
    list.scrollTop = 0;
    lastRendered = "";
    renderRows();
  }
  function toggle() {
    if (timer !== null) { clearInterval(timer); timer = null; play.textContent = "▶ play"; return; }
    if (current >= records.length - 1) go(0);
    play.textContent = "❚❚ pause";
    timer = setInterval(function () {
      if (current >= records.length - 1) { toggle(); return; }
      move(1);
    }, 350);
  }

  prev.addEventListener("click", function () { move(-1); });
  next.addEventListener("click", function () { move(1); });
  play.addEventListener("click", toggle);
  scrubber.addEventListener("input", function () { go(Number(scrubber.value)); });
  toolFilter.addEventListener("change", applyFilters);
  statusFilter.addEventListener("change", applyFilters);
  list.addEventListener("scroll", renderRows);
  rows.addEventListener("click", function (event) {
    const row = event.target.closest(".fi-row");
    if (row) go(Number(row.dataset.sequence) - 1);
  });
  const keys = document.body.classList.contains("fi-page") ? document : root;
  keys.addEventListener("keydown", function (event) {
    const tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (event.key === "ArrowRight") { move(1); event.preventDefault(); }
    else if (event.key === "ArrowLeft") { move(-1); event.preventDefault(); }
    else if (event.key === " ") { toggle(); event.preventDefault(); }
    else if (event.key === "Home") { go(0); event.preventDefault(); }
    else if (event.key === "End") { go(records.length - 1); event.preventDefault(); }
    else if (event.key === "+" || event.key === "=") { setZoom(zoom * 1.5); event.preventDefault(); }
    else if (event.key === "-") { setZoom(zoom / 1.5); event.preventDefault(); }
    else if (event.key === "0") { setZoom(1); event.preventDefault(); }
  });

  applyFilters();
  if (svg) setZoom(readableZoom());
  go(current);
  root.dataset.ready = "true";
  return {go: go, move: move, records: records};
}
