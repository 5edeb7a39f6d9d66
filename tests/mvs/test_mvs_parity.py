"""parity="aquamvs": build_cost_volume reproduces AquaMVS's costs, held
to the float64 reference in aquamvs_reference.py within 1e-5, each of its
rules checked on a scene made to show it; the textbook costs stay as they
were, bit for bit. Tests marked gpu hold the CUDA kernels to the CPU."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

import aquaprof.mvs as mvs
from aquaprof import _mvs
from aquaprof.mvs import Camera, scenes

import aquamvs_reference as reference
from fake_gpu import scenario

try:
    import torch
    CUDA = torch.cuda.is_available()
except ImportError:
    torch, CUDA = None, False

TOL = 1e-5
from repo_paths import ROOT  # noqa: E402

BENCHMARKS = ROOT / "benchmarks" / "mvs"
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device for torch")


def parity_volume(ref, srcs, ref_cam, src_cams, depths, cost, window,
                  **kwargs):
    return mvs.build_cost_volume(ref, srcs, ref_cam, src_cams, depths,
                                 cost=cost, window=window, parity="aquamvs",
                                 **kwargs)


def scene_depths(sc):
    """A few depths, from well in front of the surface to well behind:
    at the ends, many samples fall off the source images."""
    lo, hi = sc.depth_range(0.05)
    return np.array([0.5 * lo, lo, (lo + hi) / 2, hi, 1.5 * hi])


def leaves_the_image(sc, depth):
    """Whether some source sample at this depth falls off its image."""
    h, w = sc.ref.shape
    v, u = np.mgrid[0:h, 0:w]
    pixels = np.stack([u.ravel(), v.ravel()], axis=1).astype(np.float64)
    o, d, _ = sc.ref_cam.cast_rays(pixels)
    for cam in sc.cameras[1:]:
        uv, valid = cam.project(o + depth * d)
        uv = uv[valid]
        if ((uv[:, 0] < 0) | (uv[:, 0] > w - 1) | (uv[:, 1] < 0)
                | (uv[:, 1] > h - 1)).any():
            return True
    return False


# ------------------------------------------------- against the reference

@pytest.mark.parametrize("cost", ["ncc", "ssim"])
@pytest.mark.parametrize("window", [5, 11])
@pytest.mark.parametrize("kind,model", [("flat", "refractive"),
                                        ("wavy", "refractive"),
                                        ("flat", "pinhole"),
                                        ("wavy", "pinhole")])
def test_parity_matches_the_float64_reference(kind, model, cost, window):
    sc = scenes.make_scene(kind, model, views=5, height=120, width=160)
    depths = scene_depths(sc)
    assert leaves_the_image(sc, depths[0])
    got = parity_volume(sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:],
                        depths, cost, window)
    expected = reference.cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                     sc.cameras[1:], depths, cost, window)
    assert np.abs(got - expected).max() <= TOL


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("kind", ["flat", "wavy"])
def test_parity_matches_aquamvs_in_torch_float64(kind, monkeypatch):
    """Against benchmarks/mvs/aquamvs_torch.py in float64: AquaMVS's own
    geometry as well (its rays, its Newton projection), not ours."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import aquamvs_torch as aquamvs
    sc = scenes.make_scene(kind, "refractive", views=5, height=60,
                           width=80)
    depths = scene_depths(sc)[[0, 2, 4]]

    def model(cam):
        return aquamvs.RefractiveModel.from_camera(cam, torch.float64)

    def image(a):
        return torch.from_numpy(a.astype(np.float64))
    for cost in ("ncc", "ssim"):
        for window in (5, 11):
            expected = aquamvs.build_cost_volume(
                model(sc.ref_cam), [model(c) for c in sc.cameras[1:]],
                image(sc.ref), [image(i) for i in sc.images[1:]],
                torch.from_numpy(depths), cost, window).numpy()
            got = parity_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                sc.cameras[1:], depths, cost, window)
            assert np.abs(got - expected).max() <= TOL


