"""The plane sweep on GPU arrays. Tests marked gpu compare the CUDA kernels
with the CPU path (within 1e-4) and need torch with a CUDA device; the
others check, on any machine, how GPU arrays are recognised and read and
what happens where the kernels cannot run."""
import ctypes
import os
import platform
import re
import subprocess

import numpy as np
import pytest

import aquaprof.mvs as mvs
from aquaprof import _mvs
from aquaprof.mvs import _cuda, scenes
from fake_gpu import scenario
from repo_paths import ROOT

try:
    import torch
    CUDA = torch.cuda.is_available()
except ImportError:
    torch, CUDA = None, False

needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device for torch")


def driver_error():
    """Why the CUDA kernels cannot run here, or None where they can."""
    try:
        _mvs.gpu_check(-1)
    except RuntimeError as e:
        return str(e)
    return None


class FakeTorchTensor:
    """Just enough of a CUDA tensor for the checks that come before any
    launch: the interface and a device."""
    __module__ = "torch.fake"

    def __init__(self, typestr="<f4", shape=(4, 6), strides=None):
        self.__cuda_array_interface__ = {
            "typestr": typestr, "shape": shape, "strides": strides,
            "data": (0xdead000, False), "version": 3}
        self.device = type("Device", (), {"index": 1})()


class DLPackOnly:
    def __init__(self, kind):
        self.kind = kind

    def __dlpack_device__(self):
        if self.kind is None:
            raise BufferError("cannot say")
        return (self.kind, 0)


def test_gpu_arrays_are_told_from_host_arrays():
    assert not _cuda.is_gpu(np.zeros((2, 2), np.float32))
    assert _cuda.is_gpu(FakeTorchTensor())
    assert _cuda.is_gpu([np.zeros(2), FakeTorchTensor()])
    assert _cuda.is_gpu(DLPackOnly(2)) and _cuda.is_gpu(DLPackOnly(13))
    assert not _cuda.is_gpu(DLPackOnly(1))        # DLPack on the CPU
    assert not _cuda.is_gpu(DLPackOnly(None))
    if torch is not None:
        assert not _cuda.is_gpu(torch.zeros(2))   # a CPU tensor


def test_gpu_arrays_are_read_and_checked():
    a = _cuda.GpuArray(FakeTorchTensor(), "ref", 2)
    assert (a.ptr, a.shape, a.device, a.lib) == (0xdead000, (4, 6), 1,
                                                 "torch")
    # explicit C-contiguous strides, and any stride on an extent of 1
    _cuda.GpuArray(FakeTorchTensor(strides=(24, 4)), "ref", 2)
    _cuda.GpuArray(FakeTorchTensor(shape=(1, 6), strides=(4, 4)), "ref", 2)
    with pytest.raises(ValueError, match="ref must be a float32 array of 2"):
        _cuda.GpuArray(FakeTorchTensor(typestr="<f8"), "ref", 2)
    with pytest.raises(ValueError, match="ref must be a float32 array of 3"):
        _cuda.GpuArray(FakeTorchTensor(), "ref", 3)
    with pytest.raises(ValueError, match="ref must be C-contiguous"):
        _cuda.GpuArray(FakeTorchTensor(strides=(4, 16)), "ref", 2)
    with pytest.raises(ValueError, match="ref must be at least 2 x 2"):
        _cuda.images(FakeTorchTensor(shape=(1, 6)),
                    FakeTorchTensor(shape=(1, 1, 6)))


LIMIT = r"more than the 2147483647 \(2\^31 - 1\) the kernels index"
TOO_MANY = r"65536 x 32768 = 2147483648 pixels, " + LIMIT


