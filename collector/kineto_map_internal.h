/*
 * kineto_map_internal.h - the state shared by kineto_map.c (what the file's
 * events say) and kineto_emit.c (the records handed out). Not for other
 * modules: they use kineto_map.h.
 */
#ifndef FSS_COLLECTOR_KINETO_MAP_INTERNAL_H
#define FSS_COLLECTOR_KINETO_MAP_INTERNAL_H

#include "collector/kineto_map.h"

#define KMAP_NONE UINT32_MAX

/* Where a collective's host times came from. */
enum kmap_host_from {
	KMAP_HOST_OP = 0, /* the communication op around its launch (or with its External id) */
	KMAP_HOST_LAUNCH, /* its launch: no CPU op */
	KMAP_HOST_KERNEL, /* its kernel's start: no launch either */
};

/* One communicator: a process group, or an NCCL stream (inferred). */
struct kmap_comm {
	uint64_t id_hash; /* the same in every rank's file */
	uint32_t pg_name; /* string ids of the group's name and ranks as the args wrote them, 0 */
	uint32_t pg_ranks;
	uint32_t name; /* commName: the group's description, else its name; 0 */
	int32_t nranks;
	int32_t rank;	   /* this file's rank in it */
	int32_t stream;	   /* inferred: its NCCL stream, else -1 */
	uint32_t inferred; /* enum fss_comm_inferred */
	uint32_t reserved;
};

/* One collective: an NCCL kernel and the host op that issued it. */
struct kmap_coll {
	uint32_t kernel;  /* event index */
	uint32_t launch;  /* event index, KMAP_NONE */
	uint32_t host_op; /* event index of the outermost op, KMAP_NONE */
	uint32_t comm;	  /* index into comms */
	int64_t enter_ns, exit_ns;
	int64_t key; /* when its record goes out: its exit, never before the previous collective's */
	uint64_t count, bytes;
	uint32_t thread;
	uint32_t group_id; /* kernels of one launch (a coalesced op's): one fss group, from 1; 0 none */
	uint8_t op, dtype, host_from, reserved;
};

enum kmap_item_kind {
	KMAP_ITEM_HELLO = 0,
	KMAP_ITEM_ANCHOR,
	KMAP_ITEM_COMM,
	KMAP_ITEM_COLL,
	KMAP_ITEM_CORR,
	KMAP_ITEM_GPU,
	KMAP_ITEM_RANGE,
	KMAP_ITEM_FIGURES,
	KMAP_ITEM_GROUP,  /* index: the group's last collective */
	KMAP_ITEM_DEVICE, /* deviceProperties[0] as a device record */
};

/* One record to hand out, in (key, order) order. */
struct kmap_item {
	int64_t key;	/* host ns (the file's ts) */
	uint32_t order; /* creation order: ties */
	uint32_t index; /* into comms, colls or the events, by kind */
	uint32_t kind;	/* enum kmap_item_kind */
	uint32_t reserved;
};

struct kineto_map {
	kineto_file_t *f;
	uint32_t source;
	uint32_t command; /* string id */
	uint32_t gpu_domain;
	struct kineto_map_info info;
	struct fss_rec_source_figures figures;
	int64_t base_ts;	 /* the first host ts: the hello's clock reading */
	int64_t realtime_offset; /* realtime - ts */

	struct kmap_comm *comms;
	size_t ncomms;
	struct kmap_coll *colls; /* by seq - 1 */
	size_t ncolls;
	uint32_t *coll_of_event; /* seq of the collective an event is the kernel of, 0 */
	uint16_t *depth;	 /* a range's nesting depth on its thread */

	struct kmap_item *items;
	size_t nitems, cursor;

	/* handing out */
	uint8_t *sent; /* strings already defined, one bit per id */
	size_t sent_bits;
	uint32_t want[4]; /* strings to define before the pending record */
	size_t nwant, wpos;
	uint32_t part_off; /* of the string being defined */
	int pending;	   /* buf holds a record to hand out after the strings */
	union {
		struct fss_record_head head;
		struct fss_rec_process_hello hello;
		struct fss_rec_string string;
		struct fss_rec_comm comm;
		struct fss_rec_collective coll;
		struct fss_rec_group group;
		struct fss_rec_gpu_interval gpu;
		struct fss_rec_nvtx_range range;
		struct fss_rec_clock_anchor anchor;
		struct fss_rec_correlation corr;
		struct fss_rec_source_figures figures;
		struct fss_rec_device device;
	} buf, part;
};

/* kmap_items - the items of m, sorted (kineto_emit.c). 0 or -ENOMEM. */
int kmap_items(kineto_map_t *m);

#endif
