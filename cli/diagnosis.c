/*
 * diagnosis.c - the flags lint and report share, and running the analysis
 * and the rules over a trace.
 */
#include "cli/diagnosis.h"
#include "cli/commands.h"

#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/kineto_input.h"
#include "collector/ledger.h"
#include "collector/merge.h"
#include "common/error.h"
#include "common/trace_parser.h"
#include "rules/diagnosis.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void diagnosis_flags_init(struct diagnosis_flags *f)
{
	memset(f, 0, sizeof(*f));
	analysis_options_init(&f->analysis);
	rule_config_init(&f->rules);
}

int dtype_bytes_parse(const char *text, double *out)
{
	static const struct {
		const char *name;
		double bytes;
	} dtypes[] = {
		{"bf16", 2},    {"bfloat16", 2}, {"fp16", 2}, {"float16", 2}, {"half", 2}, {"fp32", 4},
		{"float32", 4}, {"float", 4},    {"fp8", 1},  {"fp64", 8},    {"none", 0},
	};

	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		if (strcmp(text, dtypes[i].name) == 0) {
			*out = dtypes[i].bytes;
			return 0;
		}
	}
	return -EINVAL;
}

int optimizer_bytes_parse(const char *text, double *out)
{
	if (strcmp(text, "adam") == 0 || strcmp(text, "adamw") == 0)
		*out = 8;
	else if (strcmp(text, "sgd-momentum") == 0 || strcmp(text, "momentum") == 0)
		*out = 4;
	else if (strcmp(text, "sgd") == 0 || strcmp(text, "none") == 0)
		*out = 0;
	else if (rule_parse_number(text, out) || *out > LEDGER_OPTIMIZER_BYTES_MAX)
		return -EINVAL;
	return 0;
}

