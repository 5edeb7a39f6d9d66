"""The package's layering, as docs/architecture.md states it: the top
level (profiler, report, schema and their helpers) imports no room at
module level; views and analysis read reports and not each other; live
figures may use analysis and views; integrations may use everything; no
module-level import cycle; no module imports another's private names.
The front (the package, Report and Profiler methods) reaches the rooms
only inside functions, when a user asks for a view or an analysis."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "aquaprof"
# what each room may import at module level, besides itself
MAY_IMPORT = {
    "top": {"top"},
    "views": {"top"},
    "analysis": {"top"},
    "live": {"top", "analysis", "views"},
    "integrations": {"top", "analysis", "views", "live", "mvs"},
    "mvs": {"top"},
}
FRONT = {"aquaprof", "aquaprof.report", "aquaprof.profiler"}
# entry points kept under their documented names: they belong to the
# integrations room though they sit at the top
ENTRY_POINTS = {"aquaprof.__main__", "aquaprof.pytest_plugin",
                "aquaprof.distributed"}


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module):
    if module in ENTRY_POINTS:
        return "integrations"
    parts = module.split(".")
    is_room = len(parts) > 2 or MODULES[module].name == "__init__.py"
    return parts[1] if is_room and module != "aquaprof" else "top"


def imports(path):
    """[(imported module, names, at module level?)] of one file; imports
    under `if TYPE_CHECKING:` are for the type checker only and left
    out."""
    tree = ast.parse(path.read_text())
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found = []

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in \
                    ast.unparse(child.test):
                continue
            inner = top and not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                names = [a.name for a in child.names]
                # `from . import x` imports module x, and x only
                modules = [f"{base}.{n}" for n in names
                           if f"{base}.{n}" in MODULES]
                found.extend((m, [], inner) for m in modules)
                if len(modules) < len(names):
                    found.append((base, names, inner))
            elif isinstance(child, ast.Import):
                found.extend((a.name, [], inner) for a in child.names)
            visit(child, inner)

    visit(tree, True)
    return [(m, n, top) for m, n, top in found
            if m == "aquaprof" or m.startswith("aquaprof.")]


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {module_name(p): p for p in FILES}


def known(module):
    """The package module an import names (extension modules count as
    the top level)."""
    while module not in MODULES and "." in module:
        module = module.rsplit(".", 1)[0]
    return module


def test_rooms_import_only_the_rooms_below_them_at_module_level():
    wrong = []
    for name, path in MODULES.items():
        for target, _, top in imports(path):
            target = known(target)
            target_room = room(target)
            allowed = MAY_IMPORT[room(name)] | {room(name)}
            if top and target_room not in allowed:
                wrong.append(f"{name} -> {target}")
            if not top and target_room not in allowed and name not in FRONT:
                wrong.append(f"{name} -> {target} (in a function)")
    assert not wrong, wrong


def test_no_module_level_import_cycle():
    graph = {name: {known(t) for t, _, top in imports(path)
                    if top and known(t) != name}
             for name, path in MODULES.items()}
    # the package imports its modules; they import `aquaprof` only for
    # its own submodules, which is the same edge read the other way
    for name in graph:
        graph[name].discard("aquaprof")
    state = {}

    def cycle_from(node, stack):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                return stack + [node, nxt]
            if nxt not in state:
                found = cycle_from(nxt, stack + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in graph:
        if node not in state:
            assert cycle_from(node, []) is None


def test_no_module_imports_private_names_of_another():
    wrong = []
    for name, path in MODULES.items():
        for target, names, _ in imports(path):
            private = [n for n in names if n.startswith("_")
                       and not n.startswith("__")
                       and f"{known(target)}.{n}" not in MODULES
                       and n not in ("_core", "_mvs")]
            if private and known(target) != name:
                wrong.append(f"{name} imports {private} from {target}")
    assert not wrong, wrong


def test_the_checker_sees_the_rooms():
    """Guards the tests above against passing vacuously: the package has
    its rooms, and a module-level import between rooms is found."""
    rooms = {room(m) for m in MODULES}
    assert {"top", "views", "analysis", "live", "integrations",
            "mvs"} <= rooms
    snapshot = imports(MODULES["aquaprof.live.snapshot"])
    assert ("aquaprof.analysis.anomaly", ["MIN_HISTORY", "Anomaly",
                                          "check_limits", "outliers"],
            True) in snapshot
