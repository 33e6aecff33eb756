/*
 * attach_cut_test.c - cli/attach_cut: the records of processes that share a
 * communicator go out once every one of them has made the call; at detach
 * each is cut at the last call all completed before the probes began to go,
 * and the calls a process was inside at attach are counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/attach_cut.h"
#include "common/record.h"

#define COMM_ID 0xabcdefull

struct sink {
	uint64_t collectives[4]; /* per slot, collective records sent */
	uint64_t last_seq[4];
	uint64_t records;
};

static void on_emit(void *ctx, size_t slot, const void *record)
{
	struct sink *s = ctx;
	const struct fss_record_head *h = record;

	s->records++;
	if (h->type == FSS_REC_COLLECTIVE) {
		s->collectives[slot]++;
		s->last_seq[slot] = ((const struct fss_rec_collective *)record)->seq;
	}
}

/* slot's observed comm record: its first call seen is first_call */
static void comm(attach_cut_t *c, size_t slot, uint64_t first_call)
{
	struct fss_rec_comm r;

	record_init(&r, FSS_REC_COMM, sizeof(r), 0);
	r.comm = 0x1000 + slot; /* handles differ per process */
	r.id_hash = COMM_ID;
	r.rank = (int32_t)slot;
	r.event = FSS_COMM_OBSERVED;
	r.first_call = first_call;
	assert_int_equal(attach_cut_record(c, slot, &r), 0);
}

static void coll(attach_cut_t *c, size_t slot, uint64_t seq, uint64_t exit_ns)
{
	struct fss_rec_enter e;
	struct fss_rec_collective r;

	record_init(&e, FSS_REC_ENTER, sizeof(e), 0);
	e.seq = seq;
	e.comm = 0x1000 + slot;
	assert_int_equal(attach_cut_record(c, slot, &e), 0);
	record_init(&r, FSS_REC_COLLECTIVE, sizeof(r), 0);
	r.seq = seq;
	r.comm = 0x1000 + slot;
	r.enter_ns = exit_ns - 1;
	r.exit_ns = exit_ns;
	assert_int_equal(attach_cut_record(c, slot, &r), 0);
}

/* Held until the other process made the call; cut at detach, after the freeze. */
static void test_hold_and_cut(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_cut_t *c;
	struct attach_cut_result r;

	assert_int_equal(attach_cut_new(&c, on_emit, &s), 0);
	comm(c, 0, 1);
	comm(c, 1, 1);
	for (uint64_t i = 1; i <= 5; i++)
		coll(c, 0, i, 100 + i);
	assert_int_equal(s.collectives[0], 0); /* process 1 made none yet */
	for (uint64_t i = 1; i <= 3; i++)
		coll(c, 1, i, 100 + i);
	assert_int_equal(s.collectives[0], 3);
	assert_int_equal(s.collectives[1], 3);
	attach_cut_freeze(c, 1000);
	/* taken from the ring after the freeze: process 1's calls 4 and 5 returned before it,
	 * 6..9 while the probes went (process 0's went first) */
	for (uint64_t i = 4; i <= 9; i++)
		coll(c, 1, i, i <= 5 ? 100 + i : 2000 + i);
	assert_int_equal(s.collectives[1], 3); /* frozen: nothing goes */
	assert_int_equal(attach_cut_detach(c, &r), 0);
	/* both completed call 5 before the freeze: process 1's 6..9 left out */
	assert_int_equal(r.ncomms, 1);
	assert_int_equal(r.comms[0].number, 5);
	assert_int_equal(r.comms[0].cut_slots, 1);
	assert_int_equal(r.nslots, 1);
	assert_int_equal(r.slots[0].slot, 1);
	assert_int_equal(r.slots[0].collectives, 4);
	assert_int_equal(r.slots[0].rank, 1);
	assert_int_equal(r.collectives, 4);
	assert_int_equal(s.collectives[0], 5);
	assert_int_equal(s.collectives[1], 5);
	assert_int_equal(s.last_seq[0], s.last_seq[1]);
	assert_int_equal(r.nunseen, 0);
	attach_cut_result_free(&r);
	attach_cut_free(c);
}

/* A process whose first call seen is later was inside the calls in between; one that
 * ended holds no other back, and a job that stopped calling has what it holds let go. */
static void test_in_flight_end_idle(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_cut_t *c;
	struct attach_cut_result r;

	assert_int_equal(attach_cut_new(&c, on_emit, &s), 0);
	comm(c, 0, 1);
	comm(c, 1, 2); /* inside call 1 when the probes came */
	comm(c, 2, 1);
	coll(c, 0, 1, 10);
	coll(c, 2, 1, 10);
	coll(c, 1, 1, 12); /* its call 2 */
	assert_int_equal(s.collectives[0], 1);
	coll(c, 0, 2, 20);
	coll(c, 0, 3, 30);
	assert_int_equal(s.collectives[0], 1); /* process 2 is behind */
	attach_cut_end(c, 2);		       /* it ended: no longer waited for */
	assert_int_equal(s.collectives[0], 2); /* call 2 made by 1 too; call 3 by nobody else */
	attach_cut_release(c, 1);	       /* the job stopped calling */
	assert_int_equal(s.collectives[0], 3);
	attach_cut_freeze(c, 100);
	assert_int_equal(attach_cut_detach(c, &r), 0);
	assert_int_equal(r.collectives, 0); /* everything was sent already */
	assert_int_equal(r.nunseen, 1);
	assert_int_equal(r.unseen[0].slot, 1);
	assert_int_equal(r.unseen[0].calls, 1);
	assert_int_equal(r.unseen_calls, 1);
	attach_cut_result_free(&r);
	attach_cut_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hold_and_cut),
	    cmocka_unit_test(test_in_flight_end_idle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
