/*
 * rank_state.c - what the analysis keeps of one rank (see rank_state.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "collector/analyze_comms.h"
#include "collector/analyze_figures.h"
#include "collector/analyze_service.h"
#include "collector/analyze_steady.h"
#include "collector/analyze_trust.h"
#include "collector/rank_state.h"

struct rank_state {
	struct tl_source *src;
	struct rank_walk walk;
	struct rank_comms comms;
	struct rank_trust trust;
	struct rank_steady steady;
	struct rank_figures figures;
};

int rank_state_new(rank_state_t **out, struct tl_source *src, uint32_t warmup_steps)
{
	*out = NULL;
	rank_state_t *rs = calloc(1, sizeof *rs);
	if (!rs)
		return -ENOMEM;
	rs->src = src;
	if (analyze_service_init(&rs->walk, warmup_steps) < 0) {
		free(rs);
		return -ENOMEM;
	}
	*out = rs;
	return 0;
}

void rank_state_free(rank_state_t *rs)
{
	if (!rs)
		return;
	analyze_comms_release(&rs->comms);
	analyze_service_release(&rs->walk);
	analyze_steady_release(&rs->steady);
	analyze_figures_release(&rs->figures);
	free(rs);
}

struct tl_source *rank_state_source(const rank_state_t *rs)
{
	return rs->src;
}

struct rank_walk *rank_state_walk(rank_state_t *rs)
{
	return &rs->walk;
}

struct rank_comms *rank_state_comms(rank_state_t *rs)
{
	return &rs->comms;
}

struct rank_trust *rank_state_trust(rank_state_t *rs)
{
	return &rs->trust;
}

struct rank_steady *rank_state_steady(rank_state_t *rs)
{
	return &rs->steady;
}

struct rank_figures *rank_state_figures(rank_state_t *rs)
{
	return &rs->figures;
}
