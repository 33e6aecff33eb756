/*
 * cmd_ledger.c - fsdpscope ledger: the FSDP memory and wire planning
 * calculator. The arithmetic is collector/ledger.c's, the same the analysis
 * of a trace uses, so a plan and a measured job are read the same way.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/options.h"

#include "collector/ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ledger_help_head[] =
    "NAME\n"
    "    fsdpscope ledger - FSDP / ZeRO-3 memory and communication planning calculator\n\n"
    "SYNOPSIS\n"
    "    fsdpscope ledger --params P --ranks N (--units K | --unit-params U) [--prefetch F]\n"
    "                     [--gpu-mem SIZE] [--param-dtype T] [--grad-dtype T]\n"
    "                     [--master-dtype T|none] [--optimizer O] [--json]\n"
    "    fsdpscope ledger [--prefetch F] [--gpu-mem SIZE] [dtype and optimizer options] [--json]\n"
    "                     TRACE...\n\n"
    "DESCRIPTION\n"
    "    Builds the memory ledger of a fully sharded job before it runs:\n"
    "      persistent per rank = (param + grad + master + optimizer bytes) x P / N\n"
    "                            (bf16 + bf16 + fp32 + Adam m, v = 16 B x P / N)\n"
    "      transient per rank  = param bytes x U x (1 + prefetch)\n"
    "                            (the gathered parameters of the live unit(s))\n"
    "      peak state          = persistent + transient (activations, reduce-scatter and\n"
    "                            staging buffers come on top: that is the headroom)\n"
    "      wire per rank/step  = 3 x P x param bytes (AllGather forward + AllGather\n"
    "                            backward + ReduceScatter), against DDP's all-reduce 2 x P\n"
    "    U is the largest unit: P / K for K equal units (one per transformer block), or\n"
    "    given with --unit-params. 'fsdpscope report' prints the same ledger for a trace,\n"
    "    with P, N and U measured from the gathers; so does this command given TRACEs (or\n"
    "    folders of them) instead of --params, --ranks and --units: several traces are\n"
    "    one job, a trace per node (docs/collect.md, \"More than one node\").\n\n"
    "OPTIONS\n";

static const char ledger_help_tail[] =
    "\n"
    "EXIT STATUS\n"
    "    0 printed; 2 bad usage, a value out of range (the message gives the range), or\n"
    "    output that could not be written ('fsdpscope: writing standard output: ...').\n\n"
    "EXAMPLES\n"
    "    # 7B model, Adam, mixed precision, 8 GPUs of 80 GB, one unit per block (32)\n"
    "    fsdpscope ledger --params 7e9 --ranks 8 --units 32 --gpu-mem 80G\n"
    "    # the same model wrapped as one unit: the transient row becomes the model\n"
    "    fsdpscope ledger --params 7e9 --ranks 8 --units 1 --prefetch 0 --gpu-mem 80G\n"
    "    fsdpscope ledger --params 70e9 --ranks 64 --units 80 --optimizer sgd --json\n"
    "    # measured: the ledger of a job recorded by one collector per node\n"
    "    fsdpscope ledger --gpu-mem 80G nodeA/collect.fss nodeB/collect.fss\n";

enum {
	OPT_PARAMS = 0x200,
	OPT_RANKS,
	OPT_UNITS,
	OPT_UNIT_PARAMS,
	OPT_PREFETCH,
	OPT_GPU_MEM,
	OPT_PARAM_DTYPE,
	OPT_GRAD_DTYPE,
	OPT_MASTER_DTYPE,
	OPT_OPTIMIZER,
	OPT_JSON,
	OPT_HELP,
};

/* A size in the table's unit: one unit for the whole table (GB for a 7B
 * model) so rows can be added up by eye. */
struct scale {
	double div;
	const char *name;
};

static struct scale pick_scale(double bytes)
{
	if (bytes >= 1e9)
		return (struct scale){1e9, "GB"};
	if (bytes >= 1e6)
		return (struct scale){1e6, "MB"};
	return (struct scale){1e3, "kB"};
}

