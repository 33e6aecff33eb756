/*
 * rank_state.h - what the analysis keeps of one rank (trace source) between
 * its records: an opaque whole made of one part per stage, each stage
 * reaching only its own part through its accessor.
 *
 *   walk    where the rank's step detection stands (analyze_service.h)
 *   comms   the roles of its communicators and their traffic (analyze_comms.h)
 *   trust   what its records vouch for (analyze_trust.h)
 *   steady  its steady-state step and figures (analyze_steady.h)
 *   figures HTA's comm/compute overlap over its whole trace (analyze_figures.h)
 */
#ifndef FSS_COLLECTOR_RANK_STATE_H
#define FSS_COLLECTOR_RANK_STATE_H

#include <stdint.h>

typedef struct rank_state rank_state_t;

struct tl_source;
struct rank_walk;
struct rank_comms;
struct rank_trust;
struct rank_steady;
struct rank_figures;

/*
 * rank_state_new - the state of a rank whose records come from src
 * (borrowed: the timeline's, it outlives the state), its first
 * warmup_steps steps to be skipped. Returns 0 or -ENOMEM.
 */
int rank_state_new(rank_state_t **out, struct tl_source *src, uint32_t warmup_steps);

/* rank_state_free - release a rank's state (NULL ok). */
void rank_state_free(rank_state_t *rs);

/* rank_state_source - the source the rank's records come from. */
struct tl_source *rank_state_source(const rank_state_t *rs);

/* The parts of the state, one per stage (see above); they live as long as
 * the state. */
struct rank_walk *rank_state_walk(rank_state_t *rs);
struct rank_comms *rank_state_comms(rank_state_t *rs);
struct rank_trust *rank_state_trust(rank_state_t *rs);
struct rank_steady *rank_state_steady(rank_state_t *rs);
struct rank_figures *rank_state_figures(rank_state_t *rs);

#endif
