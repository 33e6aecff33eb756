/*
 * rules_worlds_test.c - rules restart and duplicate-rank on hand-built
 * results: a restart (two worlds, the first of 4 ranks whose rank 3 died
 * first, the second of 2) is one info finding that names the worlds, their
 * sizes, the rank that stopped first and the headline world, and it does
 * not fire on one world; a rank claimed twice is a warning, silent
 * otherwise; each world's findings are its own (world 0's per-Linear wrap
 * is not the headline's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rules/diagnosis.h"
#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

#include <stdlib.h>
#include <string.h>

/* A world's summary of n ranks; the rank `dead` (>= 0) died first, the
 * others after it; -1: all ended cleanly. */
static void world_of(struct analysis_world *w, uint32_t index, int32_t n, int32_t dead)
{
	memset(w, 0, sizeof(*w));
	w->index = index;
	w->size = n;
	w->id = 0x1000 + index;
	w->ranks = w->nprocesses = (uint32_t)n;
	w->components = 1;
	w->first_stop = -1;
	w->duplicate_rank = -1;
	w->processes = calloc((size_t)n, sizeof(*w->processes));
	assert_non_null(w->processes);
	for (int32_t r = 0; r < n; r++) {
		struct analysis_world_process *p = &w->processes[r];
		p->source = index * 10 + (uint32_t)r;
		p->pid = 1000 * (index + 1) + (uint32_t)r;
		p->rank = r;
		p->end = dead >= 0 ? SOURCE_END_CUT_OFF : SOURCE_END_CLEAN;
		p->exit_code = dead >= 0 ? -1 : 0;
		p->last_realtime_ns = 5000 + (r == dead ? 0 : 100);
	}
	if (dead >= 0) {
		w->died = (uint32_t)n;
		w->first_stop = dead;
	}
}

/* Two worlds: 4 ranks wrapped per Linear (rank 3 died first), then 2 ranks
 * per block, the headline. The caller frees it with restart_free. */
static struct analysis_result *restart_new(void)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *top = fixture_new(&m);
	m.k = 8;
	m.ranks = 4;
	struct analysis_result *first = fixture_new(&m);
	top->nworlds = 2;
	top->headline_world = 1;
	top->worlds = calloc(2, sizeof(*top->worlds));
	assert_non_null(top->worlds);
	world_of(&top->worlds[0], 0, 4, 3);
	world_of(&top->worlds[1], 1, 2, -1);
	top->worlds[0].result = first;
	return top;
}

static void restart_free(struct analysis_result *top)
{
	for (uint32_t i = 0; i < top->nworlds; i++) {
		free(top->worlds[i].processes);
		fixture_free(top->worlds[i].result);
	}
	free(top->worlds);
	fixture_free(top);
}

static void test_restart_fires(void **state)
{
	(void)state;
	struct analysis_result *a = restart_new();
	findings_t *list = fixture_run(&rule_restart, a, NULL);
	assert_int_equal(findings_count(list), 1);
	const struct finding *f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_INFO);
	assert_non_null(strstr(f->message, "restart: 2 worlds of 4, then 2 ranks"));
	assert_non_null(strstr(f->message, "rank 3 (pid 1003) of world 0 stopped first"));
	assert_non_null(strstr(f->message, "the figures are world 1's"));
	assert_non_null(strstr(f->evidence, "world 0: 4 ranks"));
	assert_non_null(strstr(f->evidence, "world 1 (the report's figures): 2 ranks"));
	assert_non_null(strstr(f->evidence, "diagnosed: 8 units x 8"));
	assert_true(fixture_metric(f, "worlds") == 2);
	assert_true(fixture_metric(f, "headline_world") == 1);
	assert_true(fixture_metric(f, "first_world_size") == 4);
	assert_true(fixture_metric(f, "last_world_size") == 2);
	assert_true(fixture_metric(f, "processes_died") == 4);
	assert_true(fixture_metric(f, "first_stop_rank") == 3);
	assert_true(fixture_metric(f, "first_stop_world") == 0);
	findings_free(list);
	restart_free(a);
}

static void test_restart_silent_on_one_world(void **state)
{
	(void)state;
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_restart, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* The rules over the headline result see the headline world alone; over
 * world 0's result, world 0's wrap. */
static void test_each_world_its_own_findings(void **state)
{
	(void)state;
	struct analysis_result *a = restart_new();
	findings_t *top = findings_new(), *first = findings_new();
	assert_int_equal(diagnosis_from_result(a, NULL, top, NULL, 0, NULL), 0);
	assert_int_equal(diagnosis_from_result(analysis_world_result(a, 0), NULL, first, NULL, 0, NULL), 0);
	assert_non_null(findings_find(top, "restart"));
	assert_null(findings_find(top, "wrap-too-fine"));
	assert_non_null(findings_find(first, "wrap-too-fine"));
	assert_null(findings_find(first, "restart"));
	assert_ptr_equal(analysis_world_result(a, 1), a);
	findings_free(top);
	findings_free(first);
	restart_free(a);
}

static void test_duplicate_rank(void **state)
{
	(void)state;
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_duplicate_rank, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	a->duplicate_ranks = 2;
	a->duplicate_rank = 0;
	a->duplicate_pids[0] = 100;
	a->duplicate_pids[1] = 200;
	list = fixture_run(&rule_duplicate_rank, a, NULL);
	assert_int_equal(findings_count(list), 1);
	const struct finding *f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "rank 0 is claimed by two processes"));
	assert_non_null(strstr(f->message, "pids 100 and 200"));
	assert_true(fixture_metric(f, "duplicate_ranks") == 2);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_restart_fires),
	    cmocka_unit_test(test_restart_silent_on_one_world),
	    cmocka_unit_test(test_each_world_its_own_findings),
	    cmocka_unit_test(test_duplicate_rank),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
