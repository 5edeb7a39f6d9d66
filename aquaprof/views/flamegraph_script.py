"""The flamegraph's script, one text for both of its forms: the
standalone SVG file and the HTML fragment a notebook shows.

It is a single function expression called on the flamegraph's own root
element (the <svg> of a file, the container <div> of a fragment), so that
it defines no global and finds nothing outside that root: several
flamegraphs on one page stay independent. It runs where it stands, at the
end of its root, and needs no onload event (JupyterLab never fires one
for HTML it inserts). The frames are laid out again, with their labels
refitted, whenever the root's width changes: the drawing is as wide as
the page, whatever width Python laid it out for; and again when its
widths switch between wall and CPU time, or the idle threads' frame is
expanded or folded.
"""
from __future__ import annotations

# Which of the paths (a/b/c: the names of a frame and of those under it)
# the regular expression matches, how many, and the time they cover, a
# match inside another counted once; null for a pattern that is not one.
# Pure: tests run it in node.
MATCHING_JS = r"""
function matching(pattern, paths, widths) {
  var re;
  try { re = new RegExp(pattern); } catch (e) { return null; }
  var hit = [], counted = [], count = 0, time = 0;
  paths.forEach(function (p, i) {
    hit.push(p !== "" && re.test(p));
    if (!hit[i]) { return; }
    count += 1;
    if (!counted.some(function (c) { return p.indexOf(c + "/") === 0; })) {
      time += widths[i]; counted.push(p); }
  });
  return {hit: hit, count: count, time: time};
}
"""

