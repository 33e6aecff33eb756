/*
 * keep_ingest_stub.c - ingest_write_record and ingest_rotate for keep_test
 * while collector/ingest.c does not define them yet (keep.cmake decides):
 * the keeper's tests then run on their fake ingest only.
 */
#include <errno.h>

#include "collector/ingest.h"

int ingest_write_record(ingest_t *ing, const struct fss_record_head *rec)
{
	(void)ing;
	(void)rec;
	return -ENOSYS;
}

int ingest_rotate(ingest_t *ing, const char *path)
{
	(void)ing;
	(void)path;
	return -ENOSYS;
}
