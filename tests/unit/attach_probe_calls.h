/*
 * attach_probe_calls.h - the calls attach_probe_target makes and the
 * argument values it makes them with, shared with attach_probe_test,
 * which asserts that the probes saw exactly these.
 *
 * The values are chosen so that a swapped, truncated or shifted argument
 * shows: every pointer is distinct, the count needs more than 32 bits,
 * every integer differs from every other.
 */
#ifndef FSS_TESTS_ATTACH_PROBE_CALLS_H
#define FSS_TESTS_ATTACH_PROBE_CALLS_H

#include <stdint.h>

#define PROBE_SEND 0x11110000ull
#define PROBE_RECV 0x22220000ull
#define PROBE_COUNT 0x123456789ull /* size_t past 32 bits */
#define PROBE_DTYPE 8u		   /* ncclFloat64 */
#define PROBE_OP 2u		   /* ncclMax */
#define PROBE_ROOT 3u
#define PROBE_PEER 5u
#define PROBE_STREAM 0x77770000ull
#define PROBE_NRANKS 4u
#define PROBE_RANK 9u			/* >= nranks: the init fails, on any library */
#define PROBE_COMM_BEFORE 0x5a5a5a5aull /* *comm before ncclCommInitRank: a failed init leaves it */

/* The ncclUniqueId passed by value: byte i is uid_byte(i). */
static inline uint8_t probe_uid_byte(unsigned i)
{
	return (uint8_t)(i * 7u + 3u);
}

/* The calls, in the order the target makes them (command 'c'). */
enum probe_call {
	PROBE_GROUP_START,
	PROBE_ALLGATHER,
	PROBE_ALLREDUCE,
	PROBE_REDUCESCATTER,
	PROBE_BROADCAST,
	PROBE_BCAST,
	PROBE_REDUCE,
	PROBE_SEND_CALL,
	PROBE_RECV_CALL,
	PROBE_GROUP_END,
	PROBE_COMM_INIT_RANK,
	PROBE_COMM_DESTROY,
	PROBE_NCALLS
};

/* What the target writes back after the calls (fd out). */
struct probe_results {
	int32_t ret[PROBE_NCALLS]; /* each call's ncclResult_t as the program saw it */
	uint64_t fake_comm;	   /* the ncclComm_t passed to the collectives */
	uint64_t comm_ptr;	   /* the ncclComm_t * ncclCommInitRank was given */
	uint64_t comm_after;	   /* *comm after ncclCommInitRank */
	uint32_t tid;		   /* the thread that made the calls */
	uint32_t pad;
};

/* Command 'p' on the stand-in ("pair"): a real 2-rank communicator with a
 * helper rank, then split, a 1-rank CommInitAll and CommInitRankConfig. */
enum probe_pair_call {
	PAIR_INIT_RANK,	  /* (&comm, 2, uid, 0) */
	PAIR_ALLREDUCE,	  /* (buf, buf, PAIR_COUNT, ncclFloat32, ncclSum, comm, NULL) */
	PAIR_SPLIT,	  /* (comm, 0, PAIR_KEY, &split, NULL) */
	PAIR_INIT_ALL,	  /* (all, 1, NULL) */
	PAIR_INIT_CONFIG, /* (&cfg_comm, 1, uid2, 0, &config) */
	PAIR_DESTROY,	  /* (split), (all[0]), (cfg_comm), (comm): four calls */
	PAIR_NCALLS = PAIR_DESTROY + 4
};
#define PAIR_COUNT 4u
#define PAIR_KEY 1u

struct probe_pair_results {
	int32_t ret[PAIR_NCALLS];
	uint64_t comm_ptr, comm; /* &comm, and what the init wrote */
	uint64_t buf;		 /* the AllReduce buffer */
	uint64_t split_ptr, split;
	uint64_t all_ptr, all;
	uint64_t cfg_ptr, cfg, config_ptr;
	uint8_t uid[128], uid2[128];
	uint32_t tid;
	int32_t helper_status; /* rank 1's wait status: 0 when all its calls succeeded */
};

#endif
