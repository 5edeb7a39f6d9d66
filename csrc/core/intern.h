/* Interning: each distinct string gets a dense id, in order of first
 * sight. ap_intern_table is the table itself, for a caller that locks it
 * and frees it (the GPU layer's kernel names, one table a trace); ap_intern
 * is the process-wide stage-name table: a name gets one id for the life of
 * the process, so ids cached by callers stay valid across sessions. Never
 * freed, it is bounded by what adds to it: stage entries add names
 * through ap_stage_name_id (session.h), max_stages a session at most. */
#ifndef AP_INTERN_H
#define AP_INTERN_H

#include <stddef.h>
#include <stdint.h>
#include "status.h"

typedef struct {
    char *text;            /* NUL-terminated copy, owned */
    size_t len;
    uint64_t hash;         /* kept so that growing rehashes nothing */
} ap_interned;

typedef struct {
    ap_interned *entries;  /* by id */
    uint32_t count, cap;
    uint32_t *slots;       /* open addressing: id + 1, 0 = empty */
    uint32_t mask;
} ap_intern_table;

/* Ids are below this: a table holds at most this many texts, and the ids
 * above are free for callers' markers (ap_stage_name_id's AP_NAME_OVER). */
#define AP_INTERN_MAX_IDS (1u << 30)

/* An empty table; all zeros is one too. */
#define AP_INTERN_TABLE_INIT {NULL, 0, 0, NULL, 0}

/* Looks up or adds text[0:len] (len may be 0) in t. Not thread-safe.
 * Returns AP_OK and sets *id, or AP_ERR_NOMEM (out of memory, or
 * AP_INTERN_MAX_IDS texts held) with t holding what it held. */
ap_status ap_intern_table_add(ap_intern_table *t, const char *text,
                              size_t len, uint32_t *id);

/* Looks text[0:len] up in t without adding it: 1 and *id set, or 0. */
int ap_intern_table_find(const ap_intern_table *t, const char *text,
                         size_t len, uint32_t *id);

/* The text for id, NUL-terminated, or NULL if t has no such id. The
 * pointer stays valid until t is freed, whatever is added meanwhile. */
const char *ap_intern_table_text(const ap_intern_table *t, uint32_t id,
                                 size_t *len);

/* Frees every text and the table's arrays, leaving t empty. */
void ap_intern_table_free(ap_intern_table *t);

/* Looks up or adds name[0:len] (UTF-8, len > 0) in the process-wide
 * table. Thread-safe. Returns AP_OK and sets *id, AP_ERR_INVALID for an
 * empty name, AP_ERR_NOMEM. */
ap_status ap_intern(const char *name, size_t len, uint32_t *id);

/* As ap_intern; *added is 1 when name was new to the table (0 on any
 * failure). */
ap_status ap_intern_added(const char *name, size_t len, uint32_t *id,
                          int *added);

/* Looks name[0:len] up in the process-wide table without adding it: 1
 * and *id set, or 0 (an empty name: 0). Thread-safe. */
int ap_intern_find(const char *name, size_t len, uint32_t *id);

/* How many names the process-wide table holds: for tests of its bound. */
uint32_t ap_intern_count(void);

/* The name for id, NUL-terminated, or NULL if id was never given out.
 * The pointer stays valid for the life of the process. */
const char *ap_intern_name(uint32_t id, size_t *len);

/* For a forked child: the table's lock may have been held by a thread
 * that the child does not have. */
void ap_intern_after_fork(void);

#endif
