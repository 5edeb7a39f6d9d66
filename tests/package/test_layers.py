"""The house holds its map: docs/architecture.md lists the rooms, the
modules and folders each holds and the rooms each may import; this test
reads that map and checks every import of the package against it (at
module level and inside functions alike; `if TYPE_CHECKING:` imports are
for the type checker alone), every reach for another module's private
names, that no import cycle exists, and that the doc places every
module. The same for the C sources' #include lines."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT

PACKAGE = ROOT / "aquaprof"
DOC = ROOT / "docs" / "architecture.md"
EXTENSIONS = ("aquaprof._core", "aquaprof._mvs")


def map_table(title):
    """{room: (patterns, may import)} from the doc's table under the
    heading `title`: | room | `pattern`, ... | room, room or - |."""
    text = DOC.read_text()
    start = text.index(f"## {title}")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`"):
            continue
        room, held, allowed = cells
        patterns = re.findall(r"`([^`]+)`", held)
        may = {r.strip() for r in allowed.split(",")} - {"-", ""}
        rows[room] = (patterns, may)
    return rows


PY_MAP = map_table("The map: Python rooms")
C_MAP = map_table("The map: C rooms")
FILES = sorted(PACKAGE.rglob("*.py"))


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in FILES}
KNOWN = set(MODULES) | set(EXTENSIONS)


def placed(name, table):
    """The rooms whose patterns hold `name` (`x.*`: x's package and
    everything under it)."""
    found = []
    for room, (patterns, _) in table.items():
        for p in patterns:
            if p == name or (p.endswith(".*") and (
                    name == p[:-2] or name.startswith(p[:-1]))) or (
                    p.endswith("/") and name.startswith(p)):
                found.append(room)
                break
    return found


def room(module):
    rooms = placed(module, PY_MAP)
    assert len(rooms) == 1, f"{module} is placed in {rooms or 'no room'}"
    return rooms[0]


def known(module):
    """The package module (or extension) an import names."""
    while module not in KNOWN and "." in module:
        module = module.rsplit(".", 1)[0]
    return module


def imports(path, text=None):
    """[(module, names, line)] of one file's imports of the package,
    wherever they stand but under `if TYPE_CHECKING:`; text: the file's
    source, when not the file's own."""
    tree = ast.parse(path.read_text() if text is None else text)
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in \
                    ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                names = [a.name for a in child.names]
                # `from . import x` imports module x, and x only
                modules = [f"{base}.{n}" for n in names
                           if f"{base}.{n}" in KNOWN]
                found.extend((m, [], child.lineno) for m in modules)
                if len(modules) < len(names):
                    found.append((base, [n for n in names
                                         if f"{base}.{n}" not in KNOWN],
                                  child.lineno))
            elif isinstance(child, ast.Import):
                found.extend((a.name, [], child.lineno) for a in child.names)
            visit(child)

    visit(tree)
    return [(m, n, line) for m, n, line in found
            if m == "aquaprof" or m.startswith("aquaprof.")]


def test_the_doc_places_every_module_in_one_room():
    unplaced = {m: placed(m, PY_MAP) for m in sorted(KNOWN)
                if len(placed(m, PY_MAP)) != 1}
    assert not unplaced, unplaced


def test_every_import_follows_the_map():
    wrong = []
    for name, path in MODULES.items():
        mine = room(name)
        allowed = PY_MAP[mine][1] | {mine}
        for target, _, line in imports(path):
            theirs = room(known(target))
            if "every room" not in allowed and theirs not in allowed:
                wrong.append(f"{name}:{line} ({mine}) imports {target} "
                             f"({theirs})")
    assert not wrong, "\n".join(wrong)


def graph():
    return {name: {known(t) for t, _, _ in imports(path)} - {name}
            for name, path in MODULES.items()}


