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

  // --- the SVG's elements, tied to the model (again after each new layout) ----------------------------
  var foldEls = new Map(); // a folded box's node, by the box's id
  function bindSvg() {
    model.nodes.forEach(function (n) { n.el = n.valueText = n.gradText = n.freedText = null; });
    foldEls = new Map();
    Array.prototype.forEach.call(svg.querySelectorAll("g.node"), function (g) {
      var key = g.querySelector("title").textContent;
      if (foldKeys.has(key)) {
        var box = foldKeys.get(key);
        g.setAttribute("data-box", box);
        g.classList.add("folded-box");
        foldEls.set(box, g);
        return;
      }
      var n = nodes.get(key);
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
    // dot writes edges in its own order: pair them by their title ("n0->n2"), in order within a title;
    // an edge into or out of a folded box is its box's ("fold_m3->n40"), one for all it stands for
    var edgeEls = new Map();
    Array.prototype.forEach.call(svg.querySelectorAll("g.edge"), function (g) {
      var key = g.querySelector("title").textContent;
      if (!edgeEls.has(key)) edgeEls.set(key, []);
      edgeEls.get(key).push(g);
    });
    model.edges.forEach(function (e, k) {
      var key = repOf(e.source) + "->" + repOf(e.target);
      var same = edgeEls.get(key);
      var own = key === e.source + "->" + e.target;
      e.el = same && same.length ? (own ? same.shift() : same[0]) : null;
      if (e.el && own) e.el.setAttribute("data-edge", String(k));
    });
    Array.prototype.forEach.call(svg.querySelectorAll("g.node > title, g.edge > title"), function (t) {
      t.remove(); // the panel says more than a tooltip could
    });
  }
  // --- folding with a new layout: the DOT in pieces (relayout.py), assembled for the boxes folded -------------
  var pieces = model.relayout || null;
  var foldKeys = new Map(); // a folded box's node id in the DOT -> the box's id
  var folded = new Set(pieces ? pieces.folded : []);
  if (pieces) Object.keys(pieces.boxes).forEach(function (b) { foldKeys.set(pieces.boxes[b].key, b); });
  function chainOf(id) { return (pieces && pieces.chains[id]) || []; }
  function outerFolded(id) { // the outermost folded box around a node, or null
    var chain = chainOf(id);
    for (var k = 0; k < chain.length; k++) if (folded.has(chain[k])) return chain[k];
    return null;
  }
  function repOf(id) { // what stands for a node in the picture: itself, or the folded box around it
    var box = outerFolded(id);
    return box === null ? id : pieces.boxes[box].key;
  }
  function assemble() { // relayout.assemble's twin: the same DOT text for the same boxes folded
    var root = { items: [], kids: new Map(), seen: new Set() };
    model.nodes.forEach(function (n) {
      var chain = chainOf(n.id), cut = -1;
      for (var k = 0; k < chain.length; k++) if (folded.has(chain[k])) { cut = k; break; }
      var here = root;
      (cut < 0 ? chain : chain.slice(0, cut)).forEach(function (b) {
        if (pieces.boxes[b].cluster === null) return; // (a group without a box: nothing drawn around its nodes)
        if (!here.kids.has(b)) {
          here.kids.set(b, { items: [], kids: new Map(), seen: new Set() });
          here.items.push({ box: b });
        }
        here = here.kids.get(b);
      });
      if (cut < 0) here.items.push({ node: pieces.nodes[n.id] });
      else {
        var box = pieces.boxes[chain[cut]];
        if (!here.seen.has(box.key)) { here.seen.add(box.key); here.items.push({ node: box.node }); }
      }
    });
    var lines = [folded.size && model.nodes.some(function (n) { return outerFolded(n.id) !== null; }) ? pieces.head_folded : pieces.head];
    (function write(here, tabs) {
      here.items.forEach(function (item) {
        if (item.node !== undefined) { lines.push(tabs + item.node + "\n"); return; }
        lines.push(tabs + "subgraph cluster_" + item.box + " {\n" + tabs + "\t" + pieces.boxes[item.box].cluster + "\n");
        write(here.kids.get(item.box), tabs + "\t");
        lines.push(tabs + "}\n");
      });
    })(root, "\t");
    var merged = new Map(), out = [];
    model.edges.forEach(function (e, k) {
      var s = repOf(e.source), t = repOf(e.target);
      if (s === e.source && t === e.target) out.push("\t" + s + " -> " + t + pieces.edges[k] + "\n");
      else if (s !== t) {
        var key = s + " -> " + t;
        if (!merged.has(key)) { merged.set(key, 0); out.push({ key: key }); }
        merged.set(key, merged.get(key) + 1);
      }
    });
    out.forEach(function (item) {
      if (typeof item === "string") { lines.push(item); return; }
      var count = merged.get(item.key);
      lines.push("\t" + item.key + (count > 1 ? ' [fontcolor="#996600" penwidth=1.6 xlabel=" \u00d7' +
        count.toLocaleString("en") + ' "]' : "") + "\n");
    });
    lines.push(pieces.tail);
    return lines.join("");
  }
  bindSvg();

  // --- pan and zoom: a CSS transform on the SVG, composited while it moves, redrawn sharp when it stops --
  var full = null;
  var view = { x: 0, y: 0, s: 1 }; // translate (px) and scale, over the picture fitted to the window
  var settle = null;
  function sizeSvg() { // the picture fitted to the window by its viewBox; pan and zoom move it
    var base = svg.viewBox.baseVal;
    full = { w: base.width, h: base.height };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
  }
  sizeSvg();

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
    if (n && !n.el && pieces && outerFolded(id) !== null) { // folded away: its boxes open first
      return reveal(id).then(function () { select(id, true); });
    }
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
      r.nodes.forEach(function (m) {
        var x = nodes.get(m), box = x.el || !pieces ? null : outerFolded(m);
        if (x.el) x.el.classList.add("on-path");
        else if (box !== null && foldEls.has(box)) foldEls.get(box).classList.add("on-path"); // (its folded box)
      });
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

  canvas.addEventListener("click", function (ev) {
    if (drag && drag.moved) return;
    var g = ev.target.closest("g.node");
    if (g && g.hasAttribute("data-box")) { setBox(byBox.get(g.getAttribute("data-box")), false); return; }
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
  var root = null;
  var boxEls = new Map();
  function bindBoxes() {
    root = svg.querySelector("g.graph") || svg;
    boxEls = new Map();
    Array.prototype.forEach.call(svg.querySelectorAll("g.cluster"), function (g) {
      var t = g.querySelector("title");
      if (t && t.textContent.indexOf("cluster_") === 0) {
        boxEls.set(t.textContent.slice(8), g);
        g.setAttribute("data-cluster", t.textContent.slice(8));
      }
      if (t) t.remove();
    });
  }
  bindBoxes();
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
    if (pieces) return refold(box, folded);
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
  var clusterOf = new Map((model.clusters || []).map(function (c) { return [c.id, c]; }));
  (model.clusters || []).forEach(function (c) { // those drawn (a statement of one node is not: its title says it)
    if (pieces ? pieces.boxes[c.id] : boxEls.has(c.id)) allBoxes.push({ id: c.id, label: c.label, title: c.label, members: c.members, size: c.members.length, folded: !!c.collapsed, kind: "cluster" });
  });
  (model.groups || []).forEach(function (g) {
    if (pieces && !pieces.boxes[g.id]) return;
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
  if (pieces) {
    allBoxes.forEach(function (box) { box.folded = folded.has(box.id); });
    showFolds();
  } else {
    allBoxes.forEach(function (box) { setBox(box, box.folded); });
  }
  canvas.addEventListener("click", function (ev) { // a box's own label folds it
    if (drag && drag.moved) return;
    var g = ev.target.closest("g.cluster");
    if (!g || ev.target.tagName !== "text") return;
    var id = Array.from(boxEls.entries()).find(function (kv) { return kv[1] === g; });
    if (id && byBox.has(id[0])) { ev.stopPropagation(); setBox(byBox.get(id[0]), true); }
  }, true);
  // --- a new layout for the boxes folded: Graphviz in WebAssembly (vendor/, inline), the view kept on the box ----------
  var graphviz = null, settled = Promise.resolve(), layoutMs = null;
  function showFolds() {
    allBoxes.forEach(function (box) {
      var button = groupsBox.querySelector('[data-box="' + CSS.escape(box.id) + '"]');
      if (button) button.textContent = (box.folded ? "\u25B8 " : "\u25BE ") + box.title;
    });
  }
  function boxEl(id) { return folded.has(id) ? foldEls.get(id) : boxEls.get(id); }
  function centreOf(el) {
    var r = canvas.getBoundingClientRect(), b = el.getBoundingClientRect();
    return { x: b.left + b.width / 2 - r.left, y: b.top + b.height / 2 - r.top, w: b.width, h: b.height };
  }
  function refold(box, fold, chain) {
    var el = boxEl(box.id);
    var before = el ? centreOf(el) : null;
    (chain || [box]).forEach(function (b) {
      if (fold) folded.add(b.id); else folded.delete(b.id);
      b.folded = fold;
    });
    showFolds();
    return relayoutNow(box, before);
  }
  function relayoutNow(box, before) {
    settled = settled.then(function () {
      if (!graphviz) graphviz = window.gradcliGraphviz.load();
      return graphviz;
    }).then(function (gv) {
      var t = performance.now();
      var text = gv.layout(assemble(), "svg", "dot");
      swap(text, box, before);
      layoutMs = performance.now() - t;
    }).catch(function (failed) {
      statusLine.textContent = "The graph could not be laid out again here: " + failed;
      statusLine.classList.add("shown");
    });
    return settled;
  }
  function swap(text, box, before) {
    var k = fitted() * view.s; // screen pixels per unit of the picture: kept, so the rest is pushed aside
    var holder = document.createElement("div");
    holder.innerHTML = text;
    var fresh = holder.querySelector("svg");
    canvas.replaceChild(fresh, svg);
    svg = fresh;
    sizeSvg();
    bindSvg();
    bindBoxes();
    view = { x: 0, y: 0, s: k / fitted() };
    applyView();
    var el = box ? boxEl(box.id) : null;
    if (el && before) { // the box where it was, whole in the window if it fits, else its top left corner
      var r = canvas.getBoundingClientRect(), now = centreOf(el), margin = 24;
      var tx = before.x, ty = before.y;
      tx = now.w + 2 * margin > r.width ? margin + now.w / 2 : Math.min(Math.max(tx, margin + now.w / 2), r.width - margin - now.w / 2);
      ty = now.h + 2 * margin > r.height ? margin + now.h / 2 : Math.min(Math.max(ty, margin + now.h / 2), r.height - margin - now.h / 2);
      view = { x: tx - now.x, y: ty - now.y, s: view.s };
      applyView();
    }
    if (selected && selected.el) select(selected.id, false);
    else if (selected) select(null);
    paint();
    render();
  }
  function reveal(id) { // unfold the boxes around a node folded away, then show it
    var chain = chainOf(id).filter(function (b) { return folded.has(b); }).map(function (b) { return byBox.get(b); });
    if (!chain.length) return Promise.resolve();
    return refold(chain[0], false, chain);
  }

  // --- colour by gradient health; a table of the modules -----------------------------------------------------------
  function facts(v) { // a value or gradient: its norm, size, fraction of zeros, NaN and infinities
    if (v === null || v === undefined) return null;
    if (!Array.isArray(v) && typeof v === "object") {
      var size = (v.shape || []).reduce(function (a, b) { return a * b; }, 1);
      return { norm: Number(v.norm), size: size, zeros: Number(v.zeros), nonfinite: Number(v.nonfinite || 0) };
    }
    var flat = Array.isArray(v) ? v.flat(Infinity) : [v];
    var sum = 0, zeros = 0, bad = 0;
    flat.forEach(function (x) {
      var y = Number(x);
      if (!isFinite(y)) { bad += 1; sum = NaN; return; }
      sum += y * y;
      if (y === 0) zeros += 1;
    });
    return { norm: Math.sqrt(sum), size: flat.length, zeros: flat.length ? zeros / flat.length : 0, nonfinite: bad };
  }
  function combine(list) { // several tensors as one: the norm of all, zeros and NaN/inf counted over all
    list = list.filter(function (f) { return f; });
    if (!list.length) return null;
    var sq = 0, size = 0, zeros = 0, bad = 0;
    list.forEach(function (f) { sq += f.norm * f.norm; size += f.size; zeros += f.zeros * f.size; bad += f.nonfinite; });
    return { norm: Math.sqrt(sq), size: size, zeros: size ? zeros / size : 0, nonfinite: bad };
  }
  function health(tensors) { // grad norm, ratio to the value's norm, fraction of zeros, NaN/inf of value and grad
    var g = combine(tensors.map(function (n) { return facts(n.grad); }));
    var v = combine(tensors.map(function (n) { return facts(n.value); }));
    return {
      norm: g ? g.norm : null,
      ratio: g && v && v.norm > 0 ? g.norm / v.norm : null,
      zeros: g ? g.zeros : null,
      nonfinite: (g || v) ? (g ? g.nonfinite : 0) + (v ? v.nonfinite : 0) : null,
    };
  }
  function boxOutput(members) { // the box's last node used outside it
    var inside = new Set(members);
    for (var k = members.length - 1; k >= 0; k--) {
      var n = nodes.get(members[k]);
      if (n && n.kind === "op" && (n.output || consumers.get(n.id).some(function (e) { return !inside.has(e.target); }))) return n;
    }
    return null;
  }
  function measured(h) { // render/health.py's measures (node_health, module_rows) as this script names them
    var num = function (x) { return x === null || x === undefined ? null : Number(x); };
    return { norm: num(h.grad_norm), ratio: num(h.ratio), zeros: num(h.zeros), nonfinite: num(h.nonfinite) };
  }
  var rowOf = new Map((model.modules || []).map(function (r) { return [r.id, r]; }));
  var modules = allBoxes.filter(function (b) { // a module's box (a path or a class), not a program's statement
    var c = clusterOf.get(b.id);
    return b.kind === "cluster" && (model.modules ? rowOf.has(b.id) : c && (c.path || c["class"]));
  }).map(function (box) {
    var c = clusterOf.get(box.id), label = c.label || box.id, m = /^(.*?) \(([^()]*)\)$/.exec(label);
    var params = box.members.map(function (id) { return nodes.get(id); }).filter(function (n) {
      return n && n.kind === "variable" && n.scope; });
    var out = boxOutput(box.members), row = rowOf.get(box.id);
    var h = row ? measured(row) : health(params.length ? params : out ? [out] : []);
    return { box: box.id, path: c.path || (m ? m[1] : label), cls: c["class"] || (m ? m[2] : ""),
             params: row ? row.params : params.reduce(function (a, n) { return a + (facts(n.value) || { size: 0 }).size; }, 0),
             of: row ? row.of : params.length ? "parameters" : "output", norm: h.norm, ratio: h.ratio, zeros: h.zeros,
             nonfinite: h.nonfinite };
  });
  var moduleOf = new Map(modules.map(function (r) { return [r.box, r]; }));
  var SCALES = { // light to mid-dark: black text stays legible on every colour
    "grad-norm": { log: true, from: [255, 255, 204], to: [240, 80, 50], title: "gradient norm (log scale)" },
    ratio: { log: true, from: [241, 238, 246], to: [60, 150, 200], title: "gradient / value norm (log scale)" },
    zeros: { log: false, from: [247, 252, 253], to: [160, 110, 190], title: "fraction of zeros in the gradient" },
  };
  var colourBy = document.getElementById("color-by");
  var legend = document.getElementById("legend");
  function metricOf(h, by) {
    if (!h) return null;
    return by === "grad-norm" ? h.norm : by === "ratio" ? h.ratio : by === "zeros" ? h.zeros : h.nonfinite;
  }
  function scaleFor(by, values) {
    var scale = SCALES[by];
    var xs = values.filter(function (x) { return x !== null && isFinite(x) && (!scale.log || x > 0); })
      .map(function (x) { return scale.log ? Math.log10(x) : x; });
    var lo = scale.log ? Math.min.apply(null, xs) : 0, hi = scale.log ? Math.max.apply(null, xs) : 1;
    return { lo: lo, hi: hi, scale: scale, colour: function (x) {
      if (x === null || !isFinite(x)) return x === null ? null : "#ff4d4d";
      if (scale.log && x <= 0) return "rgb(" + scale.from.join(",") + ")";
      var t = hi > lo ? ((scale.log ? Math.log10(x) : x) - lo) / (hi - lo) : 1;
      return "rgb(" + scale.from.map(function (a, i) { return Math.round(a + (scale.to[i] - a) * t); }).join(",") + ")";
    } };
  }
  function shapeOf(el) { return el && el.querySelector("polygon, ellipse, path"); }
  function tint(el, colour) {
    var s = shapeOf(el);
    if (!s) return;
    if (!s.hasAttribute("data-fill")) s.setAttribute("data-fill", s.getAttribute("fill") || "none");
    s.setAttribute("fill", colour || s.getAttribute("data-fill"));
  }
  function outline(el, colour) {
    var s = shapeOf(el);
    if (!s) return;
    if (!s.hasAttribute("data-stroke")) s.setAttribute("data-stroke", s.getAttribute("stroke") || "none");
    s.setAttribute("stroke", colour || s.getAttribute("data-stroke"));
    s.setAttribute("stroke-width", colour ? "3" : "1");
  }
  function paint() { // every node and box coloured by the chosen measure (none: Graphviz's own colours)
    var by = colourBy ? colourBy.value : "none";
    var nodeHealth = new Map(model.nodes.map(function (n) { return [n.id, n.health ? measured(n.health) : health([n])]; }));
    var colour = function () { return null; }, range = null;
    if (by === "nan") {
      colour = function (x) { return x === null ? null : x > 0 ? "#ff4d4d" : "#d9f2d0"; };
    } else if (by !== "none") {
      range = scaleFor(by, Array.from(nodeHealth.values()).concat(modules).map(function (h) { return metricOf(h, by); }));
      colour = range.colour;
    }
    model.nodes.forEach(function (n) { if (n.el) tint(n.el, by === "none" ? null : colour(metricOf(nodeHealth.get(n.id), by))); });
    modules.forEach(function (r) {
      var c = by === "none" ? null : colour(metricOf(r, by));
      if (foldEls.has(r.box)) tint(foldEls.get(r.box), c);
      if (boxEls.has(r.box)) outline(boxEls.get(r.box), c);
    });
    if (legend) legend.innerHTML = by === "none" ? "" : by === "nan" ? '<span class="key" style="background:#ff4d4d"></span>NaN or inf ' +
      '<span class="key" style="background:#d9f2d0"></span>finite' : range && isFinite(range.lo) ?
      '<span class="ramp" style="background:linear-gradient(90deg,rgb(' + range.scale.from.join(",") + "),rgb(" + range.scale.to.join(",") +
      '))"></span> ' + esc(range.scale.title) + ": " + esc(range.scale.log ? number(Math.pow(10, range.lo)) + " \u2026 " + number(Math.pow(10, range.hi)) :
      "0 \u2026 1") : "";
  }
  function number(x) { return x === null || x === undefined ? "" : !isFinite(x) ? String(x) : Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : String(Number(x.toPrecision(3))); }
  if (colourBy) {
    if (model.color_by) colourBy.value = model.color_by; // (--color-by given: the page opens coloured so)
    colourBy.addEventListener("change", paint);
  }

  var table = document.getElementById("modules");
  var sortKey = null, sortDown = true;
  var COLUMNS = [["path", "module"], ["params", "params"], ["norm", "\u2016grad\u2016"], ["ratio", "grad/val"], ["zeros", "zeros"],
                 ["nonfinite", "NaN"]];
  function cell(r, key) {
    if (key === "path") return '<span class="path">' + esc(r.path) + '</span><br><span class="cls">' + esc(r.cls) + "</span>";
    if (key === "params") return r.params ? r.params.toLocaleString("en") : "\u2013";
    if (key === "zeros") return r.zeros === null ? "" : number(r.zeros * 100) + "%";
    if (key === "nonfinite") return r.nonfinite === null ? "" : r.nonfinite ? '<b class="bad">' + r.nonfinite + "</b>" : "0";
    return number(r[key]) + (key === "norm" && r.of === "output" ? "<sup title=\"no parameters: the gradient at its output\">o</sup>" : "");
  }
  function drawTable() {
    if (!table || !modules.length) return;
    var rows = modules.slice();
    if (sortKey) {
      rows.sort(function (a, b) {
        var x = a[sortKey], y = b[sortKey];
        if (x === null || (typeof x === "number" && isNaN(x))) return 1; // (unknown last, either way)
        if (y === null || (typeof y === "number" && isNaN(y))) return -1;
        var c = typeof x === "string" ? x.localeCompare(y, "en", { numeric: true }) : x - y;
        return sortDown ? -c : c;
      });
    }
    table.innerHTML = "<thead><tr>" + COLUMNS.map(function (c) {
      return '<th data-sort="' + c[0] + '"' + (c[0] === sortKey ? ' class="' + (sortDown ? "down" : "up") + '"' : "") + ">" + c[1] + "</th>";
    }).join("") + "</tr></thead><tbody>" + rows.map(function (r) {
      return '<tr data-box="' + esc(r.box) + '">' + COLUMNS.map(function (c) { return '<td data-key="' + c[0] + '">' + cell(r, c[0]) + "</td>"; }).join("") + "</tr>";
    }).join("") + "</tbody>";
  }
  if (table) {
    table.addEventListener("click", function (ev) {
      var th = ev.target.closest("th[data-sort]");
      if (th) {
        var key = th.getAttribute("data-sort");
        sortDown = key === sortKey ? !sortDown : key !== "path";
        sortKey = key;
        drawTable();
        return;
      }
      var tr = ev.target.closest("tr[data-box]");
      if (tr) showBox(tr.getAttribute("data-box"));
    });
    document.getElementById("modules-box").hidden = !modules.length;
  }
  function showBox(id) { // a module from the table: its box unfolded (and those around it), in the middle
    var box = byBox.get(id);
    Array.prototype.forEach.call(table.querySelectorAll("tr.chosen"), function (tr) { tr.classList.remove("chosen"); });
    var tr = table.querySelector('tr[data-box="' + CSS.escape(id) + '"]');
    if (tr) tr.classList.add("chosen");
    var around = chainOf(boxOutput(box.members) ? boxOutput(box.members).id : box.members[0]);
    var chain = around.slice(0, around.indexOf(id) + 1).filter(function (b) { return folded.has(b); }).map(function (b) { return byBox.get(b); });
    var done = pieces && chain.length ? refold(box, false, chain) : Promise.resolve();
    return done.then(function () {
      var el = boxEl(id);
      Array.prototype.forEach.call(svg.querySelectorAll(".chosen-box"), function (g) { g.classList.remove("chosen-box"); });
      if (el) { el.classList.add("chosen-box"); centreOn({ el: el }); }
    });
  }
  drawTable();
  paint();

  if (model.notes && model.notes.length) {
    document.getElementById("notes").innerHTML = model.notes.map(function (s) { return "<p>" + esc(s) + "</p>"; }).join("");
  }

  fit();
  render();
  window.gradcliPage = { boxes: byBox, fold: function (id, fold) { return setBox(byBox.get(id), fold); },
    settled: function () { return settled; }, assemble: function () { return pieces ? assemble() : null; },
    layoutMs: function () { return layoutMs; }, modules: modules, showBox: showBox, folded: folded, view: function () { return view; }, timed: function (f) { var t = performance.now(); f(); return performance.now() - t; }, model: model, select: select, go: go, step: function () { return step; }, total: total, find: find };
  window.gradcliPage.readyAt = performance.now(); // the page answers from here on
  document.documentElement.setAttribute("data-ready", "true");
})();
