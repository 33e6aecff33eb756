/*
 * steps.h - training steps from the collective sequence itself.
 *
 * When a job marks its steps with NVTX ranges the analysis uses them
 * (analyze_service.c). Otherwise steps come from the sequence of collective
 * signatures (op, bytes, calls, ranks): a training step issues the same
 * collectives in the same order every time, so the sequence is periodic.
 * The period is found on a window at the start of the trace, then the
 * stream is cut into steps one period at a time, so memory stays bounded by
 * a few periods however long the run.
 *
 * A step is rotated to start at the first AllGather after the last
 * ReduceScatter (the forward of FSDP starts there; the backward ends with
 * reduce-scatters, then optimizer and logging collectives). Events before
 * the first step that matches the steady state are warm-up; later stretches
 * that do not match it are irregular steps: both are reported, neither is
 * mixed into the figures.
 *
 * Collectives that occur only at the start (init broadcasts) or now and
 * then (an eval pass, a checkpoint save) are not required in a step: when
 * they break the sequence's periodicity, the step is found between
 * consecutive occurrences of one signature (an anchor) as the stretch that
 * recurs most and explains the most events (docs/patterns.md, "Steps").
 *
 * The period rests on what repeats exactly: events whose sizes change from
 * step to step (routed all-to-alls, sequence-dependent collectives) are left
 * out of the search, though every event is cut into the step it falls in.
 * A period may hold several optimizer steps: a burst of gathers without a
 * reduction between two of them (a weight sync) is outside the steps, and
 * steps that differ (a micro-batch count that changes) are each a step, of
 * its variant.
 */
#ifndef FSS_COLLECTOR_STEPS_H
#define FSS_COLLECTOR_STEPS_H

#include <stddef.h>
#include <stdint.h>

/* steps_signature - the key two events must share to be "the same". */
uint64_t steps_signature(uint8_t op, uint64_t bytes, uint32_t calls, int32_t nranks);

enum steps_kind {
	STEPS_REGULAR = 1,   /* one step matching the steady state */
	STEPS_WARMUP = 2,    /* events before the first regular step */
	STEPS_IRREGULAR = 3, /* a stretch that does not match (noise, a checkpoint) */
	STEPS_TRAILING = 4,  /* an incomplete step at the end of the trace */
};

/* A cut: events [first, first + count) (absolute event numbers from 0). */
struct steps_cut {
	uint64_t first;
	uint64_t count;
	int kind;	  /* enum steps_kind */
	uint32_t steps;	  /* training steps the cut stands for: 1 for a regular cut; for warm-up and
			     irregular stretches, how often the step's rarest ReduceScatter (else its
			     rarest collective) occurs in them, per step: set-up, eval passes and
			     checkpoints stand for 0, a first step that differs for 1 */
	uint32_t variant; /* regular cuts: which variant of the step (steps_cutter_variants); 0,
			     the steady one, unless the period holds steps that differ */
};

/* The most steps one period may hold (steps_cutter_variants). */
#define STEPS_VARIANTS_MAX 8

/* One variant of the regular step (its events: the data-parallel side's). */
struct steps_variant {
	uint32_t events;	  /* events of the step that the period search reads */
	uint32_t allgathers;	  /* of them, AllGathers */
	uint32_t reduce_scatters; /* ReduceScatters */
	uint32_t per_period;	  /* steps of this variant in one period */
};

/* One event as the cutter reads it. */
struct steps_event {
	uint64_t sig;	/* steps_signature */
	uint64_t bytes; /* count x dtype size, summed over its calls */
	uint64_t cls;	/* the events its size is compared with (same communicator, op, calls,
			   dtype: steps_class); 0: always read (the FSDP group's gathers and
			   reductions) */
	uint8_t op;	/* enum fss_coll_op */
};

/* steps_class - the class key of steps_event.cls (never 0). */
uint64_t steps_class(uint32_t comm_slot, uint8_t op, uint32_t calls, uint8_t dtype);

typedef struct steps_cutter steps_cutter_t;

/*
 * steps_cutter_new - a cutter that looks for the period in a window of at
 * most max_window events (0: 65536). NULL on ENOMEM.
 */
steps_cutter_t *steps_cutter_new(size_t max_window);
void steps_cutter_free(steps_cutter_t *c);

/* steps_cutter_push - the next event, always read (cls 0, bytes 0). 0 or
 * -ENOMEM. */
int steps_cutter_push(steps_cutter_t *c, uint64_t sig, uint8_t op);

/*
 * steps_cutter_push_event - the next event. The period search leaves out
 * the events of a class (e->cls) whose sizes change from step to step in the
 * window it is found on: at least 8 of them in the later
 * half of the window, and no shift that repeats 90% of their sizes (they
 * are decided once, with the period; their events are still cut, each into
 * the cut of the event read before it). 0 or -ENOMEM.
 */
int steps_cutter_push_event(steps_cutter_t *c, const struct steps_event *e);

/*
 * steps_cutter_next - the next cut, if one is decided: returns 1 with *cut
 * filled, 0 when more events are needed. `final`: no more events will come
 * (decide with what there is; the rest becomes a trailing cut). Cuts come
 * in order and cover every event pushed once the trace has ended (events
 * the cutter could not place come as irregular).
 */
int steps_cutter_next(steps_cutter_t *c, int final, struct steps_cut *cut);

/* steps_cutter_pending - events the cutter holds (its window, or what is
 * not cut yet). */
size_t steps_cutter_pending(const steps_cutter_t *c);

/*
 * steps_cutter_set_open_end - the events stop because the trace was cut
 * short (their source has no process_end), not because the run ended: a
 * `final` search then asks for as many repeats as one over a window that
 * is not the whole run (periods up to n / 6), since two look-alike
 * stretches at the start of a run (set-up, the first forward's blocks) are
 * no proof of a step; and the step must reduce gradients (hold a
 * ReduceScatter or an AllReduce), as every training step does.
 */
void steps_cutter_set_open_end(steps_cutter_t *c);

/* steps_cutter_period - the period once found (0 before), in events read. */
size_t steps_cutter_period(const steps_cutter_t *c);

/*
 * steps_cutter_variants - the variants of the regular step the period
 * holds, once found: 1 usually; more when the period holds steps that
 * differ (the micro-batch count changes from step to step), variant 0 the
 * one with the most events (the steady one: the most micro-batches). Fills
 * up to max of out and returns how many there are (0 before the period is
 * found).
 */
size_t steps_cutter_variants(const steps_cutter_t *c, struct steps_variant *out, size_t max);

/* steps_cutter_left_out - events the period search left out (their sizes
 * change from step to step), of those pushed. */
uint64_t steps_cutter_left_out(const steps_cutter_t *c);

#endif