def test_gpu_arrays_beyond_the_kernels_int_indices_are_refused():
    """Checked from the shapes alone, before the device is asked: these
    fakes hold no memory."""
    huge = FakeTorchTensor(shape=(1 << 16, 1 << 15))
    small = FakeTorchTensor(shape=(4, 6))
    depths = np.array([1.0, 2.0, 3.0])
    for call, message in [
        (lambda: _cuda.images(huge, [huge]), "ref has " + TOO_MANY),
        (lambda: _cuda.images(small, FakeTorchTensor(shape=(1 << 31, 4, 6))),
         "srcs has 2147483648 views, " + LIMIT),
        (lambda: _cuda.warp(huge, SCENE.ref_cam.params,
                            SCENE.ref_cam.params, 1.0),
         "src has " + TOO_MANY),
        (lambda: _cuda.extract_depth(
            FakeTorchTensor(shape=(1 << 16, 1 << 15, 3)), depths),
         "cost_volume has " + TOO_MANY),
        (lambda: _cuda.extract_depth(FakeTorchTensor(shape=(2, 2, 1 << 31)),
                                     depths),
         "cost_volume has 2147483648 planes, " + LIMIT),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


SCENE = scenes.make_scene("flat", views=3, height=24, width=32)
DEPTHS = np.linspace(*SCENE.depth_range(0.03), 6)


def test_the_gpu_binding_rejects_bad_arguments_before_any_launch():
    cam = SCENE.ref_cam.params
    cams = np.stack([cam, cam])
    # device pointers aligned to their elements (256: cuMemAlloc's)
    warp = [0, 0, 0x100, 24, 32, cam, cam, 1.0, 0x200, 0x300]
    volume = [0, 0, 0x100, 0x200, 2, 24, 32, cam, cams, 0x300, 6, 0, 6, 0,
              5, 0x400, 0x500]
    extract = [0, 0, 0x100, 24, 32, 6, 0x200, 0x300, 0x400]

    def call(f, good, **changes):
        args = list(good)
        for i, value in changes.items():
            args[int(i[1:])] = value
        f(*args)

    for f, good, bad in [
        (_mvs.gpu_warp, warp, [
            ({"a3": 1}, r"src must be at least 2 x 2 pixels, got 1 x 32"),
            ({"a4": -5}, r"got 24 x -5"),
            ({"a2": 0}, "src is a null device pointer"),
            ({"a8": 0}, "rays is a null device pointer"),
            ({"a9": 0}, "out is a null device pointer"),
            ({"a2": 0x102}, r"src \(0x102\) is not aligned to its 4-byte "
                            "elements"),
            ({"a8": 0x204}, r"rays \(0x204\) is not aligned to its 8-byte "
                            "elements"),
            ({"a3": 1 << 16, "a4": 1 << 15}, "src has " + TOO_MANY),
            # sizes that do not fit in a C int, nor their product in 64 bits
            ({"a3": 1 << 40, "a4": 1 << 40},
             "src has 1099511627776 x 1099511627776 = "
             "1208925819614629174706176 pixels, " + LIMIT)]),
        (_mvs.gpu_cost_volume, volume, [
            ({"a5": 1 << 16, "a6": 1 << 15}, "ref has " + TOO_MANY),
            ({"a5": 1}, "ref must be at least 2 x 2 pixels, got 1 x 32"),
            ({"a4": 1 << 31}, "srcs has 2147483648 views, " + LIMIT),
            ({"a10": 1 << 31}, "depths has 2147483648 entries, " + LIMIT),
            ({"a4": 0}, "a sweep needs a source view and a depth, got 0 "
                        "views"),
            ({"a12": 7}, "planes 0 to 6 are not among the 6 depths"),
            ({"a11": -1}, "planes -1 to 4 are not among the 6 depths"),
            ({"a11": 1 << 40}, "planes 1099511627776 to"),
            ({"a13": 3}, r"cost must be 0 \(ncc\), 1 \(ssim\) or 2 "
                         r"\(sad\), got 3"),
            ({"a14": 4}, "window must be odd, from 3 to 63, got 4"),
            ({"a14": 65}, "window must be odd, from 3 to 63, got 65"),
            ({"a15": 0}, "rays is a null device pointer"),
            ({"a2": 0}, "ref is a null device pointer"),
            ({"a9": 0x304}, r"depths \(0x304\) is not aligned to its "
                            "8-byte elements")]),
        (_mvs.gpu_extract_depth, extract, [
            ({"a5": 0}, "cost_volume must have a plane or more, got 0"),
            ({"a3": 0}, r"cost_volume must be at least 1 x 1 pixels, got "
                        r"0 x 32"),
            ({"a3": 1 << 16, "a4": 1 << 15}, "cost_volume has " + TOO_MANY),
            ({"a5": 1 << 31}, "cost_volume has 2147483648 planes, " + LIMIT),
            ({"a8": 0}, "confidence is a null device pointer"),
            ({"a8": 0x401}, r"confidence \(0x401\) is not aligned to its "
                            "4-byte elements")]),
    ]:
        for change, message in bad:
            with pytest.raises(ValueError, match=message):
                call(f, good, **change)
    with pytest.raises(ValueError, match="src_cam is not a valid camera: "
                                         "K's last row is"):
        call(_mvs.gpu_warp, warp, a6=np.zeros(28))
    with pytest.raises(ValueError, match=r"src_cams must hold n cameras "
                                         r"\(3\), got 2"):
        call(_mvs.gpu_cost_volume, volume, a4=3)


def test_without_a_driver_every_gpu_call_says_why():
    why = driver_error()
    if why is None:
        pytest.skip("the CUDA kernels can run here: the gpu tests cover it")
    assert "cannot run" in why
    fake = FakeTorchTensor()
    calls = [
        lambda: mvs.warp(fake, SCENE.ref_cam, SCENE.cameras[1], 1.0),
        lambda: mvs.build_cost_volume(fake, [fake], SCENE.ref_cam,
                                      SCENE.cameras[1:2], DEPTHS),
        lambda: mvs.build_cost_volume(SCENE.ref, [fake], SCENE.ref_cam,
                                      SCENE.cameras[1:2], DEPTHS),
        lambda: mvs.extract_depth(FakeTorchTensor(shape=(4, 6, 6)), DEPTHS),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="cannot run: "):
            call()


def fresh_driver_error(env):
    """What gpu_check(-1) says in a fresh interpreter run with env: the
    driver, once opened (or not), stays so for the process's life."""
    return scenario("""
        from aquaprof import _mvs
        try:
            _mvs.gpu_check(-1)
            print(json.dumps(None))
        except RuntimeError as e:
            print(json.dumps(str(e)))
    """, env)


def test_the_plane_sweep_opens_the_driver_aquaprof_libcuda_names(
        fakes, tmp_path):
    missing = tmp_path / "nowhere" / "libcuda.so.1"
    why = fresh_driver_error({"AQUAPROF_LIBCUDA": str(missing)})
    if why and "built without its CUDA kernels" in why:
        pytest.skip("built without nvcc: the driver is never opened")
    assert why.startswith("the CUDA plane sweep cannot run: no CUDA "
                          f"driver: cannot open {missing} ("), why
    # the fake driver opens, with every call the sweep makes
    assert fresh_driver_error(
        {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")}) is None


H, W, N, D = 12, 16, 2, 3
# per entry point, its device pointers: the bytes its kernels touch and
# the size of their elements
BUFFERS = {
    "warp": {"src": (H * W * 4, 4), "rays": (6 * H * W * 8, 8),
             "out": (H * W * 4, 4)},
    "cost_volume": {"ref": (H * W * 4, 4), "srcs": (N * H * W * 4, 4),
                    "depths": (D * 8, 8), "rays": (6 * H * W * 8, 8),
                    "out": (H * W * D * 4, 4)},
    "extract_depth": {"cost_volume": (H * W * D * 4, 4),
                      "depths": (D * 8, 8), "depth": (H * W * 4, 4),
                      "confidence": (H * W * 4, 4)},
}
NEVER_ALLOCATED = 0x100000


def fake_driver(fakes):
    """The fake driver's path, and a scenario's lines that load it as
    `fake`, with `alloc(size)` for its device memory and a pinhole
    camera's parameters as `cam`; a skip where the extension was built
    without its kernels."""
    lib = str(fakes / "libcuda.so")
    why = fresh_driver_error({"AQUAPROF_LIBCUDA": lib})
    if why and "built without its CUDA kernels" in why:
        pytest.skip("built without nvcc: the driver is never opened")
    return lib, f"""
        from aquaprof import _mvs
        from aquaprof.mvs import Camera
        fake = ctypes.CDLL({lib!r})
        fake.fake_cuda_alloc.restype = ctypes.c_ulonglong
        fake.fake_cuda_alloc.argtypes = [ctypes.c_ulonglong, ctypes.c_uint]
        fake.fake_cuda_launched.restype = ctypes.c_char_p
        fake.fake_cuda_launched.argtypes = [ctypes.c_int]
        def alloc(size):
            return fake.fake_cuda_alloc(size, 2)    # device memory
        K = np.array([[20.0, 0, 8], [0, 20, 6], [0, 0, 1]])
        cam = Camera.pinhole(K, np.eye(3), np.zeros(3)).params
    """


def test_the_strip_launches_hold_every_plane_of_a_column_of_tiles(fakes):
    """Through the fake driver, which keeps each launch's grid and reads
    the strip kernels' parameters: one launch holds the planes times the
    columns of blocks across (planes varying fastest in the kernel), the
    row strips down; its first plane and its count are the call's; where
    AQUAPROF_MVS_GPU_ORDER=tiles, the grid of before, the columns across
    and the planes deep, a plane's blocks at a time; AquaMVS parity's
    strip kernel alike; the tile kernel keeps its grid of tiles, a plane
    deep."""
    lib, load = fake_driver(fakes)
    found = scenario(load + """
        import os
        H, W, N, D = 150, 300, 2, 7
        p = [alloc(H * W * 4), alloc(N * H * W * 4), alloc(D * 8),
             alloc(6 * H * W * 8), alloc(H * W * D * 4)]

        def run(cost, window, first=0, count=D, parity=0, env={}):
            os.environ.update(env)
            before = fake.fake_cuda_launches()
            _mvs.gpu_cost_volume(0, 0, p[0], p[1], N, H, W, cam,
                                 np.stack([cam] * N), p[2], D, first, count,
                                 cost, window, p[3], p[4], parity, 0)
            for name in env:
                del os.environ[name]
            out = []
            for k in range(before, fake.fake_cuda_launches()):
                name = fake.fake_cuda_launched(k).decode()
                grid, at = (ctypes.c_uint * 3)(), (ctypes.c_int * 3)()
                assert fake.fake_cuda_launch_grid(k, grid, at) == 0
                if name != "ap_rays_kernel":
                    out.append([name, list(grid), list(at)])
            return out

        print(json.dumps({
            "ncc 11": run(0, 11),
            "ncc 11, tiles first": run(
                0, 11, env={"AQUAPROF_MVS_GPU_ORDER": "tiles"}),
            "ncc 11, planes 2 to 5": run(0, 11, first=2, count=4),
            "ssim 7": run(1, 7),
            "sad 5": run(2, 5),
            "parity ncc 11": run(0, 11, parity=1),
            "parity ncc 11, tiles first": run(
                0, 11, parity=1, env={"AQUAPROF_MVS_GPU_ORDER": "tiles"}),
            "tile kernel": run(0, 11, env={"AQUAPROF_MVS_GPU_WARP": "tile"}),
        }))
    """, {"AQUAPROF_LIBCUDA": lib})
    # 300 columns: 3 blocks of 118 outputs at window 11 (122 at 7, 124 at
    # 5, AquaMVS parity's 108 at 11); 150 rows: 3 strips of 64
    assert found == {
        "ncc 11": [["ap_strip_ncc_r5_kernel", [7 * 3, 3, 1], [0, 7, 0]]],
        "ncc 11, tiles first": [["ap_strip_ncc_r5_kernel", [3, 3, 7],
                                 [0, 7, 1]]],
        "ncc 11, planes 2 to 5": [["ap_strip_ncc_r5_kernel", [4 * 3, 3, 1],
                                   [2, 4, 0]]],
        "ssim 7": [["ap_strip_ssim_kernel", [7 * 3, 3, 1], [0, 7, 0]]],
        "sad 5": [["ap_strip_sad_kernel", [7 * 3, 3, 1], [0, 7, 0]]],
        "parity ncc 11": [["ap_parity_strip_ncc_kernel", [7 * 3, 3, 1],
                           [0, 7, 0]]],
        "parity ncc 11, tiles first": [["ap_parity_strip_ncc_kernel",
                                        [3, 3, 7], [0, 7, 1]]],
        # 32 x 16 tiles, a plane deep
        "tile kernel": [["ap_cost_kernel", [10, 10, 7], [-1, -1, -1]]],
    }


def test_a_device_whose_blocks_hold_less_shared_memory_takes_the_tiles(
        fakes):
    """A device whose blocks can hold 48 KiB of shared memory (opt-in),
    less than the strip kernels' blocks at window 11 ask (66 KiB, more
    with two sources a thread): the tile cost kernel runs where the
    strip kernel would fail to launch, and AquaMVS parity takes its
    three passes."""
    lib, load = fake_driver(fakes)
    found = scenario(load + """
        H, W, N, D = 40, 60, 2, 3
        p = [alloc(H * W * 4), alloc(N * H * W * 4), alloc(D * 8),
             alloc(6 * H * W * 8), alloc(H * W * D * 4),
             alloc(N * 3 * H * W * 8)]

        def run(parity):
            before = fake.fake_cuda_launches()
            _mvs.gpu_cost_volume(0, 0, p[0], p[1], N, H, W, cam,
                                 np.stack([cam] * N), p[2], D, 0, D, 0, 11,
                                 p[3], p[4], parity, p[5] if parity else 0)
            return sorted({fake.fake_cuda_launched(k).decode()
                           for k in range(before, fake.fake_cuda_launches())}
                          - {"ap_rays_kernel"})

        print(json.dumps({"textbook": run(0), "parity": run(1)}))
    """, {"AQUAPROF_LIBCUDA": lib, "FAKE_CUDA_SHARED_OPTIN": "49152"})
    assert found["textbook"] == ["ap_cost_kernel"]
    assert found["parity"] and not any("strip" in name
                                       for name in found["parity"])


def test_every_device_pointer_is_checked_before_any_launch(fakes):
    """Through the fake driver, which knows only its own allocations: a
    pointer to memory the driver does not know, to host memory, or not
    aligned to its elements is refused, naming it, and nothing is
    launched; allocations of exactly the bytes needed launch."""
    lib, load = fake_driver(fakes)
    found = scenario(load + f"""
        HOST, DEVICE, UNIFIED = 1, 2, 4
        H, W, N, D = {H}, {W}, {N}, {D}
        cams = np.stack([cam] * N)
        calls = {{
            "warp": lambda p: _mvs.gpu_warp(
                0, 0, p["src"], H, W, cam, cam, 1.0, p["rays"], p["out"]),
            "cost_volume": lambda p: _mvs.gpu_cost_volume(
                0, 0, p["ref"], p["srcs"], N, H, W, cam, cams, p["depths"],
                D, 0, D, 0, 3, p["rays"], p["out"]),
            "extract_depth": lambda p: _mvs.gpu_extract_depth(
                0, 0, p["cost_volume"], H, W, D, p["depths"], p["depth"],
                p["confidence"]),
        }}

        def run(call, pointers):
            before = fake.fake_cuda_launches()
            try:
                call(pointers)
                error = None
            except ValueError as e:
                error = str(e)
            return [error, fake.fake_cuda_launches() - before]

        found = {{}}
        for entry, buffers in {BUFFERS!r}.items():
            exact = {{name: fake.fake_cuda_alloc(size, DEVICE)
                      for name, (size, _) in buffers.items()}}
            managed = {{name: fake.fake_cuda_alloc(size, UNIFIED)
                        for name, (size, _) in buffers.items()}}
            found[entry] = {{"exact": run(calls[entry], exact),
                             "managed": run(calls[entry], managed)}}
            for name, (size, align) in buffers.items():
                bad = {{
                    "host": fake.fake_cuda_alloc(size, HOST),
                    "unknown": {NEVER_ALLOCATED},
                    "misaligned": exact[name] + align // 2,
                }}
                for case, pointer in bad.items():
                    found[entry][name + " " + case] = run(
                        calls[entry], dict(exact, **{{name: pointer}}))
        print(json.dumps(found))
    """, {"AQUAPROF_LIBCUDA": lib})
    # rays then warp; rays then cost (one launch holds it all); extract
    launches = {"warp": 2, "cost_volume": 2, "extract_depth": 1}
    for entry, buffers in BUFFERS.items():
        assert found[entry].pop("exact") == [None, launches[entry]]
        assert found[entry].pop("managed") == [None, launches[entry]]
        for name, (size, align) in buffers.items():
            at = rf"{name} \(0x[0-9a-f]+\)"
            for case, message in {
                "host": rf"{at} is not device memory \(the driver's memory "
                        rf"type 1\)",
                "unknown": rf"{name} \({NEVER_ALLOCATED:#x}\) is not memory "
                           rf"the CUDA driver knows \(cuPointerGetAttribute: "
                           rf"invalid argument \(1\)\)",
                "misaligned": rf"{at} is not aligned to its {align}-byte "
                              rf"elements",
            }.items():
                error, launched = found[entry].pop(f"{name} {case}")
                assert re.fullmatch(message, error), (entry, case, error)
                assert launched == 0, (entry, case)
        assert not found[entry]       # every case checked


def test_the_warp_buffer_takes_a_warp_launch_per_group_of_planes(fakes):
    """Through the fake driver (which runs no kernel): with a buffer of
    `room` warped planes, each group of views warps that many planes in
    one launch and then costs them in another, after the rays; without
    one, the cost kernel alone. The buffer's pointer is checked like
    every other before any launch, and refused with AquaMVS parity or
    without room."""
    lib, load = fake_driver(fakes)
    found = scenario(load + """
        import os
        os.environ.pop("AQUAPROF_MVS_GPU_WARP", None)   # the default
        H, W, D = 12, 16, 5
        def alloc(size, kind=2):
            return fake.fake_cuda_alloc(size, kind)

        def run(n, room, warped=None, parity=0, scratch=0, first=0):
            views = min(n, _mvs.GPU_VIEWS)
            if warped is None:
                warped = alloc(max(min(room, D), 1) * views * H * W * 4)
            p = [alloc(H * W * 4), alloc(n * H * W * 4), alloc(D * 8),
                 alloc(6 * H * W * 8), alloc(H * W * D * 4)]
            before = fake.fake_cuda_launches()
            try:
                _mvs.gpu_cost_volume(0, 0, p[0], p[1], n, H, W, cam,
                                     np.stack([cam] * n), p[2], D, first,
                                     D - first, 0, 5, p[3], p[4], parity,
                                     scratch, warped, room)
                error = None
            except ValueError as e:
                error = str(e)
            names = [fake.fake_cuda_launched(k).decode()
                     for k in range(before, fake.fake_cuda_launches())]
            # the kernels in order, each named once a run of them
            return [error, len(names),
                    [k for i, k in enumerate(names)
                     if i == 0 or names[i - 1] != k]]

        print(json.dumps({
            "2 views, room 2": run(2, 2),
            "2 views, room 5": run(2, 5),
            "2 views, room 9": run(2, 9),
            "10 views, room 2": run(10, 2),
            "no buffer": run(2, 0, warped=0),
            "10 views, no buffer": run(10, 0, warped=0),
            "host buffer": run(2, 2, warped=alloc(2 * 2 * H * W * 4, 1)),
            "room past the planes": run(2, 2**31 - 1, first=4),
            "no room": run(2, 0),
            "parity": run(2, 2, parity=1,
                          scratch=alloc(2 * 3 * H * W * 8)),
        }))
    """, {"AQUAPROF_LIBCUDA": lib})
    # rays, then per group of views and of planes a warp and a cost
    rays, warp, cost = "ap_rays_kernel", "ap_warp_planes_kernel", \
        "ap_cost_planes_kernel"
    assert found.pop("2 views, room 2") == [None, 1 + 3 * 2,
                                            [rays] + [warp, cost] * 3]
    assert found.pop("2 views, room 5") == [None, 1 + 2, [rays, warp, cost]]
    assert found.pop("2 views, room 9") == [None, 1 + 2, [rays, warp, cost]]
    # one group of the plane left, however much room, never past it
    assert found.pop("room past the planes") == [None, 1 + 2,
                                                 [rays, warp, cost]]
    assert found.pop("10 views, room 2") == [None, 1 + 2 * 3 * 2,
                                             [rays] + [warp, cost] * 6]
    # NCC at window 5: the strip kernel of radius 2
    strip = "ap_strip_ncc_r2_kernel"
    assert found.pop("no buffer") == [None, 1 + 1, [rays, strip]]
    assert found.pop("10 views, no buffer") == [None, 1 + 2, [rays, strip]]
    error, launched, _ = found.pop("host buffer")
    assert re.fullmatch(r"warped \(0x[0-9a-f]+\) is not device memory "
                        r"\(the driver's memory type 1\)", error)
    assert launched == 0
    for case, (parity, room) in {"no room": (0, 0),
                                 "parity": (1, 2)}.items():
        assert found.pop(case) == [
            f"warped planes are for the textbook sweep, with room for 1 "
            f"plane or more, got parity {parity} and room for {room}", 0, []]
    assert not found


def test_the_depth_fold_checks_its_planes_and_pointers_then_launches(
        fakes):
    """Through the fake driver: gpu_depth_fold refuses planes that are
    not among the depths and pointers the driver does not know, naming
    them, before any launch; a good call launches the fold once."""
    lib, load = fake_driver(fakes)
    found = scenario(load + """
        H, W, K, D = 12, 16, 3, 7
        p = [alloc(H * W * K * 4), alloc(D * 8), alloc(H * W * 32),
             alloc(H * W * 4), alloc(H * W * 4)]

        def run(k=K, first=0, ptrs=p):
            before = fake.fake_cuda_launches()
            try:
                _mvs.gpu_depth_fold(0, 0, ptrs[0], H, W, k, first, D,
                                    *ptrs[1:])
            except ValueError as e:
                return str(e)
            return [fake.fake_cuda_launched(i).decode()
                    for i in range(before, fake.fake_cuda_launches())]

        print(json.dumps({"good": run(), "last": run(first=4),
                          "past": run(first=5), "none": run(k=0),
                          "unknown": run(ptrs=p[:2] + [0x7000] + p[3:])}))
    """, {"AQUAPROF_LIBCUDA": lib})
    assert found["good"] == found["last"] == ["ap_depth_fold_kernel"]
    assert found["past"] == "planes 5 to 7 are not among the 7 depths"
    assert found["none"] == "planes 0 to -1 are not among the 7 depths"
    assert found["unknown"].startswith("state (0x7000) is not memory the "
                                       "CUDA driver knows")


def test_the_cost_kernel_is_chosen_by_cost_and_window(fakes):
    """Through the fake driver: box windows (NCC, SAD) take the strip
    kernel, NCC's own for windows 3 to 15 and the one that reads the
    radius beyond; SSIM's Gaussian window, which does not slide, its own
    strip kernel, which sums it afresh; AQUAPROF_MVS_GPU_WARP=tile the
    tile kernel for every cost, and sources warped first the kernel that
    reads them."""
    lib, load = fake_driver(fakes)
    found = scenario(load + """
        import os
        H, W, D = 12, 16, 3
        def run(cost, window, how=None, room=0):
            if how is None:
                os.environ.pop("AQUAPROF_MVS_GPU_WARP", None)
            else:
                os.environ["AQUAPROF_MVS_GPU_WARP"] = how
            p = [alloc(H * W * 4), alloc(2 * H * W * 4), alloc(D * 8),
                 alloc(6 * H * W * 8), alloc(H * W * D * 4),
                 alloc(max(room, 1) * 2 * H * W * 4)]
            before = fake.fake_cuda_launches()
            _mvs.gpu_cost_volume(0, 0, p[0], p[1], 2, H, W, cam,
                                 np.stack([cam] * 2), p[2], D, 0, D, cost,
                                 window, p[3], p[4], 0, 0,
                                 p[5] if room else 0, room)
            return [fake.fake_cuda_launched(k).decode()
                    for k in range(before + 1, fake.fake_cuda_launches())]

        print(json.dumps({
            **{f"ncc {w}": run(0, w) for w in (3, 11, 15, 17, 63)},
            "sad 5": run(2, 5), "sad 63": run(2, 63),
            "ssim 7": run(1, 7), "ssim 63": run(1, 63),
            "ssim 7, tile": run(1, 7, "tile"),
            "ncc 11, tile": run(0, 11, "tile"),
            "sad 5, tile": run(2, 5, "tile"),
            "ncc 11, planes": run(0, 11, "planes", room=D),
        }))
    """, {"AQUAPROF_LIBCUDA": lib})
    # after the rays, one launch of the cost kernel for all planes
    assert found == {
        "ncc 3": ["ap_strip_ncc_r1_kernel"],
        "ncc 11": ["ap_strip_ncc_r5_kernel"],
        "ncc 15": ["ap_strip_ncc_r7_kernel"],
        "ncc 17": ["ap_strip_ncc_kernel"],
        "ncc 63": ["ap_strip_ncc_kernel"],
        "sad 5": ["ap_strip_sad_kernel"],
        "sad 63": ["ap_strip_sad_kernel"],
        "ssim 7": ["ap_strip_ssim_kernel"],
        "ssim 63": ["ap_strip_ssim_kernel"],
        "ssim 7, tile": ["ap_cost_kernel"],
        "ncc 11, tile": ["ap_cost_kernel"],
        "sad 5, tile": ["ap_cost_kernel"],
        "ncc 11, planes": ["ap_warp_planes_kernel", "ap_cost_planes_kernel"],
    }


# --------------------------------- the GPU's arithmetic, on the host

# ap_warp_kernel's sample and ap_warp_planes_kernel's walk of a pixel's
# ray down the planes, compiled for the host from the same headers with
# contraction on, as nvcc compiles the device code (a * b + c becomes one
# fused multiply-add, rounded once)
GPU_WARP_ON_THE_HOST = r"""
#include "cpu/cost_math.h"
#include "geometry/camera_math.h"
#include "geometry/warp_walk.h"

int
emulated_walk(const double *ref_params, const double *src_params,
              const float *img, int h, int w, const double *depths,
              int planes, float *out)
{
    ap_camera ref, src;
    if (ap_camera_init(&ref, ref_params) || ap_camera_init(&src, src_params)) {
        return -1;
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double o[3], d[3];
            if (!ap_cast(&ref, x, y, o, d)) {
                o[0] = NAN;         /* as ap_rays_kernel stores it */
            }
            ap_warp_walk(o, d, depths, planes, &src, img, h, w,
                         out + (size_t)y * w + x, (size_t)h * w);
        }
    }
    return 0;
}

int
emulated_warp(const double *ref_params, const double *src_params,
              const float *img, int h, int w, double depth, float *out)
{
    ap_camera ref, src;
    if (ap_camera_init(&ref, ref_params) || ap_camera_init(&src, src_params)) {
        return -1;
    }
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double o[3], d[3], p[3], u, v;
            int seen = ap_cast(&ref, x, y, o, d);
            for (int k = 0; seen && k < 3; k++) {
                p[k] = o[k] + depth * d[k];
            }
            seen = seen && ap_project_fast(&src, p, &u, &v);
            out[(size_t)y * w + x] = seen ? ap_bilinear(img, h, w, u, v)
                                          : NAN;
        }
    }
    return 0;
}
"""


def built_on_the_host(tmp_path_factory, name, source, macros=()):
    """C source of the GPU's maths built for this CPU with fused
    multiply-adds, as the device computes, linked with the kernels'
    camera.c, with the -D `macros` of a variant: a ctypes library (skips
    where the CPU has no FMA)."""
    flags = ["-ffp-contract=fast", *macros]
    if platform.machine() == "x86_64":
        with open("/proc/cpuinfo") as f:
            if " fma " not in f.read():
                pytest.skip("this CPU has no fused multiply-add")
        flags.append("-mfma")
    kit = ROOT / "csrc" / "mvs"
    out = tmp_path_factory.mktemp("emulated")
    (out / f"{name}.c").write_text(source)
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O2",
                    "-shared", "-fPIC", *flags, "-I", str(kit), "-I",
                    str(ROOT / "tests" / "mvs" / "kernels"),
                    str(out / f"{name}.c"), str(kit / "geometry" / "camera.c"),
                    "-o", str(out / f"{name}.so"), "-lm"], check=True)
    return ctypes.CDLL(str(out / f"{name}.so"))


@pytest.fixture(scope="module")
def contracted_warp(tmp_path_factory):
    """The GPU's warp built for this CPU with fused multiply-adds."""
    lib = built_on_the_host(tmp_path_factory, "warp", GPU_WARP_ON_THE_HOST)
    array = np.ctypeslib.ndpointer
    lib.emulated_warp.argtypes = [
        array(np.float64, flags="C"), array(np.float64, flags="C"),
        array(np.float32, flags="C"), ctypes.c_int, ctypes.c_int,
        ctypes.c_double, array(np.float32, flags="C")]

    lib.emulated_walk.argtypes = [
        array(np.float64, flags="C"), array(np.float64, flags="C"),
        array(np.float32, flags="C"), ctypes.c_int, ctypes.c_int,
        array(np.float64, flags="C"), ctypes.c_int,
        array(np.float32, flags="C")]

    def warp(src, ref_cam, src_cam, depth):
        h, w = src.shape
        result = np.empty((h, w), np.float32)
        assert lib.emulated_warp(ref_cam.params, src_cam.params,
                                 np.ascontiguousarray(src), h, w, depth,
                                 result) == 0
        return result

    def walk(src, ref_cam, src_cam, depths):
        h, w = src.shape
        result = np.full((len(depths), h, w), -1.0, np.float32)
        assert lib.emulated_walk(ref_cam.params, src_cam.params,
                                 np.ascontiguousarray(src), h, w,
                                 np.ascontiguousarray(depths, np.float64),
                                 len(depths), result) == 0
        return result
    warp.walk = walk
    return warp


def test_the_gpus_arithmetic_sees_what_the_cpu_sees(contracted_warp):
    """Pinhole pairs that exact arithmetic puts on the image's border
    (a horizontal baseline: every sample of the first and last rows; a
    vertical one: of the first and last columns), and refractive ones
    (the GPU's crossing is found float first): the GPU's sample, rounded
    as nvcc rounds it, sees just what the CPU path sees."""
    pairs = []
    for model in ("pinhole", "refractive"):
        sc = scenes.make_scene("flat", model, views=2, height=48, width=64)
        pairs += [(sc.images[1], sc.ref_cam, sc.cameras[1], depth)
                  for depth in DEPTHS[[0, 3, 5]]]
    K = np.array([[1e5, 0, 1.5], [0, 1e5, 1000.0], [0, 0, 1]])
    img = np.random.default_rng(9).random((2000, 4)).astype(np.float32)
    pairs.append((img, mvs.Camera.pinhole(K, np.eye(3), np.zeros(3)),
                  mvs.Camera.pinhole(K, np.eye(3), [0, -0.001, 0]), 1.0))
    for src, ref_cam, src_cam, depth in pairs:
        expected = mvs.warp(src, ref_cam, src_cam, depth)
        got = contracted_warp(src, ref_cam, src_cam, depth)
        assert np.array_equal(np.isnan(got), np.isnan(expected))
        seen = ~np.isnan(expected)
        assert np.abs(got[seen] - expected[seen]).max() <= 1e-4


@pytest.mark.parametrize("shape", ["flat", "wavy"])
@pytest.mark.parametrize("model", ["refractive", "pinhole"])
def test_the_gpus_walk_down_the_planes_sees_what_the_cpu_sees(
        contracted_warp, shape, model):
    """ap_warp_planes_kernel's thread, which solves each refracted
    crossing from the planes before's, rounded as nvcc rounds it: every
    plane, written where the planes' stride puts it, sees what the CPU
    path's warp of that plane sees, and what the fused kernel's sample
    does. Uneven planes too, as near and far as the scene reaches."""
    sc = scenes.make_scene(shape, model, views=3, height=48, width=64)
    near, far = sc.depth_range(0.03)
    even = np.linspace(near, far, 24)
    uneven = 1.0 / np.linspace(1.0 / near, 1.0 / far, 17)
    for depths in (even, uneven):
        for src, cam in zip(sc.images[1:], sc.cameras[1:]):
            walked = contracted_warp.walk(src, sc.ref_cam, cam, depths)
            for plane, depth in zip(walked, depths):
                expected = mvs.warp(src, sc.ref_cam, cam, depth)
                assert np.array_equal(np.isnan(plane), np.isnan(expected))
                seen = ~np.isnan(expected)
                assert seen.mean() > 0.5
                assert np.abs(plane[seen] - expected[seen]).max() <= 1e-4
                fused = contracted_warp(src, sc.ref_cam, cam, depth)
                assert np.abs(plane[seen] - fused[seen]).max() <= 1e-5


# the strip cost kernel (gpu_strip.h) over a whole volume, its blocks run
# thread by thread between the points where the device's threads meet,
# in sweep.cu's passes of sources (strip_on_host.h, which
# tests/mvs/kernels/test_gpu_strip.c drives too); the rays and the frames
# made as the launch makes them
GPU_STRIP_ON_THE_HOST = r"""
#include <stdlib.h>

#include "cuda/cuda_sweep.h"
#include "cuda/gpu_strip.h"
#include "geometry/camera_math.h"
#include "strip_on_host.h"

int
emulated_strip(const double *ref_params, const double *src_params, int n,
               const float *ref, const float *srcs, int h, int w,
               const double *depths, int d, int cost, int window,
               float *out)
{
    ap_camera ref_cam, cam;
    ap_gpu_frame frames[AP_GPU_VIEWS];
    int r = window / 2, outputs = ap_strip_outputs(r), k;
    if (n > AP_GPU_VIEWS || ap_camera_init(&ref_cam, ref_params)) {
        return -1;
    }
    for (int v = 0; v < n; v++) {
        if (ap_camera_init(&cam, src_params + 28 * v)) {
            return -1;
        }
        ap_gpu_frame_init(&frames[v], &cam);
    }
    double *rays = malloc(sizeof(double) * AP_RAY_DOUBLES * h * w);
    double *shared = malloc(ap_strip_shared(cost, r));
    ap_strip_column *col = malloc(sizeof(*col) * AP_STRIP_COLS);
    if (rays == NULL || shared == NULL || col == NULL) {
        free(rays);
        free(shared);
        free(col);
        return -1;
    }
    for (int i = 0; i < h * w; i++) {       /* as ap_rays_kernel does */
        double o[3], dir[3];
        if (!ap_cast(&ref_cam, i % w, i / w, o, dir)) {
            o[0] = o[1] = o[2] = dir[0] = dir[1] = dir[2] = NAN;
        }
        ap_ray_write(rays, i, o, dir);
    }
    ap_strip_shared_at at = ap_strip_layout(shared, cost, r);
    for (int j = 0; j < d; j++) {
        for (int y0 = 0; y0 < h; y0 += AP_STRIP_ROWS) {
            for (int x0 = -r; x0 + r < w; x0 += outputs) {
                ap_strip_block b = {.ref = ref, .rays = rays, .h = h,
                                    .w = w, .x0 = x0, .y0 = y0,
                                    .cost = cost, .r = r,
                                    .depth = depths[j],
                                    .full = (double)window * window};
                for (int i = 0; i < AP_STRIP_ROWS * outputs; i++) {
                    at.acc[i] = 0.0f;
                }
                for (int v = 0; v < n; v += k) {
                    k = strip_pass_sources(v, n, 0);
                    ap_strip_sources(&b, k, v, srcs, (size_t)h * w, frames);
                    strip_pass(&b, at, col, k, NULL);
                }
                for (int i = 0; i < AP_STRIP_ROWS * outputs; i++) {
                    int y = y0 + i / outputs, x = x0 + r + i % outputs;
                    if (x < w && y < h) {
                        out[((size_t)y * w + x) * d + j] =
                            at.acc[i] * (float)(1.0 / n);
                    }
                }
            }
        }
    }
    free(rays);
    free(shared);
    free(col);
    return 0;
}
"""


@pytest.fixture(scope="module", params=[
    (), ("-DAP_STRIP_SOURCES=2", "-DAP_STRIP_ROWS=48", "-DAP_STRIP_GROUP=2",
         "-DAP_STRIP_SEGMENT=8")], ids=["one-source", "two-sources"])
def contracted_strip(tmp_path_factory, request):
    """The strip cost kernel built for this CPU with fused
    multiply-adds, over a whole volume: as committed, and with two
    sources a thread (a variant benchmarks/mvs/gpu_variants.sh times;
    three views: a pass of two, then one)."""
    lib = built_on_the_host(tmp_path_factory, "strip",
                            GPU_STRIP_ON_THE_HOST, request.param)
    array = np.ctypeslib.ndpointer
    lib.emulated_strip.argtypes = [
        array(np.float64, flags="C"), array(np.float64, flags="C"),
        ctypes.c_int, array(np.float32, flags="C"),
        array(np.float32, flags="C"), ctypes.c_int, ctypes.c_int,
        array(np.float64, flags="C"), ctypes.c_int, ctypes.c_int,
        ctypes.c_int, array(np.float32, flags="C")]

    def volume(ref, srcs, ref_cam, cams, depths, cost, window):
        h, w = ref.shape
        depths = np.ascontiguousarray(depths, np.float64)
        result = np.full((h, w, depths.size), np.nan, np.float32)
        params = np.ascontiguousarray(np.stack([c.params for c in cams]))
        assert lib.emulated_strip(
            ref_cam.params, params, len(cams), np.ascontiguousarray(ref),
            np.ascontiguousarray(np.stack(srcs)), h, w, depths,
            depths.size, {"ncc": 0, "sad": 2}[cost], window, result) == 0
        return result
    return volume


@pytest.mark.parametrize("cost,window", [("ncc", 11), ("ncc", 3),
                                         ("ncc", 63), ("sad", 5)])
@pytest.mark.parametrize("model", ["refractive", "pinhole"])
def test_the_gpus_strip_kernel_costs_what_the_cpu_does(contracted_strip,
                                                       cost, window,
                                                       model):
    """The default GPU cost kernel for box windows, rounded as nvcc
    rounds it: every cost of a scene's volume, wider than one block and
    taller than one strip, within 1e-4 of the CPU path's, the flat
    windows and those too little seen costing 1 as there."""
    sc = scenes.make_scene("wavy", model, views=3, height=70, width=150)
    depths = np.linspace(*sc.depth_range(0.03), 5)
    expected = mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                     sc.cameras[1:], depths, cost, window)
    got = contracted_strip(sc.ref, sc.images[1:], sc.ref_cam,
                           sc.cameras[1:], depths, cost, window)
    assert np.isfinite(got).all()
    assert np.abs(got - expected).max() <= 1e-4
    # what is compared: costs of every kind, seen and not
    assert (expected == 1).any() and (expected < 0.5).any()


