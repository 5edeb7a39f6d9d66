/* Process-wide stage-name table: a name gets one id for the life of the
 * process, so ids cached by callers stay valid across sessions. */
#ifndef AP_INTERN_H
#define AP_INTERN_H

#include <stddef.h>
#include <stdint.h>
#include "status.h"

/* Looks up or adds name[0:len] (UTF-8, len > 0). Thread-safe. Returns
 * AP_OK and sets *id, AP_ERR_INVALID for an empty name, AP_ERR_NOMEM. */
ap_status ap_intern(const char *name, size_t len, uint32_t *id);

/* The name for id, NUL-terminated, or NULL if id was never given out.
 * The pointer stays valid for the life of the process. */
const char *ap_intern_name(uint32_t id, size_t *len);

uint32_t ap_intern_count(void);

/* For a forked child: the table's lock may have been held by a thread
 * that the child does not have. */
void ap_intern_after_fork(void);

#endif
