/*
 * sender_retention.c - the socket sink's retention and its return channel
 * (sender_retention.h): each chunk sent is kept until the collector's ack
 * covers it, bounded by FSDPSCOPE_RETAIN_BYTES, so that a file after a
 * failure repeats what the collector did not confirm.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/sender_retention.h"
#include "agent/sender_state.h"
#include "common/wire.h"

#define SENDER_ACK_READS 16 /* recv calls per look at most: a flood cannot hold the thread */

void sender_retained_free(struct retained *r)
{
	while (r) {
		struct retained *next = r->next;
		free(r);
		r = next;
	}
}

static void sender_retained_free_all(void)
{
	sender_retained_free(sender.ret_head);
	sender.ret_head = sender.ret_tail = NULL;
	sender.ret_bytes = 0;
	atomic_store(&sender.retained_bytes, 0);
}

static void sender_retained_pop(void)
{
	struct retained *r = sender.ret_head;

	sender.ret_head = r->next;
	if (!sender.ret_head)
		sender.ret_tail = NULL;
	sender.ret_bytes -= r->len;
	free(r);
}

/* Forget the return channel's state: a new connection (or none). */
void sender_acks_reset(void)
{
	sender_retained_free_all();
	sender.chunks_sent = sender.records_chunked = 0;
	sender.acked_chunks = sender.acked_records = 0;
	sender.acks_seen = 0;
	sender.ack_eof = 0;
	sender.ack_have = 0;
}

/* trace_writer's on_chunk for the socket sink: keep a copy of the chunk.
 * A full retention lets the oldest chunks go unconfirmed (counted); one that
 * cannot keep this chunk lets every older one go too, so that what it holds
 * always runs without a hole up to the last chunk sent. */
void sender_on_chunk(void *ctx, uint64_t seq, uint32_t records, const void *bytes, size_t len)
{
	uint64_t cap = agent_config.retain_bytes;
	struct retained *r = NULL;

	(void)ctx;
	if (agent_config.dormant)
		goto count; /* a dormant agent repeats nothing: only the count, for the acks */
	if (len <= cap)
		r = malloc(sizeof(*r) + len);
	if (!r) {
		for (struct retained *o = sender.ret_head; o; o = o->next)
			atomic_fetch_add(&agent_counters.unconfirmed, o->records);
		atomic_fetch_add(&agent_counters.unconfirmed, records);
		sender_retained_free_all();
	} else {
		while (sender.ret_head && sender.ret_bytes + len > cap) {
			atomic_fetch_add(&agent_counters.unconfirmed, sender.ret_head->records);
			sender_retained_pop();
		}
		r->next = NULL;
		r->seq = seq;
		r->first = sender.records_chunked;
		r->records = records;
		r->len = (uint32_t)len;
		memcpy(r->bytes, bytes, len);
		if (sender.ret_tail)
			sender.ret_tail->next = r;
		else
			sender.ret_head = r;
		sender.ret_tail = r;
		sender.ret_bytes += len;
	}
count:
	sender.chunks_sent = seq + 1;
	sender.records_chunked += records;
	atomic_store(&sender.retained_bytes, sender.ret_bytes);
}

/* One ack: the first a->chunks chunks (a->records records) are in the
 * collector's trace. One that claims more than was sent, goes backwards or
 * does not meet a chunk boundary is ignored and counted. */
static void sender_take_ack(const struct wire_ack *a)
{
	uint64_t boundary = UINT64_MAX; /* records before chunk a->chunks, when known */

	if (a->reserved != 0 || a->chunks > sender.chunks_sent || a->records > sender.records_chunked ||
	    a->chunks < sender.acked_chunks || a->records < sender.acked_records)
		goto bad;
	if (a->chunks == sender.chunks_sent)
		boundary = sender.records_chunked;
	for (struct retained *r = sender.ret_head; r && boundary == UINT64_MAX; r = r->next)
		if (r->seq == a->chunks)
			boundary = r->first;
	if (boundary != UINT64_MAX && boundary != a->records)
		goto bad;
	sender.acks_seen = 1;
	sender.retry_backoff = 1;
	sender.acked_chunks = a->chunks;
	sender.acked_records = a->records;
	while (sender.ret_head && sender.ret_head->seq < a->chunks)
		sender_retained_pop();
	atomic_store(&sender.retained_bytes, sender.ret_bytes);
	if (sender.copied_path[0] && (sender.acked_records >= sender.copied_until ||
				      atomic_load(&agent_counters.unconfirmed) == sender.copied_unconfirmed)) {
		if (unlink(sender.copied_path) == 0)
			agent_debug("removed %s: the collector has it, or its copy is retained", sender.copied_path);
		sender.copied_path[0] = '\0';
	}
	return;
bad:
	atomic_fetch_add(&sender.bad_acks, 1);
	agent_debug("ignored an ack for %llu chunks / %llu records (sent %llu / %llu, acked %llu / %llu)",
		    (unsigned long long)a->chunks, (unsigned long long)a->records,
		    (unsigned long long)sender.chunks_sent, (unsigned long long)sender.records_chunked,
		    (unsigned long long)sender.acked_chunks, (unsigned long long)sender.acked_records);
}

/* Read whatever acks the collector sent, never waiting. Bytes that are not
 * an ack are skipped up to the next ack magic and counted as one bad ack. */
void sender_read_acks(void)
{
	static const uint32_t magic = WIRE_ACK_MAGIC;

	if (sender.kind != SINK_SOCKET || sender.fd < 0 || sender.ack_eof)
		return;
	for (int reads = 0; reads < SENDER_ACK_READS; reads++) {
		ssize_t n = recv(sender.fd, sender.ack_buf + sender.ack_have, sizeof(sender.ack_buf) - sender.ack_have,
				 MSG_DONTWAIT);
		size_t at = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			sender.ack_eof = 1; /* the writes will tell whether the collector is gone */
			return;
		}
		if (n < 0)
			return;
		sender.ack_have += (size_t)n;
		while (sender.ack_have - at >= sizeof(struct wire_ack)) {
			struct wire_ack a;

			memcpy(&a, sender.ack_buf + at, sizeof(a));
			if (a.magic == WIRE_ACK_MAGIC) {
				sender_take_ack(&a);
				at += sizeof(a);
				continue;
			}
			atomic_fetch_add(&sender.bad_acks, 1);
			agent_debug("%zu bytes on the return channel that are not an ack: skipped",
				    sender.ack_have - at);
			void *next = memmem(sender.ack_buf + at + 1, sender.ack_have - at - 1, &magic, sizeof(magic));
			at = next ? (size_t)((unsigned char *)next - sender.ack_buf)
				  : sender.ack_have - (sizeof(magic) - 1); /* a magic may start in the last bytes */
		}
		memmove(sender.ack_buf, sender.ack_buf + at, sender.ack_have - at);
		sender.ack_have -= at;
	}
}
