"""Where the build finds cupti.h and cuda.h: a CUDA toolkit's include/ or
extras/CUPTI/include/, or the nvidia-* wheels' include folders; the fake
CUPTI of the tests is built against the same header."""
import importlib.util

import pytest

from fake_gpu import ROOT, cupti_include


@pytest.fixture(scope="module")
def setup_py():
    spec = importlib.util.spec_from_file_location("aquaprof_setup",
                                                  ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def headers(base, *paths):
    for path in paths:
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_text("/* a header */\n")


# (where cupti.h and cuda.h are, relative to a toolkit or a site folder;
# the folders found, cupti.h's first)
TOOLKITS = {
    "include": (["include/cupti.h", "include/cuda.h"], ["include"]),
    "extras/CUPTI/include": (["extras/CUPTI/include/cupti.h",
                              "include/cuda.h"],
                             ["extras/CUPTI/include", "include"]),
}
WHEELS = {
    "nvidia-cuda-cupti": (["nvidia/cuda_cupti/include/cupti.h",
                           "nvidia/cuda_runtime/include/cuda.h"],
                          ["nvidia/cuda_cupti/include",
                           "nvidia/cuda_runtime/include"]),
    "cu13": (["nvidia/cu13/include/cupti.h", "nvidia/cu13/include/cuda.h"],
             ["nvidia/cu13/include"]),
}


@pytest.mark.parametrize("place", TOOLKITS)
def test_a_toolkit_named_by_cuda_home(setup_py, tmp_path, monkeypatch,
                                      place):
    files, want = TOOLKITS[place]
    headers(tmp_path, *files)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("AQUAPROF_NO_CUDA", raising=False)
    want = [str(tmp_path / w) for w in want]
    assert setup_py.find_cupti_headers(sites=[]) == want
    assert str(cupti_include(sites=[])) == want[0]


@pytest.mark.parametrize("wheel", WHEELS)
def test_a_wheel_on_sys_path(setup_py, tmp_path, monkeypatch, wheel):
    files, want = WHEELS[wheel]
    headers(tmp_path / "site-packages", *files)
    monkeypatch.setattr("sys.path", [str(tmp_path / "site-packages")])
    monkeypatch.delenv("AQUAPROF_NO_CUDA", raising=False)
    want = [str(tmp_path / "site-packages" / w) for w in want]
    assert setup_py.find_cupti_headers(roots=[]) == want
    assert str(cupti_include(roots=[])) == want[0]


def test_a_toolkit_comes_before_a_wheel(setup_py, tmp_path):
    headers(tmp_path / "cuda", "include/cupti.h", "include/cuda.h")
    headers(tmp_path / "site", "nvidia/cu13/include/cupti.h",
            "nvidia/cu13/include/cuda.h")
    assert setup_py.find_cupti_headers([str(tmp_path / "cuda")],
                                       [str(tmp_path / "site")]) == [
        str(tmp_path / "cuda" / "include")]


def test_none_without_cuda_h_or_when_told(setup_py, tmp_path, monkeypatch):
    headers(tmp_path, "extras/CUPTI/include/cupti.h")
    monkeypatch.delenv("AQUAPROF_NO_CUDA", raising=False)
    assert setup_py.find_cupti_headers([str(tmp_path)], []) == []
    assert cupti_include([str(tmp_path)], []) is None
    headers(tmp_path, "include/cuda.h")
    assert setup_py.find_cupti_headers([str(tmp_path)], []) != []
    monkeypatch.setenv("AQUAPROF_NO_CUDA", "1")
    assert setup_py.find_cupti_headers([str(tmp_path)], []) == []


def test_a_kernel_variants_macros_reach_the_launchers_c(setup_py,
                                                        monkeypatch):
    """The launcher sizes the strip kernels' grids and shared memory from
    the same #defines as the kernels: a variant's -D macros must reach
    both compilers, and its other nvcc flags nvcc alone."""
    monkeypatch.setenv("AQUAPROF_NVCC_FLAGS",
                       "-DAP_STRIP_ROWS=32 -D AP_STRIP_GROUP=2 -DAP_FLAG "
                       "-Xptxas -v")
    assert setup_py.variant_macros() == [("AP_STRIP_ROWS", "32"),
                                         ("AP_STRIP_GROUP", "2"),
                                         ("AP_FLAG", None)]
    assert "-Xptxas" in setup_py.variant_flags()
    monkeypatch.delenv("AQUAPROF_NVCC_FLAGS")
    assert setup_py.variant_macros() == []
    # forms that would reach nvcc alone, and a -D without a name
    for flags, said in (("--define-macro=AP_STRIP_ROWS=32", "not"),
                        ("-UAP_STRIP_AHEAD", "not"), ("-O3 -D", "names no"),
                        ("-D -O3", "names no")):
        monkeypatch.setenv("AQUAPROF_NVCC_FLAGS", flags)
        with pytest.raises(SystemExit, match=said):
            setup_py.variant_macros()
