"""The plane-sweep kit against a plain float64 reference (mvs_reference.py),
torch's grid_sample, the geometry of refraction, and bad inputs."""
import numpy as np
import pytest

import aquaprof.mvs as mvs
import mvs_reference as ref
from aquaprof import _mvs
from aquaprof.mvs import scenes


def rel_error(out, expected):
    """||out - ref|| / ||ref|| over finite entries; NaN masks must agree."""
    out, expected = np.asarray(out, np.float64), np.asarray(expected)
    assert (np.isnan(out) == np.isnan(expected)).all()
    seen = ~np.isnan(expected)
    return np.linalg.norm(out[seen] - expected[seen]) / np.linalg.norm(
        expected[seen])


def random_camera(rng, refractive, width=16, height=12):
    """A camera above the water looking down, slightly tilted."""
    f = rng.uniform(14, 20)
    K = np.array([[f, 0, (width - 1) / 2 + rng.uniform(-1, 1)],
                  [0, f * rng.uniform(0.95, 1.05), (height - 1) / 2],
                  [0, 0, 1.0]])
    angles = rng.uniform(-0.08, 0.08, 3)
    cx, sx = np.cos(angles[0]), np.sin(angles[0])
    cy, sy = np.cos(angles[1]), np.sin(angles[1])
    cz, sz = np.cos(angles[2]), np.sin(angles[2])
    R = (np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
         @ np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
         @ np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]]))
    center = np.array([rng.uniform(-0.1, 0.1), rng.uniform(-0.05, 0.05),
                       rng.uniform(-0.02, 0.02)])
    t = -R @ center
    if refractive:
        return mvs.Camera.refractive(K, R, t, water_z=rng.uniform(0.15, 0.3),
                                     n_water=rng.uniform(1.30, 1.36))
    return mvs.Camera.pinhole(K, R, t)


def random_views(rng, refractive, n=2, height=12, width=16):
    cams = [random_camera(rng, refractive, width, height)
            for _ in range(n + 1)]
    # smooth random images: neighbours correlate, as in real ones
    imgs = []
    for _ in range(n + 1):
        base = rng.random((height + 4, width + 4))
        smooth = (base[:-4, :-4] + base[2:-2, 2:-2] + base[4:, 4:]
                  + base[4:, :-4] + base[:-4, 4:]) / 5
        imgs.append(smooth.astype(np.float32))
    return cams, imgs


@pytest.mark.parametrize("refractive", [False, True])
def test_rays_and_projection_match_the_reference(refractive):
    rng = np.random.default_rng(1)
    for _ in range(5):
        cam = random_camera(rng, refractive)
        pixels = rng.uniform(0, 15, size=(40, 2))
        origins, dirs, valid = cam.cast_rays(pixels)
        assert valid.all()
        for p, o, d in zip(pixels, origins, dirs):
            ro, rd = ref.cast(cam, *p)
            assert np.allclose(o, ro, atol=1e-12)
            assert np.allclose(d, rd, atol=1e-12)
        points = origins + rng.uniform(0.5, 1.5, (40, 1)) * dirs
        back, ok = cam.project(points)
        assert ok.all()
        expected = np.array([ref.project(cam, x) for x in points])
        # 1e-6 px is under 1e-7 m at these focal lengths and depths
        assert np.abs(back - expected).max() < 1e-6
        assert np.abs(back - pixels).max() < 1e-6   # round trip


def test_refraction_obeys_snell_and_traces_back_to_the_point():
    rng = np.random.default_rng(2)
    cam = random_camera(rng, True)
    pixels = rng.uniform(0, 15, size=(20, 2))
    origins, dirs, _ = cam.cast_rays(pixels)
    n = cam.normal / np.linalg.norm(cam.normal)
    for (u, v), o, d in zip(pixels, origins, dirs):
        incoming = o - cam.center
        incoming /= np.linalg.norm(incoming)
        sin_in = np.linalg.norm(np.cross(incoming, n))
        sin_out = np.linalg.norm(np.cross(d, n))
        assert cam.n_air * sin_in == pytest.approx(cam.n_water * sin_out,
                                                   abs=1e-12)
        assert np.dot(n, np.array([0, 0, cam.water_z]) - o) == \
            pytest.approx(0, abs=1e-12)
    # a point under water projects to a pixel whose ray passes through it
    point = np.array([[0.03, -0.02, 1.1]])
    (pixel,), (ok,) = cam.project(point)
    assert ok
    (o,), (d,), _ = cam.cast_rays(pixel[None])
    s = np.dot(point[0] - o, d)
    assert np.linalg.norm(o + s * d - point[0]) < 1e-6   # metres


