/* What the fake CUPTI (fake_cupti.c) offers the fake GPU's records
 * (fake_cupti_records.c). */
#ifndef FAKE_CUPTI_H
#define FAKE_CUPTI_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

/* One API call: a new correlation id, and the external correlation
 * record that ties it to the id the calling thread pushed last. */
uint32_t fake_api_call(void);

/* Queues a record of `kind` for the next flush, if that kind is enabled. */
void fake_emit(CUpti_ActivityKind kind, const void *record, size_t size);

/* Records the next cuptiActivityGetNumDroppedRecords reports. */
extern size_t fake_cupti_dropped;

/* Now, on the clock of the registered timestamp callback. */
uint64_t fake_now(void);

#endif
