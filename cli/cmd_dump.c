/*
 * cmd_dump.c - fsdpscope dump TRACE: every record as one JSON object a line.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "common/json.h"

#include "cli/diagnosis.h"
#include "collector/merge.h"
#include "collector/session.h"
#include "collector/source.h"
#include "common/error.h"
#include "common/record.h"
#include "common/record_fields.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char dump_help_head[] =
    "NAME\n"
    "    fsdpscope dump - print every record of a trace as JSON lines\n\n"
    "SYNOPSIS\n"
    "    fsdpscope dump [--type NAME[,NAME...]] [--header] [--sources] [--salvage] TRACE...\n\n"
    "DESCRIPTION\n"
    "    Reads TRACE (a file written by 'fsdpscope run' or by an agent's file sink,\n"
    "    including a '.partial' file left by a writer that died) and prints each\n"
    "    record as one JSON object per line, in file order, the way 'perf script'\n"
    "    shows a perf.data file. Every object has \"type\", \"source\" (the process it\n"
    "    came from) and \"rank\" (that process's rank, -1 if unknown), then every\n"
    "    field of the record by the names of docs/format.md. Enums are shown by\n"
    "    name, handles as hex strings, and string ids resolved: a field \"name\"\n"
    "    holding string id 5 prints as \"name\":\"layers.3\",\"name_id\":5.\n\n"
    "    The trace is read twice: first to learn what each process is, then to\n"
    "    print. So every line of a process carries the rank it is known by in the\n"
    "    whole trace (its rank in its largest communicator, else RANK, else\n"
    "    SLURM_PROCID, else OMPI_COMM_WORLD_RANK), its hello included, even though\n"
    "    the communicator comes later; and strings defined after the record that\n"
    "    names them (a hello's host and command) are resolved. A TRACE that is not\n"
    "    a regular file (a pipe) is read once: ranks and strings are those known\n"
    "    when the line is printed (null for a string not defined yet).\n\n"
    "    Two record fields are renamed so that no line has a key twice: the\n"
    "    hello's rank (the RANK variable) prints as \"env_rank\", and a\n"
    "    communicator record's rank (the process's rank in that communicator) as\n"
    "    \"comm_rank\".\n\n"
    "    Several TRACEs (or folders of them) are one job, a trace per node: printed\n"
    "    merged, with \"node\" after \"rank\", sources renumbered and clocks aligned\n"
    "    on the first trace's (docs/collect.md, \"More than one node\").\n\n"
    "    Records of types this version does not know are printed as\n"
    "    {\"type\":\"unknown\",\"type_id\":N,\"size\":S,...} and otherwise skipped.\n\n"
    "    A damaged trace is dumped chunk by chunk around the damage: every chunk\n"
    "    whose checksum holds is printed, and dump says on stderr which byte\n"
    "    ranges (and chunks) it skipped and why, and exits 2. So does a trace cut\n"
    "    short or never closed by its writer (no trace_end record at its end):\n"
    "    what it holds is printed first. A file that is empty, not a trace, or\n"
    "    whose header is cut short or damaged is named as such, and nothing is\n"
    "    printed. A damaged file header (a flipped bit) does not lose the chunks\n"
    "    after it: --salvage reads them without it and says on stderr what it\n"
    "    assumed in its place and how many chunks it recovered.\n\n"
    "OPTIONS\n";

static const char dump_help_tail[] =
    "\n"
    "EXIT STATUS\n"
    "    0 the whole trace was read and its writer closed it (also when it holds no\n"
    "    records: said on stderr); 2 bad usage, a file that is not a readable trace,\n"
    "    a damaged trace (one read with --salvage too), or one cut short or never\n"
    "    closed.\n\n"
    "EXAMPLES\n"
    "    fsdpscope dump run.fss | head\n"
    "    fsdpscope dump --type collective run.fss | grep AllGather | wc -l\n"
    "    fsdpscope dump --header rank3.fss.partial\n"
    "    fsdpscope dump --sources --type process_hello run.fss\n"
    "    fsdpscope dump --type collective nodeA/collect.fss nodeB/collect.fss\n"
    "    fsdpscope dump --salvage damaged-header.fss | wc -l   # the intact chunks' records\n";

struct dump {
	fss_session_t *session; /* the reading: its view is what each process is (ranks, strings, ends) */
	const sources_t *layer; /* the session's view */
	merge_t *merge;		/* several traces: the session's merged reading, else NULL */
	int learning;		/* the first of two reads: the view learns, nothing is printed */
	int one_pass;		/* not a regular file: the view learns and lines print as records come */
	unsigned type_mask;	/* bit per record type; 0 = all */
	int want_header;
	int want_sources;
	int salvage;	    /* --salvage: TRACE_READ_SALVAGE */
	int header_assumed; /* the first read salvaged the trace: its header is the assumed one */
	FILE *out;
};

