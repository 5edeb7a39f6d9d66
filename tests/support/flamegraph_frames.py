"""A flamegraph's frames by their paths, made as its script makes them:
each frame (<g class="f">) writes only its parent's index (data-p) and
its name (data-n), and a path is the names from the root's child up,
joined by '/', the root's path empty. The browser tests check the
script makes the same paths (search, hover)."""
import html
import re
from typing import Dict, List, Optional

SVG = "{http://www.w3.org/2000/svg}"


def paths_of(parents: List[Optional[str]], names: List[str]) -> List[str]:
    """The paths of frames in the order drawn, from each one's data-p
    (None for the root) and data-n."""
    paths: List[str] = []
    for parent, name in zip(parents, names):
        under = None if parent is None else paths[int(parent)]
        paths.append("" if under is None else
                     f"{under}/{name}" if under else name)
    return paths


def frames_by_path(element) -> Dict[str, object]:
    """{path: <g>} of the frames inside an ElementTree element (a whole
    SVG file, or the <svg> of a notebook's fragment)."""
    groups = [g for g in element.iter(f"{SVG}g")
              if "f" in (g.get("class") or "").split()]
    paths = paths_of([g.get("data-p") for g in groups],
                     [g.get("data-n") for g in groups])
    return dict(zip(paths, groups))


def frame_paths_in_text(text: str) -> List[str]:
    """The paths of the frames written in an SVG or HTML text, in the
    order drawn (a page's text, which is not XML)."""
    parents, names = [], []
    for attrs in re.findall(r'<g class="f[ "][^>]*>', text):
        a = {k: html.unescape(v) for k, v in
             re.findall(r'([\w-]+)="([^"]*)"', attrs)}
        parents.append(a.get("data-p"))
        names.append(a["data-n"])
    return paths_of(parents, names)
