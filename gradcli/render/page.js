// gradcli's graph page: interaction on top of Graphviz's SVG (no library, no network).
// The model (nodes in evaluation order, edges input -> consumer) is the JSON in #gradcli-model.
(function () {
  "use strict";
  var model = JSON.parse(document.getElementById("gradcli-model").textContent);
  var svg = document.querySelector("#canvas svg");
  var canvas = document.getElementById("canvas");
  var details = document.getElementById("details");
  var statusLine = document.getElementById("status");
  var nodes = new Map();
  var inputs = new Map();
  var consumers = new Map();

  model.nodes.forEach(function (n, i) {
    n.index = i;
    nodes.set(n.id, n);
    inputs.set(n.id, []);
    consumers.set(n.id, []);
  });
  model.edges.forEach(function (e) {
    if (nodes.has(e.source) && nodes.has(e.target)) {
      inputs.get(e.target).push(e);
      consumers.get(e.source).push(e);
    }
  });

  // --- the SVG's elements, tied to the model ------------------------------------------------------
  Array.prototype.forEach.call(svg.querySelectorAll("g.node"), function (g) {
    var n = nodes.get(g.querySelector("title").textContent);
    if (!n) return;
    n.el = g;
    g.setAttribute("data-id", n.id);
    Array.prototype.forEach.call(g.querySelectorAll("text"), function (t) {
      var s = t.textContent;
      if (s.indexOf("value ") === 0) n.valueText = t;
      else if (s.indexOf("grad ") === 0) { n.gradText = t; n.gradOriginal = s; }
      else if (s.indexOf("saved values freed") === 0) n.freedText = t;
    });
  });
  // dot writes edges in its own order: pair them by their title ("n0->n2"), in order within a title
  var edgeEls = new Map();
  Array.prototype.forEach.call(svg.querySelectorAll("g.edge"), function (g) {
    var key = g.querySelector("title").textContent;
    if (!edgeEls.has(key)) edgeEls.set(key, []);
    edgeEls.get(key).push(g);
  });
  model.edges.forEach(function (e, k) {
    var same = edgeEls.get(e.source + "->" + e.target);
    e.el = same && same.length ? same.shift() : null;
    if (e.el) e.el.setAttribute("data-edge", String(k));
  });
  Array.prototype.forEach.call(svg.querySelectorAll("g.node > title, g.edge > title"), function (t) {
    t.remove(); // the panel says more than a tooltip could
  });

  // --- pan and zoom: a CSS transform on the SVG, composited while it moves, redrawn sharp when it stops --
  var base = svg.viewBox.baseVal;
  var full = { w: base.width, h: base.height };
  var view = { x: 0, y: 0, s: 1 }; // translate (px) and scale, over the picture fitted to the window
  var settle = null;
  svg.removeAttribute("width");
  svg.removeAttribute("height");

  function applyView() {
    svg.style.willChange = "transform"; // one layer moved by the compositor: no repaint of 600 nodes per frame
    svg.style.transform = "translate(" + view.x + "px, " + view.y + "px) scale(" + view.s + ")";
    clearTimeout(settle);
    settle = setTimeout(function () { svg.style.willChange = "auto"; }, 250); // then drawn again at full sharpness
  }
  function fit() {
    view = { x: 0, y: 0, s: 1 };
    applyView();
  }
  function fitted() { // screen pixels per SVG unit at scale 1
    var r = canvas.getBoundingClientRect();
    return Math.min(r.width / full.w, r.height / full.h) || 1;
  }
  function zoomAt(factor, clientX, clientY) {
    var r = canvas.getBoundingClientRect();
    var most = Math.max(8, 4 / fitted()); // up to 4x the picture's own size
    var s = Math.min(Math.max(view.s * factor, 0.25), most);
    var f = s / view.s, cx = clientX - r.left, cy = clientY - r.top;
    view = { x: cx - (cx - view.x) * f, y: cy - (cy - view.y) * f, s: s };
    applyView();
  }
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX, ev.clientY);
  }, { passive: false });

  var drag = null;
  canvas.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, view: view, moved: false };
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) canvas.classList.add("dragging");
    drag.moved = true;
    view = { x: drag.view.x + dx, y: drag.view.y + dy, s: drag.view.s };
    applyView();
  });
  window.addEventListener("pointerup", function () {
    if (drag && drag.moved) {
      canvas.classList.remove("dragging");
      setTimeout(function () { drag = null; }, 0); // the click that ends a drag selects nothing
    } else {
      drag = null;
    }
  });

  function centreOn(n) { // zoom in to the picture's own size (never out), the node in the middle
    if (!n.el) return;
    var r = canvas.getBoundingClientRect(), b = n.el.getBoundingClientRect();
    var s = Math.max(view.s, 1 / fitted());
    var f = s / view.s;
    var px = b.left + b.width / 2 - r.left, py = b.top + b.height / 2 - r.top;
    view = { x: r.width / 2 - (px - view.x) * f, y: r.height / 2 - (py - view.y) * f, s: s };
    applyView();
  }

  // --- the selected node: its panel and its paths --------------------------------------------------
  var selected = null;

  function reach(start, next, key) {
    var seen = new Set([start]);
    var queue = [start];
    var on = new Set();
    while (queue.length) {
      var id = queue.shift();
      next.get(id).forEach(function (e) {
        on.add(e);
        var other = e[key];
        if (!seen.has(other)) { seen.add(other); queue.push(other); }
      });
    }
    return { nodes: seen, edges: on };
  }

  function clearPaths() {
    svg.classList.remove("focus");
    Array.prototype.forEach.call(svg.querySelectorAll(".on-path, .selected, .to-output, .to-leaves"), function (el) {
      el.classList.remove("on-path", "selected", "to-output", "to-leaves");
    });
  }

  function select(id, centre) {
    var n = nodes.get(id);
    clearPaths();
    selected = n || null;
    if (!n) {
      details.innerHTML = '<p class="hint">Click a node to see its operation, values and local derivatives.</p>';
      return;
    }
    var up = reach(id, consumers, "target");
    var down = reach(id, inputs, "source");
    svg.classList.add("focus");
    [up, down].forEach(function (r, k) {
      r.nodes.forEach(function (m) { var x = nodes.get(m); if (x.el) x.el.classList.add("on-path"); });
      r.edges.forEach(function (e) { if (e.el) e.el.classList.add("on-path", k === 0 ? "to-output" : "to-leaves"); });
    });
    if (n.el) n.el.classList.add("selected");
    details.innerHTML = panel(n, up.nodes.size - 1, down.nodes.size - 1);
    if (centre) centreOn(n);
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function row(field, label, text) {
    if (text === null || text === undefined || text === "") return "";
    return '<tr><th>' + label + '</th><td data-field="' + field + '">' + esc(text) + "</td></tr>";
  }
  function link(id) {
    var n = nodes.get(id);
    return '<a href="#" data-goto="' + esc(id) + '">' + esc(n ? n.title : id) + "</a>";
  }
  function shapeText(shape) {
    return shape.length ? "(" + shape.join(", ") + (shape.length === 1 ? ",)" : ")") : "scalar";
  }
  function savedText(n) {
    if (n.kind !== "op") return null;
    var what = { inputs: "its inputs", output: "its output", both: "its inputs and output", shapes: "shapes only",
                 nothing: "nothing", meta: "shapes only" }[n.saves] || n.saves || "nothing";
    return n.freed ? what + " \u2014 freed by backward()" : what + (n.saves === "nothing" ? "" : " \u2014 kept");
  }

  function panel(n, toOutput, toLeaves) {
    if (n.kind === "hidden") return hiddenPanel(n);
    var kind = n.kind === "op" ? "operation" : n.kind === "variable" ? "variable (leaf)" :
      n.kind === "group" ? "group of repeated structure: \u00d7" + n.count.toLocaleString("en") + ", " +
        n.size.toLocaleString("en") + " nodes (its value is their total, its gradient each one's)" : "constant";
    var h = '<h2 data-field="title">' + esc(n.title) + "</h2><table>";
    h += row("id", "id", n.id) + row("kind", "kind", kind + (n.output ? ", output" : ""));
    h += row("op", "op", n.kind === "op" ? n.op : null) + row("grad_fn", "backward", n.grad_fn);
    h += row("shape", "shape", shapeText(n.shape)) + row("value", "value", n.value_text);
    h += row("grad", "gradient", n.grad_text);
    if (n.grad_label && n.grad_label.indexOf(" = ") > 0) {
      h += row("grad_parts", "sum of paths", n.grad_label.slice(n.grad_label.indexOf(" = ") + 3));
    }
    h += row("saved", "saved", savedText(n)) + "</table>";
    var ins = inputs.get(n.id), outs = consumers.get(n.id);
    if (ins.length) {
      h += "<h3>inputs</h3><ul class=\"edges\" data-field=\"inputs\">";
      ins.forEach(function (e) {
        h += "<li>" + link(e.source) + (e.partial ? ' <span class="partial">' + esc(e.partial) + "</span>" : "") + "</li>";
      });
      h += "</ul>";
    }
    if (outs.length) {
      h += "<h3>used by</h3><ul class=\"edges\" data-field=\"consumers\">";
      outs.forEach(function (e) {
        h += "<li>" + link(e.target) + (e.partial ? ' <span class="partial">' + esc(e.partial) + "</span>" : "") +
          (e.part_text ? ' <span class="part">sends back ' + esc(e.part_text) + "</span>" : "") + "</li>";
      });
      h += "</ul>";
    }
    var leaves = toLeaves ? '<span class="swatch to-leaves"></span>' + toLeaves + " node" + (toLeaves === 1 ? "" : "s") +
      " towards the leaves" : "";
    if (!toOutput) {
      h += '<p class="paths">The output' + (leaves ? "; " + leaves : "") + ".</p>";
    } else {
      h += '<p class="paths"><span class="swatch to-output"></span>' + toOutput + " node" + (toOutput === 1 ? "" : "s") +
        " on its paths to the output" + (leaves ? ", " + leaves : "") +
        ". Its gradient: multiply the local derivatives along each path to the output, add the paths.</p>";
    }
    return h;
  }

  function hiddenPanel(n) {
    var h = '<h2 data-field="title">' + esc(n.title) + "</h2><p>Not drawn, so the page stays quick; counted by operation:</p><ul>";
    Object.keys(model.hidden_kinds || {}).forEach(function (k) {
      h += "<li>" + esc(k) + " \u00d7" + model.hidden_kinds[k].toLocaleString("en") + "</li>";
    });
    return h + "</ul><p>Show more with <code>--max-nodes</code>, or see every node with <code>--format text</code>.</p>";
  }

  svg.addEventListener("click", function (ev) {
    if (drag && drag.moved) return;
    var g = ev.target.closest("g.node");
    select(g ? g.getAttribute("data-id") : null, false);
  });
  details.addEventListener("click", function (ev) {
    var a = ev.target.closest("a[data-goto]");
    if (!a) return;
    ev.preventDefault();
    select(a.getAttribute("data-goto"), true);
  });

  // --- search ------------------------------------------------------------------------------------------
  var search = document.getElementById("search");
  var list = document.getElementById("names");
  var names = new Set();
  model.nodes.forEach(function (n) {
    if (n.kind === "hidden") return;
    [n.name, n.id].forEach(function (s) { if (s) names.add(s); });
  });
  names.forEach(function (s) {
    var o = document.createElement("option");
    o.value = s;
    list.appendChild(o);
  });

  function find(text) {
    var q = text.trim().toLowerCase();
    if (!q) return null;
    var tests = [
      function (n) { return (n.name || "").toLowerCase() === q || n.id.toLowerCase() === q; },
      function (n) { return n.title.toLowerCase() === q || (n.label || "").toLowerCase() === q; },
      function (n) { return (n.title + " " + (n.label || "")).toLowerCase().indexOf(q) >= 0; },
      function (n) { return (n.grad_fn || "").toLowerCase().indexOf(q) >= 0; },
    ];
    for (var t = 0; t < tests.length; t++) {
      for (var i = model.nodes.length - 1; i >= 0; i--) { // the latest match: nearest the output
        if (model.nodes[i].kind !== "hidden" && tests[t](model.nodes[i])) return model.nodes[i];
      }
    }
    return null;
  }
  function runSearch() {
    var n = find(search.value);
    search.classList.toggle("missing", !n && search.value.trim() !== "");
    if (n) select(n.id, true);
  }
  search.addEventListener("keydown", function (ev) { if (ev.key === "Enter") runSearch(); });
  search.addEventListener("change", runSearch);

  // --- the step control: forward pass, then backward pass -------------------------------------------------
  var forward = model.nodes.filter(function (n) { return n.kind === "op" || n.kind === "variable"; });
  var backward = model.has_point ? forward.filter(function (n) { return n.kind === "op" && n.grad_text !== null; }).reverse() : [];
  var total = forward.length + backward.length;
  var step = total; // the whole picture
  var timer = null;
  var range = document.getElementById("step-range");
  var playButton = document.getElementById("step-play");
  range.max = String(total);
  range.value = String(total);

  function setHidden(el, hidden) {
    if (el) el.classList.toggle("pending", hidden);
  }

  function render() {
    range.value = String(step);
    var animating = step < total;
    svg.classList.toggle("animating", animating);
    var computed = new Set(forward.slice(0, Math.min(step, forward.length)).map(function (n) { return n.id; }));
    var fired = backward.slice(0, Math.max(0, step - forward.length));
    var firedIds = new Set(fired.map(function (n) { return n.id; }));
    var received = new Map();
    fired.forEach(function (n) {
      inputs.get(n.id).forEach(function (e) {
        if (!received.has(e.source)) received.set(e.source, []);
        received.get(e.source).push(e);
      });
    });
    var current = step === 0 || !animating ? null : step <= forward.length ? forward[step - 1] : fired[fired.length - 1];
    model.nodes.forEach(function (n) {
      if (!n.el) return;
      var done = !animating || n.kind === "constant" || n.kind === "hidden" || computed.has(n.id);
      n.el.classList.toggle("pending", !done);
      n.el.classList.toggle("current", n === current);
      setHidden(n.valueText, !done);
      if (n.gradText) showGrad(n, animating, firedIds, received.get(n.id) || []);
      setHidden(n.freedText, animating && !firedIds.has(n.id)); // backward frees what a node saved
    });
    model.edges.forEach(function (e) {
      if (!e.el) return;
      var t = nodes.get(e.target);
      var source = nodes.get(e.source);
      var flows = animating && firedIds.has(e.target) && source && source.kind !== "constant";
      e.el.classList.toggle("pending", animating && !computed.has(e.target) && t && t.kind !== "hidden");
      e.el.classList.toggle("carried", flows && !(current && e.target === current.id));
      e.el.classList.toggle("flowing", flows && current !== null && e.target === current.id);
    });
    statusLine.textContent = describe(current, received);
    statusLine.classList.toggle("shown", animating);
  }

  function showGrad(n, animating, firedIds, got) {
    var needed = paths(n.id);
    var complete = !animating || firedIds.has(n.id) || (got.length > 0 && got.length >= needed);
    if (complete) {
      n.gradText.textContent = n.gradOriginal;
      setHidden(n.gradText, false);
    } else if (got.length) { // a shared node: its sum is forming, one path at a time
      var parts = got.slice(0, 3).map(function (e) { return e.part_text || "?"; });
      n.gradText.textContent = "grad " + parts.join(" + ") + " + \u2026" +
        (got.length > 3 ? " (" + got.length + " of " + needed + ")" : "");
      setHidden(n.gradText, false);
    } else {
      n.gradText.textContent = n.gradOriginal;
      setHidden(n.gradText, true);
    }
  }

  function paths(id) {
    return consumers.get(id).filter(function (e) { var t = nodes.get(e.target); return t && t.grad_text !== null; }).length;
  }

  function describe(n, received) {
    if (step >= total) return "";
    if (!n) return "Before the forward pass: only the inputs are known. Step on (\u2192) to evaluate the graph node by node.";
    if (step <= forward.length) {
      var ins = inputs.get(n.id).map(function (e) { return nodes.get(e.source).title; });
      return "forward " + step + "/" + forward.length + ": " + n.title +
        (ins.length ? " from " + ins.join(", ") : " (an input)") + (n.value_text !== null ? " = " + n.value_text : "");
    }
    var k = step - forward.length;
    var sends = inputs.get(n.id).filter(function (e) { return e.part_text; }).map(function (e) {
      var got = (received.get(e.source) || []).length, all = paths(e.source);
      var source = nodes.get(e.source);
      return (source.name || source.title) + " gets " + e.part_text + " (" + n.grad_text + " \u00d7 " + e.partial + ")" +
        (all > 1 ? " [" + got + " of " + all + " paths summed]" : "");
    });
    return "backward " + k + "/" + backward.length + ": " + n.title + " has its gradient " + n.grad_text +
      (sends.length ? "; it sends back: " + sends.join("; ") : "");
  }

  function go(s) {
    step = Math.max(0, Math.min(total, s));
    render();
  }
  function stop() {
    if (timer) clearInterval(timer);
    timer = null;
    playButton.textContent = "\u25B6 play";
  }
  function play() {
    if (timer) { stop(); return; }
    if (step >= total) go(0);
    playButton.textContent = "\u275A\u275A pause";
    var delay = Math.max(40, Math.min(700, 24000 / Math.max(total, 1)));
    timer = setInterval(function () {
      if (step >= total) { stop(); return; }
      go(step + 1);
    }, delay);
  }
  function stepBy(d) {
    stop();
    go(step >= total && d > 0 ? 1 : step + d);
  }
  document.getElementById("step-first").addEventListener("click", function () { stop(); go(0); });
  document.getElementById("step-back").addEventListener("click", function () { stepBy(-1); });
  document.getElementById("step-next").addEventListener("click", function () { stepBy(1); });
  document.getElementById("step-last").addEventListener("click", function () { stop(); go(total); });
  playButton.addEventListener("click", play);
  range.addEventListener("input", function () { stop(); go(Number(range.value)); });
  document.getElementById("fit").addEventListener("click", fit);
  document.addEventListener("keydown", function (ev) {
    // the search box and the slider keep their keys; a focused button takes its own space
    if (ev.target.tagName === "INPUT" || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === " " && ev.target.tagName === "BUTTON") return;
    var keys = { ArrowRight: function () { stepBy(1); }, ArrowLeft: function () { stepBy(-1); },
                 Home: function () { stop(); go(0); }, End: function () { stop(); go(total); },
                 " ": play, f: fit, Escape: function () { select(null); } };
    if (keys[ev.key]) { ev.preventDefault(); keys[ev.key](); }
  });

  // --- boxes: statements, Python calls and groups of repeated structure, folded and unfolded ----------------------
  // A box is a Graphviz cluster (its <title> is "cluster_<id>"). Folded, its nodes and the edges between them are
  // hidden and a card over the box's place names it and counts them: the edges from outside end at the card.
  var groupsBox = document.getElementById("groups");
  var root = svg.querySelector("g.graph") || svg;
  var boxEls = new Map();
  Array.prototype.forEach.call(svg.querySelectorAll("g.cluster"), function (g) {
    var t = g.querySelector("title");
    if (t && t.textContent.indexOf("cluster_") === 0) boxEls.set(t.textContent.slice(8), g);
    if (t) t.remove();
  });
  var SVGNS = "http://www.w3.org/2000/svg";
  function card(box) {
    var el = boxEls.get(box.id);
    if (!el) return null;
    var b = el.getBBox();
    var c = document.createElementNS(SVGNS, "g");
    c.setAttribute("class", "fold");
    c.setAttribute("data-box", box.id);
    var r = document.createElementNS(SVGNS, "rect");
    ["x", "y", "width", "height"].forEach(function (k) { r.setAttribute(k, String(b[k])); });
    r.setAttribute("rx", "6");
    c.appendChild(r);
    var lines = [box.label, "\u25B8 " + box.size.toLocaleString("en") + " node" + (box.size === 1 ? "" : "s") + " folded: click to open"];
    if (box.total !== null && box.total !== undefined) lines.splice(1, 0, "total value " + (typeof box.total === "number" ? String(Number(box.total.toPrecision(6))) : box.total));
    lines.forEach(function (s, k) {
      var t = document.createElementNS(SVGNS, "text");
      t.setAttribute("x", String(b.x + b.width / 2));
      t.setAttribute("y", String(b.y + b.height / 2 + (k - (lines.length - 1) / 2) * 15));
      t.setAttribute("text-anchor", "middle");
      t.setAttribute("class", k === 0 ? "fold-label" : "fold-note");
      t.textContent = s;
      c.appendChild(t);
    });
    c.addEventListener("click", function (ev) { ev.stopPropagation(); if (!(drag && drag.moved)) setBox(box, false); });
    root.appendChild(c);
    return c;
  }
  function setBox(box, folded) {
    box.folded = folded;
    var members = new Set(box.members);
    box.members.forEach(function (id) { var n = nodes.get(id); if (n && n.el) n.el.classList.toggle("collapsed", folded); });
    model.edges.forEach(function (e) {
      if (!e.el) return;
      var inside = members.has(e.source) && members.has(e.target);
      var touches = members.has(e.source) || members.has(e.target);
      if (inside || (touches && !boxEls.has(box.id))) e.el.classList.toggle("collapsed", folded);
    });
    if (folded && !box.card) box.card = card(box);
    if (box.card) box.card.classList.toggle("collapsed", !folded);
    var el = boxEls.get(box.id);
    if (el) el.classList.toggle("folded", folded);
    var button = groupsBox.querySelector('[data-box="' + CSS.escape(box.id) + '"]');
    if (button) button.textContent = (folded ? "\u25B8 " : "\u25BE ") + box.title;
    if (!folded) { // a box inside stays as it was: folded again over the nodes this one showed
      allBoxes.forEach(function (inner) { if (inner !== box && inner.folded && box.members.indexOf(inner.members[0]) >= 0) setBox(inner, true); });
    }
  }
  var allBoxes = [];
  (model.clusters || []).forEach(function (c) { // those drawn (a statement of one node is not: its title says it)
    if (boxEls.has(c.id)) allBoxes.push({ id: c.id, label: c.label, title: c.label, members: c.members, size: c.members.length, folded: !!c.collapsed, kind: "cluster" });
  });
  (model.groups || []).forEach(function (g) {
    allBoxes.push({ id: g.id, label: g.label + " \u00d7" + (g.count || g.members.length).toLocaleString("en"),
                    title: g.label + " \u00d7" + (g.count || g.members.length), members: g.members, size: g.members.length,
                    total: g.total, folded: !!g.collapsed, kind: "group", group: g });
  });
  var byBox = new Map(allBoxes.map(function (b) { return [b.id, b]; }));
  function addButtons(kind, heading) {
    var some = allBoxes.filter(function (b) { return b.kind === kind; });
    if (!some.length) return;
    var h = document.createElement("h3");
    h.textContent = heading;
    groupsBox.appendChild(h);
    some.forEach(function (box) {
      var b = document.createElement("button");
      b.className = "group";
      b.setAttribute("data-box", box.id);
      if (kind === "group") b.setAttribute("data-group", box.id);
      b.addEventListener("click", function () { setBox(box, !box.folded); });
      groupsBox.appendChild(b);
    });
  }
  addButtons("cluster", "statements and calls");
  addButtons("group", "groups");
  allBoxes.forEach(function (box) { setBox(box, box.folded); });
  svg.addEventListener("click", function (ev) { // a box's own label folds it
    if (drag && drag.moved) return;
    var g = ev.target.closest("g.cluster");
    if (!g || ev.target.tagName !== "text") return;
    var id = Array.from(boxEls.entries()).find(function (kv) { return kv[1] === g; });
    if (id && byBox.has(id[0])) { ev.stopPropagation(); setBox(byBox.get(id[0]), true); }
  }, true);
  if (model.notes && model.notes.length) {
    document.getElementById("notes").innerHTML = model.notes.map(function (s) { return "<p>" + esc(s) + "</p>"; }).join("");
  }

  fit();
  render();
  window.gradcliPage = { boxes: byBox, fold: function (id, folded) { setBox(byBox.get(id), folded); }, view: function () { return view; }, timed: function (f) { var t = performance.now(); f(); return performance.now() - t; }, model: model, select: select, go: go, step: function () { return step; }, total: total, find: find };
  window.gradcliPage.readyAt = performance.now(); // the page answers from here on
  document.documentElement.setAttribute("data-ready", "true");
})();
