"""The flamegraph's script, one text for both of its forms: the
standalone SVG file and the HTML fragment a notebook shows.

It is a single function expression called on the flamegraph's own root
element (the <svg> of a file, the container <div> of a fragment), so that
it defines no global and finds nothing outside that root: several
flamegraphs on one page stay independent. It runs where it stands, at the
end of its root, and needs no onload event (JupyterLab never fires one
for HTML it inserts). The frames are laid out again, with their labels
refitted, whenever the root's width changes: the drawing is as wide as
the page, whatever width Python laid it out for.
"""
from __future__ import annotations

# Which of the paths (a/b/c, as in data-path) the regular expression
# matches, how many, and the time they cover, a match inside another
# counted once; null for a pattern that is not one. Pure: tests run it in
# node.
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
# page is the flamegraph's own; a notebook's is not)
_ENGINE = r"""
(function (root, pageKeys) {
  "use strict";
  var PAD = @PAD@, ROW = @ROW@;
  var svg = root.tagName.toLowerCase() === "svg" ? root
    : root.querySelector("svg.frames");
  var frames = Array.prototype.slice.call(root.querySelectorAll("g.f"));
  var details = root.querySelector(".details");
  var reset = root.querySelector(".reset");
  var matched = root.querySelector(".matched");
  var term = root.querySelector(".term");
  var wall = parseFloat(root.querySelector("[data-wall]")
    .getAttribute("data-wall"));
  var box = svg.viewBox.baseVal;
  var width = box.width, height = box.height, view = frames[0];
  var fitHeight = svg !== root;
  @MATCHING@
  function num(g, key) { return parseFloat(g.getAttribute("data-" + key)); }
  function fit(g, x, w) {
    var rect = g.querySelector("rect"), text = g.querySelector("text");
    rect.setAttribute("x", x); rect.setAttribute("width", Math.max(w, 0));
    text.setAttribute("x", x + 3);
    var name = g.getAttribute("data-path").split("/").pop() || "all";
    var room = Math.floor((w - 6) / 7);
    text.textContent = room >= name.length ? name
      : room > 2 ? name.substring(0, room - 2) + ".." : "";
  }
  function draw() {
    var x0 = num(view, "x"), w0 = num(view, "w"), d0 = num(view, "d");
    var path = view.getAttribute("data-path");
    var span = width - 2 * PAD, scale = w0 > 0 ? span / w0 : 0;
    frames.forEach(function (g) {
      var p = g.getAttribute("data-path"), d = num(g, "d");
      var inside = path === "" || p === path || p.indexOf(path + "/") === 0;
      var above = d < d0 && (p === "" || path.indexOf(p + "/") === 0);
      if (inside || above) {
        g.style.display = "";
        if (above) { fit(g, PAD, span); }
        else { fit(g, PAD + (num(g, "x") - x0) * scale, num(g, "w") * scale); }
        g.style.opacity = above ? 0.6 : 1;
      } else { g.style.display = "none"; }
    });
    reset.style.visibility = path === "" ? "hidden" : "visible";
    if (fitHeight) { crop(); }
  }
  // a fragment shows only the rows in use, so that a zoom into a shallow
  // stage leaves no empty space above it (a file keeps its header there)
  function crop() {
    var deepest = 0;
    frames.forEach(function (g) {
      if (g.style.display !== "none") {
        deepest = Math.max(deepest, num(g, "d")); }
    });
    var top = Math.max(height - PAD - (deepest + 1) * ROW - 4, 0);
    svg.setAttribute("viewBox",
      "0 " + top + " " + width + " " + (height - top));
  }
  function zoom(target) { view = target; draw(); }
  function search(pattern) {
    frames.forEach(function (g) { g.classList.remove("hit"); });
    term.classList.remove("bad");
    matched.textContent = "";
    if (!pattern) { return; }
    var found = matching(pattern,
      frames.map(function (g) { return g.getAttribute("data-path"); }),
      frames.map(function (g) { return num(g, "w"); }));
    if (found === null) {
      term.classList.add("bad");
      matched.textContent = "invalid pattern"; return; }
    frames.forEach(function (g, i) {
      if (found.hit[i]) { g.classList.add("hit"); } });
    matched.textContent = found.count + " matched, " +
      (wall > 0 ? (100 * found.time / wall).toFixed(1) : "0") +
      " % of the run's wall time";
  }
  // the drawing as wide as it shows: a viewBox of its width in pixels,
  // the frames laid out again and what hangs on the right edge moved
  function measure() {
    var w = svg.getBoundingClientRect().width;
    if (!(w > 0) || Math.abs(w - width) < 0.5) { return; }
    width = w;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    Array.prototype.forEach.call(root.querySelectorAll("[data-right]"),
      function (el) {
        var right = parseFloat(el.getAttribute("data-right"));
        el.setAttribute("x", width - right);
      });
    draw();
  }
  frames.forEach(function (g) {
    g.addEventListener("mouseover", function () {
      details.textContent = g.getAttribute("data-details"); });
    g.addEventListener("mouseout", function () {
      details.textContent = " "; });
    g.addEventListener("click", function () { zoom(g); });
  });
  reset.addEventListener("click", function () { zoom(frames[0]); });
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
