/*
 * sources_fuzz.c - libFuzzer target for the per-source layer
 * (collector/source.h) and the timeline that reads through it.
 *
 * The trace decoder has its own target (trace_fuzz.c); here the input is
 * read directly as a sequence of records, so that every mutation reaches the
 * layer's bookkeeping: a control byte picks the type and the source (a
 * few ids, and FSS_SOURCE_NONE), the record's fields come from the next
 * bytes (zero-filled when the input runs out), as the parser would hand
 * them over. Strings in parts, NVTX ranges waiting for their names,
 * communicator splits, sequence numbers and ends all come out of that.
 */
#include "collector/source.h"
#include "collector/timeline.h"
#include "common/record.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	const sources_t *layer;
	uint64_t sink;
};

static int on_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	struct seen *s = ctx;

	(void)rec;
	if (src) {
		const char *host = sources_string(s->layer, src->id, src->host);

		s->sink += (host ? strlen(host) : 0) + (uint64_t)src->rank + source_collectives_missing(src);
		s->sink += (uint64_t)source_end_of(src) + (uint64_t)source_signal(src);
	}
	return 0;
}

static int on_range(void *ctx, struct source *src, const struct fss_rec_nvtx_range *r, const char *domain,
		    const char *name)
{
	struct seen *s = ctx;

	(void)src;
	s->sink += strlen(domain) + strlen(name) + r->start_ns;
	return 0;
}

static int on_comm(void *ctx, struct source *src, size_t index)
{
	struct seen *s = ctx;

	s->sink += src->comms[index].dimension;
	return 0;
}

static const struct source_ops ops = {.on_record = on_record, .on_nvtx_range = on_range, .on_comm = on_comm};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen seen = {0};
	sources_t *layer = sources_new(&ops, &seen);
	timeline_t *tl = timeline_new("*:step *", "*");
	_Alignas(8) unsigned char rec[FSS_RECORD_MAX_BYTES];
	size_t off = 0;

	if (!layer || !tl)
		goto out;
	seen.layer = layer;
	while (off < size) {
		struct fss_record_head *head = (struct fss_record_head *)rec;
		uint8_t control = data[off++];
		uint16_t type = (uint16_t)(control % (FSS_REC_TYPE_MAX + 1));
		uint32_t source = (control >> 5) == 7 ? FSS_SOURCE_NONE : (uint32_t)(control >> 5);
		size_t known = record_known_size(type);
		size_t body = known ? known - sizeof(*head) : 8;
		size_t take = size - off < body ? size - off : body;
		struct tl_source *touched;

		memset(rec, 0, sizeof(rec));
		memcpy(rec + sizeof(*head), data + off, take);
		off += take;
		head->type = type;
		head->size = (uint16_t)(known ? known : sizeof(*head) + 8);
		head->source = source;
		if (sources_feed(layer, head) || timeline_feed(tl, head, &touched))
			break;
	}
	sources_finish(layer);
	timeline_flush_groups(tl);
	{
		struct source_summary *sum;
		size_t n;

		if (sources_summarize(layer, &sum, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				seen.sink += sum[i].dropped + strlen(sum[i].host);
			free(sum);
		}
	}
out:
	timeline_free(tl);
	sources_free(layer);
	return seen.sink == 0x123456789abcdefull; /* never, but keeps the reads */
}
