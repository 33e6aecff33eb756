/*
 * top_screen_missing.c - stands in for the dashboard's screen (tui/top.h)
 * in a build without the tui library (fss_tui): `fsdpscope top` then says
 * the screen is not built instead of failing to link.
 */
#include "tui/top.h"

#include <errno.h>
#include <stdio.h>

int top_run_screen(struct top_feed *feed, const struct top_options *opt, char *err, size_t errlen)
{
	(void)feed;
	(void)opt;
	snprintf(err, errlen, "this fsdpscope was built without the dashboard's screen (tui/)");
	return -ENOSYS;
}

int top_print_once(struct top_feed *feed, const struct top_options *opt, FILE *f, char *why, size_t whylen)
{
	(void)feed;
	(void)opt;
	(void)f;
	snprintf(why, whylen, "this fsdpscope was built without the dashboard's screen (tui/)");
	return -ENOSYS;
}
