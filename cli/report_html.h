/*
 * report_html.h - `fsdpscope report --html OUT.html`: the whole diagnosis as
 * one self-contained page (docs/report-html.md). CSS and SVG are inline, no
 * script runs and nothing in it points outside the file, so it opens offline
 * from a mail attachment or a CI artefact. Every string that came from the
 * job (NVTX names, communicator names, command lines, hosts, evidence) is
 * escaped, and bytes that are not UTF-8 are replaced with U+FFFD.
 */
#ifndef FSS_CLI_REPORT_HTML_H
#define FSS_CLI_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

struct diagnosis;
struct html_timeline;

/*
 * report_html_write - render d as a page into path: written to a temporary
 * file beside it (O_EXCL, O_NOFOLLOW), synced, then renamed over path, so
 * that a reader never sees half a page and a symbolic link at path is
 * replaced, never followed. Exactly one file is left: path. Returns 0, or a
 * negative errno with what failed (the step and the file) in err.
 */
int report_html_write(const char *path, const struct diagnosis *d, const struct html_timeline *t, char *err,
		      size_t errlen);

/* report_html_page - the page itself, onto out (report_html_write's body;
 * tests render into a memory stream). t: the kernels of the timeline
 * (cli/report_html_timeline.h), NULL: its lanes from the per-rank figures. */
void report_html_page(FILE *out, const struct diagnosis *d, const struct html_timeline *t);

#endif
