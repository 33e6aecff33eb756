/*
 * agent_fallback.c - the files a session's agents wrote elsewhere: an agent
 * that can write neither to the session's socket nor into FSDPSCOPE_OUT (a
 * full disk, a folder it may not write) records into its user's own folder
 * (docs/agent.md), and the session must say where those bytes went.
 */
#include "cli/agent_fallback.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The agent's default folders, as agent/sender_file.c picks them. */
static int default_dirs(char dirs[2][4096])
{
	const char *runtime = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
	int n = 0;

	if (runtime && runtime[0] == '/')
		snprintf(dirs[n++], 4096, "%s/fsdpscope", runtime);
	snprintf(dirs[n++], 4096, "%s/fsdpscope-%u", tmp && tmp[0] ? tmp : "/tmp", (unsigned)geteuid());
	return n;
}

/* The numbers that end a name "fsdpscope-HOST-PID.fss" ("-PID-N.fss" when
 * the name was taken, ".partial" while written): the last two dash-ended
 * numbers, since a host name may end in digits too. 0: none. */
static void name_numbers(const char *name, uint32_t out[2])
{
	const char *end = strstr(name, ".fss");

	out[0] = out[1] = 0;
	if (strncmp(name, "fsdpscope-", 10) || !end)
		return;
	for (int i = 0; i < 2; i++) {
		const char *p = end;
		while (p > name + 10 && p[-1] >= '0' && p[-1] <= '9')
			p--;
		if (p == end || p[-1] != '-')
			return;
		out[i] = (uint32_t)strtoul(p, NULL, 10);
		end = p - 1;
	}
}

static int is_session_pid(const uint32_t *pids, size_t npids, uint32_t pid)
{
	for (size_t i = 0; pid && i < npids; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

size_t agent_fallback_say(FILE *out, const char *prog, const uint32_t *pids, size_t npids, long long since)
{
	char dirs[2][4096];
	int ndirs = default_dirs(dirs);
	size_t found = 0;
	uint64_t bytes = 0;

	for (int d = 0; d < ndirs; d++) {
		DIR *dh = opendir(dirs[d]);
		struct dirent *e;

		if (!dh)
			continue;
		while ((e = readdir(dh))) {
			char path[4096 + 2 + sizeof e->d_name];
			struct stat sb;

			uint32_t num[2];

			name_numbers(e->d_name, num);
			if (!is_session_pid(pids, npids, num[0]) && !is_session_pid(pids, npids, num[1]))
				continue;
			if (snprintf(path, sizeof path, "%.4095s/%s", dirs[d], e->d_name) >= (int)sizeof path)
				continue;
			/* a file an earlier process of the same pid left is not this session's */
			if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode) || (long long)sb.st_mtime < since)
				continue;
			if (!found)
				fprintf(out,
					"%s: agents of this job could not write where the session asked and recorded into "
					"their own folder instead; these records are not in the trace:\n",
					prog);
			fprintf(out, "%s:     %s (%" PRIu64 " bytes)\n", prog, path, (uint64_t)sb.st_size);
			found++;
			bytes += (uint64_t)sb.st_size;
		}
		closedir(dh);
	}
	if (found)
		fprintf(out, "%s: %zu file%s, %" PRIu64 " bytes: 'fsdpscope lint FILE...' reads %s\n",
			prog, found, found == 1 ? "" : "s", bytes, found == 1 ? "it" : "them");
	return found;
}
