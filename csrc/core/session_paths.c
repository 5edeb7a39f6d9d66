/* A session's table of distinct stage paths, shared by its threads: each
 * thread files its calls in its own tree, whose nodes name a path here,
 * so that the report's stages are this table (no merge by name at the
 * end), a thread's exit merges into it, and config.max_stages bounds it. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc.h"
#include "intern.h"
#include "session_internal.h"

/* Adds the path (parent, name). AP_ERR_NOMEM leaves s unchanged. */
static ap_status
add_path(ap_session *s, uint32_t parent, uint32_t name, uint32_t *path)
{
    if (ap_path_map_reserve(&s->path_ids) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    if (s->npaths == s->paths_cap) {
        uint32_t cap = s->paths_cap ? s->paths_cap * 2 : 16;
        ap_report_stage *paths = ap_realloc(s->paths, cap * sizeof(*paths));
        if (!paths) {
            return AP_ERR_NOMEM;
        }
        s->paths = paths;
        s->paths_cap = cap;
    }
    ap_report_stage *p = &s->paths[s->npaths];
    p->name = name;
    p->parent = parent == NO_PATH ? -1 : (int32_t)parent;
    p->depth = parent == NO_PATH ? 0 : s->paths[parent].depth + 1;
    ap_stats_init(&p->stats);
    ap_path_map_put(&s->path_ids, parent + 1, name, s->npaths);
    *path = s->npaths++;
    return AP_OK;
}

static int
find_path(const ap_session *s, uint32_t parent, uint32_t name,
          uint32_t *path)
{
    return ap_path_map_find(&s->path_ids, parent + 1, name, path);
}

/* An entry of a path that may not be added, folded into the path `fold`
 * names under the same parent, so that the parent's self time stays
 * right; a folding path's own children fold into it. Each parent gets at
 * most one of each. */
static ap_status
fold_path(ap_session *s, uint32_t parent, uint32_t fold, uint32_t *path,
          uint32_t *filed, int64_t *counter)
{
    *filed = fold;
    ap_status st = AP_OK;
    if (parent != NO_PATH && s->paths[parent].name == fold) {
        *path = parent;
    } else if (!find_path(s, parent, fold, path)) {
        st = add_path(s, parent, fold, path);
    }
    *counter += st == AP_OK;
    return st;
}

static uint32_t
max_stages(const ap_session *s)
{
    return s->config.max_stages ? s->config.max_stages : AP_MAX_STAGES;
}

ap_status
ap_path_resolve_locked(ap_session *s, uint32_t parent, uint32_t name,
                       uint32_t *path, uint32_t *filed)
{
    *filed = name;
    if (find_path(s, parent, name, path)) {
        return AP_OK;
    }
    if (parent != NO_PATH && s->paths[parent].depth + 1 >= AP_MAX_DEPTH) {
        /* the folding path sits at AP_MAX_DEPTH, never deeper */
        return fold_path(s, parent, s->too_deep_name, path, filed,
                         &s->too_deep);
    }
    if (name != AP_NAME_OVER && s->npaths < max_stages(s)) {
        return add_path(s, parent, name, path);
    }
    /* the table holds at most 2 * max_stages + 1 paths, and the too-deep
     * ones; AP_NAME_OVER, a name that could make no path, is never one */
    return fold_path(s, parent, s->overflow_name, path, filed,
                     &s->overflowed);
}

ap_status
ap_stage_name_id(const char *name, size_t len, uint32_t *id)
{
    if (ap_intern_find(name, len, id)) {
        return AP_OK;
    }
    if (!name || len == 0) {
        return AP_ERR_INVALID;
    }
    ap_session *s = atomic_load_explicit(&ap_current_session,
                                         memory_order_acquire);
    if (!s) {
        return AP_IGNORED;
    }
    /* A name new to the process makes a new path at its entry, if any:
     * none once the table is full (npaths never falls while s records).
     * The room is taken before the name is added, and given back when
     * the name was not added (another thread's was first), so that
     * threads racing to add names never pass max_stages. */
    pthread_mutex_lock(&s->lock);
    int room = s->npaths < max_stages(s) && s->names_added < max_stages(s);
    s->names_added += room;
    pthread_mutex_unlock(&s->lock);
    if (!room) {
        *id = AP_NAME_OVER;
        return AP_OK;
    }
    int added;
    ap_status st = ap_intern_added(name, len, id, &added);
    if (!added) {
        pthread_mutex_lock(&s->lock);
        s->names_added--;
        pthread_mutex_unlock(&s->lock);
    }
    return st;
}

void
ap_paths_free(ap_session *s)
{
    for (uint32_t i = 0; i < s->ended_recent_cap; i++) {
        free(s->ended_recent[i].calls);
    }
    free(s->ended_recent);
    s->ended_recent = NULL;
    s->ended_recent_cap = 0;
    for (uint32_t i = 0; s->paths && i < s->npaths; i++) {
        ap_stats_free(&s->paths[i].stats);
    }
    free(s->paths);
    s->paths = NULL;
    s->npaths = s->paths_cap = 0;
    ap_path_map_free(&s->path_ids);
}
