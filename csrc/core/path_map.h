/* A map from (parent, name) to an index: a thread's stage tree finds a
 * node's child by it on every ap_enter, and the report merges the
 * threads' trees into one table of paths by it. Open addressing, keys
 * never removed. Not thread-safe: each map has one owner. */
#ifndef AP_PATH_MAP_H
#define AP_PATH_MAP_H

#include <stdint.h>

#include "status.h"

typedef struct {
    uint64_t *keys;        /* (parent << 32 | name) + 1, 0 = empty */
    uint32_t *vals;
    uint32_t mask;
    uint32_t count;
} ap_path_map;

static inline uint64_t
ap_path_map_key(uint32_t parent, uint32_t name)
{
    return ((uint64_t)parent << 32 | name) + 1;
}

/* Where a key's probe starts in a table of mask + 1 slots. */
static inline uint32_t
ap_path_map_slot(uint64_t key, uint32_t mask)
{
    return (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32) & mask;
}

/* Inline: ap_enter looks a child up at every stage edge. Returns 1 and
 * sets *val when (parent, name) is in m, else 0. */
static inline int
ap_path_map_find(const ap_path_map *m, uint32_t parent, uint32_t name,
                 uint32_t *val)
{
    uint64_t key = ap_path_map_key(parent, name);
    for (uint32_t i = ap_path_map_slot(key, m->mask); m->keys[i];
         i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
    }
    return 0;
}

/* Sets the value of (parent, name), which m must hold. */
static inline void
ap_path_map_update(ap_path_map *m, uint32_t parent, uint32_t name,
                   uint32_t val)
{
    uint64_t key = ap_path_map_key(parent, name);
    for (uint32_t i = ap_path_map_slot(key, m->mask); m->keys[i];
         i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
    }
}

/* An empty map with room for `expected` keys before it grows. AP_OK or
 * AP_ERR_NOMEM (m then holds nothing to free). */
ap_status ap_path_map_init(ap_path_map *m, uint32_t expected);

/* Room for one more key, so that the next ap_path_map_put cannot fail.
 * AP_OK or AP_ERR_NOMEM with m unchanged. */
ap_status ap_path_map_reserve(ap_path_map *m);

/* Adds (parent, name) -> val; the key must be absent and room reserved. */
void ap_path_map_put(ap_path_map *m, uint32_t parent, uint32_t name,
                     uint32_t val);

void ap_path_map_free(ap_path_map *m);

#endif