static const char *dtype_name(double bytes)
{
	return bytes == 1 ? "fp8" : bytes == 2 ? "bf16" : bytes == 4 ? "fp32" : bytes == 8 ? "fp64" : "custom";
}

/* row - one line of the table: label, formula, value in the table's unit. */
static void row(const char *label, const char *formula, double bytes, struct scale s)
{
	printf("  %-28s %-26s %11.3f %s\n", label, formula, bytes / s.div, s.name);
}

static void print_text(const struct analysis_ledger *l, uint32_t units)
{
	struct scale s = pick_scale((double)l->persistent_bytes_per_rank);
	double P = (double)l->params, N = l->ranks;
	double per_param = l->param_bytes + l->grad_bytes + l->master_bytes + l->optimizer_bytes;
	char b1[32], b2[32], f[64], label[64];

	printf("FSDP memory ledger: P = %s parameters sharded over N = %u ranks", rule_format_count(P, b1, sizeof(b1)),
	       l->ranks);
	if (units)
		printf(", %u unit%s", units, units == 1 ? "" : "s");
	printf(" (largest U = %s parameters), prefetch %u\n\n",
	       rule_format_count((double)l->largest_unit_params, b2, sizeof(b2)), l->prefetch);
	printf("Persistent, per rank (steady state)\n");
	snprintf(label, sizeof(label), "%s parameter shard", dtype_name(l->param_bytes));
	snprintf(f, sizeof(f), "%g B x P / N", l->param_bytes);
	row(label, f, l->param_bytes * P / N, s);
	snprintf(label, sizeof(label), "%s gradient shard", dtype_name(l->grad_bytes));
	snprintf(f, sizeof(f), "%g B x P / N", l->grad_bytes);
	row(label, f, l->grad_bytes * P / N, s);
	if (l->master_bytes > 0) {
		snprintf(label, sizeof(label), "%s master-weight shard", dtype_name(l->master_bytes));
		snprintf(f, sizeof(f), "%g B x P / N", l->master_bytes);
		row(label, f, l->master_bytes * P / N, s);
	}
	if (l->optimizer_bytes > 0) {
		snprintf(f, sizeof(f), "%g B x P / N", l->optimizer_bytes);
		row(l->optimizer_bytes == 8 ? "optimizer shard (Adam m, v)" : "optimizer state shard", f,
		    l->optimizer_bytes * P / N, s);
	}
	snprintf(f, sizeof(f), "%g B x P / N", per_param);
	row("persistent", f, (double)l->persistent_bytes_per_rank, s);
	printf("Transient, per rank (gathered parameters of the live units)\n");
	snprintf(f, sizeof(f), "%g B x U x (1 + %u)", l->param_bytes, l->prefetch);
	row("gathered units", f, (double)l->transient_bytes_per_rank, s);
	printf("Peak\n");
	row("peak state per rank", "persistent + transient", (double)l->peak_state_bytes_per_rank, s);
	if (l->gpu_mem_bytes) {
		snprintf(label, sizeof(label), "headroom of %s",
			 rule_format_bytes((double)l->gpu_mem_bytes, b1, sizeof(b1)));
		row(label, "activations, buffers", (double)l->headroom_bytes, s);
		if (l->headroom_bytes < 0)
			printf("  DOES NOT FIT: the sharded state alone exceeds the GPU's memory\n");
	}
	printf("Wire, per rank per step\n");
	snprintf(f, sizeof(f), "3 x P x %g B", l->param_bytes);
	row("FSDP (AG fwd + AG bwd + RS)", f, (double)l->model_wire_bytes_per_step, s);
	snprintf(f, sizeof(f), "2 x P x %g B", l->param_bytes);
	row("DDP (one all-reduce)", f, (double)l->ddp_wire_bytes_per_step, s);
	printf("For scale\n");
	snprintf(f, sizeof(f), "%g B x P", per_param);
	row("DDP state per GPU", f, (double)l->ddp_persistent_bytes_per_rank, s);
	snprintf(f, sizeof(f), "%g B x P", l->param_bytes);
	row("whole model as one unit", f, (double)l->whole_model_transient_bytes, s);
	if (l->gpu_mem_bytes && l->ddp_persistent_bytes_per_rank > l->gpu_mem_bytes)
		printf("  DDP does not fit in %s; FSDP moves %.2fx DDP's bytes to make it fit\n",
		       rule_format_bytes((double)l->gpu_mem_bytes, b1, sizeof(b1)),
		       l->ddp_wire_bytes_per_step
			   ? (double)l->model_wire_bytes_per_step / (double)l->ddp_wire_bytes_per_step
			   : 0);
}

