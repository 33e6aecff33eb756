/*
 * ingest_ack.c - the return channel: acks back to the agents for what is on disk.
 *
 * A connection is acked for the whole chunks of its stream the output holds
 * once they reached the disk (docs/format.md); a peer that stops reading
 * ends its acks, never the ingest.
 */
#include "collector/ingest_ack.h"

#include "collector/ingest_internal.h"

#include "common/clock.h"
#include "common/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* ---- the return channel ------------------------------------------------ */

void ingest_ack_blocked_set(ingest_t *ing, struct input *in, int blocked)
{
	if (in->ack_blocked == blocked)
		return;
	in->ack_blocked = blocked;
	if (blocked)
		ing->acks_blocked++;
	else
		ing->acks_blocked--;
}

void ingest_ack_send(ingest_t *ing, struct input *in)
{
	for (;;) {
		if (in->fd < 0 || in->acks_off) {
			ingest_ack_blocked_set(ing, in, 0);
			return;
		}
		if (!in->ack_left) {
			struct wire_ack ack = {
			    .magic = WIRE_ACK_MAGIC, .chunks = in->acked.chunks, .records = in->acked.records};
			struct wire_ack *last = (struct wire_ack *)in->ackbuf;

			if (last->magic == WIRE_ACK_MAGIC && last->chunks == ack.chunks) {
				ingest_ack_blocked_set(ing, in, 0);
				return; /* sent already */
			}
			memcpy(in->ackbuf, &ack, sizeof(ack));
			in->ack_left = sizeof(ack);
		}
		ssize_t n = send(in->fd, in->ackbuf + sizeof(in->ackbuf) - in->ack_left, in->ack_left,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ingest_ack_blocked_set(ing, in, 1);
			return;
		}
		if (n <= 0) {
			in->acks_off = 1; /* EPIPE, ECONNRESET: the reading side will see the end */
			ingest_ack_blocked_set(ing, in, 0);
			return;
		}
		in->ack_left -= (size_t)n;
		if (!in->ack_left)
			ing->stats.acks_sent++;
	}
}

void ingest_acks_after_write(ingest_t *ing)
{
	ing->last_flush_ns = clock_mono_ns();
	ing->arrived = 0;
	for (size_t i = 0; i < ing->ninputs; i++) {
		struct input *in = ing->inputs[i];
		size_t k = 0;

		if (in->kind != INPUT_CONNECTION || in->fd < 0 || in->acks_off)
			continue;
		while (k < in->npoints && in->points[k].out_mark <= ing->on_disk)
			k++;
		if (k) {
			in->acked = in->points[k - 1];
			memmove(in->points, in->points + k, (in->npoints - k) * sizeof(in->points[0]));
			in->npoints -= k;
		}
		if (k || in->ack_blocked)
			ingest_ack_send(ing, in);
	}
}
