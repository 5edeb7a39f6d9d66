"""Cameras of the plane-sweep kit: every bad argument refused with an
error that names it and says why, in the Python and the C layer; cameras
that cannot change once made; rays that do not exist (total internal
reflection, non-finite pixels) marked invalid, never NaN marked valid."""
import copy
import pickle

import numpy as np
import pytest

import aquaprof.mvs as mvs
import mvs_reference as ref
from aquaprof import _mvs

K = np.array([[20.0, 0, 8], [0, 20, 6], [0, 0, 1]])
GOOD = dict(K=K, R=np.eye(3), t=np.zeros(3), water_z=0.2)
REFLECTION = np.diag([1.0, 1.0, -1.0])
SHEARED = np.eye(3) + np.array([[0, 1e-3, 0], [0, 0, 0], [0, 0, 0]])


def refractive(**changes):
    return mvs.Camera.refractive(**dict(GOOD, **changes))


@pytest.mark.parametrize("changes, message", [
    (dict(K=np.eye(2)), r"K must be a \(3, 3\) array, got shape \(2, 2\)"),
    (dict(K="K"), r"K must be a \(3, 3\) array of numbers, got str"),
    (dict(K=[[1, 2, 3], [4, 5]]), "K must be .* of numbers, got list"),
    (dict(K=[[20, 0, 8], [0, 20, np.nan], [0, 0, 1]]),
     r"K\[1\]\[2\] is nan: K must be finite"),
    (dict(K=[[np.inf, 0, 8], [0, 20, 6], [0, 0, 1]]),
     r"K\[0\]\[0\] is inf: K must be finite"),
    (dict(K=np.diag([20.0, 20.0, 2.0])),
     r"K's last row is \[0, 0, 2\]: it must be \[0, 0, 1\]"),
    (dict(K=[[20, 0, 8], [0, 20, 6], [0.5, 0, 1]]),
     r"K's last row is \[0.5, 0, 1\]"),
    (dict(K=[[0, 0, 8], [0, 20, 6], [0, 0, 1]]),
     r"K is singular \(determinant 0\): its focal lengths must be "
     r"non-zero"),
    (dict(K=[[1e200, 0, 8], [0, 1e200, 6], [0, 0, 1]]),
     r"K's determinant overflows \(inf\)"),
    (dict(R=np.eye(3)[0]), r"R must be a \(3, 3\) array, got shape \(3,\)"),
    (dict(R=[[1, 0, 0], [0, 1, 0], [0, 0, -np.inf]]),
     r"R\[2\]\[2\] is -inf: R must be finite"),
    (dict(R=np.eye(3) * 2), r"R is not a rotation: R R\^T differs from "
                            r"the identity by up to 3 \(more than 1e-6\)"),
    (dict(R=SHEARED), r"R is not a rotation: .* by up to 0.001 "),
    (dict(R=REFLECTION), r"R is a reflection \(determinant -1\), not a "
                         r"rotation \(determinant \+1\)"),
    (dict(t=[0, 0]), r"t must be a \(3,\) array, got shape \(2,\)"),
    (dict(t=[0, 0, np.inf]), r"t\[2\] is inf: t must be finite"),
    (dict(t=None), r"t must be a \(3,\) array, got shape \(\)"),
    (dict(water_z="deep"), "water_z must be a number, got str"),
    (dict(water_z=[0.2]), "water_z must be a number, got list"),
    (dict(water_z=np.array([0.2])), "water_z must be a number, got ndarray"),
    (dict(n_water=np.ones((1, 1))), "n_water must be a number, got ndarray"),
    (dict(water_z=np.nan), "water_z is nan: it must be finite"),
    (dict(water_z=-np.inf), "water_z is -inf: it must be finite"),
    (dict(normal=(0, 0, 0)), "normal is the zero vector: it must point "
                             "from the water into the air"),
    (dict(normal=(0, 1)), r"normal must be a \(3,\) array, got shape "
                          r"\(2,\)"),
    (dict(normal=(0, np.nan, -1)), r"normal\[1\] is nan"),
    (dict(n_air=0), "n_air is 0.0: a refractive index must be > 0"),
    (dict(n_air=-1.0), "n_air is -1.0: a refractive index must be > 0"),
    (dict(n_air="air"), "n_air must be a number, got str"),
    (dict(n_water=np.nan), "n_water is nan: it must be finite"),
    (dict(n_water=np.inf), "n_water is inf: it must be finite"),
    (dict(n_water=0), "n_water is 0.0: a refractive index must be > 0"),
    # the camera (at the origin) against its water surface
    (dict(water_z=-0.1), r"not a valid camera: the camera centre \(0, 0, 0\)"
                         r" is 0.1 below its water surface \(water_z -0.1, "
                         r"normal \(0, 0, -1\) towards the air\): a "
                         r"refractive camera must be above it"),
    (dict(water_z=0.0), r"the camera centre \(0, 0, 0\) is on its water "
                        r"surface"),
    (dict(normal=(0, 0, 2)), r"is 0.2 below its water surface \(water_z "
                             r"0.2, normal \(0, 0, 1\)"),
    (dict(t=[0, 0, -0.5]), r"the camera centre \(0, 0, 0.5\) is 0.3 below"),
])
def test_bad_camera_arguments_are_named_with_why(changes, message):
    with pytest.raises(ValueError, match=message):
        refractive(**changes)