def test_the_warp_buffer_is_asked_for_by_name(monkeypatch):
    """AQUAPROF_MVS_GPU_WARP: the cost kernels' own warps by default
    ("strip"), "strip" or "tile"; "planes" gives a buffer of whole planes
    under its byte limit (at most the planes of a call, and none, the
    kernel's own warps, where one plane of the views is over it); anything
    else is refused, naming the variable."""
    monkeypatch.delenv(_cuda.WARP_ENV, raising=False)
    assert _cuda.warp_mode() == "strip"
    assert _cuda.warp_room(5, 1200, 1600, 128) == 0
    for own in ("strip", "tile"):
        monkeypatch.setenv(_cuda.WARP_ENV, own)
        assert _cuda.warp_mode() == own
        assert _cuda.warp_room(5, 1200, 1600, 128) == 0
    monkeypatch.setenv(_cuda.WARP_ENV, "planes")
    room = _cuda.warp_room(5, 1200, 1600, 128)
    assert room == _cuda.WARP_PLANES_BYTES // (5 * 1200 * 1600 * 4) == 13
    assert _cuda.warp_room(5, 24, 32, 6) == 6
    assert _cuda.warp_room(8, 4096, 4096, 4) == 1
    assert _cuda.warp_room(8, 16384, 16384, 4) == 0
    monkeypatch.setenv(_cuda.WARP_ENV, "Planes")
    for call in (lambda: _cuda.warp_room(5, 24, 32, 6), _cuda.warp_mode):
        with pytest.raises(ValueError, match="AQUAPROF_MVS_GPU_WARP must "
                           "be one of 'strip', 'tile', 'planes', got "
                           "'Planes'"):
            call()