/* The key a field prints under: the envelope has "type", "source" and
 * "rank", so a record field of one of those names is renamed. */
static const char *field_key(uint16_t type, const struct record_field *f, char *buf, size_t len)
{
	if (strcmp(f->name, "rank") == 0 && type == FSS_REC_PROCESS_HELLO)
		return "env_rank";
	if (strcmp(f->name, "rank") == 0 && type == FSS_REC_COMM)
		return "comm_rank";
	if (strcmp(f->name, "rank") == 0 || strcmp(f->name, "source") == 0 || strcmp(f->name, "type") == 0) {
		snprintf(buf, len, "record_%s", f->name);
		return buf;
	}
	return f->name;
}

static void print_field(struct dump *d, const struct fss_record_head *rec, const struct record_field *f)
{
	uint64_t v = record_field_uint(rec, f);
	char key_buf[64];
	const char *key = field_key(rec->type, f, key_buf, sizeof(key_buf));
	const char *s;

	switch (f->kind) {
	case FIELD_RESERVED:
		return;
	case FIELD_TEXT: {
		const struct fss_rec_string *part = (const void *)rec;
		size_t len = part->total_len > part->offset ? (size_t)(part->total_len - part->offset) : 0;

		if (len > FSS_STRING_PART_BYTES)
			len = FSS_STRING_PART_BYTES;
		fprintf(d->out, ",\"%s\":", key);
		json_string(d->out, part->text, len);
		return;
	}
	case FIELD_STRING_ID:
		s = sources_string(d->layer, rec->source, (uint32_t)v);
		fprintf(d->out, ",\"%s\":", key);
		if (s)
			json_string(d->out, s, strlen(s));
		else
			fputs("null", d->out);
		fprintf(d->out, ",\"%s_id\":%" PRIu64, key, v);
		return;
	case FIELD_ENUM8:
	case FIELD_ENUM16:
	case FIELD_ENUM32:
		fprintf(d->out, ",\"%s\":\"%s\"", key, f->enum_name((unsigned)v));
		return;
	case FIELD_HEX64:
		fprintf(d->out, ",\"%s\":\"0x%" PRIx64 "\"", key, v);
		return;
	case FIELD_I32:
		fprintf(d->out, ",\"%s\":%" PRId64, key, (int64_t)v);
		return;
	default:
		fprintf(d->out, ",\"%s\":%" PRIu64, key, v);
		return;
	}
}

/* The session's tool: a record, after the view took it in (or on the second
 * read, with the view of the whole trace). */