def test_a_pinhole_camera_is_checked_alike():
    with pytest.raises(ValueError, match="R is a reflection"):
        mvs.Camera.pinhole(K, REFLECTION, np.zeros(3))
    with pytest.raises(ValueError, match=r"K\[0\]\[1\] is nan"):
        mvs.Camera.pinhole([[1, np.nan, 0], [0, 1, 0], [0, 0, 1]],
                           np.eye(3), np.zeros(3))
    # the water does not matter to a pinhole camera, even below it
    cam = mvs.Camera(K, np.eye(3), np.zeros(3), water_z=-1.0)
    assert not cam.is_refractive


def packed(**changes):
    """Packed parameters of the good refractive camera, entries changed
    by index: what a caller of the C layer could pass."""
    p = refractive().params.copy()
    for index, value in changes.items():
        p[int(index[1:])] = value
    return p


@pytest.mark.parametrize("changes, message", [
    (dict(i4=np.nan), r"K\[1\]\[1\] is nan: every parameter must be "
                      r"finite"),
    (dict(i15=np.inf), r"R\[2\]\[0\] is inf"),
    (dict(i19=np.nan), r"t\[1\] is nan"),
    (dict(i21=np.nan), "refractive is nan"),
    (dict(i22=np.inf), "water_z is inf"),
    (dict(i25=np.nan), r"normal\[2\] is nan"),
    (dict(i26=np.nan), "n_air is nan"),
    (dict(i27=-np.inf), "n_water is -inf"),
    (dict(i21=3.0), r"refractive is 3: it must be 0 \(pinhole\), 1 "
                    r"\(refractive\) or 2 \(refractive, casting as AquaMVS "
                    r"does\)"),
    (dict(i8=0.0), r"K's last row is \[0, 0, 0\]"),
    (dict(i0=0.0), "K is singular"),
    (dict(i9=2.0), "R is not a rotation"),
    (dict(i17=-1.0), "R is a reflection"),
    (dict(i23=0.0, i24=0.0, i25=0.0), "normal is the zero vector"),
    (dict(i26=-1.0), "n_air is -1: a refractive index must be > 0"),
    (dict(i27=0.0), "n_water is 0: a refractive index must be > 0"),
    (dict(i22=-1.0), "the camera centre .* is 1 below its water surface"),
])
def test_the_c_layer_names_the_bad_parameter_too(changes, message):
    with pytest.raises(ValueError, match="not a valid camera: " + message):
        _mvs.check_camera(packed(**changes))
    # every entry point that takes a camera says the same
    bad, good = packed(**changes), refractive().params
    img = np.zeros((12, 16), np.float32)
    with pytest.raises(ValueError, match="src_cam is not a valid camera: "
                       + message):
        _mvs.warp(img, good, bad, 1.0)
    with pytest.raises(ValueError, match="src_cams.1. is not a valid "
                       "camera: " + message):
        _mvs.cost_volume(img, np.stack([img, img]), good,
                         np.stack([good, bad]), np.ones(1), 0, 1, 0, 5, 1,
                         np.empty((12, 16, 1), np.float32))
    with pytest.raises(ValueError, match="ref_cam is not a valid camera: "
                       + message):
        _mvs.gpu_warp(0, 0, 1, 12, 16, bad, good, 1.0, 2, 3)
    with pytest.raises(ValueError, match="not a valid camera: " + message):
        _mvs.cast_rays(bad, np.zeros((1, 2)))


