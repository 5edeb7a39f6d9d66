"""The type stubs of the C extensions keep up with them.

Every public name of aquaprof._core and aquaprof._mvs (module level, and
the public methods and properties of their classes) must be declared in
the extension's .pyi, and the .pyi must declare nothing public that the
extension lacks. The stubs are read with ast, as mypy reads them, not
imported."""
import ast
import inspect
from pathlib import Path

import pytest

import aquaprof
from aquaprof import _core, _mvs

PACKAGE = Path(aquaprof.__file__).parent


def public(names):
    return {n for n in names if not n.startswith("_")}


def declared(body):
    """{name: the ast node declaring it} for one module's or class's body;
    a name under `if`/`try` (a version check) counts too."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(
                node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node
        elif isinstance(node, (ast.If, ast.Try)):
            for part in (node.body, node.orelse,
                         getattr(node, "finalbody", [])):
                out.update({k: v for k, v in declared(part).items()
                            if k not in out})
    return out


def stub(module):
    path = PACKAGE / (module.__name__.rsplit(".", 1)[1] + ".pyi")
    return declared(ast.parse(path.read_text(), str(path)).body)


@pytest.mark.parametrize("module", [_core, _mvs], ids=lambda m: m.__name__)
def test_module_names_match(module):
    names = stub(module)
    missing = sorted(public(dir(module)) - public(names))
    assert not missing, (f"{module.__name__} has names its .pyi lacks: "
                         f"{missing}")
    extra = sorted(public(names) - public(dir(module)))
    assert not extra, (f"the .pyi of {module.__name__} declares names the "
                       f"extension lacks: {extra}")


@pytest.mark.parametrize("module", [_core, _mvs], ids=lambda m: m.__name__)
def test_kinds_match(module):
    """A class is stubbed as a class, a function as a def, a constant as
    a variable."""
    names = stub(module)
    for name in public(dir(module)):
        value, node = getattr(module, name), names[name]
        if inspect.isclass(value):
            assert isinstance(node, ast.ClassDef), name
        elif callable(value):
            assert isinstance(node, ast.FunctionDef), name
        else:
            assert isinstance(node, (ast.AnnAssign, ast.Assign)), name


def classes():
    return [(module, name) for module in (_core, _mvs)
            for name in sorted(public(dir(module)))
            if inspect.isclass(getattr(module, name))]


@pytest.mark.parametrize("module,name", classes(),
                         ids=lambda v: getattr(v, "__name__", v))
def test_class_members_match(module, name):
    cls = getattr(module, name)
    node = stub(module)[name]
    members = declared(node.body)
    runtime = public(vars(cls))
    missing = sorted(runtime - public(members))
    assert not missing, f"{name} has members its stub lacks: {missing}"
    extra = sorted(public(members) - public(dir(cls)))
    assert not extra, (f"the stub of {name} declares members the class "
                       f"lacks: {extra}")


def test_test_sees_names():
    """The checks above compare something: the stubs parse to names."""
    assert {"Profiler", "stage", "GPU_DTYPE"} <= set(stub(_core))
    assert {"cost_volume", "snell_guess"} <= set(stub(_mvs))
    assert {"start", "running"} <= set(
        declared(stub(_core)["Profiler"].body))