def cycle(edges):
    """One import cycle as a list of modules, or None."""
    state = {}

    def walk(node, stack):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt] \
                    if nxt in stack else stack + [node, nxt]
            if nxt not in state:
                found = walk(nxt, stack + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            found = walk(node, [node])
            if found:
                return found
    return None


def test_no_import_cycle_counting_imports_inside_functions():
    assert cycle(graph()) is None, " -> ".join(cycle(graph()))


def private_reaches(path, text=None):
    """`name._private` where name is bound by an import of another module
    or of something from one: (line, text) pairs."""
    text = path.read_text() if text is None else text
    tree = ast.parse(text)
    me = module_name(path)
    bound = {}
    for target, names, _ in imports(path, text):
        if known(target) == me:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    short = (a.asname or a.name).split(".")[0]
                    if a.name in names or target.endswith("." + a.name) \
                            or a.name == target:
                        bound[short] = target
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value,
                                                          ast.Name) \
                and node.value.id in bound and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def binding(line_text):
    """The extensions mark with a leading underscore what only the
    package's own wrappers call (``_core._sigterm_hold``): theirs to use,
    not another room's private names."""
    return line_text.split(".")[0] in ("_core", "_mvs")


def test_no_module_reaches_for_private_names_of_another():
    wrong = []
    for name, path in MODULES.items():
        for target, names, line in imports(path):
            private = [n for n in names if n.startswith("_")
                       and not n.startswith("__")]
            if private and known(target) != name:
                wrong.append(f"{name}:{line} imports {private} from "
                             f"{target}")
        wrong += [f"{name}:{line} uses {text}"
                  for line, text in private_reaches(path)
                  if not binding(text)]
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ C
C_FILES = sorted(p for p in (ROOT / "csrc").rglob("*")
                 if p.suffix in (".c", ".h", ".cu", ".cuh"))


def c_room(path):
    rel = path.relative_to(ROOT).as_posix()
    rooms = placed(rel, C_MAP)
    assert len(rooms) == 1, f"{rel} is placed in {rooms or 'no room'}"
    return rooms[0]


def includes(path):
    """(line, the file an #include "..." names) of one C file."""
    found = []
    for n, text in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', text)
        if m:
            found.append((n, (path.parent / m.group(1)).resolve()))
    return found


def test_the_doc_places_every_c_file():
    unplaced = [p.relative_to(ROOT).as_posix() for p in C_FILES
                if len(placed(p.relative_to(ROOT).as_posix(), C_MAP)) != 1]
    assert not unplaced, unplaced


def test_every_c_include_follows_the_map():
    wrong = []
    for path in C_FILES:
        mine = c_room(path)
        allowed = C_MAP[mine][1] | {mine}
        for line, target in includes(path):
            if not target.is_relative_to(ROOT / "csrc"):
                continue  # generated at build time (ap_fatbin.h)
            theirs = c_room(target)
            if theirs not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({mine}) "
                             f"includes {target.relative_to(ROOT)} "
                             f"({theirs})")
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_what_they_check():
    """Guards the tests above against passing vacuously: the map has its
    rooms, imports inside functions are seen, a cycle is found, a private
    reach is found."""
    assert {"door", "front", "record", "model", "analysis", "views",
            "live", "integrations", "mvs", "common", "core"} <= set(PY_MAP)
    inside = [t for t, _, _ in imports(MODULES["aquaprof.report"])]
    assert "aquaprof.views.page" in inside      # imported in a method
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == \
        ["a", "b", "c", "a"]
    probe = PACKAGE / "record" / "probe.py"   # read, never written
    assert private_reaches(probe, "from .profiler import Profiler\n"
                                  "Profiler._for_child\n") == \
        [(2, "Profiler._for_child")]
    assert any(includes(p) for p in C_FILES)


@pytest.mark.parametrize("module", ["aquaprof.schema", "aquaprof.limits",
                                    "aquaprof.children", "aquaprof.cupti",
                                    "aquaprof.calibration",
                                    "aquaprof.integrations.torch_hooks",
                                    "aquaprof.analysis.history"])
def test_documented_old_import_paths_give_the_module_itself(module):
    import importlib

    from aquaprof.moved import MOVED
    old = importlib.import_module(module)
    assert old is importlib.import_module(MOVED[module])
    assert old.__spec__.name == MOVED[module]


def test_an_old_path_reads_as_an_attribute_of_the_package_too():
    code = ("import aquaprof as ap\n"
            "from aquaprof.model import schema\n"
            "assert ap.schema is schema, ap.schema\n"
            "assert ap.schema.KERNEL == schema.KERNEL\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