@pytest.mark.parametrize("variable,read,modes,typo", [
    (_cuda.PARITY_ENV, _cuda.parity_mode, ("strip", "passes"), "pases"),
    (_cuda.ORDER_ENV, _cuda.order_mode, ("planes", "tiles"), "tile")])
def test_the_kernels_ways_are_asked_for_by_name(variable, read, modes, typo,
                                                monkeypatch):
    """AQUAPROF_MVS_GPU_PARITY: AquaMVS parity's strip kernel by default
    ("strip"), or its three passes; AQUAPROF_MVS_GPU_ORDER: the strip
    kernels' blocks every plane of a tile side by side by default
    ("planes"), or a plane at a time ("tiles"). Anything else is refused,
    naming the variable, rather than taken silently as the default."""
    monkeypatch.delenv(variable, raising=False)
    assert read() == modes[0]
    for mode in modes:
        monkeypatch.setenv(variable, mode)
        assert read() == mode
    monkeypatch.setenv(variable, typo)
    with pytest.raises(ValueError, match=f"{variable} must be one of "
                       f"'{modes[0]}', '{modes[1]}', got '{typo}'"):
        read()


# ------------------------------------------------------------ on a GPU

def cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def use_kernel(warp, monkeypatch):
    """The cost kernel by AQUAPROF_MVS_GPU_WARP: unset, the strip
    kernels ("strip-tiles": their blocks a plane at a time, by
    AQUAPROF_MVS_GPU_ORDER); "tile" or "planes"."""
    monkeypatch.delenv(_cuda.ORDER_ENV, raising=False)
    if warp == "strip-tiles":
        monkeypatch.setenv(_cuda.ORDER_ENV, "tiles")
    if warp.startswith("strip"):
        monkeypatch.delenv(_cuda.WARP_ENV, raising=False)
    else:
        monkeypatch.setenv(_cuda.WARP_ENV, warp)