/* parse_params - a parameter count: rule_parse_number's syntax, plus "7B"
 * meaning 7 billion (for sizes "B" means bytes, so it is read here only). */
static int parse_params(const char *text, double *out)
{
	char buf[64];
	size_t len = strlen(text);

	if (len >= 2 && len < sizeof(buf) && text[len - 1] == 'B' &&
	    (text[len - 2] == '.' || (text[len - 2] >= '0' && text[len - 2] <= '9'))) {
		memcpy(buf, text, len + 1);
		buf[len - 1] = 'G';
		return rule_parse_number(buf, out);
	}
	return rule_parse_number(text, out);
}

/* What each option takes, for the message that refuses a value. */
static const char *expected(int opt)
{
	switch (opt) {
	case OPT_PARAMS:
		return "a parameter count from 1 to 1e15 (7e9, 7B, 7G)";
	case OPT_RANKS:
		return "a whole number of ranks from 1 to 10000000";
	case OPT_UNITS:
		return "a whole number of units from 1 to 10000000, and at most --params";
	case OPT_UNIT_PARAMS:
		return "a parameter count from 1 to --params";
	case OPT_PREFETCH:
		return "a whole number of units from 0 to 64";
	case OPT_GPU_MEM:
		return "a size from 1 byte to 1e18 bytes (80G, 80GB, 141e9)";
	case OPT_PARAM_DTYPE:
	case OPT_GRAD_DTYPE:
		return "bf16, fp16, fp32, fp8 or fp64";
	case OPT_MASTER_DTYPE:
		return "bf16, fp16, fp32, fp8, fp64 or none";
	case OPT_OPTIMIZER:
		return "adam, sgd-momentum, sgd, or bytes of state per parameter from 0 to 64";
	default:
		return "see 'fsdpscope ledger --help'";
	}
}

/* The option that sets each input ledger_check names. */
static int option_of(enum ledger_field f)
{
	switch (f) {
	case LEDGER_PARAMS:
		return OPT_PARAMS;
	case LEDGER_RANKS:
		return OPT_RANKS;
	case LEDGER_UNITS:
		return OPT_UNITS;
	case LEDGER_LARGEST_UNIT:
		return OPT_UNIT_PARAMS;
	case LEDGER_PREFETCH:
		return OPT_PREFETCH;
	case LEDGER_PARAM_BYTES:
		return OPT_PARAM_DTYPE;
	case LEDGER_GRAD_BYTES:
		return OPT_GRAD_DTYPE;
	case LEDGER_MASTER_BYTES:
		return OPT_MASTER_DTYPE;
	case LEDGER_OPTIMIZER_BYTES:
		return OPT_OPTIMIZER;
	case LEDGER_GPU_MEM:
		return OPT_GPU_MEM;
	case LEDGER_OK:
		break;
	}
	return 0;
}

/* whole - v is a whole number in [lo, hi] (false for NaN). */
static int whole(double v, double lo, double hi)
{
	return v >= lo && v <= hi && v == floor(v);
}

/*
 * ledger_of_traces - the ledger measured from TRACEs (P, N and U from the
 * gathers, as 'fsdpscope report' has it), with the options that describe
 * what the traces cannot tell (dtypes, optimizer, prefetch, GPU memory).
 */
