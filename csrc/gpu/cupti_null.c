/* The backend of a build without CUPTI's headers: nothing can be traced,
 * and every call says so as the status line does. */
#include "cupti_api.h"

#include <stdio.h>

#define LACKING "aquaprof was built without the CUPTI headers: GPU " \
                "activity cannot be traced (rebuild with CUDA_HOME set)"

static ap_status
lacking(char *why, size_t size)
{
    snprintf(why, size, "%s", LACKING);
    return AP_ERR_SYSTEM;
}

static ap_status
null_open(const char *const *candidates, size_t n, char *where,
          size_t where_size, char *why, size_t size)
{
    (void)candidates;
    (void)n;
    if (where_size) {
        where[0] = '\0';
    }
    return lacking(why, size);
}

static void
null_nothing(void)
{
}

static int
null_push_tag(uint64_t tag)
{
    (void)tag;
    return 0;
}

const ap_cupti_api ap_cupti_null = {
    .lacking = LACKING,
    .open = null_open,
    .take_callbacks = lacking,
    .enable = lacking,
    .disable = null_nothing,
    .flush = null_nothing,
    .push_tag = null_push_tag,
    .pop_tag = null_nothing,
};