def test_parity_matches_the_reference_on_a_full_size_view():
    sc = scenes.make_scene("wavy", "refractive", views=5)
    assert sc.ref.shape == (240, 320)
    depths = scene_depths(sc)[[0, 2, 4]]
    for cost in ("ncc", "ssim"):
        got = parity_volume(sc.ref, sc.images[1:], sc.ref_cam,
                            sc.cameras[1:], depths, cost, 11)
        expected = reference.cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                         sc.cameras[1:], depths, cost, 11)
        assert np.abs(got - expected).max() <= TOL


def test_parity_holds_beside_black_regions_inside_the_images(monkeypatch):
    """Black stripes across the sources, as a housing's vignetting or a
    masked region leaves: a window of the near-zero samples beside them
    has so little variance that NCC's 1e-8 guard leaves its cost
    sensitive to 1e-6 px, as at the image's border. One Newton step from
    the guess is 3.9e-4 off the reference here; parity's second holds it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from parity_positions import striped
    sc = scenes.make_scene("flat", "refractive", views=5)
    srcs = striped(list(sc.images[1:]))
    depths = scene_depths(sc)
    got = parity_volume(sc.ref, srcs, sc.ref_cam, sc.cameras[1:], depths,
                        "ncc", 5)
    expected = reference.cost_volume(sc.ref, srcs, sc.ref_cam,
                                     sc.cameras[1:], depths, "ncc", 5)
    assert np.abs(got - expected).max() <= TOL


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_parity_does_not_depend_on_threads_or_batches(cost):
    # 300 rows: three bands of rows, one of them short
    sc = scenes.make_scene("wavy", "refractive", views=3, height=300,
                           width=40)
    depths = scene_depths(sc)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths, cost,
            7)
    one = parity_volume(*args, threads=1)
    for kwargs in ({"threads": 2}, {"threads": 5, "depth_batch": 2}):
        assert np.array_equal(parity_volume(*args, **kwargs), one)


def test_parity_staged_groups_of_planes_write_what_single_planes_do():
    """31 planes: on one or two threads a group of 16 staged planes and
    one of 15; one plane a call writes each plane straight into the
    volume; eight a call stage groups that start past the first plane,
    the last of 7; three threads split the planes otherwise. The volume
    must not change."""
    sc = scenes.make_scene("flat", "refractive", views=3, height=72,
                           width=56)
    lo, hi = sc.depth_range(0.05)
    depths = np.linspace(0.8 * lo, 1.2 * hi, 31)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths,
            "ncc", 5)
    grouped = parity_volume(*args, threads=2)
    assert np.isfinite(grouped).any() and np.ptp(grouped[np.isfinite(
        grouped)]) > 0.1
    for kwargs in ({"threads": 1}, {"threads": 1, "depth_batch": 1},
                   {"threads": 1, "depth_batch": 8}, {"threads": 3}):
        assert np.array_equal(parity_volume(*args, **kwargs), grouped,
                              equal_nan=True)


def test_parity_differs_from_the_textbook_costs():
    sc = scenes.make_scene("flat", "pinhole", views=3, height=48, width=64)
    depths = scene_depths(sc)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths)
    for cost in ("ncc", "ssim"):
        textbook = mvs.build_cost_volume(*args, cost=cost, window=5)
        assert np.abs(parity_volume(*args, cost, 5) - textbook).max() > 0.01


# ------------------------------------------------------- each rule alone

K = np.array([[60.0, 0, 31.5], [0, 60.0, 23.5], [0, 0, 1]])
SHAPE = (48, 64)


def texture(seed=0, scale=1.0):
    """A smooth random float32 image of SHAPE."""
    rng = np.random.default_rng(seed)
    v, u = np.mgrid[0:SHAPE[0], 0:SHAPE[1]]
    img = np.zeros(SHAPE)
    for _ in range(12):
        k = rng.uniform(0.1, 0.8, 2)
        img += np.sin(k[0] * u + k[1] * v + rng.uniform(0, 6))
    return (scale * (0.5 + img / 24)).astype(np.float32)


def shifted(dx):
    """A pinhole camera whose image is the reference's shifted left by dx
    pixels: its sample of reference pixel x is at x + dx."""
    k = K.copy()
    k[0, 2] += dx
    return Camera.pinhole(k, np.eye(3), np.zeros(3))


REF_CAM = Camera.pinhole(K, np.eye(3), np.zeros(3))


def one_view(ref, src, src_cam, cost, window, ref_cam=REF_CAM, depth=1.0):
    """The parity cost map of one view at one depth, and the reference's."""
    got = parity_volume(ref, [src], ref_cam, [src_cam], [depth], cost,
                        window)[..., 0]
    warped = reference.warp(src, ref_cam, src_cam, depth)
    return got, warped, reference.window_cost(ref, warped, cost, window)


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_each_pixel_is_centred_by_its_own_windows_means(cost):
    ref, src = texture(0), texture(1)
    got, warped, expected = one_view(ref, src, shifted(0.3), cost, 7)
    textbook_centred = reference.window_cost(ref, warped, cost, 7,
                                             centre="window")
    assert np.abs(got - expected).max() <= TOL
    assert np.abs(got - textbook_centred).max() > 0.01


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_samples_partly_off_the_image_mix_with_zeros(cost):
    ref, src = texture(0), texture(1)
    # the last 3 columns sample past the right border, one half on it
    got, warped, expected = one_view(ref, src, shifted(2.5), cost, 5)
    w = SHAPE[1]
    assert warped[0, w - 3] == pytest.approx(0.5 * src[0, w - 1], abs=1e-9)
    assert (warped[:, w - 2:] == 0).all()
    assert np.abs(got - expected).max() <= TOL


