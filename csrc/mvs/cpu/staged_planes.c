#include "staged_planes.h"

#include "workers.h"

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

static long long
item_count(const ap_plane_bands *items)
{
    int group = items->group;
    return ((long long)items->args->count + group - 1) / group *
           items->bands;
}

void
ap_plane_bands_work(ap_plane_bands *items, ap_band_costs costs,
                    const void *job, void *workspace, float *staged)
{
    const ap_sweep_args *a = items->args;
    size_t plane_size = (size_t)items->band_rows * a->w;
    long long count = item_count(items), item;
    while ((item = atomic_fetch_add(&items->next_item, 1)) < count &&
           !atomic_load(&items->failed) && !atomic_load(&items->stopped)) {
        int start = (int)(item / items->bands) * items->group;
        int planes = a->count - start < items->group ? a->count - start
                                                      : items->group;
        int y0 = (int)(item % items->bands) * items->band_rows;
        int y1 = y0 + items->band_rows > a->h ? a->h
                                               : y0 + items->band_rows;
        int k = 0;
        for (; k < planes &&
               !ap_worker_stopped(a->stop, a->stop_ctx, &items->stopped);
             k++) {
            costs(job, workspace, start + k, y0, y1,
                  staged != NULL ? staged + k * plane_size : NULL);
        }
        if (staged != NULL) {
            ap_write_staged(items->out, a->w, a->d, a->first + start,
                            staged, plane_size, k, y0, y1);
        }
    }
}

int
ap_plane_bands_run(ap_plane_bands *items, void *(*worker)(void *),
                   void *job)
{
    long long count = item_count(items);
    int threads = items->args->threads < count ? items->args->threads
                                               : (int)count;
    int status = ap_run_workers(worker, job, threads, &items->failed);
    if (status == 0 && atomic_load(&items->failed)) {
        status = -1;
    } else if (status == 0 && atomic_load(&items->stopped)) {
        status = AP_SWEEP_STOPPED;
    }
    return status;
}
