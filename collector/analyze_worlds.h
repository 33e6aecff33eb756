/*
 * analyze_worlds.h - what the worlds of a restarted job (collector/worlds.h)
 * tell the analyzer's other parts; the result per world is
 * analyze_finish_build's (analyze_finish.h).
 */
#ifndef FSS_COLLECTOR_ANALYZE_WORLDS_H
#define FSS_COLLECTOR_ANALYZE_WORLDS_H

#include "collector/flight.h"
#include "collector/source.h"

/*
 * analyze_worlds_stopped - every process of a world that a later world
 * followed had stopped when that world started (the launcher stops every
 * worker before it starts new ones): its calls in flight are measured to
 * there at most (flight_set_stopped), so that a wait the restart ended is
 * not taken for a hang that lasted to the trace's end. Returns 0 or -ENOMEM.
 */
int analyze_worlds_stopped(flight_t *f, const sources_t *layer);

#endif