def test_invalid_points_and_rays():
    K = np.array([[20, 0, 8], [0, 20, 6], [0, 0, 1.0]])
    cam = mvs.Camera.refractive(K, np.eye(3), np.zeros(3), water_z=0.2)
    px, ok = cam.project([[0, 0, 0.1], [0, 0, -1.0], [0, 0, 1.0]])
    assert list(ok) == [False, False, True]       # above water, behind
    assert np.isnan(px[:2]).all()
    # a camera tilted so that a pixel looks at the sky
    up = np.array([[1, 0, 0], [0, -1, 0], [0, 0, -1.0]])
    sky = mvs.Camera.refractive(K, up, np.zeros(3), water_z=0.2)
    _, d, valid = sky.cast_rays([[8, 6]])
    assert not valid[0] and np.isnan(d).all()


@pytest.mark.parametrize("refractive", [False, True])
def test_warp_matches_the_reference(refractive):
    rng = np.random.default_rng(3)
    cams, imgs = random_views(rng, refractive, n=1)
    for depth in (0.8, 1.2):
        out = mvs.warp(imgs[1], cams[0], cams[1], depth)
        assert out.dtype == np.float32
        assert rel_error(out, ref.warp(imgs[1], cams[0], cams[1],
                                       depth)) < 1e-6


def test_warp_just_under_the_surface_matches_the_reference():
    """Points a hair under the water are where the sweep's table of Snell
    solutions is coarsest: the Newton steps after it must still land."""
    rng = np.random.default_rng(13)
    cams, imgs = random_views(rng, True, n=1)
    for depth in (1e-4, 1e-2):   # ray depth: metres past the surface
        out = mvs.warp(imgs[1], cams[0], cams[1], depth)
        expected = ref.warp(imgs[1], cams[0], cams[1], depth)
        assert np.isfinite(out).mean() > 0.1     # some of it is seen
        assert rel_error(out, expected) < 1e-6


def test_samples_a_rounding_outside_the_border_take_its_value():
    """A source camera whose principal point is moved by `shift` px sees
    every reference pixel `shift` px over: its warp is the image itself,
    moved. Moved by rounding's size, the border pixels land just outside
    the image (on the CPU here, on the GPU there: the paths round
    differently) and must still be seen, with the border's value; moved
    past the slack, they are not seen."""
    K = np.array([[20.0, 0, 7.5], [0, 20, 5.5], [0, 0, 1]])
    ref_cam = mvs.Camera.pinhole(K, np.eye(3), np.zeros(3))
    img = np.random.default_rng(16).random((12, 16)).astype(np.float32)
    tiny, past = 1e-12, ref.BORDER_SLACK + 1e-4
    for axis in (0, 1):          # column u (K[0, 2]), row v (K[1, 2])
        for shift in (-tiny, tiny):
            moved = K.copy()
            moved[axis, 2] += shift
            src_cam = mvs.Camera.pinhole(moved, np.eye(3), np.zeros(3))
            out = mvs.warp(img, ref_cam, src_cam, 1.0)
            np.testing.assert_allclose(out, img, atol=1e-6)   # no NaN
        for shift, lost in ((-past, 0), (past, -1)):
            moved = K.copy()
            moved[axis, 2] += shift
            src_cam = mvs.Camera.pinhole(moved, np.eye(3), np.zeros(3))
            out = mvs.warp(img, ref_cam, src_cam, 1.0)
            lines = out.T if axis else out     # the lost line: a column
            assert np.isnan(lines[:, lost]).all()
            assert np.isfinite(np.delete(lines, lost, axis=1)).all()


@pytest.mark.parametrize("box, guess", [
    ((30.0, 0.05, 2.0), ("table", 257, 2)),
    ((300.0, 0.3, 0.5), ("table", 257, 3)),
    ((5.0, 1e-5, 2.0), ("table", 257, 2)),
    ((10.0, 0.01, 0.5), ("table", 257, 2)),
    ((1000.0, 0.3, 0.5), ("per sample", 0, 1)),
])
def test_tables_refine_while_finer_ones_shrink_their_error(box, guess):
    # refining stops early only where a finer table barely helps; these
    # boxes' errors shrink slowly (1.6x to 3x a halving at times) but
    # their largest tables land, with the fewest steps
    K = np.array([[600, 0, 320], [0, 600, 240], [0, 0, 1.0]])
    cam = mvs.Camera.refractive(K, np.eye(3), np.zeros(3), water_z=0.2)
    assert _mvs.snell_guess(cam.params, *box) == guess


