"""The plane-sweep maths written plainly in float64 NumPy, as the
reference the C kernels are tested against. Slow on purpose: loops over
pixels, no shared code with the kernels; refraction is solved by
bisection, not Newton."""
import numpy as np


def pinhole_project(cam, x):
    xc = cam.R @ x + cam.t
    if xc[2] <= 0:
        return None
    p = cam.K @ xc
    return p[:2] / p[2]


def unit_normal(cam):
    return cam.normal / np.linalg.norm(cam.normal)


def cast(cam, u, v):
    if cam.casts_as_aquamvs:    # not this maths: AquaMVS's reference is
        raise ValueError("casts as AquaMVS: use benchmarks/aquamvs_torch")
    d = cam.R.T @ np.linalg.solve(cam.K, np.array([u, v, 1.0]))
    d /= np.linalg.norm(d)
    c = cam.center
    if not cam.is_refractive:
        return c, d
    n = unit_normal(cam)
    height = n @ c - n @ np.array([0, 0, cam.water_z])
    cos_in = -(n @ d)
    if cos_in <= 0:
        return None
    origin = c + d * height / cos_in
    sin_in = np.sqrt(1 - cos_in ** 2)
    sin_out = cam.n_air / cam.n_water * sin_in
    if sin_out >= 1:
        return None     # past the critical angle: reflected whole
    horizontal = d + cos_in * n
    if np.linalg.norm(horizontal) > 0:
        horizontal /= np.linalg.norm(horizontal)
    direction = sin_out * horizontal - np.sqrt(1 - sin_out ** 2) * n
    return origin, direction


def project(cam, x):
    if not cam.is_refractive:
        return pinhole_project(cam, x)
    n = unit_normal(cam)
    plane = n @ np.array([0, 0, cam.water_z])
    c = cam.center
    hc = n @ c - plane
    depth = plane - n @ x
    if depth <= 0:
        return None
    foot = c - hc * n
    h = x + depth * n - foot
    dist = np.linalg.norm(h)

    def f(r):
        return (cam.n_air * r / np.hypot(r, hc)
                - cam.n_water * (dist - r) / np.hypot(dist - r, depth))
    lo, hi = 0.0, dist
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    r = (lo + hi) / 2
    point = foot + (h * r / dist if dist > 0 else 0)
    return pinhole_project(cam, point)


#: a sample this far outside the image (pixels), or less, takes the
#: border's value (AP_BORDER_SLACK in csrc/mvs/cpu/cost_math.h)
BORDER_SLACK = 1e-3


def bilinear(img, u, v):
    h, w = img.shape
    s = BORDER_SLACK
    if not (-s <= u <= w - 1 + s and -s <= v <= h - 1 + s):
        return np.nan
    u, v = min(max(u, 0.0), w - 1.0), min(max(v, 0.0), h - 1.0)
    x0, y0 = min(int(u), w - 2), min(int(v), h - 2)
    fx, fy = u - x0, v - y0
    return ((1 - fx) * (1 - fy) * img[y0, x0] + fx * (1 - fy) * img[y0, x0 + 1]
            + (1 - fx) * fy * img[y0 + 1, x0] + fx * fy * img[y0 + 1, x0 + 1])


def warp(src, ref_cam, src_cam, depth):
    h, w = src.shape
    out = np.full((h, w), np.nan)
    for y in range(h):
        for x in range(w):
            ray = cast(ref_cam, x, y)
            if ray is None:
                continue
            p = project(src_cam, ray[0] + depth * ray[1])
            if p is not None:
                out[y, x] = bilinear(src.astype(np.float64), p[0], p[1])
    return out


def window_cost(ref, warped, y, x, cost, window):
    r = window // 2
    h, w = ref.shape
    ys, xs = np.mgrid[y - r:y + r + 1, x - r:x + r + 1]
    inside = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    ys, xs = ys[inside], xs[inside]
    s = warped[ys, xs]
    seen = ~np.isnan(s)
    rv, sv = ref[ys, xs].astype(np.float64)[seen], s[seen]
    if cost == "ssim":
        g1 = np.exp(-np.arange(-r, r + 1) ** 2 / (2 * 1.5 ** 2))
        g1 /= g1.sum()
        g = np.outer(g1, g1)[(ys - y + r)[seen], (xs - x + r)[seen]]
        wsum = g.sum()
        if wsum < 0.5:
            return 1.0
        mr, ms = (g * rv).sum() / wsum, (g * sv).sum() / wsum
        vr = (g * rv * rv).sum() / wsum - mr ** 2
        vs = (g * sv * sv).sum() / wsum - ms ** 2
        cov = (g * rv * sv).sum() / wsum - mr * ms
        c1, c2 = 0.01 ** 2, 0.03 ** 2
        ssim = ((2 * mr * ms + c1) * (2 * cov + c2)) / (
            (mr ** 2 + ms ** 2 + c1) * (vr + vs + c2))
        return min(max(1 - ssim, 0.0), 1.0)
    if seen.sum() < window * window / 2:
        return 1.0
    if cost == "sad":
        return np.abs(rv - sv).mean()
    mr, ms = rv.mean(), sv.mean()
    vr, vs = (rv * rv).mean() - mr ** 2, (sv * sv).mean() - ms ** 2
    if vr < 1e-10 or vs < 1e-10:
        return 1.0
    cov = (rv * sv).mean() - mr * ms
    return 1 - min(max(cov / np.sqrt(vr * vs), -1.0), 1.0)


def cost_volume(ref, srcs, ref_cam, src_cams, depths, cost, window):
    h, w = ref.shape
    out = np.zeros((h, w, len(depths)))
    for k, depth in enumerate(depths):
        for src, cam in zip(srcs, src_cams):
            warped = warp(src, ref_cam, cam, depth)
            for y in range(h):
                for x in range(w):
                    out[y, x, k] += window_cost(ref, warped, y, x, cost,
                                                window)
    return out / len(srcs)


def extract_depth(volume, depths):
    h, w, d = volume.shape
    depth = np.full((h, w), np.nan)
    conf = np.zeros((h, w))
    for y in range(h):
        for x in range(w):
            c = volume[y, x].astype(np.float64)
            if not np.isfinite(c).all():
                continue
            k = int(np.argmin(c))
            if k in (0, d - 1):
                continue
            curve = c[k - 1] - 2 * c[k] + c[k + 1]
            off = 0.5 * (c[k - 1] - c[k + 1]) / curve if curve > 0 else 0.0
            off = min(max(off, -0.5), 0.5)
            step = depths[k + 1] - depths[k] if off >= 0 else \
                depths[k] - depths[k - 1]
            depth[y, x] = depths[k] + off * step
            a = 1 - min(max(c[k], 0), 1)
            b = min(max(1 - c[k] / c.mean(), 0), 1) if c.mean() > 0 else 0
            conf[y, x] = np.sqrt(a * b)
    return depth, conf