def test_a_camera_cannot_change_once_made():
    """Its packed parameters are what the kernels use: an edit of K that
    they did not see would be silently ignored."""
    cam = refractive()
    for name in ("K", "R", "t", "normal", "params"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(cam, name)[0] = 1.0
    with pytest.raises(AttributeError, match="cannot be changed once made "
                                             r"\(setting R\)"):
        cam.R = np.eye(3)
    # and it holds copies: the caller's arrays stay theirs
    mine = K.copy()
    cam = mvs.Camera.pinhole(mine, np.eye(3), np.zeros(3))
    mine[0, 0] = 1.0
    assert cam.K[0, 0] == 20.0 and mine.flags.writeable


@pytest.mark.parametrize("aquamvs", [False, True])
def test_a_camera_copies_and_pickles_to_an_equal_camera(aquamvs):
    cam = refractive(n_water=1.31, normal=(0, 0.1, -1))
    if aquamvs:
        cam = mvs.Camera(**dict(GOOD, refractive=True, n_water=1.31,
                                normal=(0, 0.1, -1), casts_as_aquamvs=True))
    for other in (copy.copy(cam), copy.deepcopy(cam),
                  pickle.loads(pickle.dumps(cam))):
        assert other is not cam
        assert other.casts_as_aquamvs == aquamvs
        assert np.array_equal(other.params, cam.params)
        assert np.array_equal(other.cast_rays([[3.0, 4.0]])[1],
                              cam.cast_rays([[3.0, 4.0]])[1])


def aquamvs_cast(pixels, normal, n_air=1.0, n_water=1.333):
    """AquaMVS's cast_ray for GOOD's camera, written out in float64."""
    rays = np.c_[pixels, np.ones(len(pixels))] @ np.linalg.inv(K).T
    rays /= np.linalg.norm(rays, axis=1, keepdims=True)
    reach = GOOD["water_z"] / rays[:, 2]       # the centre is the origin
    cos_i = -(rays @ normal)
    ratio = n_air / n_water
    cos_t = np.sqrt(np.clip(1 - ratio ** 2 * (1 - cos_i ** 2), 0, None))
    bent = ratio * rays + (cos_t - ratio * cos_i)[:, None] * -normal
    return reach[:, None] * rays, bent / np.linalg.norm(bent, axis=1,
                                                        keepdims=True)


@pytest.mark.parametrize("normal", [(0, 0, -1), (0.1, -0.05, -1),
                                    (0, 0, -2), (3, 0, -0.5)])
def test_a_camera_casting_as_aquamvs_meets_the_level_plane_and_bends_about_its_normal(normal):
    normal = np.array(normal, float)
    cam = mvs.Camera(**dict(GOOD, refractive=True, normal=normal,
                            casts_as_aquamvs=True))
    pixels = np.array([[8.0, 6.0], [0.0, 0.0], [15.5, 11.0], [-30.0, 2.0]])
    origins, directions, valid = cam.cast_rays(pixels)
    want_origins, want_directions = aquamvs_cast(pixels, normal)
    assert valid.all()
    np.testing.assert_allclose(origins, want_origins, atol=1e-14)
    np.testing.assert_allclose(directions, want_directions, atol=1e-14)
    assert np.allclose(origins[:, 2], GOOD["water_z"])
    # and projects through the level surface, whatever the normal
    level = refractive()
    points = [[0.1, 0.05, 0.9], [-0.2, 0.1, 0.5]]
    assert np.array_equal(cam.project(points)[0], level.project(points)[0])


def test_a_camera_casting_as_aquamvs_is_above_its_level_surface():
    # a normal that puts the centre under the plane it describes: the
    # surface is level all the same, and the camera above it
    tipped = dict(GOOD, refractive=True, normal=(1.0, 0.0, -0.01))
    with pytest.raises(ValueError, match="is .* below its water surface"):
        mvs.Camera(**dict(tipped, t=(0.5, 0.0, 0.0)))
    mvs.Camera(**dict(tipped, t=(0.5, 0.0, 0.0), casts_as_aquamvs=True))
    with pytest.raises(ValueError, match=r"the camera centre \(0, 0, 0.3\) "
                       r"is 0.1 below its water surface \(water_z 0.2, "
                       r"normal \(0, 0, -1\)"):
        mvs.Camera(**dict(tipped, t=(0.0, 0.0, -0.3), casts_as_aquamvs=True))


def test_only_a_refractive_camera_casts_as_aquamvs():
    with pytest.raises(ValueError, match="casts_as_aquamvs is for "
                       "refractive cameras"):
        mvs.Camera(K, np.eye(3), np.zeros(3), casts_as_aquamvs=True)


@pytest.mark.parametrize("model", ["pinhole", "refractive"])
def test_non_finite_pixels_and_points_are_invalid_not_nan_and_valid(model):
    cam = refractive() if model == "refractive" else \
        mvs.Camera.pinhole(K, np.eye(3), np.zeros(3))
    o, d, valid = cam.cast_rays([[np.nan, 3], [4, np.inf], [-np.inf, 0],
                                 [1e300, 1e300], [8, 6]])
    assert list(valid) == [False, False, False, False, True]
    assert np.isnan(o[:4]).all() and np.isnan(d[:4]).all()
    assert np.isfinite(o[4]).all() and np.isfinite(d[4]).all()
    px, ok = cam.project([[np.nan, 0, 1], [0, np.inf, 1], [0, 0, np.nan],
                          [1e308, 0, 1], [0, 0, 1]])   # 2e309: inf
    assert list(ok) == [False, False, False, False, True]
    assert np.isnan(px[:4]).all() and np.isfinite(px[4]).all()


@pytest.mark.parametrize("name, bad", [("pixels", "pixels"),
                                       ("pixels", [[1, 2], [3]])])
def test_bad_pixels_and_points_are_named(name, bad):
    cam = refractive()
    with pytest.raises(ValueError, match=fr"{name} must be an \(N, 2\) "
                                         "array of numbers"):
        cam.cast_rays(bad)
    with pytest.raises(ValueError, match=r"points must be an \(N, 3\) "
                                         "array of numbers"):
        cam.project(bad)


# ---------------------------------------------- total internal reflection

def under_glass(f=5.0, x=0.0, n_air=1.5, n_water=1.0):
    """A camera in a denser medium than the one below its surface (glass
    over air, or a camera in water looking up out of it): with f = 5 on
    16 x 12 pixels its corners look past the critical angle."""
    K = np.array([[f, 0, 7.5], [0, f, 5.5], [0, 0, 1.0]])
    return mvs.Camera.refractive(K, np.eye(3), [-x, 0, 0], 0.2, n_air=n_air,
                                 n_water=n_water)


def grid(h=12, w=16):
    v, u = np.mgrid[0:h, 0:w]
    return np.stack([u.ravel(), v.ravel()], 1).astype(np.float64)


def test_rays_past_the_critical_angle_are_invalid():
    cam = under_glass()
    pixels = grid()
    o, d, valid = cam.cast_rays(pixels)
    # the angle of incidence from the pixel's line of sight
    sight = np.c_[(pixels - [7.5, 5.5]) / 5.0, np.ones(len(pixels))]
    sin_in = np.linalg.norm(sight[:, :2], axis=1) / np.linalg.norm(sight,
                                                                   axis=1)
    past = sin_in * cam.n_air / cam.n_water >= 1
    assert 0 < past.sum() < len(pixels)          # both kinds are there
    assert np.array_equal(valid, ~past)
    assert np.isnan(o[past]).all() and np.isnan(d[past]).all()
    assert np.isfinite(o[~past]).all() and np.isfinite(d[~past]).all()
    # the valid ones obey Snell's law and have unit length
    n = np.array([0, 0, -1.0])
    sin_out = np.linalg.norm(np.cross(d[~past], n), axis=1)
    assert np.allclose(cam.n_air * sin_in[~past], cam.n_water * sin_out,
                       atol=1e-12)
    assert np.allclose(np.linalg.norm(d[~past], axis=1), 1, atol=1e-12)
    # and the reference agrees on which exist
    assert [ref.cast(cam, *p) is not None for p in pixels] == list(valid)


def test_points_seen_through_a_surface_with_less_index_project_back():
    cam = under_glass()
    o, d, valid = cam.cast_rays(grid())
    for depth in (1e-3, 0.5, 20.0):
        points = o[valid] + depth * d[valid]
        px, ok = cam.project(points)
        assert ok.all()
        assert np.abs(px - grid()[valid]).max() < 1e-6
        expected = np.array([ref.project(cam, x) for x in points])
        assert np.abs(px - expected).max() < 1e-6


def rel_error(out, expected):
    out, expected = np.asarray(out, np.float64), np.asarray(expected)
    assert (np.isnan(out) == np.isnan(expected)).all()
    seen = ~np.isnan(expected)
    return np.linalg.norm(out[seen] - expected[seen]) / np.linalg.norm(
        expected[seen])


def images(n, seed=21):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.random((16, 20))
        out.append(((base[:-4, :-4] + base[2:-2, 2:-2] + base[4:, 4:]) / 3)
                   .astype(np.float32))
    return out


def test_warps_and_cost_volumes_through_total_reflection_match_the_reference():
    """Reference pixels without a ray see nothing: NaN in a warp (unseen,
    as documented), never a NaN cost: a window that sees too little
    costs 1."""
    cams = [under_glass(), under_glass(x=0.02), under_glass(x=-0.03)]
    imgs = images(3)
    _, _, valid = cams[0].cast_rays(grid())
    assert not valid.all()
    for depth in (0.3, 1.0):
        out = mvs.warp(imgs[1], cams[0], cams[1], depth)
        assert np.isnan(out.ravel()[~valid]).all()
        assert rel_error(out, ref.warp(imgs[1], cams[0], cams[1],
                                       depth)) < 1e-6
    depths = np.array([0.3, 0.6, 1.0, 1.6])
    for cost in ("ncc", "sad"):
        out = mvs.build_cost_volume(imgs[0], imgs[1:], cams[0], cams[1:],
                                    depths, cost=cost, window=3)
        assert np.isfinite(out).all()
        assert rel_error(out, ref.cost_volume(imgs[0], imgs[1:], cams[0],
                                              cams[1:], depths, cost,
                                              3)) < 1e-5
    depth, confidence = mvs.extract_depth(out, depths)
    assert np.isfinite(confidence).all()
