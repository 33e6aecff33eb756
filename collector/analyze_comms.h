/*
 * analyze_comms.h - a rank's communicators: the roles decided from a window
 * of its first events (comm_roles.h), each event's role, the traffic of
 * each communicator; and the result's communicators table.
 */
#ifndef FSS_COLLECTOR_ANALYZE_COMMS_H
#define FSS_COLLECTOR_ANALYZE_COMMS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/comm_roles.h"
#include "collector/timeline.h"

/* Events of a rank looked at before its communicators get their roles:
 * several steps of any job seen so far (a 32-block per-Linear step is about
 * 800 events, with tensor parallelism about 1100). */
#define ANALYZE_ROLE_WINDOW 4096
#define ANALYZE_ROLE_STEPS 3

struct rank_comms {
	struct comm_roles roles; /* what each communicator carries, once decided */
	int decided;
	uint64_t roled;	  /* source events (absolute) whose role is set */
	uint64_t *events; /* [nevents] events seen per communicator slot */
	size_t nevents;
};

/*
 * analyze_comms_decide - decide the roles of src's communicators from its
 * pending events (t names them; fsdp_comm: --fsdp-comm, NULL). Returns 0 or
 * -ENOMEM.
 */
int analyze_comms_decide(struct rank_comms *c, const timeline_t *t, const struct tl_source *src, const char *fsdp_comm);

/*
 * analyze_comms_assign - give src's pending events that have none their
 * communicator's role, and count them per communicator. Returns 0 or
 * -ENOMEM.
 */
int analyze_comms_assign(struct rank_comms *c, struct tl_source *src);

/* analyze_comms_release - free what c holds (c is the caller's). */
void analyze_comms_release(struct rank_comms *c);

/*
 * analyze_comms_fill - r's communicators table from the rank of src whose
 * communicators c describes: per communicator its role, and its traffic in
 * the steady step step[0..nstep) (analyzed steps of it) and outside.
 * Sets r->fsdp_comm and multiplies r->tp_degree by the tensor-parallel
 * groups' sizes. t names the communicators.
 */
void analyze_comms_fill(const timeline_t *t, const struct tl_source *src, const struct rank_comms *c,
			const struct tl_event *step, size_t nstep, uint32_t analyzed, struct analysis_result *r);

#endif
