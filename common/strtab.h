/*
 * strtab.h - interned strings of a trace, keyed by (source, id).
 *
 * Readers feed it the FSS_REC_STRING parts they meet and look names up by
 * the ids other records carry. Parts may come in any order; a string is
 * visible once all its bytes have arrived.
 */
#ifndef FSS_COMMON_STRTAB_H
#define FSS_COMMON_STRTAB_H

#include <stdint.h>

#include "common/record.h"

typedef struct strtab strtab_t;

strtab_t *strtab_new(void);
void strtab_free(strtab_t *t);

/*
 * strtab_add_part - store one part. Returns 0, -EINVAL for a part that does
 * not fit its declared length (offset + part beyond total_len, id 0), or
 * -ENOMEM. A part of a string already complete replaces those bytes.
 */
int strtab_add_part(strtab_t *t, const struct fss_rec_string *part);

/*
 * strtab_get - the NUL-terminated string, or NULL when it is unknown or not
 * complete yet. Valid until the next strtab_add_part or strtab_free.
 */
const char *strtab_get(const strtab_t *t, uint32_t source, uint32_t id);

#endif