static int on_record(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	struct dump *d = ctx;
	const struct record_field *fields;
	size_t n;

	if (d->learning)
		return 0;
	if (d->type_mask && (rec->type >= 32 || !(d->type_mask & (1u << rec->type))))
		return 0;
	if (rec->source == FSS_SOURCE_NONE && !d->want_header && !d->type_mask)
		return 0; /* the writer's trace_end: the file's framing, shown with --header */
	fields = record_fields(rec->type, &n);
	if (!fields) {
		fprintf(d->out, "{\"type\":\"unknown\",\"type_id\":%u,\"size\":%u,\"source\":%u}\n", rec->type,
			rec->size, rec->source);
		return 0;
	}
	fprintf(d->out, "{\"type\":\"%s\",\"source\":%u,\"rank\":%d", record_type_name(rec->type), rec->source,
		src ? src->rank : FSS_RANK_UNKNOWN);
	if (d->merge)
		fprintf(d->out, ",\"node\":%zu", merge_current(d->merge));
	for (size_t i = 0; i < n; i++)
		print_field(d, rec, &fields[i]);
	fputs("}\n", d->out);
	return 0;
}

/* The session's tool: a trace's header. */
static int on_header(void *ctx, const struct fss_file_header *h)
{
	struct dump *d = ctx;

	if (!d->want_header || d->learning)
		return 0;
	if (d->merge) {
		size_t n, k = merge_current(d->merge);
		const struct merge_node *nodes = merge_nodes(d->merge, &n);

		fprintf(d->out, "{\"type\":\"file_header\",\"node\":%zu,\"path\":", k);
		json_string(d->out, nodes[k].path, strlen(nodes[k].path));
		fputc(',', d->out);
	} else {
		fputs("{\"type\":\"file_header\",", d->out);
	}
	if (d->header_assumed) /* not the file's: what --salvage assumed in its place */
		fputs("\"assumed\":true,", d->out);
	fprintf(d->out,
		"\"version\":\"%u.%u\",\"header_size\":%u,\"flags\":%u,"
		"\"features\":%" PRIu64 ",\"created_mono_ns\":%" PRIu64 ",\"created_realtime_ns\":%" PRIu64
		",\"chunk_payload_max\":%u,\"writer_pid\":%u}\n",
		h->version_major, h->version_minor, h->header_size, h->flags, h->features, h->created_mono_ns,
		h->created_realtime_ns, h->chunk_payload_max, h->writer_pid);
	return 0;
}

static int parse_types(const char *list, unsigned *mask)
{
	char *copy = strdup(list), *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint16_t t;

		for (t = 1; t < FSS_REC_TYPE_MAX; t++)
			if (strcmp(record_type_name(t), tok) == 0)
				break;
		if (t == FSS_REC_TYPE_MAX) {
			fprintf(stderr,
				"fsdpscope dump: --type: '%s' is not a record type (see 'fsdpscope help dump')\n", tok);
			err = FSS_E_USAGE;
			break;
		}
		*mask |= 1u << t;
	}
	free(copy);
	return err;
}

static void print_text(FILE *out, const char *key, const char *s)
{
	fprintf(out, ",\"%s\":", key);
	if (s)
		json_string(out, s, strlen(s));
	else
		fputs("null", out);
}

/* The GPUs a source uses (device records, format 1.5): [] when the trace
 * does not say. */
static void print_devices(const struct dump *d, const struct source *s)
{
	fprintf(d->out, ",\"devices\":[");
	for (size_t i = 0; i < s->ndevices; i++) {
		const struct fss_rec_device *v = &s->devices[i];

		fprintf(d->out, "%s{\"device\":%" PRIu32, i ? "," : "", v->device);
		print_text(d->out, "name", sources_string(d->layer, s->id, v->name));
		fprintf(d->out,
			",\"sm_count\":%" PRIu32 ",\"memory_bytes\":%" PRIu64 ",\"compute_capability\":\"%u.%u\""
			",\"origin\":\"%s\"}",
			v->sm_count, v->memory_bytes, v->compute_major, v->compute_minor,
			record_device_origin_name(v->origin));
	}
	fprintf(d->out, "]");
}