def close(gpu_result, cpu_result, tol=1e-4):
    got = gpu_result.cpu().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(cpu_result))
    seen = ~np.isnan(cpu_result)
    return np.abs(got[seen] - cpu_result[seen]).max() <= tol


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("model", ["refractive", "pinhole"])
def test_cuda_warp_equals_the_cpu(model):
    sc = scenes.make_scene("flat", model, views=2, height=48, width=64)
    for depth in DEPTHS[[0, 3, 5]]:
        out = mvs.warp(cuda(sc.images[1]), sc.ref_cam, sc.cameras[1], depth)
        assert isinstance(out, torch.Tensor) and out.is_cuda
        assert close(out, mvs.warp(sc.images[1], sc.ref_cam, sc.cameras[1],
                                   depth))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("cost,window", [("ncc", 11), ("ssim", 7),
                                         ("sad", 5), ("ncc", 63),
                                         ("ssim", 63)])
@pytest.mark.parametrize("model", ["refractive", "pinhole"])
@pytest.mark.parametrize("warp", ["strip", "strip-tiles", "tile", "planes"])
def test_cuda_cost_volume_equals_the_cpu(cost, window, model, warp,
                                         monkeypatch):
    """Every cost kernel: the strip kernels (the default; SSIM's sums its
    Gaussian window afresh), their blocks in either order, the tile
    kernel's, which warps its tiles and their halos, and whole planes
    warped first (in groups of depth_batch planes)."""
    use_kernel(warp, monkeypatch)
    sc = scenes.make_scene("wavy", model, views=3, height=40, width=56)
    depths = np.linspace(*sc.depth_range(0.03), 9)
    args = (sc.ref_cam, sc.cameras[1:], depths, cost, window)
    expected = mvs.build_cost_volume(sc.ref, sc.images[1:], *args)
    stacked = mvs.build_cost_volume(cuda(sc.ref),
                                    cuda(np.stack(sc.images[1:])), *args)
    listed = mvs.build_cost_volume(cuda(sc.ref),
                                   [cuda(i) for i in sc.images[1:]], *args,
                                   depth_batch=4)
    for out in (stacked, listed):
        assert out.is_cuda and out.dtype == torch.float32
        assert close(out, expected)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("warp", ["strip", "tile", "planes"])