def test_sweeps_guess_by_polynomial_or_table_and_both_land():
    """A sweep's source camera guesses the interface point from a
    polynomial where one Newton step from it lands within 1e-8 m over the
    box of its points, else from a table of solutions."""
    K = np.array([[600, 0, 320], [0, 600, 240], [0, 0, 1.0]])
    cam = mvs.Camera.refractive(K, np.eye(3), np.zeros(3), water_z=0.2)
    # the benchmark's box (dist^2 up to 0.26 m^2, 0.89-1.07 m deep) takes
    # the quadratic, a deeper one the cubic
    assert _mvs.snell_guess(cam.params, 0.26, 0.889, 1.073) == (
        "polynomial", 2, 1)
    assert _mvs.snell_guess(cam.params, 0.1, 0.3, 0.6) == (
        "polynomial", 3, 1)
    kind, points, steps = _mvs.snell_guess(cam.params, 1.0, 0.1, 3.0)
    assert kind == "table" and points > 33 and steps == 1
    # a wider, shallower box: the table plus more steps
    kind, points, steps = _mvs.snell_guess(cam.params, 100.0, 0.3, 0.4)
    assert kind == "table" and steps > 1
    # one reaching hundreds of metres out, or right under the surface,
    # where even those do not land: each sample's crossing solved alone,
    # as the GPU solves it
    assert _mvs.snell_guess(cam.params, 5e4, 0.3, 0.4) == (
        "per sample", 0, 1)
    assert _mvs.snell_guess(cam.params, 1e5, 1e-9, 1e3) == (
        "per sample", 0, 1)
    with pytest.raises(ValueError, match="refractive"):
        _mvs.snell_guess(mvs.Camera.pinhole(K, np.eye(3),
                                            np.zeros(3)).params, 1, 1, 2)
    # both guesses, in sweeps, against the reference
    rng = np.random.default_rng(15)
    cams, imgs = random_views(rng, True, n=1)
    # quadratic, cubic, table (checked when written, by printing them)
    for depths in ([1.0, 1.01], [1.0, 1.2], [0.05, 3.0]):
        out = mvs.build_cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                    np.array(depths), cost="sad", window=3)
        expected = ref.cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                   np.array(depths), "sad", 3)
        assert rel_error(out, expected) < 1e-5


def test_rays_grazing_the_water_far_out_leave_the_sweep_exact():
    """Cameras pitched to 15 degrees under the horizon: the reference's
    rays just under it meet the water hundreds of metres out, so that the
    box of points a source camera sees is too wide for any guess to land
    everywhere; each sample's crossing is then solved alone."""
    sc = scenes.make_scene("flat", "refractive", 2, 48, 64)
    cams = [scenes.pitched(cam, 75.0) for cam in sc.cameras]
    origins, directions, valid = cams[0].cast_rays(
        np.argwhere(np.ones((48, 64)))[:, ::-1].astype(float))
    far = origins[valid] + 4.0 * directions[valid] - cams[1].center
    assert np.hypot(far[:, 0], far[:, 1]).max() > 100
    depths = np.array([0.5, 4.0])
    out = mvs.build_cost_volume(sc.ref, sc.images[1:], cams[0], cams[1:],
                                depths, cost="ncc", window=5)
    expected = ref.cost_volume(sc.ref, sc.images[1:], cams[0], cams[1:],
                               depths, "ncc", 5)
    assert rel_error(out, expected) < 1e-5


@pytest.mark.parametrize("cost", ["ncc", "ssim", "sad"])
def test_windows_wider_than_the_image_match_the_reference(cost):
    rng = np.random.default_rng(14)
    cams, imgs = random_views(rng, True, n=1, height=6, width=5)
    depths = np.array([0.9, 1.1])
    out = mvs.build_cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                depths, cost=cost, window=13)
    expected = ref.cost_volume(imgs[0], imgs[1:], cams[0], cams[1:], depths,
                               cost, 13)
    assert rel_error(out, expected) < 1e-5