static int ledger_of_traces(int argc, char **argv, int first, const char *const *given, const struct ledger_input *in,
			    int json)
{
	static const int plan_only[] = {OPT_PARAMS, OPT_RANKS, OPT_UNITS, OPT_UNIT_PARAMS};
	struct diagnosis_flags flags;
	struct diagnosis d;
	struct analysis_options *o = &flags.analysis;

	for (size_t i = 0; i < sizeof(plan_only) / sizeof(plan_only[0]); i++)
		if (given[plan_only[i] - OPT_PARAMS]) {
			fprintf(stderr,
				"fsdpscope ledger: --params, --ranks, --units and --unit-params plan a job; with "
				"TRACEs they are measured: give one or the other (see 'fsdpscope ledger --help')\n");
			return EXIT_USAGE;
		}
	diagnosis_flags_init(&flags);
	if (given[OPT_PREFETCH - OPT_PARAMS])
		o->prefetch = in->prefetch;
	if (given[OPT_GPU_MEM - OPT_PARAMS])
		o->gpu_mem_bytes = in->gpu_mem_bytes;
	if (given[OPT_PARAM_DTYPE - OPT_PARAMS])
		o->param_bytes = in->param_bytes;
	if (given[OPT_GRAD_DTYPE - OPT_PARAMS])
		o->grad_bytes = in->grad_bytes;
	if (given[OPT_MASTER_DTYPE - OPT_PARAMS])
		o->master_bytes = in->master_bytes;
	if (given[OPT_OPTIMIZER - OPT_PARAMS])
		o->optimizer_bytes = in->optimizer_bytes;
	if (diagnosis_run_args(argc, argv, first, "ledger", &flags, &d))
		return EXIT_USAGE;
	if (!d.result->ledger.params) {
		fprintf(stderr, "fsdpscope ledger: %s: no FSDP gathers measured, so no ledger (%s)\n", d.trace_path,
			d.result->undecided_why[0] ? d.result->undecided_why : "see 'fsdpscope report'");
		diagnosis_free(&d);
		return EXIT_USAGE;
	}
	if (json)
		diagnosis_print_ledger_json(stdout, &d.result->ledger);
	else
		print_text(&d.result->ledger, d.result->units.forward_units);
	diagnosis_free(&d);
	return EXIT_OK;
}

static const struct options_entry ledger_entries[] = {
    {"params", 0, "P", "parameters of the model, 1 to 1e15 (7e9, 7B, 7G all work)", OPT_PARAMS},
    {"ranks", 0, "N", "ranks the parameters are sharded over, 1 to 10000000", OPT_RANKS},
    {"units", 0, "K", "equal FSDP units (e.g. the transformer blocks): U = P / K", OPT_UNITS},
    {"unit-params", 0, "U", "parameters of the largest unit (overrides P / K)", OPT_UNIT_PARAMS},
    {"prefetch", 0, "F", "units gathered ahead of the one computing (default 1)", OPT_PREFETCH},
    {"gpu-mem", 0, "SIZE", "memory of one GPU (80G, 80GB, 141e9): headroom", OPT_GPU_MEM},
    {"param-dtype", 0, "T", "gathered / compute dtype: bf16 (default), fp16, fp32, fp8", OPT_PARAM_DTYPE},
    {"grad-dtype", 0, "T", "gradient shard dtype (default bf16)", OPT_GRAD_DTYPE},
    {"master-dtype", 0, "T", "master weights: fp32 (default) or none", OPT_MASTER_DTYPE},
    {"optimizer", 0, "O",
     "adam (8 B/param, default), sgd-momentum (4), sgd (0), or bytes\n"
     "(0 to 64)",
     OPT_OPTIMIZER},
    {"json", 0, NULL, "one JSON document (schema fsdpscope.ledger/1, docs/report-schema.md)", OPT_JSON},
    {NULL, 0, NULL, NULL, 0},
};

/* What the options make: the plan's input, and the text each option was given (for the messages). */
struct ledger_args {
	struct ledger_input in;
	double ranks, units;
	int json;
	const char *given[OPT_HELP - OPT_PARAMS + 1];
};