def test_cuda_takes_more_views_than_one_launch_holds(warp, monkeypatch):
    use_kernel(warp, monkeypatch)
    sc = scenes.make_scene("flat", views=11, height=24, width=32)
    assert len(sc.cameras) - 1 > _mvs.GPU_VIEWS
    args = (sc.ref_cam, sc.cameras[1:], DEPTHS)
    expected = mvs.build_cost_volume(sc.ref, sc.images[1:], *args)
    out = mvs.build_cost_volume(cuda(sc.ref), cuda(np.stack(sc.images[1:])),
                                *args)
    assert close(out, expected)


@pytest.mark.gpu
@needs_cuda
def test_cuda_extract_depth_equals_the_cpu():
    rng = np.random.default_rng(6)
    volume = rng.random((30, 40, 9)).astype(np.float32)
    depths = np.cumsum(rng.uniform(0.01, 0.03, 9)) + 0.8
    depth, conf = mvs.extract_depth(cuda(volume), depths)
    expected_depth, expected_conf = mvs.extract_depth(volume, depths)
    assert close(depth, expected_depth, 1e-6)
    assert close(conf, expected_conf, 1e-6)


@pytest.mark.gpu
@needs_cuda
def test_cuda_pipeline_recovers_the_flat_plane():
    sc = scenes.make_scene("flat", views=3, height=96, width=128)
    depths = np.linspace(*sc.depth_range(0.03), 48)
    volume = mvs.build_cost_volume(cuda(sc.ref),
                                   [cuda(i) for i in sc.images[1:]],
                                   sc.ref_cam, sc.cameras[1:], depths, "ncc",
                                   7)
    depth, _ = mvs.extract_depth(volume, depths)
    m = scenes.metrics(sc, depth.cpu().numpy(), tolerance=depths[1] -
                       depths[0])
    assert m["completeness"] > 0.8


