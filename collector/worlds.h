/*
 * worlds.h - the worlds of a trace: which processes trained together.
 *
 * An elastic launcher (torchelastic, docs/patterns.md "Restarts") that sees a
 * worker die stops every worker it started and starts new processes, which
 * make new communicators (a new unique id, so a new id_hash), possibly with
 * fewer ranks, and reuse the rank numbers 0..N-1. One trace then holds two
 * jobs that must be diagnosed apart: merging their rank 0s would mix two
 * step structures, two world sizes and a dead process into one verdict.
 *
 * A world is found from the communicators alone:
 *   1. processes that share a communicator (the same id_hash: an init with
 *      the same unique id, or a split of one, whose hash derives from its
 *      parent's) are in one component;
 *   2. components are ordered by their first record on CLOCK_REALTIME (the
 *      one clock every host and every merged node shares); a component that
 *      starts after every process of the current world has stopped starts a
 *      new world (the next generation), one that overlaps it in time joins
 *      it: processes that ran at the same time are one world, even when they
 *      share no communicator (then a rank claimed twice is said to be so);
 *   3. components without a collective, and processes without a
 *      communicator (a launcher, a supervisor), join the world their first
 *      record falls in (else the latest that started before it, else the
 *      first); a process with no timed record joins none.
 * Only components with collectives start worlds, so a trace whose processes
 * never restarted is one world whatever else it holds.
 */
#ifndef FSS_COLLECTOR_WORLDS_H
#define FSS_COLLECTOR_WORLDS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/source.h"

/* One world. */
struct world {
	uint64_t id;		    /* id_hash of its world communicator: the largest communicator of its
				       processes (the first made of that size); 0 none */
	int32_t size;		    /* ranks of that communicator, 0 none */
	uint32_t components;	    /* communicator components in it (> 1: processes that shared none ran
				       at the same time) */
	uint64_t first_realtime_ns; /* its processes' first and last timed record, CLOCK_REALTIME */
	uint64_t last_realtime_ns;
	size_t nsources;	       /* processes in it */
	uint32_t *sources;	       /* [nsources] their trace source ids, in arrival order */
	size_t nkeys;		       /* distinct worlds_source_key of its processes with collectives */
	uint64_t *keys;		       /* [nkeys] */
	uint32_t duplicate_ranks;      /* ranks claimed by more than one of its processes with collectives */
	int32_t duplicate_rank;	       /* the lowest of them, -1 */
	uint32_t duplicate_sources[2]; /* the first two sources that claim it */
};

/* The worlds of a trace, in the order they started. */
struct worlds {
	size_t n;
	struct world *w;     /* [n] */
	size_t nsources;     /* the layer's sources when found */
	uint32_t *source_id; /* [nsources] source ids, ascending */
	int32_t *world_of;   /* [nsources] the world of source_id[i], -1 none */
};

/*
 * worlds_find - the worlds of the sources of layer (as they stand: a live
 * session calls it again as records come). *out is the caller's, released
 * with worlds_release (also after a failure). A trace without a collective
 * has no world (n = 0). Returns 0 or -ENOMEM.
 */
int worlds_find(const sources_t *layer, struct worlds *out);

/* worlds_of - the world of trace source `source`, -1 for none. */
int worlds_of(const struct worlds *w, uint32_t source);

/* worlds_release - free what worlds_find put in w (zeroed after). */
void worlds_release(struct worlds *w);

/*
 * worlds_source_key - the id_hash of src's first largest communicator (the
 * one its rank comes from), 0 without one: the same for every process of a
 * world whose processes all joined its world communicator, and never the
 * same across worlds (each makes its own). The cross-rank matcher
 * (collector/ranks.h) keeps its totals apart by it.
 */
uint64_t worlds_source_key(const struct source *src);

#endif