# root: the flamegraph's element; page_keys: whether Ctrl-F, F3 and
# Escape anywhere on the page reach the search box (a standalone file's
# page is the flamegraph's own; a notebook's is not).
# The frames come in pre-order, each naming its parent's index (data-p),
# its wall and CPU widths (data-w, data-c) and its name (data-n): the
# script works out depths, paths and x positions itself, so that what
# Python writes stays linear in the frames however deep the stacks (a
# path in a loop, not a recursion: a recursive stage may be thousands
# deep).
_ENGINE = r"""
(function (root, pageKeys) {
  "use strict";
  var PAD = @PAD@, ROW = @ROW@, SVGNS = "http://www.w3.org/2000/svg";
  var svg = root.tagName.toLowerCase() === "svg" ? root
    : root.querySelector("svg.frames");
  var frames = Array.prototype.slice.call(root.querySelectorAll("g.f"));
  var details = root.querySelector(".details");
  var reset = root.querySelector(".reset");
  var matched = root.querySelector(".matched");
  var term = root.querySelector(".term");
  var fold = root.querySelector(".fold");
  var modes = Array.prototype.slice.call(root.querySelectorAll(".mode"));
  var wall = parseFloat(root.querySelector("[data-wall]")
    .getAttribute("data-wall"));
  var box = svg.viewBox.baseVal;
  var width = box.width, height = box.height;
  var fitHeight = svg !== root;
  var n = frames.length, view = 0, mode = "wall", open = false, idle = -1;
  var parent = [], depth = [], kids = [], names = [], end = [];
  var wallW = [], cpuW = [], paths = [], x = [], w = [];
  @MATCHING@
  function num(g, key) { return parseFloat(g.getAttribute("data-" + key)); }
  frames.forEach(function (g, i) {
    var p = g.getAttribute("data-p");
    parent.push(p === null ? -1 : parseInt(p, 10));
    depth.push(parent[i] < 0 ? 0 : depth[parent[i]] + 1);
    kids.push([]);
    if (parent[i] >= 0) { kids[parent[i]].push(i); }
    names.push(g.getAttribute("data-n") || "");
    paths.push(parent[i] < 0 ? "" : null);
    wallW.push(num(g, "w")); cpuW.push(num(g, "c") || 0);
    if (g.classList.contains("idle")) { idle = i; }
  });
  for (var k = n - 1; k >= 0; k--) {
    end[k] = kids[k].length ? end[kids[k][kids[k].length - 1]] : k + 1; }
  // a frame's path, from the frames under it, made when first asked
  function pathOf(i) {
    var up = [], a, j;
    for (a = i; paths[a] === null; a = parent[a]) { up.push(a); }
    while ((j = up.pop()) !== undefined) {
      a = paths[parent[j]];
      paths[j] = a ? a + "/" + names[j] : names[j];
    }
    return paths[i];
  }
  function folded(i) {
    return idle >= 0 && !open && i > idle && i < end[idle]; }
  // the widths of the mode, the idle threads' frame folded to its CPU
  // time, the root as wide as what stands on it; x left to right
  function layout() {
    var next = [];
    for (var i = n - 1; i >= 0; i--) {
      w[i] = (i === idle && !open) || mode === "cpu" ? cpuW[i] : wallW[i];
      if (i === 0) {
        w[0] = kids[0].reduce(function (s, j) { return s + w[j]; }, 0); }
    }
    for (var j = 0; j < n; j++) {
      x[j] = parent[j] < 0 ? 0 : next[parent[j]];
      if (parent[j] >= 0) { next[parent[j]] += w[j]; }
      next[j] = x[j];
    }
  }
  function label(g) {
    var text = g.querySelector("text");
    if (!text) {
      text = document.createElementNS(SVGNS, "text");
      var rect = g.querySelector("rect");
      text.setAttribute("y", parseFloat(rect.getAttribute("y")) + ROW - 5);
      g.appendChild(text);
    }
    return text;
  }
  function fit(i, left, size) {
    var g = frames[i], rect = g.querySelector("rect");
    rect.setAttribute("x", left);
    rect.setAttribute("width", Math.max(size, 0));
    var room = Math.floor((size - 6) / 7), name = names[i] || "all";
    var shown = room >= name.length ? name
      : room > 2 ? name.substring(0, room - 2) + ".." : "";
    var text = g.querySelector("text");
    if (!shown && !text) { return; }
    text = label(g);
    text.setAttribute("x", left + 3);
    text.textContent = shown;
  }
  function draw() {
    layout();
    var span = width - 2 * PAD, scale = w[view] > 0 ? span / w[view] : 0;
    var up = {};
    for (var a = parent[view]; a >= 0; a = parent[a]) { up[a] = true; }
    frames.forEach(function (g, i) {
      var inside = i >= view && i < end[view];
      if (folded(i) || !(inside || up[i])) {
        g.style.display = "none"; return; }
      g.style.display = "";
      g.removeAttribute("display");
      if (up[i]) { fit(i, PAD, span); }
      else { fit(i, PAD + (x[i] - x[view]) * scale, w[i] * scale); }
      g.style.opacity = up[i] ? 0.6 : 1;
    });
    reset.style.visibility = view === 0 ? "hidden" : "visible";
    if (fitHeight) { crop(); }
  }
  // a fragment shows only the rows in use, so that a zoom into a shallow
  // stage leaves no empty space above it (a file keeps its header there)
  function crop() {
    var deepest = 0;
    frames.forEach(function (g, i) {
      if (g.style.display !== "none") {
        deepest = Math.max(deepest, depth[i]); }
    });
    var top = Math.max(height - PAD - (deepest + 1) * ROW - 4, 0);
    svg.setAttribute("viewBox",
      "0 " + top + " " + width + " " + (height - top));
  }
  function zoom(target) { view = target; draw(); }
  function time(s) {
    return s === 0 ? "0" : s < 1e-6 ? (s * 1e9).toFixed(0) + " ns"
      : s < 1e-3 ? (s * 1e6).toFixed(1) + " us"
      : s < 1 ? (s * 1e3).toFixed(1) + " ms" : s.toFixed(2) + " s";
  }
  // what Python wrote for wall time (a code frame's starts with its
  // name: its path goes first); CPU time's own line
  function describe(i) {
    var g = frames[i];
    if (mode === "cpu") {
      var all = w[0] > 0 ? (100 * cpuW[i] / w[0]).toFixed(1) : "0";
      return (i === 0 ? "all" : pathOf(i)) + ": " + time(cpuW[i]) +
        " of CPU time (" + all + " % of all the CPU time drawn)" +
        (wallW[i] > 0 ? ", on a CPU " +
         (100 * cpuW[i] / wallW[i]).toFixed(0) + " % of its " +
         time(wallW[i]) + " wall time" : "");
    }
    var text = g.getAttribute("data-details");
    if (text !== null) { return text; }
    text = g.querySelector("title").textContent;
    return pathOf(i) + text.substring(names[i].length);
  }
  function search(pattern) {
    frames.forEach(function (g) { g.classList.remove("hit"); });
    term.classList.remove("bad");
    matched.textContent = "";
    if (!pattern) { return; }
    var shown = [];
    for (var i = 0; i < n; i++) { if (!folded(i)) { shown.push(i); } }
    layout();
    var found = matching(pattern,
      shown.map(function (i) { return i === 0 ? "" : pathOf(i); }),
      shown.map(function (i) { return w[i]; }));
    if (found === null) {
      term.classList.add("bad");
      matched.textContent = "invalid pattern"; return; }
    shown.forEach(function (i, k) {
      if (found.hit[k]) { frames[i].classList.add("hit"); } });
    matched.textContent = found.count + " matched, " + (mode === "cpu"
      ? (w[0] > 0 ? (100 * found.time / w[0]).toFixed(1) : "0") +
        " % of all the CPU time drawn"
      : (wall > 0 ? (100 * found.time / wall).toFixed(1) : "0") +
        " % of the run's wall time");
  }
  function setMode(m) {
    mode = m;
    modes.forEach(function (b) {
      var on = b.getAttribute("data-mode") === m;
      b.classList.toggle("on", on);
      if (b.tagName.toLowerCase() === "button") {
        b.setAttribute("aria-pressed", on ? "true" : "false"); }
    });
    draw(); search(term.value);
  }
  function setOpen(o) {
    open = o;
    if (fold) {
      fold.textContent = fold.getAttribute(open ? "data-fold" : "data-show");
    }
    if (!open && view > idle && view < end[idle]) { view = 0; }
    draw(); search(term.value);
  }
  // the SVG file's note cut at a word's end to the width it has, an
  // ellipsis after it (the fragment's is HTML, which CSS cuts)
  function fitNote() {
    Array.prototype.forEach.call(root.querySelectorAll("text[data-note]"),
      function (el) {
        var words = el.getAttribute("data-note").split(" ");
        var room = width - PAD - parseFloat(el.getAttribute("x"));
        var shown = words.join(" ");
        el.lastChild.nodeValue = shown;
        while (el.getComputedTextLength() > room && words.length > 1) {
          words.pop();
          shown = words.join(" ").replace(/[ ;,]+$/, "") + "\u2026";
          el.lastChild.nodeValue = shown;
        }
      });
  }
  // the drawing as wide as it shows: a viewBox of its width in pixels,
  // the frames laid out again and what hangs on the right edge moved
  function measure() {
    var px = svg.getBoundingClientRect().width;
    if (!(px > 0) || Math.abs(px - width) < 0.5) { return; }
    width = px;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    Array.prototype.forEach.call(root.querySelectorAll("[data-right]"),
      function (el) {
        var right = parseFloat(el.getAttribute("data-right"));
        el.setAttribute("x", width - right);
      });
    fitNote();
    draw();
  }
  frames.forEach(function (g, i) {
    g.addEventListener("mouseover", function () {
      details.textContent = describe(i); });
    g.addEventListener("mouseout", function () {
      details.textContent = " "; });
    g.addEventListener("click", function () {
      if (i === idle && !open) { setOpen(true); }
      zoom(i);
    });
  });
  reset.addEventListener("click", function () { zoom(0); });
  modes.forEach(function (b) {
    b.addEventListener("click", function () {
      setMode(b.getAttribute("data-mode")); });
  });
  if (fold) {
    fold.addEventListener("click", function () { setOpen(!open); }); }
  term.addEventListener("input", function () { search(term.value); });
  term.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { term.value = ""; search(""); }
  });
  if (pageKeys) {
    window.addEventListener("keydown", function (e) {
      if (e.key === "F3" || (e.ctrlKey && (e.key === "f" || e.key === "F"))) {
        e.preventDefault(); term.focus(); term.select(); }
      else if (e.key === "Escape") { term.value = ""; search(""); }
    });
    svg.setAttribute("width", "100%");
  }
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(measure).observe(svg);
  }
  window.addEventListener("resize", measure);
  fitNote();
  measure();
})(@ROOT@, @KEYS@);
"""


def flamegraph_script(pad: int, row: int, root: str,
                      page_keys: bool) -> str:
    """The script for one flamegraph drawn with pad pixels of margin and
    rows row pixels high: root is a JS expression giving its root
    element, page_keys whether the page's keys reach its box."""
    return (_ENGINE.replace("@MATCHING@", MATCHING_JS.strip())
            .replace("@PAD@", str(pad)).replace("@ROW@", str(row))
            .replace("@ROOT@", root)
            .replace("@KEYS@", "true" if page_keys else "false"))