@pytest.mark.gpu
@needs_cuda
def test_cuda_bad_inputs():
    ref = cuda(SCENE.ref)
    with pytest.raises(ValueError, match="C-contiguous"):
        mvs.build_cost_volume(ref.t(), [ref], SCENE.ref_cam,
                              SCENE.cameras[1:2], DEPTHS)
    with pytest.raises(ValueError, match="float32"):
        mvs.build_cost_volume(ref.double(), [ref], SCENE.ref_cam,
                              SCENE.cameras[1:2], DEPTHS)
    with pytest.raises(ValueError, match="srcs\\[0\\] has shape"):
        mvs.build_cost_volume(ref, [ref[:10]], SCENE.ref_cam,
                              SCENE.cameras[1:2], DEPTHS)
    with pytest.raises(ValueError, match="window"):
        mvs.build_cost_volume(ref, [ref], SCENE.ref_cam,
                              SCENE.cameras[1:2], DEPTHS, window=4)
    with pytest.raises(RuntimeError, match="no CUDA device 99"):
        _mvs.gpu_check(99)


@pytest.mark.gpu
@needs_cuda
def test_cuda_extract_depth_gives_no_depth_where_a_cost_is_not_finite():
    volume = np.tile(np.array([0.9, 0.5, 0.2, 0.6, 0.8], np.float32),
                     (2, 3, 1))
    volume[0, 0, 0], volume[0, 1, 2], volume[0, 2, 3] = np.nan, np.inf, \
        -np.inf
    depths = np.linspace(1.0, 1.4, 5)
    depth, conf = mvs.extract_depth(cuda(volume), depths)
    expected_depth, expected_conf = mvs.extract_depth(volume, depths)
    assert np.isnan(expected_depth[0]).all()
    assert close(depth, expected_depth, 1e-6)
    assert close(conf, expected_conf, 1e-6)