/* One line per process: what the layer learnt of it over the whole trace. */
static void print_sources(const struct dump *d)
{
	for (size_t i = 0; i < sources_count(d->layer); i++) {
		const struct source *s = sources_at(d->layer, i);
		const char *abbrev = source_signal(s) ? sigabbrev_np(source_signal(s)) : NULL;
		fprintf(d->out, "{\"type\":\"source\",\"source\":%" PRIu32 ",\"rank\":%" PRId32 ",\"rank_from\":\"%s\"",
			s->id, s->rank, source_rank_from_name(s->rank_from));
		fprintf(d->out, ",\"world_size\":%" PRId32 ",\"pid\":%" PRIu32, s->world_size, s->pid);
		print_text(d->out, "host", sources_string(d->layer, s->id, s->host));
		print_text(d->out, "command", sources_string(d->layer, s->id, s->command));
		fprintf(d->out,
			",\"records\":%" PRIu64 ",\"communicators\":%zu,\"collectives\":%" PRIu64
			",\"collectives_missing\":%" PRIu64,
			s->records, s->ncomms, s->collectives, source_collectives_missing(s));
		fprintf(d->out, ",\"end\":\"%s\",\"exit_code\":%" PRId32 ",\"signal\":%d",
			source_end_name(source_end_of(s)), source_exit_code(s), source_signal(s));
		print_text(d->out, "signal_name", abbrev ? abbrev : NULL);
		fprintf(d->out, ",\"process_end\":%s,\"process_exit\":%s", s->has_process_end ? "true" : "false",
			s->has_exit ? "true" : "false");
		fprintf(d->out, ",\"first_ns\":%" PRIu64 ",\"last_ns\":%" PRIu64, s->first_ns, s->last_ns);
		print_devices(d, s);
		fprintf(d->out,
			",\"drops\":{\"ring\":%" PRIu64 ",\"sink\":%" PRIu64 ",\"cupti\":%" PRIu64 ",\"nvtx\":%" PRIu64
			",\"nvtx_unnamed\":%" PRIu64 "},\"dropped\":%" PRIu64 "}\n",
			s->drops.ring, s->drops.sink, s->drops.cupti, s->drops.nvtx, s->drops.nvtx_unnamed, s->dropped);
	}
}

/*
 * A view-only session over the n traces at paths with the dump as its
 * tool (why: what failed). Returns 0, -ENOMEM, or the merge's error.
 */
static int dump_open(struct dump *d, const char *const *paths, size_t n, char *why, size_t whylen)
{
	const struct fss_session_tool tool = {.ctx = d, .on_header = on_header, .on_record = on_record};
	const struct fss_session_options o = {
	    .tool = &tool, .view_only = 1, .read_flags = d->salvage ? TRACE_READ_SALVAGE : 0};
	int rc = fss_session_new(&d->session, &o);

	if (!rc) {
		rc = fss_session_open_files(d->session, paths, n, why, whylen);
		d->layer = fss_session_view(d->session);
		d->merge = fss_session_merge(d->session);
	}
	if (rc == -ENOMEM)
		snprintf(why, whylen, "out of memory");
	return rc;
}

/* The first of two reads: the view learns what each process is. Returns
 * -ENOMEM, else 0 (a damaged trace stops both reads at the same places). */
static int dump_learn(struct dump *d)
{
	int rc;

	d->learning = 1;
	rc = fss_session_read(d->session, 0);
	d->learning = 0;
	fss_session_end_view(d->session);
	if (!d->merge && fss_session_read_info(d->session))
		d->header_assumed = fss_session_read_info(d->session)->salvage.used;
	return rc == -ENOMEM ? rc : 0;
}

static void dump_close(struct dump *d)
{
	fss_session_free(d->session);
	d->session = NULL;
	d->layer = NULL;
	d->merge = NULL;
}

/* What each trace of a merged dump was, on stderr. Returns EXIT_OK, or
 * EXIT_USAGE when one was not read whole. */