def test_warp_matches_torch_grid_sample_for_pinhole_cameras():
    torch = pytest.importorskip("torch")  # installed by `make test`
    rng = np.random.default_rng(4)
    cams, imgs = random_views(rng, False, n=1, height=24, width=32)
    depth = 1.0
    out = mvs.warp(imgs[1], cams[0], cams[1], depth)
    h, w = imgs[1].shape
    v, u = np.mgrid[0:h, 0:w]
    o, d, _ = cams[0].cast_rays(np.stack([u.ravel(), v.ravel()], 1))
    px, _ = cams[1].project(o + depth * d)
    grid = np.stack([px[:, 0] / (w - 1) * 2 - 1, px[:, 1] / (h - 1) * 2 - 1],
                    axis=1).reshape(1, h, w, 2)
    sampled = torch.nn.functional.grid_sample(
        torch.from_numpy(imgs[1])[None, None],
        torch.from_numpy(grid.astype(np.float32)), mode="bilinear",
        padding_mode="zeros", align_corners=True)[0, 0].numpy()
    seen = ~np.isnan(out)
    assert seen.sum() > h * w / 2
    assert np.abs(out[seen] - sampled[seen]).max() < 1e-5


@pytest.mark.parametrize("cost", ["ncc", "ssim", "sad"])
@pytest.mark.parametrize("refractive", [False, True])
def test_cost_volume_matches_the_reference(cost, refractive):
    rng = np.random.default_rng(5)
    cams, imgs = random_views(rng, refractive, n=2)
    depths = np.array([0.7, 0.9, 1.1, 1.3])
    out = mvs.build_cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                depths, cost=cost, window=5)
    assert out.shape == (12, 16, 4) and out.dtype == np.float32
    expected = ref.cost_volume(imgs[0], imgs[1:], cams[0], cams[1:], depths,
                               cost, 5)
    assert rel_error(out, expected) < 1e-5
    top = {"ncc": 2.0, "ssim": 1.0, "sad": 1.0}[cost]
    assert (out >= 0).all() and (out <= top).all()


def test_results_do_not_depend_on_threads_or_depth_batches():
    # several bands of rows, and a plane count that leaves a work item
    # of fewer planes than the others
    sc = scenes.make_scene("flat", views=3, height=300, width=48)
    depths = np.linspace(*sc.depth_range(0.03), 37)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths)
    base = mvs.build_cost_volume(*args, threads=1)
    for threads, batch in ((2, None), (3, 5), (8, 1)):
        other = mvs.build_cost_volume(*args, threads=threads,
                                      depth_batch=batch)
        assert np.array_equal(base, other)


@pytest.mark.parametrize("window", [3, 11])
@pytest.mark.parametrize("swap", [False, True])
def test_ssim_windows_seeing_every_sample_give_the_same_bits(window, swap):
    # All planes in one call: where a window sees every sample, its count,
    # r and r^2 sums are the reference's, made once a call; one plane of
    # one view a call (fewer than four plane-views a thread) makes every
    # window's own. Both give the same bits,
    # beside the unseen samples (on the left, or swapped, on the right)
    # and away from them.
    sc = scenes.make_scene("flat", "pinhole", views=2, height=40, width=64)
    ref_cam, src_cam = sc.ref_cam, sc.cameras[1]
    ref_img, src_img = sc.ref, sc.images[1]
    if swap:
        ref_cam, src_cam, ref_img, src_img = src_cam, ref_cam, src_img, \
            ref_img
    depths = np.linspace(*sc.depth_range(0.03), 8)
    unseen = np.isnan(mvs.warp(src_img, ref_cam, src_cam, depths[0]))
    columns = np.flatnonzero(unseen.any(axis=0))
    assert 0 < len(columns) < 64 - 4 * window
    assert columns[0] > 0 if swap else columns[-1] < 63
    args = (ref_img, [src_img], ref_cam, [src_cam], depths, "ssim", window)
    once = mvs.build_cost_volume(*args, threads=1)
    per_plane = mvs.build_cost_volume(*args, depth_batch=1, threads=1)
    assert np.array_equal(once, per_plane)


