/*
 * cmd_dump.c - fsdpscope dump TRACE: every record as one JSON object a line.
 */
#include "cli/commands.h"
#include "cli/json.h"
#include "cli/output.h"

#include "common/error.h"
#include "common/record.h"
#include "common/record_fields.h"
#include "common/strtab.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_dump_help[] =
	"NAME\n"
	"    fsdpscope dump - print every record of a trace as JSON lines\n\n"
	"SYNOPSIS\n"
	"    fsdpscope dump [--type NAME[,NAME...]] [--header] TRACE\n\n"
	"DESCRIPTION\n"
	"    Reads TRACE (a file written by 'fsdpscope run' or by an agent's file sink,\n"
	"    including a '.partial' file left by a writer that died) and prints each\n"
	"    record as one JSON object per line, in file order, the way 'perf script'\n"
	"    shows a perf.data file. Every object has \"type\", \"source\" (the process it\n"
	"    came from) and \"rank\" (the RANK hint of that process, -1 if unknown), then\n"
	"    every field of the record by the names of docs/format.md. Enums are shown\n"
	"    by name, handles as hex strings, and string ids resolved: a field \"name\"\n"
	"    holding string id 5 prints as \"name\":\"layers.3\",\"name_id\":5.\n\n"
	"    Records of types this version does not know are printed as\n"
	"    {\"type\":\"unknown\",\"type_id\":N,\"size\":S,...} and otherwise skipped.\n\n"
	"    A damaged trace is dumped chunk by chunk around the damage: every chunk\n"
	"    whose checksum holds is printed, and dump says on stderr which byte\n"
	"    ranges (and chunks) it skipped and why, and exits 2. So does a trace cut\n"
	"    short or never closed by its writer (no trace_end record at its end):\n"
	"    what it holds is printed first. A file that is empty, not a trace, or\n"
	"    whose header is cut short or damaged is named as such, and nothing is\n"
	"    printed.\n\n"
	"OPTIONS\n"
	"    --type NAME[,NAME...]  print only these record types (process_hello, string,\n"
	"                           comm, collective, group, gpu_interval, nvtx_range,\n"
	"                           clock_anchor, drops, process_end, correlation)\n"
	"    --header               print the file header first, as {\"type\":\"file_header\",...},\n"
	"                           and the writer's trace_end record (source 4294967295, the\n"
	"                           file's own) where it lies, last in a closed trace\n\n"
	"EXIT STATUS\n"
	"    0 the whole trace was read and its writer closed it (also when it holds no\n"
	"    records: said on stderr); 2 bad usage, a file that is not a readable trace,\n"
	"    a damaged trace, or one cut short or never closed.\n\n"
	"EXAMPLES\n"
	"    fsdpscope dump run.fss | head\n"
	"    fsdpscope dump --type collective run.fss | grep AllGather | wc -l\n"
	"    fsdpscope dump --header rank3.fss.partial\n";

struct dump {
	strtab_t *strings;
	int32_t *ranks; /* rank hint per source */
	size_t nsources;
	unsigned type_mask; /* bit per record type; 0 = all */
	int want_header;
	FILE *out;
};

static int32_t rank_of(const struct dump *d, uint32_t source)
{
	return source < d->nsources ? d->ranks[source] : FSS_RANK_UNKNOWN;
}

static int remember_hello(struct dump *d, const struct fss_rec_process_hello *h)
{
	uint32_t source = h->head.source;
	int32_t rank = h->rank;

	if (source >= d->nsources) {
		size_t n = (size_t)source + 1;
		int32_t *r = realloc(d->ranks, n * sizeof(*r));

		if (!r)
			return -ENOMEM;
		for (size_t i = d->nsources; i < n; i++)
			r[i] = FSS_RANK_UNKNOWN;
		d->ranks = r;
		d->nsources = n;
	}
	if (rank < 0)
		rank = h->slurm_procid >= 0 ? h->slurm_procid : h->ompi_rank;
	d->ranks[source] = rank;
	return 0;
}

