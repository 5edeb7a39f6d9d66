#include "path_map.h"

#include <stdlib.h>

#include "alloc.h"

/* Keeps at least half the slots empty, so probes stay short. */
static int
full(uint32_t count, uint32_t mask)
{
    return (uint64_t)(count + 1) * 2 > (uint64_t)mask + 1;
}

static void
place(uint64_t *keys, uint32_t *vals, uint32_t mask, uint64_t key,
      uint32_t val)
{
    uint32_t i = ap_path_map_slot(key, mask);
    while (keys[i]) {
        i = (i + 1) & mask;
    }
    keys[i] = key;
    vals[i] = val;
}

static ap_status
resize(ap_path_map *m, uint32_t cap)
{
    uint64_t *keys = ap_calloc(cap, sizeof(*keys));
    uint32_t *vals = ap_malloc(cap * sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return AP_ERR_NOMEM;
    }
    for (uint32_t i = 0; m->keys && i <= m->mask; i++) {
        if (m->keys[i]) {
            place(keys, vals, cap - 1, m->keys[i], m->vals[i]);
        }
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = cap - 1;
    return AP_OK;
}

ap_status
ap_path_map_init(ap_path_map *m, uint32_t expected)
{
    *m = (ap_path_map){NULL, NULL, 0, 0};
    uint32_t cap = 64;
    while (cap < (1u << 31) && full(expected, cap - 1)) {
        cap *= 2;
    }
    return resize(m, cap);
}

ap_status
ap_path_map_reserve(ap_path_map *m)
{
    if (!full(m->count, m->mask)) {
        return AP_OK;
    }
    return resize(m, (m->mask + 1) * 2);
}

void
ap_path_map_put(ap_path_map *m, uint32_t parent, uint32_t name,
                uint32_t val)
{
    place(m->keys, m->vals, m->mask, ap_path_map_key(parent, name), val);
    m->count++;
}

void
ap_path_map_free(ap_path_map *m)
{
    free(m->keys);
    free(m->vals);
    *m = (ap_path_map){NULL, NULL, 0, 0};
}