def test_extract_depth_matches_the_reference():
    rng = np.random.default_rng(6)
    volume = rng.random((6, 7, 9)).astype(np.float32)
    volume[0, 0, 0] = -1   # winner at the first plane
    volume[0, 1, 8] = -1   # and at the last
    depths = np.cumsum(rng.uniform(0.01, 0.03, 9)) + 0.8   # uneven steps
    depth, conf = mvs.extract_depth(volume, depths)
    rd, rc = ref.extract_depth(volume, depths)
    assert np.isnan(depth[0, 0]) and np.isnan(depth[0, 1])
    assert conf[0, 0] == 0 and conf[0, 1] == 0
    assert rel_error(depth, rd) < 1e-6
    assert np.abs(conf - rc).max() < 1e-6


def test_extract_depth_gives_no_depth_where_a_cost_is_not_finite():
    """A NaN compares less than nothing: first it hid the best cost
    behind it, and an infinite cost made the depth NaN with a confidence
    above 0. A pixel whose costs are not all finite has no depth."""
    volume = np.tile(np.array([0.9, 0.5, 0.2, 0.6, 0.8], np.float32),
                     (2, 4, 1))
    depths = np.linspace(1.0, 1.4, 5)
    volume[0, 0, 0] = np.nan        # before the best
    volume[0, 1, 4] = np.nan        # after it
    volume[0, 2, 1] = np.inf        # next to it
    volume[0, 3, 3] = -np.inf
    depth, conf = mvs.extract_depth(volume, depths)
    assert np.isnan(depth[0]).all() and (conf[0] == 0).all()
    assert np.isfinite(depth[1]).all() and (conf[1] > 0).all()
    rd, rc = ref.extract_depth(volume, depths)
    assert rel_error(depth, rd) < 1e-6
    assert np.abs(conf - rc).max() < 1e-6


@pytest.mark.parametrize("model", ["refractive", "pinhole"])
def test_flat_plane_depth_recovered_within_one_step(model):
    sc = scenes.make_scene("flat", model, views=3, height=96, width=128)
    depths = np.linspace(*sc.depth_range(0.03), 48)
    step = depths[1] - depths[0]
    volume = mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                   sc.cameras[1:], depths, "ncc", 7)
    depth, _ = mvs.extract_depth(volume, depths)
    m = scenes.metrics(sc, depth, tolerance=step)
    assert m["median_abs_error"] < step
    assert m["completeness"] > 0.8
    # every estimated point counts, the few mismatches at borders too
    assert m["plane_fit_rmse"] < 2 * step


def test_wavy_surface_is_recovered():
    sc = scenes.make_scene("wavy", views=3, height=96, width=128)
    depths = np.linspace(*sc.depth_range(0.03), 48)
    volume = mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                   sc.cameras[1:], depths, "ncc", 7)
    depth, _ = mvs.extract_depth(volume, depths)
    m = scenes.metrics(sc, depth, tolerance=depths[1] - depths[0])
    # the undulation is 5 mm: errors far under it mean it was resolved
    assert m["median_abs_error"] < 0.003
    assert "plane_fit_rmse" not in m


def test_gray_from_bgr():
    img = np.zeros((2, 3, 3), np.uint8)
    img[0, 0] = (255, 0, 0)          # blue
    img[1, 2] = (255, 255, 255)
    gray = mvs.gray_from_bgr(img)
    assert gray.dtype == np.float32 and gray.shape == (2, 3)
    assert gray[0, 0] == pytest.approx(0.114, abs=1e-6)
    assert gray[1, 2] == pytest.approx(1.0, abs=1e-6)