def test_samples_far_off_the_image_are_seen_zeros():
    # a dark reference against zeros: SSIM sees them alike, where unseen
    # samples would cost 1
    ref = texture(0, scale=0.01)
    got, warped, expected = one_view(ref, texture(1), shifted(1000.0),
                                     "ssim", 5)
    assert (warped == 0).all()
    assert np.abs(got - expected).max() <= TOL
    assert got[2:-2, 2:-2].max() < 0.5
    ncc, _, expected_ncc = one_view(ref, texture(1), shifted(1000.0), "ncc",
                                    5)
    assert np.abs(ncc - expected_ncc).max() <= TOL


def tilted_water():
    """A reference camera over flat water and a source camera whose water
    is tilted about the y axis: points right of a line lie above the
    source's water, so they do not project (unseen)."""
    ref_cam = Camera.refractive(K, np.eye(3), np.zeros(3), 0.2)
    a = np.radians(40)
    src_cam = Camera.refractive(K, np.eye(3), np.zeros(3), 0.2,
                                normal=[np.sin(a), 0.0, -np.cos(a)])
    return ref_cam, src_cam


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_points_that_do_not_project_are_unseen(cost):
    ref_cam, src_cam = tilted_water()
    ref, src = texture(0), texture(1)
    got, warped, expected = one_view(ref, src, src_cam, cost, 5,
                                     ref_cam=ref_cam, depth=0.02)
    unseen = np.isnan(warped)
    assert unseen[:, -5:].all() and not unseen[:, :5].any()
    assert np.abs(got - expected).max() <= TOL
    assert (got[:, -3:] == 1.0).all()     # windows that see nothing


def diagonal_water(turn):
    """A source camera whose water tilts 40 degrees about a diagonal
    (its normal turned `turn` degrees about z): at depth 0.02 its samples
    are unseen past a slanting line, so some rows are partly unseen and
    the others all seen."""
    a, b = np.radians(40), np.radians(turn)
    return Camera.refractive(K, np.eye(3), np.zeros(3), 0.2,
                             normal=[np.sin(a) * np.cos(b),
                                     np.sin(a) * np.sin(b), -np.cos(a)])