static int dump_nodes_said(const struct dump *d)
{
	const struct merge_node *nodes;
	size_t nnodes;
	int rc = EXIT_OK;

	nodes = merge_nodes(d->merge, &nnodes);
	for (size_t k = 0; k < nnodes; k++) {
		const struct trace_read_info *info = &nodes[k].info;

		if (nodes[k].read_rc == 0 && info->end == TRACE_END_NOT_MARKED)
			fprintf(stderr,
				"fsdpscope dump: %s: format %u.%u has no end marker: whether its writer finished "
				"cannot be told\n",
				nodes[k].path, info->version_major, info->version_minor);
		if (!nodes[k].read_rc)
			continue;
		fprintf(stderr, "fsdpscope dump: %s: %s\n", nodes[k].path, info->message);
		if (nodes[k].read_rc == FSS_E_TRUNCATED || nodes[k].read_rc == FSS_E_CORRUPT)
			fprintf(stderr, "fsdpscope dump: %s: the %llu chunks that could be read were dumped above\n",
				nodes[k].path, (unsigned long long)info->chunks);
		rc = EXIT_USAGE;
	}
	return rc;
}

/* Several traces (or a folder): one job's records, merged (merge.h). */
static int dump_merged(struct dump *d, int argc, char **argv, int first)
{
	char **paths;
	char err[2048]; /* a refusal of traces of several jobs names their files */
	size_t n;
	int rc, err_rc;

	if (diagnosis_trace_args(argc, argv, first, "dump", &paths, &n))
		return EXIT_USAGE;
	rc = dump_open(d, (const char *const *)paths, n, err, sizeof(err));
	if (rc) {
		char hint[160] = "";

		/* the merge refuses a trace only for its header: is it damaged? */
		if (rc == FSS_E_CORRUPT && !d->salvage)
			diagnosis_salvage_hint("dump", "TRACE...", hint, sizeof(hint));
		fprintf(stderr, "fsdpscope dump: %s%s\n", err, hint);
		dump_close(d);
		diagnosis_trace_args_free(paths, n);
		return EXIT_USAGE;
	}
	/* as for one trace: learn first, then print */
	err_rc = dump_learn(d);
	if (!err_rc)
		err_rc = fss_session_reread(d->session);
	if (d->want_sources && err_rc != -ENOMEM)
		print_sources(d);
	output_flush();
	if (err_rc == -ENOMEM) {
		fprintf(stderr, "fsdpscope dump: out of memory\n");
		rc = EXIT_USAGE;
	} else {
		rc = dump_nodes_said(d);
	}
	dump_close(d);
	diagnosis_trace_args_free(paths, n);
	return rc;
}

enum { OPT_TYPE, OPT_HEADER, OPT_SOURCES, OPT_SALVAGE };

static int dump_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct dump *d = ctx;

	(void)prog;
	if (id == OPT_TYPE)
		return parse_types(arg, &d->type_mask) ? -1 : 0;
	if (id == OPT_HEADER)
		d->want_header = 1;
	else if (id == OPT_SALVAGE)
		d->salvage = 1;
	else
		d->want_sources = 1;
	return 0;
}