# ------------------------------------------------------------ bad input
K = np.array([[20, 0, 8], [0, 20, 6], [0, 0, 1.0]])
CAM = mvs.Camera.pinhole(K, np.eye(3), np.zeros(3))
IMG = np.zeros((12, 16), np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: CAM.project([[1, 2]]), ValueError, r"points must be an \(N, 3\)"),
    (lambda: CAM.cast_rays([1, 2]), ValueError, r"pixels must be an \(N, 2\)"),
    (lambda: mvs.warp(IMG.astype(np.float64), CAM, CAM, 1.0), ValueError,
     "src must be float32"),
    (lambda: mvs.warp([[0.0]], CAM, CAM, 1.0), TypeError, "NumPy float32"),
    (lambda: mvs.warp(IMG, "cam", CAM, 1.0), TypeError, "ref_cam must be"),
    (lambda: mvs.warp(IMG, CAM, CAM, -1.0), ValueError, "depths must be"),
    (lambda: mvs.warp(np.full((12, 16), np.nan, np.float32), CAM, CAM, 1.0),
     ValueError, "src must be finite"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], []), ValueError,
     "depths must be a non-empty"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0, 0.9]),
     ValueError, "strictly increasing"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   window=4), ValueError, "window must be"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   window=65), ValueError, "window must be"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   cost="l2"), ValueError, "cost must be"),
    (lambda: mvs.build_cost_volume(IMG, [], CAM, [], [1.0]), ValueError,
     "at least one source"),
    (lambda: mvs.build_cost_volume(IMG, [IMG[:5]], CAM, [CAM], [1.0]),
     ValueError, r"srcs\[0\] has shape"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM, CAM], [1.0]),
     ValueError, "one camera per source view"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   depth_batch=0), ValueError, "depth_batch"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   threads=0), ValueError, "threads"),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0],
                                   threads=2 ** 31), ValueError,
     "threads must be an int from 1 to 2147483647, got 2147483648"),
    (lambda: mvs.build_cost_volume(IMG, 7, CAM, [CAM], [1.0]), TypeError,
     "srcs must be"),
    (lambda: mvs.extract_depth(np.zeros((2, 2, 3)), [1, 2, 3]), ValueError,
     r"float32 \(H, W, D\) array, got float64 \(2, 2, 3\)"),
    (lambda: mvs.extract_depth([[[0.0]]], [1]), ValueError,
     "float32 .* array, got list"),
    (lambda: mvs.extract_depth(np.zeros((2, 2, 3), np.float32), [1, 2]),
     ValueError, "depths has 2 entries"),
    (lambda: mvs.gray_from_bgr(np.zeros((2, 2), np.uint8)), ValueError,
     "uint8"),
    (lambda: scenes.make_scene("cube"), ValueError, "kind must be"),
    (lambda: scenes.make_scene(views=1), ValueError, "views must be"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_binding_rejects_what_python_would_have_caught():
    """The C layer checks too: no input reaches the kernels unchecked."""
    with pytest.raises(ValueError, match="ref_cam must be 1-D .last "
                                         "dimension 28"):
        _mvs.warp(IMG, np.zeros(5), CAM.params, 1.0)
    with pytest.raises(ValueError, match="src_cam is not a valid camera: "
                                         "K's last row is"):
        _mvs.warp(IMG, CAM.params, np.zeros(28), 1.0)
    h, w = IMG.shape
    out = np.empty((h, w, 2), np.float32)
    good = (IMG, IMG[None], CAM.params, CAM.params[None], np.ones(2), 0, 2,
            0, 5, 1, out)

    def call(**changes):
        args = list(good)
        for i, value in changes.items():
            args[int(i[1:])] = value
        _mvs.cost_volume(*args)

    call()
    with pytest.raises(ValueError, match="do not agree"):
        call(a1=IMG[None, :5])
    with pytest.raises(ValueError, match="do not agree"):
        call(a5=1)                  # planes 1 and 2 of 2
    with pytest.raises(ValueError, match="do not agree"):
        call(a6=0)
    with pytest.raises(ValueError, match="bad cost"):
        call(a7=7)
    for bad_out in (out[:, :, :1], out.astype(np.float64), out[::-1],
                    np.empty((h, w, 2), np.float32).T.copy().T):
        with pytest.raises(ValueError, match="out must be"):
            call(a10=bad_out)
    frozen = out.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be"):
        call(a10=frozen)
    with pytest.raises(TypeError):
        call(a10=[0.0])


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_window_loops_run_at_eight_lanes_exactly_where_the_cpu_has_avx512():
    """The eight-lane loops are picked as the kernels' clones are: where
    the CPU has every AVX-512 feature of x86-64-v4 (and what v3 needs),
    and never in a build without the clones (Clang, other systems)."""
    flags = _cpu_flags()
    if not _mvs.VECTOR_CLONES or flags is None:
        assert _mvs.WIDE_LANES == 0
        return
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
          "avx2", "fma", "bmi1", "bmi2", "movbe", "f16c", "abm"}
    assert _mvs.WIDE_LANES == int(v4 <= flags)


# ------------------------------------------------- depth without the volume
@pytest.mark.parametrize("cost,parity", [("ncc", "textbook"),
                                         ("sad", "textbook"),
                                         ("ssim", "textbook"),
                                         ("ncc", "aquamvs")])