@pytest.mark.parametrize("window", [5, 11])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_rows_partly_unseen_beside_rows_all_seen(cost, window):
    # Rows whose windows see every sample take the reference's count,
    # means and variance made once; rows whose windows, or whose
    # neighbours' windows, reach a row partly unseen, above or below,
    # must not: their counts and means are their own.
    ref_cam = tilted_water()[0]
    level = Camera.refractive(K, np.eye(3), np.array([0.002, 0, 0]), 0.2)
    cams = [diagonal_water(60), level, diagonal_water(-60)]
    ref, srcs = texture(0), [texture(1), texture(2), texture(3)]
    depths = [0.02, 0.021]
    unseen = [np.isnan(reference.warp(s, ref_cam, c, depths[0])).any(axis=1)
              for s, c in zip(srcs, cams)]
    assert not unseen[0][:13].any() and unseen[0][13:].all()
    assert not unseen[1].any()
    assert unseen[2][:35].all() and not unseen[2][35:].any()
    got = parity_volume(ref, srcs, ref_cam, cams, depths, cost, window)
    expected = reference.cost_volume(ref, srcs, ref_cam, cams, depths, cost,
                                     window)
    assert np.abs(got - expected).max() <= TOL
    for i in (0, 2):    # each alone: no other view's costs to hide its own
        alone = parity_volume(ref, [srcs[i]], ref_cam, [cams[i]], depths,
                              cost, window)
        one = reference.cost_volume(ref, [srcs[i]], ref_cam, [cams[i]],
                                    depths, cost, window)
        assert np.abs(alone - one).max() <= TOL


@pytest.mark.parametrize("window", [5, 11])
def test_a_window_seeing_half_its_pixels_rounded_down_is_computed(window):
    ref_cam, src_cam = tilted_water()
    ref, src = texture(0), texture(1)
    got, warped, expected = one_view(ref, src, src_cam, "ncc", window,
                                     ref_cam=ref_cam, depth=0.02)
    seen = reference.conv((~np.isnan(warped)).astype(float),
                          np.ones((window, window)))
    least = window * window // 2
    at_least = seen == least           # 12 of 25, 60 of 121: computed
    assert at_least.any()
    assert (expected[at_least] != 1.0).any()
    assert np.abs(got - expected).max() <= TOL
    assert (got[seen < least] == 1.0).all()


def test_ncc_divides_by_the_deviations_plus_1e_8():
    # the source is the reference times 1e-7: perfectly correlated, but
    # its deviation is so small that the 1e-8 guard dominates
    ref = texture(0)
    src = (ref.astype(np.float64) * 1e-7).astype(np.float32)
    got, warped, expected = one_view(ref, src, REF_CAM, "ncc", 11)
    assert np.abs(got - expected).max() <= TOL
    assert got[20:28, 20:40].min() > 0.3    # without the guard: 0


def test_a_pixel_without_a_ray_is_unseen():
    # water slower than air: past the critical angle a pixel has no ray
    k = np.array([[20.0, 0, 31.5], [0, 20.0, 23.5], [0, 0, 1]])
    ref_cam = Camera.refractive(k, np.eye(3), np.zeros(3), 0.2,
                                n_air=1.5, n_water=1.0)
    src_cam = Camera.refractive(k, np.eye(3), np.array([-0.01, 0, 0]), 0.2,
                                n_air=1.5, n_water=1.0)
    ref, src = texture(0), texture(1)
    got, warped, expected = one_view(ref, src, src_cam, "ssim", 5,
                                     ref_cam=ref_cam, depth=0.1)
    assert np.isnan(warped[0, 0]) and not np.isnan(warped[24, 32])
    assert np.abs(got - expected).max() <= TOL
    assert got[0, 0] == 1.0


@pytest.mark.parametrize("window", [3, 63])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_windows_wider_than_a_tiny_image(cost, window):
    k = np.array([[2.0, 0, 0.5], [0, 2.0, 0.5], [0, 0, 1]])
    ref_cam = Camera.pinhole(k, np.eye(3), np.zeros(3))
    src_cam = Camera.pinhole(k, np.eye(3), np.array([-0.1, 0, 0]))
    ref = np.array([[0.1, 0.5], [0.9, 0.3]], np.float32)
    src = np.array([[0.2, 0.7], [0.4, 0.6]], np.float32)
    got = parity_volume(ref, [src], ref_cam, [src_cam], [1.0, 2.0], cost,
                        window)
    expected = reference.cost_volume(ref, [src], ref_cam, [src_cam],
                                     [1.0, 2.0], cost, window)
    assert np.abs(got - expected).max() <= TOL


# ------------------------------------------------------------ bad input

