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

ap_status
ap_intern_table_add(ap_intern_table *t, const char *text, size_t len,
                    uint32_t *id)
{
    uint64_t hash = fnv1a(text, len);
    if (!t->slots || (t->count + 1) * 2 > t->mask + 1) {
        ap_status st = grow_slots(t);
        if (st != AP_OK) {
            return st;
        }
    }
    uint32_t i = (uint32_t)hash & t->mask;
    for (; t->slots[i]; i = (i + 1) & t->mask) {
        const ap_interned *e = &t->entries[t->slots[i] - 1];
        if (e->hash == hash && e->len == len && !memcmp(e->text, text, len)) {
            *id = t->slots[i] - 1;
            return AP_OK;
        }
    }
    ap_status st = append(t, text, len, hash, id);
    if (st == AP_OK) {
        t->slots[i] = *id + 1;
    }
    return st;
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

/* The process-wide stage names; never freed, as callers cache their ids. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static ap_intern_table names = AP_INTERN_TABLE_INIT; /* names_lock */

ap_status
ap_intern(const char *name, size_t len, uint32_t *id)
{
    if (!name || len == 0) {
        return AP_ERR_INVALID;
    }
    pthread_mutex_lock(&names_lock);
    ap_status st = ap_intern_table_add(&names, name, len, id);
    pthread_mutex_unlock(&names_lock);
    return st;
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