@pytest.mark.parametrize("model", ["refractive", "pinhole"])
def test_reduce_depth_is_the_volumes_extraction_to_the_bit(cost, parity,
                                                            model):
    """Chunks of every size, the last one short, and one chunk for all:
    each chunk's costs are the volume's bits (swept among the depths'
    ends, as the refraction guesses are fitted to them) and the fold
    keeps ap_extract_pixel's order and ties."""
    sc = scenes.make_scene("wavy", model, views=3, height=40, width=36)
    depths = np.linspace(*sc.depth_range(0.03), 23)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths, cost,
            7)
    want = mvs.extract_depth(mvs.build_cost_volume(*args, parity=parity),
                             depths)
    assert np.isfinite(want[0]).mean() > 0.5
    for batch in (None, 1, 5, 23, 40):
        depth, conf = mvs.build_cost_volume(*args, depth_batch=batch,
                                            threads=2, parity=parity,
                                            reduce="depth")
        assert depth.dtype == conf.dtype == np.float32
        assert np.array_equal(depth, want[0], equal_nan=True)
        assert np.array_equal(conf, want[1])


def test_the_fold_keeps_the_extractions_ties_and_non_finite_costs():
    rng = np.random.default_rng(9)
    volume = rng.choice(np.float32([0.1, 0.2, 0.5, 0.9, 1.5]),
                        (9, 11, 17))
    volume[0, :, 3] = np.nan
    volume[1, :, 5] = np.inf
    volume[2, :, 0] = -1.0          # least at the first plane
    volume[3, :, 16] = -1.0         # and at the last
    volume[4, :, [2, 9]] = -1.0     # tied
    depths = np.cumsum(rng.uniform(0.01, 0.03, 17)) + 0.8
    want = mvs.extract_depth(volume, depths)
    for chunk in (1, 2, 5, 16, 17):
        state = np.empty((9, 11, _mvs.DEPTH_STATE_DOUBLES))
        depth = np.empty((9, 11), np.float32)
        conf = np.empty((9, 11), np.float32)
        for first in range(0, 17, chunk):
            part = np.ascontiguousarray(volume[:, :, first:first + chunk])
            _mvs.depth_fold(part, 0, part.shape[2], first, depths, state,
                            depth, conf)
        assert np.array_equal(depth, want[0], equal_nan=True)
        assert np.array_equal(conf, want[1])


@pytest.mark.parametrize("reduce", ["Depth", "volume", "", 1, True,
                                    ["depth"]])
def test_reduce_takes_none_or_depth(reduce):
    with pytest.raises(ValueError, match="reduce must be None or one of "
                                         "'depth', got"):
        mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0, 1.1],
                              reduce=reduce)


def test_reduce_depth_refuses_what_the_volume_refuses():
    with pytest.raises(ValueError, match="depth_batch"):
        mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0, 1.1],
                              depth_batch=0, reduce="depth")
    with pytest.raises(ValueError, match="window must be"):
        mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0, 1.1], window=4,
                              reduce="depth")
    with pytest.raises(ValueError, match="no 'sad' cost"):
        mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], [1.0, 1.1], "sad",
                              parity="aquamvs", reduce="depth")


def test_the_binding_refuses_a_fold_that_does_not_fit():
    h, w = 3, 4
    good = [np.zeros((h, w, 2), np.float32), 0, 2, 0, np.ones(3),
            np.empty((h, w, _mvs.DEPTH_STATE_DOUBLES)),
            np.empty((h, w), np.float32), np.empty((h, w), np.float32)]

    def call(**changes):
        args = list(good)
        for i, value in changes.items():
            args[int(i[1:])] = value
        _mvs.depth_fold(*args)

    call()
    call(a3=1)                      # planes 1 and 2 of 3: the last chunk
    for change in ({"a1": -1}, {"a2": 0}, {"a2": 3}, {"a1": 1, "a2": 2},
                   {"a3": 2}, {"a3": -1}):
        with pytest.raises(ValueError, match="are not planes"):
            call(**change)
    with pytest.raises(ValueError, match="chunk must be"):
        call(a0=np.zeros((h, w), np.float32))
    with pytest.raises(ValueError, match="chunk must be"):
        call(a0=np.zeros((h, w, 2)))
    with pytest.raises(ValueError, match="state must be"):
        call(a5=np.empty((h, w, 3)))
    with pytest.raises(ValueError, match="depth must be"):
        call(a6=np.empty((h, w + 1), np.float32))
    frozen = np.empty((h, w), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="confidence must be"):
        call(a7=frozen)
    with pytest.raises(TypeError):
        call(a0=[0.0])