def test_parity_must_be_a_known_name():
    sc = scenes.make_scene("flat", views=2, height=16, width=16)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], [1.0])
    for bad in ("AquaMVS", "", None, 1):
        with pytest.raises(ValueError, match="parity must be one of"):
            mvs.build_cost_volume(*args, parity=bad)


def test_aquamvs_parity_has_no_sad():
    sc = scenes.make_scene("flat", views=2, height=16, width=16)
    with pytest.raises(ValueError, match="no 'sad' cost"):
        mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                              sc.cameras[1:], [1.0], cost="sad",
                              parity="aquamvs")


def test_the_binding_rejects_a_bad_parity():
    img = np.zeros((8, 8), np.float32)
    cam = REF_CAM.params
    out = np.zeros((8, 8, 1), np.float32)
    args = (img, img[None], cam, cam[None], np.ones(1), 0, 1)
    with pytest.raises(ValueError, match="parity must be 0 .textbook. or 1"):
        _mvs.cost_volume(*args, 0, 5, 1, out, 2)
    with pytest.raises(ValueError, match="no SAD"):
        _mvs.cost_volume(*args, 2, 5, 1, out, 1)


# ------------------------------------------------- textbook unchanged

#: sha256 (first 16 hex digits) of textbook volumes, as computed before
#: parity existed: (kind, model, cost, window) -> digest. NCC (wavy,
#: pinhole, 11) was pinned again when NCC's count, r and r^2 window sums
#: came to be the reference's less the unseen samples': one of its 18432
#: costs moved by 4.7e-10, one float step.
TEXTBOOK = {
    ("flat", "refractive", "ncc", 5): "3ecb832ccd6a8f0d",
    ("flat", "refractive", "ncc", 11): "35429f3d1c50ce8b",
    ("flat", "refractive", "ssim", 5): "8a5a155284fe65b4",
    ("flat", "refractive", "ssim", 11): "8916e6e2de80e273",
    ("flat", "refractive", "sad", 5): "879d979a2fe3afea",
    ("flat", "refractive", "sad", 11): "831665fe22c81cf2",
    ("wavy", "pinhole", "ncc", 5): "f5fa6a56e0eeed77",
    ("wavy", "pinhole", "ncc", 11): "bc380191559419c4",
    ("wavy", "pinhole", "ssim", 5): "a0a8be250d332c6a",
    ("wavy", "pinhole", "ssim", 11): "2c11df619a697efb",
    ("wavy", "pinhole", "sad", 5): "b388779ad737c7ae",
    ("wavy", "pinhole", "sad", 11): "b01bedfce1c914a5",
}


@pytest.mark.parametrize("key", sorted(TEXTBOOK))
def test_textbook_costs_are_unchanged_bit_for_bit(key):
    kind, model, cost, window = key
    sc = scenes.make_scene(kind, model, views=3, height=48, width=64)
    depths = np.linspace(*sc.depth_range(0.1), 6)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths)
    default = mvs.build_cost_volume(*args, cost=cost, window=window,
                                    threads=2)
    named = mvs.build_cost_volume(*args, cost=cost, window=window,
                                  threads=2, parity="textbook")
    assert hashlib.sha256(default.tobytes()).hexdigest()[:16] == \
        TEXTBOOK[key]
    assert np.array_equal(default, named)


# ---------------------------------------------- through the fake driver

