"""AquaMVS's dense costs (its dense/cost.py and the sampling of
dense/plane_sweep.py) written plainly in float64 NumPy, as the reference
the kernels' parity="aquamvs" mode is tested against: full 2-D windows,
zero padding by slicing, nothing shared with the kernels. The geometry is
the native cameras' (Camera.cast_rays, Camera.project), which mirror
AquaMVS's and are tested on their own."""
import numpy as np

SSIM_C1, SSIM_C2 = 0.01 ** 2, 0.03 ** 2


def sample_zeros(img, u, v):
    """grid_sample(bilinear, padding_mode="zeros", align_corners=True) at
    pixel coordinates: texels outside the image count as 0; NaN where u
    is (no projection)."""
    img = img.astype(np.float64)
    h, w = img.shape
    out = np.full(u.shape, np.nan)
    seen = ~np.isnan(u)
    x, y = u[seen], v[seen]
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    total = np.zeros(x.shape)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            xi, yi = x0 + dx, y0 + dy
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            xs = np.clip(xi, 0, w - 1).astype(np.int64)
            ys = np.clip(yi, 0, h - 1).astype(np.int64)
            total += np.where(inside, img[ys, xs], 0.0) * wx * wy
    out[seen] = total
    return out


def warp(src, ref_cam, src_cam, depth):
    """src seen from the reference view at one ray depth, AquaMVS's way:
    NaN only where the point does not project."""
    h, w = src.shape
    v, u = np.mgrid[0:h, 0:w]
    pixels = np.stack([u.ravel(), v.ravel()], axis=1).astype(np.float64)
    origins, directions, _ = ref_cam.cast_rays(pixels)
    uv, valid = src_cam.project(origins + depth * directions)
    uv = np.where(valid[:, None], uv, np.nan)
    return sample_zeros(src, uv[:, 0], uv[:, 1]).reshape(h, w)


def gaussian(window):
    g = np.exp(-(np.arange(window) - window // 2) ** 2 / (2 * 1.5 ** 2))
    k = np.outer(g, g)
    return k / k.sum()


def conv(x, kernel):
    """F.conv2d(x, kernel, padding=window // 2): zeros beyond the image."""
    h, w = x.shape
    r = kernel.shape[0] // 2
    padded = np.zeros((h + 2 * r, w + 2 * r))
    padded[r:r + h, r:r + w] = x
    out = np.zeros((h, w))
    for i in range(2 * r + 1):
        for j in range(2 * r + 1):
            out += kernel[i, j] * padded[i:i + h, j:j + w]
    return out


def window_cost(ref, warped, cost, window, centre="own"):
    """AquaMVS's compute_ncc / compute_ssim. centre="window" centres every
    pixel by the output pixel's window instead (the textbook way), for
    tests that tell the two apart."""
    ref = ref.astype(np.float64)
    m = (~np.isnan(warped)).astype(np.float64)
    s = np.where(m > 0, warped, 0.0)
    kernel = np.ones((window, window)) if cost == "ncc" else \
        gaussian(window)
    seen = conv(m, kernel)
    count = np.maximum(seen, 1.0 if cost == "ncc" else 1e-8)
    mr, ms = conv(ref * m, kernel) / count, conv(s * m, kernel) / count
    if centre == "own":
        rc, sc = (ref - mr) * m, (s - ms) * m
        vr = conv(rc ** 2, kernel) / count
        vs = conv(sc ** 2, kernel) / count
        cov = conv(rc * sc, kernel) / count
    else:
        vr = conv(ref ** 2 * m, kernel) / count - mr ** 2
        vs = conv(s ** 2 * m, kernel) / count - ms ** 2
        cov = conv(ref * s * m, kernel) / count - mr * ms
    if cost == "ncc":
        c = 1.0 - cov / (np.sqrt(vr * vs) + 1e-8)
        c = np.where(seen < window * window // 2, 1.0, c)
        return np.clip(c, 0.0, 2.0)
    ssim = ((2 * mr * ms + SSIM_C1) * (2 * cov + SSIM_C2)) / (
        (mr ** 2 + ms ** 2 + SSIM_C1) * (vr + vs + SSIM_C2))
    c = np.where(count < 0.5, 1.0, 1.0 - ssim)
    return np.clip(c, 0.0, 1.0)


def cost_volume(ref, srcs, ref_cam, src_cams, depths, cost, window):
    out = np.zeros(ref.shape + (len(depths),))
    for k, depth in enumerate(depths):
        out[..., k] = np.mean([
            window_cost(ref, warp(src, ref_cam, cam, depth), cost, window)
            for src, cam in zip(srcs, src_cams)], axis=0)
    return out