/* parse_int - a whole number in [lo, hi]. */
static int parse_int(const char *text, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (end == text || *end || errno || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int diagnosis_hang_timeout_parse(const char *text, uint64_t *ns)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	/* "> 0" also refuses NaN; isfinite refuses inf before the cap does */
	if (end == text || *end || errno || !isfinite(v) || !(v > 0) || v > DIAG_HANG_TIMEOUT_MAX_S)
		return -EINVAL;
	*ns = (uint64_t)(v * 1e9);
	if (*ns == 0)
		return -EINVAL; /* below a nanosecond */
	return 0;
}

/* option_expects - what a shared option takes, for the message that
 * refuses a value. */
static const char *option_expects(int opt)
{
	switch (opt) {
	case DIAG_OPT_LAYERS:
		return "a whole number of layers from 1 to 1048576";
	case DIAG_OPT_RANK:
		return "a rank: a whole number from 0";
	case DIAG_OPT_WARMUP:
		return "a whole number of steps from 0 to 1048576";
	case DIAG_OPT_PREFETCH:
		return "a whole number of units from 0 to 64";
	case DIAG_OPT_PARAM_DTYPE:
	case DIAG_OPT_GRAD_DTYPE:
		return "bf16, fp16, fp32, fp8 or fp64";
	case DIAG_OPT_MASTER_DTYPE:
		return "bf16, fp16, fp32, fp8, fp64 or none";
	case DIAG_OPT_OPTIMIZER:
		return "adam, sgd-momentum, sgd, or bytes of state per parameter from 0 to 64";
	case DIAG_OPT_GPU_MEM:
		return "a size from 1 byte to 1e18 bytes (80G, 80GB, 141e9)";
	case DIAG_OPT_EXPOSED_MIN_NS:
		return "nanoseconds from 0 to 1e15";
	case DIAG_OPT_PEAK_FLOPS:
		return "FLOP/s from 0 to 1e21 (989e12)";
	case DIAG_OPT_FLOPS_PER_STEP:
	case DIAG_OPT_MODEL_FLOPS:
		return "FLOPs from 0 to 1e30";
	case DIAG_OPT_TOKENS_PER_STEP:
		return "tokens from 0 to 1e15";
	case DIAG_OPT_FSDP_COMM:
		return "a communicator id, dimension or name ('fsdpscope report' lists them)";
	case DIAG_OPT_HANG_TIMEOUT:
		return "seconds above 0, at most 1e7 (60, 0.5)";
	default:
		return "see --help";
	}
}

static const char *threshold_names(void)
{
	static char names[1024];
	size_t n;
	const struct rule_threshold_def *t = rule_thresholds(&n);

	if (!names[0])
		for (size_t i = 0; i < n; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", t[i].name);
	return names;
}

/* "NAME is a fraction from 0 to 1 (0% to 100%)" for the threshold that
 * NAME=VALUE names. */
static const char *threshold_range_words(const char *assignment)
{
	static char words[160];
	size_t n, len = strcspn(assignment, "=");
	const struct rule_threshold_def *t = rule_thresholds(&n);
	double lo, hi;

	for (size_t i = 0; i < n; i++)
		if (strlen(t[i].name) == len && strncmp(t[i].name, assignment, len) == 0) {
			snprintf(words, sizeof words, "%s is %s", t[i].name, rule_threshold_range(&t[i], &lo, &hi));
			return words;
		}
	return "see --help";
}

int diagnosis_option(struct diagnosis_flags *f, int opt, const char *arg, const char *cmd)
{
	struct analysis_options *o = &f->analysis;
	double v;
	int err;

	switch (opt) {
	case DIAG_OPT_LAYERS:
		if (parse_int(arg, 1, 1 << 20, &o->layers))
			goto bad;
		return 0;
	case DIAG_OPT_RANK:
		if (parse_int(arg, 0, INT_MAX, &o->rank))
			goto bad;
		f->rank_given = 1;
		return 0;
	case DIAG_OPT_WARMUP:
		if (parse_int(arg, 0, 1 << 20, &o->warmup_steps))
			goto bad;
		return 0;
	case DIAG_OPT_PREFETCH:
		if (parse_int(arg, 0, 64, &o->prefetch))
			goto bad;
		return 0;
	case DIAG_OPT_THRESHOLD:
		err = rule_config_set(&f->rules, arg);
		if (err == -ENOENT) {
			fprintf(stderr, "fsdpscope %s: --threshold %s: no such threshold (known: %s)\n", cmd, arg,
				threshold_names());
			return -1;
		}
		if (err == -EDOM) {
			fprintf(stderr, "fsdpscope %s: --threshold %s: out of range: %s\n", cmd, arg,
				threshold_range_words(arg));
			return -1;
		}
		if (err) {
			fprintf(stderr, "fsdpscope %s: --threshold %s: expected NAME=VALUE with VALUE a number >= 0 "
					"(suffixes %%, k, M, G, Ki, Mi, Gi)\n",
				cmd, arg);
			return -1;
		}
		return 0;
	case DIAG_OPT_DISABLE:
		if (rule_config_disable(&f->rules, arg)) {
			fprintf(stderr, "fsdpscope %s: --disable %s: no such rule (see 'fsdpscope lint --help')\n", cmd,
				arg);
			return -1;
		}
		return 0;
	case DIAG_OPT_PARAM_DTYPE:
		if (dtype_bytes_parse(arg, &v) || v == 0)
			goto bad;
		o->param_bytes = v;
		return 0;
	case DIAG_OPT_GRAD_DTYPE:
		if (dtype_bytes_parse(arg, &v) || v == 0)
			goto bad;
		o->grad_bytes = v;
		return 0;
	case DIAG_OPT_MASTER_DTYPE:
		if (dtype_bytes_parse(arg, &v))
			goto bad;
		o->master_bytes = v;
		return 0;
	case DIAG_OPT_OPTIMIZER:
		if (optimizer_bytes_parse(arg, &v))
			goto bad;
		o->optimizer_bytes = v;
		return 0;
	case DIAG_OPT_GPU_MEM:
		if (rule_parse_number(arg, &v) || v < 1 || v > LEDGER_GPU_MEM_MAX)
			goto bad;
		o->gpu_mem_bytes = (uint64_t)v;
		return 0;
	case DIAG_OPT_STEP_RANGES:
		o->step_ranges = arg;
		return 0;
	case DIAG_OPT_COMPUTE_RANGES:
		o->compute_ranges = arg;
		return 0;
	case DIAG_OPT_HOST_TIMING:
		o->force_host_timing = 1;
		return 0;
	case DIAG_OPT_FSDP_COMM:
		if (!arg[0])
			goto bad;
		o->fsdp_comm = arg;
		return 0;
	case DIAG_OPT_HANG_TIMEOUT:
		if (diagnosis_hang_timeout_parse(arg, &o->hang_timeout_ns))
			goto bad;
		return 0;
	case DIAG_OPT_EXPOSED_MIN_NS:
		if (rule_parse_number(arg, &v) || v > DIAG_EXPOSED_MIN_NS_MAX)
			goto bad;
		o->exposed_min_ns = (uint64_t)v;
		return 0;
	case DIAG_OPT_PEAK_FLOPS:
		if (rule_parse_number(arg, &o->peak_flops) || o->peak_flops > DIAG_PEAK_FLOPS_MAX)
			goto bad;
		return 0;
	case DIAG_OPT_FLOPS_PER_STEP:
	case DIAG_OPT_MODEL_FLOPS:
		if (rule_parse_number(arg, &o->flops_per_step) || o->flops_per_step > DIAG_FLOPS_PER_STEP_MAX)
			goto bad;
		return 0;
	case DIAG_OPT_TOKENS_PER_STEP:
		if (rule_parse_number(arg, &o->tokens_per_step) || o->tokens_per_step > DIAG_TOKENS_PER_STEP_MAX)
			goto bad;
		return 0;
	default:
		return 1;
	}
bad:
	for (const struct option *lo = (const struct option[]){DIAGNOSIS_LONG_OPTIONS, {0}}; lo->name; lo++)
		if (lo->val == opt)
			fprintf(stderr, "fsdpscope %s: --%s %s: expected %s\n", cmd, lo->name, arg, option_expects(opt));
	return -1;
}

/* on_record_skip - the re-read that finds where a damaged trace stops. */
static int on_record_skip(void *ctx, const struct fss_record_head *rec)
{
	(void)ctx;
	(void)rec;
	return 0;
}

/* forward_gathers - AllGather events of one micro-batch's forward on the
 * FSDP group (of a step when micro-batches are not told), 0 when unknown. */
static uint32_t forward_gathers(const struct analysis_result *a)
{
	if (a->units.forward_units)
		return a->units.forward_units;
	if (a->microbatches.forward_allgathers)
		return a->microbatches.forward_allgathers;
	return a->per_step.forward_allgathers;
}

uint32_t diagnosis_layers_max(const struct analysis_result *a)
{
	uint32_t forward = forward_gathers(a);

	if (!forward)
		return 0;
	return forward > DIAG_LAYERS_COARSE_MAX ? forward : DIAG_LAYERS_COARSE_MAX;
}

/* find_rank - the per-rank entry of rank r, NULL when the trace has none. */
static const struct analysis_rank *find_rank(const struct analysis_result *a, int r)
{
	for (uint32_t i = 0; i < a->nper_rank; i++)
		if (a->per_rank[i].rank == r)
			return &a->per_rank[i];
	return NULL;
}

/*
 * format_ranks - the ranks of a (all, or those with analysed steps when
 * analysed_only), by rank, runs shortened: "0..3", "0, 2, 5..7". Writes at
 * most len bytes into buf and returns buf.
 */
static char *format_ranks(const struct analysis_result *a, int analysed_only, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t i = 0;

	buf[0] = 0;
	while (i < a->nper_rank && off < len) {
		if (analysed_only && !a->per_rank[i].steps_analyzed) {
			i++;
			continue;
		}
		uint32_t j = i;
		while (j + 1 < a->nper_rank && a->per_rank[j + 1].rank == a->per_rank[j].rank + 1 &&
		       (!analysed_only || a->per_rank[j + 1].steps_analyzed))
			j++;
		if (j == i)
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", a->per_rank[i].rank);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%d..%d", off ? ", " : "", a->per_rank[i].rank,
						a->per_rank[j].rank);
		i = j + 1;
	}
	return buf;
}

/*
 * check_against_trace - an option that cannot apply to the trace it was
 * given for is an error, not a report of nothing (an all-zero table, "no
 * step found", a product of the user's count with what was seen): a rank
 * the trace does not hold or that has no analysed step, a warm-up that
 * leaves a rank no step, a layer count far beyond the gathers. Returns 0,
 * or -EINVAL with why and the valid range in err.
 */
static int check_against_trace(const struct diagnosis_flags *f, const struct analysis_result *a, char *err,
			       size_t errlen)
{
	const struct analysis_options *o = &f->analysis;
	const struct analysis_rank *r = NULL;
	char ranks[160];

	if (f->rank_given && a->nper_rank) {
		r = find_rank(a, o->rank);
		if (!r) {
			snprintf(err, errlen, "--rank %d: the trace has no rank %d; its ranks are %s", o->rank, o->rank,
				 format_ranks(a, 0, ranks, sizeof ranks));
			return -EINVAL;
		}
	}
	if (o->warmup_steps > 0) {
		/* The skip applies to every rank: it must leave each rank that
		 * has steps at least one, or that rank drops out of the figures
		 * (and with all ranks gone, "no step" would blame the trace). */
		const struct analysis_rank *fewest = NULL;
		uint32_t most = 0;

		for (uint32_t i = 0; i < a->nper_rank; i++) {
			const struct analysis_rank *e = &a->per_rank[i];

			if (!e->steps_seen)
				continue;
			if (!fewest || e->steps_seen < fewest->steps_seen)
				fewest = e;
			if (e->steps_seen > most)
				most = e->steps_seen;
		}
		if (fewest && (uint32_t)o->warmup_steps >= fewest->steps_seen) {
			char range[32];

			if (fewest->steps_seen == 1)
				snprintf(range, sizeof range, "0");
			else
				snprintf(range, sizeof range, "0..%u", fewest->steps_seen - 1);
			if (fewest->steps_seen == most)
				snprintf(err, errlen, "--warmup-steps %d: the trace has %u step%s; --warmup-steps must be %s",
					 o->warmup_steps, most, most == 1 ? "" : "s", range);
			else
				snprintf(err, errlen, "--warmup-steps %d: rank %d has %u step%s (the ranks have %u to %u); "
						      "--warmup-steps must be %s to leave every rank a step",
					 o->warmup_steps, fewest->rank, fewest->steps_seen,
					 fewest->steps_seen == 1 ? "" : "s", fewest->steps_seen, most, range);
			return -EINVAL;
		}
	}
	if (r && !r->steps_analyzed && a->spread.ranks) {
		char found[64] = "no step found";

		if (r->steps_seen)
			snprintf(found, sizeof found, "%u found, none like the steady state", r->steps_seen);
		snprintf(err, errlen, "--rank %d: rank %d has no analysed step (%s); ranks with analysed steps: %s",
			 o->rank, o->rank, found, format_ranks(a, 1, ranks, sizeof ranks));
		return -EINVAL;
	}
	if (o->layers > 0) {
		uint32_t max = diagnosis_layers_max(a);

		if (max && (uint32_t)o->layers > max) {
			uint32_t forward = forward_gathers(a);

			if (forward < DIAG_LAYERS_COARSE_MAX)
				snprintf(err, errlen, "--layers %d: the forward of a micro-batch holds %u AllGather%s; "
						      "more layers than gathers means units that hold several, but no "
						      "model has more than %u layers: --layers must be 1..%u",
					 o->layers, forward, forward == 1 ? "" : "s", DIAG_LAYERS_COARSE_MAX, max);
			else
				snprintf(err, errlen, "--layers %d: the forward of a micro-batch holds %u AllGathers, at "
						      "least one per unit, and no model has more than %u layers: --layers "
						      "must be 1..%u",
					 o->layers, forward, DIAG_LAYERS_COARSE_MAX, max);
			return -EINVAL;
		}
	}
	return 0;
}

int diagnosis_check(const struct diagnosis_flags *f, const struct analysis_result *a, char *err, size_t errlen)
{
	if (f->analysis.fsdp_comm && a->fsdp_comm_match != 1 && a->ncomms) {
		/* an option that cannot apply: say what there is */
		size_t off = (size_t)snprintf(err, errlen, "--fsdp-comm %s names %s communicator of rank %d; it has:",
					      f->analysis.fsdp_comm, a->fsdp_comm_match < 0 ? "more than one" : "no",
					      a->headline_rank);
		for (uint32_t i = 0; i < a->ncomms && off < errlen; i++)
			off += (size_t)snprintf(err + off, errlen - off, " %016" PRIx64 " (dimension %016" PRIx64 "%s%s%s, %s)",
						a->comms[i].id, a->comms[i].dimension, a->comms[i].name[0] ? ", \"" : "",
						a->comms[i].name, a->comms[i].name[0] ? "\"" : "",
						analysis_comm_role_name(a->comms[i].role));
		return -EINVAL;
	}
	return check_against_trace(f, a, err, errlen);
}

int diagnosis_run(const char *path, const struct diagnosis_flags *f, struct diagnosis *d, char *err,
		  size_t errlen)
{
	return diagnosis_run_traces(&path, 1, f, d, err, errlen);
}

/* damage_of - where and why trace `path` stops being readable, into buf;
 * read as the analysis read it (flags: TRACE_READ_*). */
static void damage_of(const char *path, unsigned flags, const char *fallback, char *buf, size_t len)
{
	struct trace_parser_ops ops = {.on_record = on_record_skip};
	struct trace_read_info info;

	if (trace_read_flags(path, flags, &ops, NULL, &info) == 0 || !info.message[0])
		snprintf(buf, len, "%s", fallback);
	else
		snprintf(buf, len, "%s", info.message);
}

const char *diagnosis_salvage_hint(const char *cmd, const char *path, char *buf, size_t len)
{
	snprintf(buf, len, ": 'fsdpscope %s --salvage %s' recovers the intact chunks", cmd, path);
	return buf;
}

int diagnosis_run_worlds(struct diagnosis *d, const struct rule_config *rules)
{
	const struct analysis_result *a = d->result;

	if (!a->nworlds)
		return 0;
	d->world_findings = calloc(a->nworlds, sizeof(*d->world_findings));
	if (!d->world_findings)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->nworlds; i++) {
		int rc;

		if (!a->worlds[i].result)
			continue;
		d->world_findings[i] = findings_new();
		if (!d->world_findings[i])
			return -ENOMEM;
		rc = diagnosis_from_result(a->worlds[i].result, rules, d->world_findings[i], NULL, 0, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int diagnosis_run_traces(const char *const *paths, size_t n, const struct diagnosis_flags *f, struct diagnosis *d,
			 char *err, size_t errlen)
{
	int rc;

	memset(d, 0, sizeof(*d));
	d->trace_path = paths[0];
	if (errlen)
		err[0] = 0;
	if (n > 1) {
		size_t len = 1;

		for (size_t i = 0; i < n; i++)
			len += strlen(paths[i]) + 1;
		d->label = malloc(len);
		if (!d->label) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		d->label[0] = 0;
		for (size_t i = 0; i < n; i++)
			strcat(strcat(d->label, i ? " " : ""), paths[i]);
		d->trace_path = d->label;
	}
	rc = analyze_traces_tool(paths, n, &f->analysis, f->tool, &d->result, &d->merge, err, errlen);
	if (rc) {
		if (errlen && !err[0])
			snprintf(err, errlen, "%s", fss_strerror(rc));
		diagnosis_free(d);
		return rc;
	}
	if (diagnosis_check(f, d->result, err, errlen)) {
		diagnosis_free(d);
		return -EINVAL;
	}
	if (d->result->trace.truncated) {
		/* Where and why: the analysis read up to the last good chunk; the
		 * parser's own message says the offset. */
		const char *fallback = errlen && err[0] ? err : "the trace ends inside a chunk";
		unsigned flags = f->analysis.read_flags;
		char why[sizeof(d->damage)] = "";

		if (kineto_input_sniff(paths[0])) {
			/* PyTorch profiler traces: their reader's words, with the byte offsets */
			size_t off = 0;

			for (uint32_t k = 0; k < d->result->trace.ngaps && off < sizeof(d->damage); k++)
				off += (size_t)snprintf(d->damage + off, sizeof(d->damage) - off, "%s%s", off ? "; " : "",
							d->result->trace.gaps[k].why);
		} else if (n == 1) {
			damage_of(paths[0], flags, fallback, why, sizeof(why));
			snprintf(d->damage, sizeof(d->damage), "%s", why);
		} else {
			size_t off = 0;
			const struct merge_node *nodes;
			size_t nnodes;

			nodes = merge_nodes(d->merge, &nnodes);
			for (size_t k = 0; k < nnodes && off < sizeof(d->damage); k++) {
				if (!nodes[k].read_rc)
					continue;
				damage_of(paths[k], flags, "the trace ends inside a chunk", why, sizeof(why));
				off += (size_t)snprintf(d->damage + off, sizeof(d->damage) - off, "%s%s: %s", off ? "; " : "",
							paths[k], why);
			}
			if (!off)
				snprintf(d->damage, sizeof(d->damage), "%s", fallback);
		}
	}
	d->findings = findings_new();
	if (!d->findings) {
		diagnosis_free(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = diagnosis_from_result(d->result, &f->rules, d->findings, NULL, 0, NULL);
	if (!rc)
		rc = diagnosis_run_worlds(d, &f->rules);
	if (rc) {
		diagnosis_free(d);
		snprintf(err, errlen, "running the rules: %s", fss_strerror(rc));
		return rc;
	}
	return 0;
}

void diagnosis_free(struct diagnosis *d)
{
	for (uint32_t i = 0; d->world_findings && d->result && i < d->result->nworlds; i++)
		findings_free(d->world_findings[i]);
	free(d->world_findings);
	d->world_findings = NULL;
	analysis_result_free(d->result);
	findings_free(d->findings);
	merge_free(d->merge);
	for (size_t i = 0; i < d->npaths; i++)
		free(d->paths[i]);
	free(d->paths);
	free(d->label);
	if (d->trace_path == d->label)
		d->trace_path = NULL;
	d->result = NULL;
	d->findings = NULL;
	d->merge = NULL;
	d->paths = NULL;
	d->npaths = 0;
	d->label = NULL;
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(char ***paths, size_t *n, const char *path)
{
	char **grown = realloc(*paths, (*n + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	*paths = grown;
	if (!(grown[*n] = strdup(path)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* A folder's traces: its regular files named *.fss and those whose content
 * is a PyTorch profiler trace (*.json, *.json.gz, or any name), in name
 * order. A folder of both kinds is refused when they are read. */
static int folder_traces(const char *dir, char ***paths, size_t *n)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	size_t first = *n;
	int rc = 0;

	if (!dh)
		return -errno;
	while (!rc && (e = readdir(dh))) {
		size_t len = strlen(e->d_name);
		struct stat st;
		char *full;

		int fss = len > 4 && strcmp(e->d_name + len - 4, ".fss") == 0;

		if (e->d_name[0] == '.')
			continue;
		if (asprintf(&full, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && (fss || kineto_input_sniff(full)))
			rc = add_path(paths, n, full);
		free(full);
	}
	closedir(dh);
	if (!rc)
		qsort(*paths + first, *n - first, sizeof(**paths), path_cmp);
	return rc;
}

void diagnosis_print_partial_job(FILE *out, const char *cmd, const char *trace_path, const struct analysis_result *a)
{
	if (a->world_size > 0 && a->ranks < (uint32_t)a->world_size)
		fprintf(out,
			"fsdpscope %s: %s: a partial job: %u of the %d ranks of its largest communicator; read the "
			"other ranks' traces with it as one job (a trace per node, or a PyTorch profiler trace per rank): "
			"fsdpscope %s TRACE... or DIR...\n",
			cmd, trace_path, a->ranks, a->world_size, cmd);
}

int diagnosis_trace_args(int argc, char **argv, int first, const char *cmd, char ***out, size_t *nout)
{
	char **paths = NULL;
	size_t n = 0;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (first >= argc) {
		fprintf(stderr, "fsdpscope %s: expected a TRACE (or several, or a folder of them) (see 'fsdpscope %s --help')\n",
			cmd, cmd);
		return EXIT_USAGE;
	}
	for (int i = first; i < argc && !rc; i++) {
		struct stat st;
		size_t before = n;

		if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
			rc = add_path(&paths, &n, argv[i]);
			continue;
		}
		rc = folder_traces(argv[i], &paths, &n);
		if (rc == -ENOMEM)
			break;
		if (rc) {
			fprintf(stderr, "fsdpscope %s: %s: %s\n", cmd, argv[i], fss_strerror(rc));
			goto fail;
		}
		if (n == before) {
			fprintf(stderr,
				"fsdpscope %s: %s: a folder without a trace (no *.fss file, no PyTorch profiler trace in "
				"it)\n",
				cmd, argv[i]);
			goto fail;
		}
		fprintf(stderr, "fsdpscope %s: %s: reading", cmd, argv[i]);
		for (size_t k = before; k < n; k++)
			fprintf(stderr, "%s %s", k > before ? "," : "", paths[k]);
		fputc('\n', stderr);
	}
	if (rc) {
		fprintf(stderr, "fsdpscope %s: out of memory\n", cmd);
		goto fail;
	}
	*out = paths;
	*nout = n;
	return 0;
fail:
	diagnosis_trace_args_free(paths, n);
	return EXIT_USAGE;
}

void diagnosis_trace_args_free(char **paths, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(paths[k]);
	free(paths);
}

int diagnosis_run_args(int argc, char **argv, int first, const char *cmd, const struct diagnosis_flags *f,
		       struct diagnosis *d)
{
	char **paths;
	size_t n;
	char err[2048]; /* a refusal of traces of several jobs names their files */
	char hint[PATH_MAX + 80] = "";
	int rc;

	memset(d, 0, sizeof(*d));
	if (diagnosis_trace_args(argc, argv, first, cmd, &paths, &n))
		return EXIT_USAGE;
	rc = diagnosis_run_traces((const char *const *)paths, n, f, d, err, sizeof(err));
	if (rc) {
		/* Refused for a file header that does not hold: the analysis reads
		 * a trace damaged anywhere else, so that is what FSS_E_CORRUPT means. */
		if (rc == FSS_E_CORRUPT && !(f->analysis.read_flags & TRACE_READ_SALVAGE))
			diagnosis_salvage_hint(cmd, n == 1 ? paths[0] : "TRACE...", hint, sizeof(hint));
		/* several traces: the reason names the trace it is about */
		if (n == 1)
			fprintf(stderr, "fsdpscope %s: %s: %s%s\n", cmd, paths[0], err, hint);
		else
			fprintf(stderr, "fsdpscope %s: %s%s\n", cmd, err, hint);
		goto fail;
	}
	d->paths = paths;
	d->npaths = n;
	diagnosis_print_partial_job(stderr, cmd, d->trace_path, d->result);
	return 0;
fail:
	diagnosis_trace_args_free(paths, n);
	return EXIT_USAGE;
}