def test_gpu_parity_launches_its_strip_kernel_or_three_passes_a_plane(
        fakes):
    """Through the fake driver (which runs no kernel): AquaMVS parity
    launches the rays and, for windows up to 15, its strip kernel once
    for every plane (NCC's or SSIM's), which needs no scratch; wider
    windows, or $AQUAPROF_MVS_GPU_PARITY=passes, take three passes a
    plane, which need it (gpu_parity_scratch says so), checked like
    every device pointer before any launch. sad with parity is refused
    before the driver is asked anything."""
    lib = str(fakes / "libcuda.so")
    found = scenario(f"""
        import os
        from aquaprof import _mvs
        from aquaprof.mvs import Camera
        fake = ctypes.CDLL({lib!r})
        fake.fake_cuda_alloc.restype = ctypes.c_ulonglong
        fake.fake_cuda_alloc.argtypes = [ctypes.c_ulonglong, ctypes.c_uint]
        try:
            _mvs.gpu_check(-1)
        except RuntimeError as e:
            print(json.dumps(str(e)))
            raise SystemExit
        H, W, N, D = 12, 16, 2, 3
        K = np.array([[20.0, 0, 8], [0, 20, 6], [0, 0, 1]])
        cam = Camera.pinhole(K, np.eye(3), np.zeros(3)).params
        cams = np.stack([cam] * N)
        def alloc(size):
            return fake.fake_cuda_alloc(size, 2)
        p = [alloc(H * W * 4), alloc(N * H * W * 4), alloc(D * 8),
             alloc(6 * H * W * 8), alloc(H * W * D * 4)]

        fake.fake_cuda_launched.restype = ctypes.c_char_p
        fake.fake_cuda_launched.argtypes = [ctypes.c_int]

        def run(cost, parity, scratch, window=5, passes=False):
            if passes:
                os.environ["AQUAPROF_MVS_GPU_PARITY"] = "passes"
            before = fake.fake_cuda_launches()
            try:
                _mvs.gpu_cost_volume(0, 0, p[0], p[1], N, H, W, cam, cams,
                                     p[2], D, 0, D, cost, window, p[3],
                                     p[4], parity, scratch)
                error = None
            except ValueError as e:
                error = str(e)
            os.environ.pop("AQUAPROF_MVS_GPU_PARITY", None)
            after = fake.fake_cuda_launches()
            names = sorted({{fake.fake_cuda_launched(k).decode()
                            for k in range(before + 1, after)}})
            return [error, after - before, names]

        print(json.dumps({{
            "ncc": run(0, 1, alloc(N * 3 * H * W * 8)),
            "ssim": run(1, 1, alloc(N * 3 * H * W * 8), window=15),
            "wide": run(0, 1, alloc(N * 3 * H * W * 8), window=17),
            "passes": run(1, 1, alloc(N * 3 * H * W * 8), passes=True),
            "no scratch": run(0, 1, 0),
            "no scratch, wide": run(0, 1, 0, window=17),
            "no scratch, passes": run(0, 1, 0, passes=True),
            "needs scratch": [_mvs.gpu_parity_scratch(0, 0, 5),
                              _mvs.gpu_parity_scratch(0, 1, 15),
                              _mvs.gpu_parity_scratch(0, 0, 17)],
            "sad": run(2, 1, alloc(N * 3 * H * W * 8)),
            "textbook": run(0, 0, 0),
        }}))
    """, {"AQUAPROF_LIBCUDA": lib})
    if isinstance(found, str):
        pytest.skip(found)
    three = ["ap_parity_centre_kernel", "ap_parity_cost_kernel",
             "ap_parity_warp_kernel"]
    assert found["ncc"] == [None, 1 + 1, ["ap_parity_strip_ncc_kernel"]]
    assert found["ssim"] == [None, 1 + 1, ["ap_parity_strip_ssim_kernel"]]
    assert found["wide"] == [None, 1 + 3 * 3, three]
    assert found["passes"] == [None, 1 + 3 * 3, three]
    # the strip kernel needs no scratch; the passes refuse to start
    # without it, before any launch
    assert found["no scratch"] == [None, 1 + 1, ["ap_parity_strip_ncc_kernel"]]
    missing = ("scratch is a null device pointer: AquaMVS parity at window "
               "{} takes the three passes here, which need it")
    assert found["no scratch, wide"] == [missing.format(17), 0, []]
    assert found["no scratch, passes"] == [missing.format(5), 0, []]
    assert found["needs scratch"] == [False, False, True]
    assert found["sad"][0].startswith("AquaMVS parity has no SAD cost")
    assert found["sad"][1:] == [0, []]
    assert found["textbook"][:2] == [None, 2]


@pytest.mark.parametrize("cost,window,message", [
    (2, 11, "AquaMVS parity has no SAD cost"),
    (3, 11, r"cost must be 0 \(ncc\), 1 \(ssim\) or 2 \(sad\), got 3"),
    (0, 10, "window must be odd, from 3 to 63, got 10"),
    (1, 65, "window must be odd, from 3 to 63, got 65")])
