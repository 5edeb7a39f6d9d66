#include "intern.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *text;
    size_t len;
    uint64_t hash;
} ap_name;

/* All fields below are protected by table_lock. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static ap_name *names;          /* indexed by id */
static uint32_t names_len, names_cap;
static uint32_t *slots;         /* open addressing: id + 1, 0 = empty */
static uint32_t slots_mask;

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
grow_slots_unlocked(void)
{
    uint32_t cap = slots ? (slots_mask + 1) * 2 : 64;
    uint32_t *fresh = calloc(cap, sizeof(*fresh));
    if (!fresh) {
        return AP_ERR_NOMEM;
    }
    for (uint32_t id = 0; id < names_len; id++) {
        uint32_t i = (uint32_t)names[id].hash & (cap - 1);
        while (fresh[i]) {
            i = (i + 1) & (cap - 1);
        }
        fresh[i] = id + 1;
    }
    free(slots);
    slots = fresh;
    slots_mask = cap - 1;
    return AP_OK;
}

static ap_status
append_unlocked(const char *name, size_t len, uint64_t hash, uint32_t *id)
{
    if (names_len == names_cap) {
        uint32_t cap = names_cap ? names_cap * 2 : 64;
        ap_name *fresh = realloc(names, cap * sizeof(*fresh));
        if (!fresh) {
            return AP_ERR_NOMEM;
        }
        names = fresh;
        names_cap = cap;
    }
    char *text = malloc(len + 1);
    if (!text) {
        return AP_ERR_NOMEM;
    }
    memcpy(text, name, len);
    text[len] = '\0';
    names[names_len] = (ap_name){text, len, hash};
    *id = names_len++;
    return AP_OK;
}

ap_status
ap_intern(const char *name, size_t len, uint32_t *id)
{
    if (!name || len == 0) {
        return AP_ERR_INVALID;
    }
    uint64_t hash = fnv1a(name, len);
    ap_status st = AP_OK;
    pthread_mutex_lock(&table_lock);
    if (!slots || (names_len + 1) * 2 > slots_mask + 1) {
        st = grow_slots_unlocked();
        if (st != AP_OK) {
            goto done;
        }
    }
    uint32_t i = (uint32_t)hash & slots_mask;
    for (; slots[i]; i = (i + 1) & slots_mask) {
        ap_name *n = &names[slots[i] - 1];
        if (n->hash == hash && n->len == len && !memcmp(n->text, name, len)) {
            *id = slots[i] - 1;
            goto done;
        }
    }
    st = append_unlocked(name, len, hash, id);
    if (st == AP_OK) {
        slots[i] = *id + 1;
    }
done:
    pthread_mutex_unlock(&table_lock);
    return st;
}

const char *
ap_intern_name(uint32_t id, size_t *len)
{
    const char *text = NULL;
    pthread_mutex_lock(&table_lock);
    if (id < names_len) {
        text = names[id].text;
        if (len) {
            *len = names[id].len;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return text;
}

uint32_t
ap_intern_count(void)
{
    pthread_mutex_lock(&table_lock);
    uint32_t n = names_len;
    pthread_mutex_unlock(&table_lock);
    return n;
}

void
ap_intern_after_fork(void)
{
    pthread_mutex_init(&table_lock, NULL);
}