/* refuse - say that option id cannot take what it was given. Returns -1. */
static int refuse(const struct ledger_args *a, int id)
{
	for (const struct options_entry *e = ledger_entries; e->name; e++)
		if (e->id == id)
			fprintf(stderr, "fsdpscope ledger: --%s %s: expected %s\n", e->name,
				a->given[id - OPT_PARAMS] ? a->given[id - OPT_PARAMS] : "", expected(id));
	return -1;
}

static int ledger_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct ledger_args *a = ctx;
	struct ledger_input *in = &a->in;
	double v;
	int bad = 0;

	(void)prog;
	a->given[id - OPT_PARAMS] = arg;
	switch (id) {
	case OPT_PARAMS:
		bad = parse_params(arg, &in->params) || !(in->params >= 1 && in->params <= LEDGER_PARAMS_MAX);
		break;
	case OPT_RANKS:
		bad = rule_parse_number(arg, &a->ranks) || !whole(a->ranks, 1, LEDGER_RANKS_MAX);
		break;
	case OPT_UNITS:
		bad = rule_parse_number(arg, &a->units) || !whole(a->units, 1, 1e7);
		break;
	case OPT_UNIT_PARAMS:
		bad = parse_params(arg, &in->largest_unit_params) ||
		      !(in->largest_unit_params >= 1 && in->largest_unit_params <= LEDGER_PARAMS_MAX);
		break;
	case OPT_PREFETCH:
		bad = rule_parse_number(arg, &v) || !whole(v, 0, LEDGER_PREFETCH_MAX);
		in->prefetch = bad ? 0 : (int)v;
		break;
	case OPT_GPU_MEM:
		bad = rule_parse_number(arg, &v) || !(v >= 1 && v <= LEDGER_GPU_MEM_MAX);
		in->gpu_mem_bytes = bad ? 0 : (uint64_t)v;
		break;
	case OPT_PARAM_DTYPE:
		bad = dtype_bytes_parse(arg, &in->param_bytes) || in->param_bytes == 0;
		break;
	case OPT_GRAD_DTYPE:
		bad = dtype_bytes_parse(arg, &in->grad_bytes) || in->grad_bytes == 0;
		break;
	case OPT_MASTER_DTYPE:
		bad = dtype_bytes_parse(arg, &in->master_bytes);
		break;
	case OPT_OPTIMIZER:
		bad = optimizer_bytes_parse(arg, &in->optimizer_bytes);
		break;
	default: /* OPT_JSON */
		a->json = 1;
	}
	return bad ? refuse(a, id) : 0;
}

static const struct options_set ledger_sets[] = {{.entries = ledger_entries, .apply = ledger_apply}};

const struct options_help cmd_ledger_help = OPTIONS_HELP(ledger_help_head, ledger_sets, 27, ledger_help_tail);

int cmd_ledger(int argc, char **argv)
{
	struct ledger_args a = {0};
	struct analysis_ledger out;
	enum ledger_field field;
	int first;

	ledger_input_defaults(&a.in);
	first = options_parse(&cmd_ledger_help, "ledger", argc, argv, OPTIONS_ANYWHERE, &a);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (first < argc)
		return ledger_of_traces(argc, argv, first, a.given, &a.in, a.json);
	if (a.in.params <= 0 || a.ranks <= 0 || (a.units <= 0 && a.in.largest_unit_params <= 0)) {
		fprintf(stderr,
			"fsdpscope ledger: --params, --ranks and --units (or --unit-params) are required, e.g.\n"
			"    fsdpscope ledger --params 7e9 --ranks 8 --units 32\n");
		return EXIT_USAGE;
	}
	a.in.ranks = (uint32_t)a.ranks;
	a.in.units = (uint32_t)a.units;
	field = ledger_check(&a.in);
	if (field != LEDGER_OK) {
		refuse(&a, option_of(field));
		return EXIT_USAGE;
	}
	ledger_compute(&a.in, &out);
	if (a.json)
		diagnosis_print_ledger_json(stdout, &out);
	else
		print_text(&out, a.in.units);
	return EXIT_OK;
}