@pytest.mark.gpu
@needs_cuda
def test_cuda_rays_past_the_critical_angle_see_nothing():
    """A camera over a surface with less index below (n_water < n_air)
    whose corners look past the critical angle: those pixels have no ray
    on the GPU either, and no cost is NaN."""
    K = np.array([[12.0, 0, 15.5], [0, 12.0, 11.5], [0, 0, 1]])
    cams = [mvs.Camera.refractive(K, np.eye(3), [-x, 0, 0], 0.2, n_air=1.5,
                                  n_water=1.0) for x in (0.0, 0.02, -0.03)]
    imgs = scenes.make_scene("flat", views=3, height=24, width=32).images
    for depth in (0.3, 1.0):
        out = mvs.warp(cuda(imgs[1]), cams[0], cams[1], depth)
        expected = mvs.warp(imgs[1], cams[0], cams[1], depth)
        assert np.isnan(expected).any() and close(out, expected)
    depths = np.array([0.3, 0.6, 1.0, 1.6])
    out = mvs.build_cost_volume(cuda(imgs[0]), cuda(np.stack(imgs[1:])),
                                cams[0], cams[1:], depths, "ncc", 5)
    expected = mvs.build_cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                     depths, "ncc", 5)
    assert np.isfinite(expected).all() and close(out, expected)


@pytest.mark.gpu
@needs_cuda
def test_cuda_images_taller_than_one_grid_are_covered(monkeypatch):
    """A grid holds 65535 blocks down: 524,280 rows of 8. Taller images
    (within the 2^31 - 1 pixels) take more launches, and every row is
    computed."""
    h, w = 530_000, 4
    K = np.array([[1e5, 0, 1.5], [0, 1e5, 527_000.0], [0, 0, 1]])
    ref_cam = mvs.Camera.pinhole(K, np.eye(3), np.zeros(3))
    src_cam = mvs.Camera.pinhole(K, np.eye(3), [0, -0.001, 0])
    rng = np.random.default_rng(9)
    ref_img = rng.random((h, w)).astype(np.float32)
    src_img = np.roll(ref_img, 100, axis=0)
    depths = np.array([0.9, 1.0, 1.1])
    warped = mvs.warp(cuda(src_img), ref_cam, src_cam, 1.0)
    expected = mvs.warp(src_img, ref_cam, src_cam, 1.0)
    assert np.isfinite(expected[524_280:]).mean() > 0.5   # seen past it
    assert close(warped, expected)
    expected = mvs.build_cost_volume(ref_img, src_img[None], ref_cam,
                                     [src_cam], depths, "sad", 3)
    monkeypatch.delenv(_cuda.WARP_ENV, raising=False)   # the strip kernel
    assert close(mvs.build_cost_volume(cuda(ref_img), cuda(src_img[None]),
                                       ref_cam, [src_cam], depths, "sad",
                                       3), expected)
    # the warp of whole planes first takes its own slices of rows
    monkeypatch.setenv(_cuda.WARP_ENV, "planes")
    assert close(mvs.build_cost_volume(cuda(ref_img), cuda(src_img[None]),
                                       ref_cam, [src_cam], depths, "sad",
                                       3), expected)
    monkeypatch.setenv(_cuda.WARP_ENV, "tile")
    volume = mvs.build_cost_volume(cuda(ref_img), cuda(src_img[None]),
                                   ref_cam, [src_cam], depths, "sad", 3)
    assert close(volume, expected)
    # the extraction covers every row too: the values of the host's
    # extraction of the same volume (the CPU volume's depths may differ,
    # as costs within 1e-4 may swap two planes)
    depth, conf = mvs.extract_depth(volume, depths)
    host_depth, host_conf = mvs.extract_depth(volume.cpu().numpy(), depths)
    assert np.array_equal(depth.cpu().numpy(), host_depth, equal_nan=True)
    assert np.array_equal(conf.cpu().numpy(), host_conf, equal_nan=True)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("cost,window", [("ncc", 11), ("sad", 5),
                                         ("ncc", 17)])
@pytest.mark.parametrize("views", [3, 11])
def test_cuda_reduce_depth_is_the_gpu_volumes_extraction(cost, window,
                                                         views):
    """The strip kernel's chunks folded on the device: the same bits as
    extracting the GPU's whole volume (the chunks' costs are its costs:
    the strip kernel's samples do not depend on the planes beside them),
    more views than one launch holds included; against the CPU, NaN at
    the same pixels and depths within half a step but where costs within
    1e-4 of the CPU's swapped two close planes (on a smooth cost curve the
    planes beside the least are often within 1e-5 of it, so a swap moves
    the refined depth: at most 0.1 % of pixels)."""
    sc = scenes.make_scene("wavy", views=views, height=72, width=150)
    depths = np.linspace(*sc.depth_range(0.03), 37)
    args = (sc.ref_cam, sc.cameras[1:], depths, cost, window)
    stack = cuda(np.stack(sc.images[1:]))
    volume = mvs.build_cost_volume(cuda(sc.ref), stack, *args)
    want_depth, want_conf = mvs.extract_depth(volume, depths)
    for batch in (None, 5, 37):
        depth, conf = mvs.build_cost_volume(cuda(sc.ref), stack, *args,
                                            depth_batch=batch,
                                            reduce="depth")
        assert depth.is_cuda and conf.is_cuda
        assert torch.equal(torch.nan_to_num(depth, 7.0),
                           torch.nan_to_num(want_depth, 7.0))
        assert torch.equal(conf, want_conf)
    cpu_depth, _ = mvs.build_cost_volume(sc.ref, sc.images[1:], *args,
                                         reduce="depth")
    got = depth.cpu().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(cpu_depth))
    assert np.isfinite(cpu_depth).mean() > 0.9
    seen = np.isfinite(cpu_depth)
    apart = np.abs(got[seen] - cpu_depth[seen]) / (depths[1] - depths[0])
    assert (apart > 0.5).mean() <= 1e-3
