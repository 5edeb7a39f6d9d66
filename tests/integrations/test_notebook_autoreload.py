"""IPython's autoreload over a module whose functions @aquaprof.stage
decorates, as a notebook uses it: `%autoreload 2`, names imported from the
module (`from mod import step`), the module edited, the cell run again.
Each name must run the edited code, under the edited stage name, as a
plain function's does; profiled or not."""
import os
import sys
import time

import pytest

import aquaprof as ap

pytest.importorskip("IPython")      # installed by `make test`
from aquaprof.integrations.autoreload import watch_autoreload  # noqa: E402

SOURCE = '''
import aquaprof as ap

@ap.stage("{name}")
def step():
    return "{version}"

@ap.stage
async def fetch():
    return "{version}"

@ap.stage
def produce():
    yield "{version}"

def plain():
    return "{version}"

class Model:
    @ap.stage
    def forward(self):
        return "{version}"
'''


def write(path, version, name, when):
    path.write_text(SOURCE.format(version=version, name=name))
    # autoreload compares modification times; a whole second apart
    os.utime(path, (when, when))


@pytest.fixture(params=["2", "2 --full"])
def reloading(request, tmp_path):
    """The shell with autoreload on (IPython 9's `%autoreload 2` patches
    functions where it can, `--full` reloads the module), and the module's
    name; aquaprof's rule taught as importing aquaprof in it does."""
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    name = f"staged_mod_{abs(hash(request.param)) % 10**6}"
    module = tmp_path / f"{name}.py"
    write(module, "v1", "step", time.time() - 10)
    sys.path.insert(0, str(tmp_path))
    shell.run_line_magic("load_ext", "autoreload")
    shell.run_line_magic("autoreload", request.param)
    watch_autoreload()
    yield shell, name, module
    shell.run_line_magic("autoreload", "0")
    sys.path.remove(str(tmp_path))
    sys.modules.pop(name, None)


def run(shell, cell):
    result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    return result.result


def test_names_imported_from_an_edited_module_run_the_new_code(reloading):
    shell, name, module = reloading
    run(shell, f"import asyncio\nimport {name}\n"
               f"from {name} import step, fetch, produce, plain, Model\n"
               f"model = Model()")
    calls = "(step(), asyncio.run(fetch()), next(produce()), plain(), " \
            "model.forward())"
    assert run(shell, calls) == ("v1",) * 5
    write(module, "v2", "step", time.time())
    assert run(shell, calls) == ("v2",) * 5


def test_an_edited_stage_name_is_recorded_under_the_new_name(reloading):
    shell, name, module = reloading
    run(shell, f"from {name} import step")
    write(module, "v2", "load", time.time())
    run(shell, "step")      # the reload
    with ap.Profiler(compensate=False) as prof:
        assert run(shell, "step()") == "v2"
    assert [s.path for s in prof.report().stages] == ["load"]