static void print_field(struct dump *d, const struct fss_record_head *rec, const struct record_field *f)
{
	uint64_t v = record_field_uint(rec, f);
	const char *s;

	switch (f->kind) {
	case FIELD_RESERVED:
		return;
	case FIELD_TEXT: {
		const struct fss_rec_string *part = (const void *)rec;
		size_t len = part->total_len > part->offset ? (size_t)(part->total_len - part->offset) : 0;

		if (len > FSS_STRING_PART_BYTES)
			len = FSS_STRING_PART_BYTES;
		fprintf(d->out, ",\"%s\":", f->name);
		json_string(d->out, part->text, len);
		return;
	}
	case FIELD_STRING_ID:
		s = strtab_get(d->strings, rec->source, (uint32_t)v);
		fprintf(d->out, ",\"%s\":", f->name);
		if (s)
			json_string(d->out, s, strlen(s));
		else
			fputs("null", d->out);
		fprintf(d->out, ",\"%s_id\":%" PRIu64, f->name, v);
		return;
	case FIELD_ENUM8:
	case FIELD_ENUM16:
	case FIELD_ENUM32:
		fprintf(d->out, ",\"%s\":\"%s\"", f->name, f->enum_name((unsigned)v));
		return;
	case FIELD_HEX64:
		fprintf(d->out, ",\"%s\":\"0x%" PRIx64 "\"", f->name, v);
		return;
	case FIELD_I32:
		fprintf(d->out, ",\"%s\":%" PRId64, f->name, (int64_t)v);
		return;
	default:
		fprintf(d->out, ",\"%s\":%" PRIu64, f->name, v);
		return;
	}
}

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct dump *d = ctx;
	const struct record_field *fields;
	size_t n;

	if (rec->type == FSS_REC_STRING && strtab_add_part(d->strings, (const void *)rec) == -ENOMEM)
		return -ENOMEM;
	if (rec->type == FSS_REC_PROCESS_HELLO && remember_hello(d, (const void *)rec))
		return -ENOMEM;
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
		rank_of(d, rec->source));
	for (size_t i = 0; i < n; i++)
		print_field(d, rec, &fields[i]);
	fputs("}\n", d->out);
	return 0;
}

static int on_header(void *ctx, const struct fss_file_header *h)
{
	struct dump *d = ctx;

	if (!d->want_header)
		return 0;
	fprintf(d->out,
		"{\"type\":\"file_header\",\"version\":\"%u.%u\",\"header_size\":%u,\"flags\":%u,"
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
			fprintf(stderr, "fsdpscope dump: --type: '%s' is not a record type (see 'fsdpscope help dump')\n",
				tok);
			err = FSS_E_USAGE;
			break;
		}
		*mask |= 1u << t;
	}
	free(copy);
	return err;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option options[] = {
		{"type", required_argument, NULL, 't'},
		{"header", no_argument, NULL, 'H'},
		{NULL, 0, NULL, 0},
	};
	struct trace_parser_ops ops = {.on_header = on_header, .on_record = on_record};
	struct dump d = {.out = stdout};
	struct trace_read_info info;
	int opt, err;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+", options, NULL)) != -1) {
		switch (opt) {
		case 't':
			if (parse_types(optarg, &d.type_mask))
				return EXIT_USAGE;
			break;
		case 'H':
			d.want_header = 1;
			break;
		default:
			fprintf(stderr, "fsdpscope dump: unknown option '%s' (see 'fsdpscope help dump')\n",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "fsdpscope dump: give one trace file (see 'fsdpscope help dump')\n");
		return EXIT_USAGE;
	}
	d.strings = strtab_new();
	if (!d.strings) {
		fprintf(stderr, "fsdpscope dump: out of memory\n");
		return EXIT_USAGE;
	}
	err = trace_read(argv[optind], &ops, &d, &info);
	output_flush();
	strtab_free(d.strings);
	free(d.ranks);
	if (err == -ENOENT || err == -EACCES || err == -EISDIR) {
		fprintf(stderr, "fsdpscope dump: cannot open %s: %s\n", argv[optind], fss_strerror(err));
		return EXIT_USAGE;
	}
	if (info.input == TRACE_INPUT_NO_RECORDS && err == 0) {
		/* Read whole and closed by its writer: empty, not damaged. */
		fprintf(stderr, "fsdpscope dump: %s: %s\n", argv[optind], info.message);
		return EXIT_OK;
	}
	if (info.input != TRACE_INPUT_TRACE) {
		/* Say what the file is; there was nothing (or no record) to dump. */
		fprintf(stderr, "fsdpscope dump: %s: %s\n", argv[optind], info.message);
		return EXIT_USAGE;
	}
	if (err) {
		fprintf(stderr, "fsdpscope dump: %s: %s\n", argv[optind], info.message);
		if (err == FSS_E_TRUNCATED || err == FSS_E_CORRUPT)
			fprintf(stderr, "fsdpscope dump: the %llu chunks that could be read were dumped above\n",
				(unsigned long long)info.chunks);
		return EXIT_USAGE;
	}
	if (info.end == TRACE_END_NOT_MARKED)
		fprintf(stderr, "fsdpscope dump: %s: format %u.%u has no end marker: whether its writer finished "
				"cannot be told\n",
			argv[optind], info.version_major, info.version_minor);
	return EXIT_OK;
}
