#include "staged_planes.h"

void
ap_write_staged(float *volume, int w, int d, int plane0,
                const float *staged, size_t plane_size, int count, int y0,
                int y1)
{
    for (int y = y0; y < y1; y++) {
        const float *row = staged + (size_t)(y - y0) * w;
        float *out = volume + (size_t)y * w * d + plane0;
        for (size_t x = 0; x < (size_t)w; x++) {
            if (count == AP_STAGED_PLANES) {    /* a constant trip count */
                for (int k = 0; k < AP_STAGED_PLANES; k++) {
                    out[x * d + k] = row[k * plane_size + x];
                }
            } else {
                for (int k = 0; k < count; k++) {
                    out[x * d + k] = row[k * plane_size + x];
                }
            }
        }
    }
}
