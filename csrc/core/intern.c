#include "intern.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static uint64_t
fnv1a(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    }
    return h;
}

static ap_status
grow_slots(ap_intern_table *t)
{
    uint32_t cap = t->slots ? (t->mask + 1) * 2 : 64;
    uint32_t *fresh = ap_calloc(cap, sizeof(*fresh));
    if (!fresh) {
        return AP_ERR_NOMEM;
    }
    for (uint32_t id = 0; id < t->count; id++) {
        uint32_t i = (uint32_t)t->entries[id].hash & (cap - 1);
        while (fresh[i]) {
            i = (i + 1) & (cap - 1);
        }
        fresh[i] = id + 1;
    }
    free(t->slots);
    t->slots = fresh;
    t->mask = cap - 1;
    return AP_OK;
}

static ap_status
append(ap_intern_table *t, const char *text, size_t len, uint64_t hash,
       uint32_t *id)
{
    if (t->count == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        ap_interned *fresh = ap_realloc(t->entries,
                                        cap * sizeof(*fresh));
        if (!fresh) {
            return AP_ERR_NOMEM;
        }
        t->entries = fresh;
        t->cap = cap;
    }
    char *copy = ap_malloc(len + 1);
    if (!copy) {
        return AP_ERR_NOMEM;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    t->entries[t->count] = (ap_interned){copy, len, hash};
    *id = t->count++;
    return AP_OK;
}

/* The slot of text[0:len] in t: its own, or the empty one where it
 * would go. t must have slots. */
static uint32_t
probe(const ap_intern_table *t, const char *text, size_t len, uint64_t hash)
{
    uint32_t i = (uint32_t)hash & t->mask;
    for (; t->slots[i]; i = (i + 1) & t->mask) {
        const ap_interned *e = &t->entries[t->slots[i] - 1];
        if (e->hash == hash && e->len == len && !memcmp(e->text, text, len)) {
            break;
        }
    }
    return i;
}

int
ap_intern_table_find(const ap_intern_table *t, const char *text, size_t len,
                     uint32_t *id)
{
    if (!t->slots) {
        return 0;
    }
    uint32_t i = probe(t, text, len, fnv1a(text, len));
    if (!t->slots[i]) {
        return 0;
    }
    *id = t->slots[i] - 1;
    return 1;
}

/* As ap_intern_table_add; *added tells whether text was new to t. */
static ap_status
table_add(ap_intern_table *t, const char *text, size_t len, uint32_t *id,
          int *added)
{
    uint64_t hash = fnv1a(text, len);
    *added = 0;
    if (t->slots) {
        uint32_t i = probe(t, text, len, hash);
        if (t->slots[i]) {
            *id = t->slots[i] - 1;
            return AP_OK;
        }
    }
    if (t->count >= AP_INTERN_MAX_IDS) {
        return AP_ERR_NOMEM;    /* ids past it are the callers' markers */
    }
    if (!t->slots || (t->count + 1) * 2 > t->mask + 1) {
        ap_status st = grow_slots(t);
        if (st != AP_OK) {
            return st;
        }
    }
    uint32_t i = probe(t, text, len, hash);
    ap_status st = append(t, text, len, hash, id);
    if (st == AP_OK) {
        t->slots[i] = *id + 1;
        *added = 1;
    }
    return st;
}

ap_status
ap_intern_table_add(ap_intern_table *t, const char *text, size_t len,
                    uint32_t *id)
{
    int added;
    return table_add(t, text, len, id, &added);
}

const char *
ap_intern_table_text(const ap_intern_table *t, uint32_t id, size_t *len)
{
    if (id >= t->count) {
        return NULL;
    }
    if (len) {
        *len = t->entries[id].len;
    }
    return t->entries[id].text;
}

void
ap_intern_table_free(ap_intern_table *t)
{
    for (uint32_t id = 0; id < t->count; id++) {
        free(t->entries[id].text);
    }
    free(t->entries);
    free(t->slots);
    *t = (ap_intern_table)AP_INTERN_TABLE_INIT;
}

/* The process-wide stage names; never freed, as callers cache their ids.
 * What bounds them is the callers' (ap_stage_name_id). */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static ap_intern_table names = AP_INTERN_TABLE_INIT; /* names_lock */

ap_status
ap_intern(const char *name, size_t len, uint32_t *id)
{
    int added;
    return ap_intern_added(name, len, id, &added);
}

ap_status
ap_intern_added(const char *name, size_t len, uint32_t *id, int *added)
{
    *added = 0;
    if (!name || len == 0) {
        return AP_ERR_INVALID;
    }
    pthread_mutex_lock(&names_lock);
    ap_status st = table_add(&names, name, len, id, added);
    pthread_mutex_unlock(&names_lock);
    return st;
}

int
ap_intern_find(const char *name, size_t len, uint32_t *id)
{
    if (!name || len == 0) {
        return 0;
    }
    pthread_mutex_lock(&names_lock);
    int found = ap_intern_table_find(&names, name, len, id);
    pthread_mutex_unlock(&names_lock);
    return found;
}

uint32_t
ap_intern_count(void)
{
    pthread_mutex_lock(&names_lock);
    uint32_t n = names.count;
    pthread_mutex_unlock(&names_lock);
    return n;
}

const char *
ap_intern_name(uint32_t id, size_t *len)
{
    /* the lock keeps entries from moving under the read */
    pthread_mutex_lock(&names_lock);
    const char *text = ap_intern_table_text(&names, id, len);
    pthread_mutex_unlock(&names_lock);
    return text;
}

void
ap_intern_after_fork(void)
{
    pthread_mutex_init(&names_lock, NULL);
}