static const struct options_entry dump_entries[] = {
    {"type", 0, "NAME[,NAME...]",
     "print only these record types (process_hello, string,\n"
     "comm, collective, group, gpu_interval, nvtx_range,\n"
     "clock_anchor, drops, process_end, correlation,\n"
     "process_exit, sink, step_summary, enter, sync_exit)",
     OPT_TYPE},
    {"header", 0, NULL,
     "print the file header first, as {\"type\":\"file_header\",...},\n"
     "and the writer's trace_end record (source 4294967295, the\n"
     "file's own) where it lies, last in a closed trace",
     OPT_HEADER},
    {"sources", 0, NULL,
     "after the records, one {\"type\":\"source\",...} line per\n"
     "process: its rank and where it came from (\"rank_from\":\n"
     "communicator, RANK, SLURM_PROCID, ...; for an attached process\n"
     "inferred:in-place-allgather, inferred:environment or\n"
     "guessed:pid-order), pid, host, command, how it ended\n"
     "(\"end\": clean, exited, signaled, cut-off, detached: still\n"
     "running when fsdpscope attach let go), drops, collectives\n"
     "seen and missing",
     OPT_SOURCES},
    {"salvage", 0, NULL, DIAGNOSIS_SALVAGE_HELP "; --header prints the\nassumed header, with \"assumed\":true",
     OPT_SALVAGE},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set dump_sets[] = {{.entries = dump_entries, .apply = dump_apply}};

const struct options_help cmd_dump_help = OPTIONS_HELP(dump_help_head, dump_sets, 27, dump_help_tail);

int cmd_dump(int argc, char **argv)
{
	struct dump d = {.out = stdout};
	struct trace_read_info info = {0};
	char why[512];
	int err, first;

	first = options_parse(&cmd_dump_help, "dump", argc, argv, OPTIONS_ANYWHERE, &d);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (argc - first < 1) {
		fprintf(stderr, "fsdpscope dump: give a trace file, or several (see 'fsdpscope help dump')\n");
		return EXIT_USAGE;
	}
	{
		struct stat st;

		if (argc - first > 1 || (stat(argv[first], &st) == 0 && S_ISDIR(st.st_mode)))
			return dump_merged(&d, argc, argv, first);
	}
	if (dump_open(&d, (const char *const *)&argv[first], 1, why, sizeof(why))) {
		fprintf(stderr, "fsdpscope dump: %s\n", why);
		dump_close(&d);
		return EXIT_USAGE;
	}
	{
		struct stat st;

		/* A pipe can be read only once: print as the records come. */
		d.one_pass = stat(argv[first], &st) == 0 && !S_ISREG(st.st_mode);
	}
	/* The first read only learns; the second prints and says what the file
	 * was. A pipe is read once: the view learns as the lines print. */
	err = d.one_pass ? 0 : dump_learn(&d);
	if (!err) {
		err = d.one_pass ? fss_session_read(d.session, 0) : fss_session_reread(d.session);
		info = *fss_session_read_info(d.session);
	} else {
		snprintf(info.message, sizeof(info.message), "%s", fss_strerror(err));
	}
	if (d.one_pass)
		fss_session_end_view(d.session);
	if (d.want_sources && err != -ENOENT && err != -EACCES && err != -EISDIR && err != -ENOMEM)
		print_sources(&d);
	output_flush();
	dump_close(&d);
	if (err == -ENOENT || err == -EACCES || err == -EISDIR) {
		fprintf(stderr, "fsdpscope dump: cannot open %s: %s\n", argv[first], fss_strerror(err));
		return EXIT_USAGE;
	}
	if (info.input == TRACE_INPUT_NO_RECORDS && err == 0) {
		/* Read whole and closed by its writer: empty, not damaged. */
		fprintf(stderr, "fsdpscope dump: %s: %s\n", argv[first], info.message);
		return EXIT_OK;
	}
	if (info.input != TRACE_INPUT_TRACE) {
		/* Say what the file is; there was nothing (or no record) to dump. */
		char hint[PATH_MAX + 80] = "";

		if (info.input == TRACE_INPUT_HEADER_DAMAGED && !d.salvage)
			diagnosis_salvage_hint("dump", argv[first], hint, sizeof(hint));
		fprintf(stderr, "fsdpscope dump: %s: %s%s\n", argv[first], info.message, hint);
		return EXIT_USAGE;
	}
	if (err) {
		fprintf(stderr, "fsdpscope dump: %s: %s\n", argv[first], info.message);
		if (err == FSS_E_TRUNCATED || err == FSS_E_CORRUPT)
			fprintf(stderr, "fsdpscope dump: the %llu chunks that could be read were dumped above\n",
				(unsigned long long)info.chunks);
		return EXIT_USAGE;
	}
	if (info.end == TRACE_END_NOT_MARKED)
		fprintf(stderr,
			"fsdpscope dump: %s: format %u.%u has no end marker: whether its writer finished "
			"cannot be told\n",
			argv[first], info.version_major, info.version_minor);
	return EXIT_OK;
}