def test_gpu_parity_scratch_refuses_what_no_sweep_takes(cost, window,
                                                        message):
    """Checked before any driver is opened: no GPU needed."""
    with pytest.raises(ValueError, match=message):
        _mvs.gpu_parity_scratch(0, cost, window)


# ------------------------------------------------------------ on a GPU

def cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("cost,window", [("ncc", 11), ("ssim", 11),
                                         ("ncc", 5), ("ssim", 63)])
@pytest.mark.parametrize("kind,model", [("flat", "refractive"),
                                        ("wavy", "pinhole")])
@pytest.mark.parametrize("kernels", ["strip", "strip-tiles", "passes"])
def test_cuda_parity_equals_the_cpu_and_the_reference(kind, model, cost,
                                                      window, kernels,
                                                      monkeypatch):
    """Both GPU paths: the strip kernel (windows up to 15; window 63
    takes the passes either way), its blocks in either order
    (AQUAPROF_MVS_GPU_ORDER), and the three passes."""
    if kernels == "passes":
        monkeypatch.setenv("AQUAPROF_MVS_GPU_PARITY", "passes")
    if kernels == "strip-tiles":
        monkeypatch.setenv("AQUAPROF_MVS_GPU_ORDER", "tiles")
    sc = scenes.make_scene(kind, model, views=5, height=120, width=160)
    depths = scene_depths(sc)
    args = (sc.ref_cam, sc.cameras[1:], depths, cost, window)
    cpu = parity_volume(sc.ref, sc.images[1:], *args)
    gpu = parity_volume(cuda(sc.ref), cuda(np.stack(sc.images[1:])), *args,
                        depth_batch=2)
    assert gpu.is_cuda and gpu.dtype == torch.float32
    got = gpu.cpu().numpy()
    assert np.abs(got - cpu).max() <= TOL
    expected = reference.cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                     sc.cameras[1:], depths, cost, window)
    assert np.abs(got - expected).max() <= TOL


@pytest.mark.gpu
@needs_cuda
def test_cuda_parity_takes_more_views_than_one_launch_holds():
    sc = scenes.make_scene("flat", views=11, height=24, width=32)
    assert len(sc.cameras) - 1 > _mvs.GPU_VIEWS
    args = (sc.ref_cam, sc.cameras[1:], scene_depths(sc), "ssim", 5)
    cpu = parity_volume(sc.ref, sc.images[1:], *args)
    gpu = parity_volume(cuda(sc.ref), cuda(np.stack(sc.images[1:])), *args)
    assert np.abs(gpu.cpu().numpy() - cpu).max() <= TOL


@pytest.mark.gpu
@needs_cuda
def test_cuda_rejects_sad_with_aquamvs_parity():
    sc = scenes.make_scene("flat", views=2, height=16, width=16)
    with pytest.raises(ValueError, match="no 'sad' cost"):
        mvs.build_cost_volume(cuda(sc.ref), [cuda(sc.images[1])],
                              sc.ref_cam, sc.cameras[1:], [1.0], cost="sad",
                              parity="aquamvs")


# ------------------------------------------------- the positions' precision

def test_the_position_script_rounds_positions_to_float32_and_restores(
        capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import parity_positions
    project = Camera.project
    assert parity_positions.main(["--height", "48", "--width", "64",
                                  "--views", "3"]) == 0
    assert Camera.project is project
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            [2:]]
    assert [row[0] for row in rows] == ["plain", "striped"]
    largest = {}
    for name, top, pct, share in rows:
        largest[name] = float(top)
        assert float(top) >= float(pct) >= 0
        assert 0 <= float(share.rstrip("%")) <= 100
    # float32 positions move costs, most beside the black stripes
    assert 0 < largest["plain"] < largest["striped"]


@pytest.mark.parametrize("bad", [["--window", "4"], ["--views", "1"],
                                 ["--cost", "sad"]])
def test_the_position_script_refuses_bad_arguments(bad, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import parity_positions
    with pytest.raises(SystemExit):
        parity_positions.main(bad)
