/*
 * diagnosis.h - what `fsdpscope lint` and `fsdpscope report` share: the
 * flags that steer the analysis and the rules, running both over a trace,
 * and writing the result as text or as the JSON report
 * (docs/report-schema.md, "fsdpscope.report/2").
 */
#ifndef FSS_CLI_DIAGNOSIS_H
#define FSS_CLI_DIAGNOSIS_H

#include <getopt.h>
#include <stdio.h>

#include "collector/analysis.h"
#include "rules/rules.h"

/* Long options both commands accept (getopt_long values from 0x100 up). */
enum diagnosis_opt {
	DIAG_OPT_LAYERS = 0x100,
	DIAG_OPT_RANK,
	DIAG_OPT_THRESHOLD,
	DIAG_OPT_DISABLE,
	DIAG_OPT_PREFETCH,
	DIAG_OPT_PARAM_DTYPE,
	DIAG_OPT_GRAD_DTYPE,
	DIAG_OPT_MASTER_DTYPE,
	DIAG_OPT_OPTIMIZER,
	DIAG_OPT_GPU_MEM,
	DIAG_OPT_WARMUP,
	DIAG_OPT_STEP_RANGES,
	DIAG_OPT_COMPUTE_RANGES,
	DIAG_OPT_HOST_TIMING,
	DIAG_OPT_PEAK_FLOPS,
	DIAG_OPT_FLOPS_PER_STEP,
	DIAG_OPT_TOKENS_PER_STEP,
	DIAG_OPT_EXPOSED_MIN_NS,
	DIAG_OPT_FSDP_COMM,
	DIAG_OPT_HANG_TIMEOUT,
	DIAG_OPT_MODEL_FLOPS, /* --model-flops: the documented name of --flops-per-step */
	DIAG_OPT_END
};

/* The entries of struct option for the shared flags, to splice into a
 * command's table. */
#define DIAGNOSIS_LONG_OPTIONS                                                                                \
	{"layers", required_argument, NULL, DIAG_OPT_LAYERS},                                                 \
	{"rank", required_argument, NULL, DIAG_OPT_RANK},                                                     \
	{"threshold", required_argument, NULL, DIAG_OPT_THRESHOLD},                                           \
	{"disable", required_argument, NULL, DIAG_OPT_DISABLE},                                               \
	{"prefetch", required_argument, NULL, DIAG_OPT_PREFETCH},                                             \
	{"param-dtype", required_argument, NULL, DIAG_OPT_PARAM_DTYPE},                                       \
	{"grad-dtype", required_argument, NULL, DIAG_OPT_GRAD_DTYPE},                                         \
	{"master-dtype", required_argument, NULL, DIAG_OPT_MASTER_DTYPE},                                     \
	{"optimizer", required_argument, NULL, DIAG_OPT_OPTIMIZER},                                           \
	{"gpu-mem", required_argument, NULL, DIAG_OPT_GPU_MEM},                                               \
	{"warmup-steps", required_argument, NULL, DIAG_OPT_WARMUP},                                           \
	{"step-ranges", required_argument, NULL, DIAG_OPT_STEP_RANGES},                                       \
	{"compute-ranges", required_argument, NULL, DIAG_OPT_COMPUTE_RANGES},                                 \
	{"host-timing", no_argument, NULL, DIAG_OPT_HOST_TIMING},                                             \
	{"peak-flops", required_argument, NULL, DIAG_OPT_PEAK_FLOPS},                                         \
	{"flops-per-step", required_argument, NULL, DIAG_OPT_FLOPS_PER_STEP},                                 \
	{"model-flops", required_argument, NULL, DIAG_OPT_MODEL_FLOPS},                                       \
	{"tokens-per-step", required_argument, NULL, DIAG_OPT_TOKENS_PER_STEP},                               \
	{"exposed-min-ns", required_argument, NULL, DIAG_OPT_EXPOSED_MIN_NS},                                 \
	{"fsdp-comm", required_argument, NULL, DIAG_OPT_FSDP_COMM},                                           \
	DIAGNOSIS_HANG_OPTION

/* --hang-timeout alone, for `run`, which takes no other analysis flag. */
#define DIAGNOSIS_HANG_OPTION {"hang-timeout", required_argument, NULL, DIAG_OPT_HANG_TIMEOUT}

/* Its help lines (OPTIONS section), shared by lint, report, run and collect. */
#define DIAGNOSIS_HANG_HELP \
	"    --hang-timeout SEC     ranks waiting in a collective longer than SEC seconds while others\n" \
	"                           have not entered it are a hang (collective-hang, error); also\n" \
	"                           every rank inside one and none out for SEC (default 60; > 0,\n" \
	"                           fractions allowed). A wait longer than SEC stays a hang when\n" \
	"                           the job's own timeout ends it (the waiting ranks give up on an\n" \
	"                           NCCL error, or die); set SEC below that NCCL / PyTorch timeout,\n" \
	"                           or the job ends the waits before they are a hang\n"

/* The help text of the shared flags (OPTIONS section lines), a string
 * literal so that each command's static help text can include it. */
#define DIAGNOSIS_OPTIONS_HELP \
	"  Analysis\n" \
	"    --layers L             the model has L repeating units (transformer blocks): overrides the\n" \
	"                           inference, and enables the gather-count-mismatch rule; at most\n" \
	"                           the forward AllGathers of a micro-batch, or 1024 when fewer\n" \
	"    --rank R               rank whose figures are the headline ones (default: the lowest);\n" \
	"                           a rank of the trace that has an analysed step\n" \
	"    --warmup-steps N       steps to skip at the start (default: detected); fewer than the\n" \
	"                           steps of the rank that has fewest\n" \
	"    --step-ranges PATS     NVTX ranges that mark a step, domain:name globs, comma separated\n" \
	"                           (default \"" ANALYSIS_DEFAULT_STEP_RANGES "\")\n" \
	"    --compute-ranges PATS  NVTX ranges that count as compute in host timing; a leading '-'\n" \
	"                           excludes, later patterns win\n" \
	"                           (default \"" ANALYSIS_DEFAULT_COMPUTE_RANGES "\")\n" \
	"    --host-timing          measure exposure from host timing even when GPU intervals exist\n" \
	"    --exposed-min-ns NS    exposure below NS per gather counts as hidden (default 1000)\n" \
	"    --fsdp-comm ID         the FSDP shard group, by the id or dimension 'report' lists under\n" \
	"                           communicators (at least 4 hex digits of its start) or by the name\n" \
	"                           the job gave it (ncclConfig_t.commName); default: told from traffic\n" \
	DIAGNOSIS_HANG_HELP \
	"  Ledger and MFU\n" \
	"    --prefetch N           units gathered ahead (default 1)\n" \
	"    --param-dtype T        dtype parameters are gathered and computed in: bf16 (default), fp16,\n" \
	"                           fp32, fp8; fp32 also tells fp32-gather that fp32 compute is meant\n" \
	"    --grad-dtype T         dtype of the gradient shard (default bf16)\n" \
	"    --master-dtype T       dtype of the master weights, or none (default fp32)\n" \
	"    --optimizer O          adam (8 B/param, default), sgd-momentum (4), sgd (0), or bytes\n" \
	"                           (0 to 64)\n" \
	"    --gpu-mem SIZE         memory of one GPU, e.g. 80G: the ledger's headroom\n" \
	"    --model-flops F        model FLOPs of one step, all ranks together, e.g. 3.2e15: MFU\n" \
	"                           (--flops-per-step is the same flag)\n" \
	"    --tokens-per-step T    tokens of one step, all ranks: FLOPs = 6 P T, P the parameters the\n" \
	"                           trace shows (when --model-flops is not given)\n" \
	"    --peak-flops F         peak FLOP/s of one GPU, e.g. 989e12; default: the dense BF16 peak\n" \
	"                           of the GPU the trace names (device record, or a PyTorch profiler\n" \
	"                           trace's deviceProperties): H100 SXM / PCIe, H200, A100, B200 from\n" \
	"                           NVIDIA's datasheets; MI300X from a profiler trace only. Without\n" \
	"                           FLOPs or a peak, MFU is unknown and the report says which is missing\n" \
	"  Rules\n" \
	"    --threshold NAME=VALUE set a rule threshold (repeatable; see THRESHOLDS); VALUE takes\n" \
	"                           %, k/M/G (1000s) and Ki/Mi/Gi (1024s) suffixes\n" \
	"    --disable RULE         do not run RULE (repeatable)\n"

/* The largest values of the shared numeric flags: every figure computed
 * from them stays finite and fits its field. */
#define DIAG_EXPOSED_MIN_NS_MAX 1e15  /* ns: 11 days */
#define DIAG_PEAK_FLOPS_MAX 1e21      /* FLOP/s of one GPU: a thousand times today's */
#define DIAG_FLOPS_PER_STEP_MAX 1e30
#define DIAG_TOKENS_PER_STEP_MAX 1e15
#define DIAG_HANG_TIMEOUT_MAX_S 1e7   /* s: 115 days */

/* --layers may exceed the forward gathers (units holding several layers, or
 * the whole model in one) up to this many layers: the deepest models
 * trained have about a thousand. */
#define DIAG_LAYERS_COARSE_MAX 1024

/* --salvage's help, for the commands that read trace files (dump, lint, report). */
#define DIAGNOSIS_SALVAGE_HELP                                                                      \
	"a trace whose 64-byte file header is damaged (its magic or\n"                              \
	"CRC wrong) is read by its chunks, each on its own CRC: every\n"                            \
	"intact chunk is recovered, what was assumed in place of the\n"                             \
	"header is said on stderr, and the trace counts as damaged\n"                               \
	"(docs/format.md, \"Salvage\")"

/* diagnosis_salvage_hint - what to add to the refusal of a trace whose file
 * header is damaged, read without --salvage: ": 'fsdpscope CMD --salvage
 * PATH' recovers the intact chunks", into buf (returned). */
const char *diagnosis_salvage_hint(const char *cmd, const char *path, char *buf, size_t len);

struct fss_session_tool;

struct diagnosis_flags {
	struct analysis_options analysis;
	struct rule_config rules;
	int rank_given; /* --rank was given (the analysis' default is rank 0, silently replaced) */
	const struct fss_session_tool *tool; /* a consumer of the records read (export), NULL: none */
};

/* diagnosis_print_summary - one line, no newline: what was analysed and the
 * headline counts ("8 steps analysed, 4 micro-batches per step, ..."), or
 * why no verdict was reached. */
void diagnosis_print_summary(FILE *out, const struct analysis_result *a);

/* diagnosis_flags_init - analysis defaults, rule defaults. */
void diagnosis_flags_init(struct diagnosis_flags *f);

/*
 * diagnosis_option - apply one shared option (opt from getopt_long, arg its
 * argument). Returns 0 when applied, 1 when opt is not a shared option, -1
 * when the value is bad (a message naming the flag was printed on stderr,
 * prefixed with cmd).
 */
int diagnosis_option(struct diagnosis_flags *f, int opt, const char *arg, const char *cmd);

/*
 * diagnosis_hang_timeout_parse - --hang-timeout's SEC: a finite number of
 * seconds above 0 (fractions allowed), at most DIAG_HANG_TIMEOUT_MAX_S, as
 * nanoseconds in *ns. Returns 0 or -EINVAL.
 */
int diagnosis_hang_timeout_parse(const char *text, uint64_t *ns);

/*
 * dtype_bytes_parse - bytes per element of "bf16", "fp16", "fp32", "fp8",
 * or "none" (0: no such copy, for --master-dtype none). Returns 0 or -EINVAL.
 */
int dtype_bytes_parse(const char *text, double *out);

/*
 * optimizer_bytes_parse - optimizer state bytes per parameter: "adam" /
 * "adamw" 8 (fp32 m and v), "sgd-momentum" / "momentum" 4, "sgd" / "none"
 * 0, or a plain number of bytes from 0 to LEDGER_OPTIMIZER_BYTES_MAX.
 * Returns 0 or -EINVAL.
 */
int optimizer_bytes_parse(const char *text, double *out);

struct merge;

/* The outcome of one diagnosis. */
struct diagnosis {
	struct analysis_result *result; /* owned */
	findings_t *findings;           /* owned */
	const char *trace_path;         /* the trace, or with several all of them ("a.fss b.fss"); borrowed or
	                                   label's */
	char damage[768];               /* "" or where and why the trace stopped being readable (salvaged: what
	                                   was assumed in place of its file header) */
	struct merge *merge;            /* owned: the nodes of a job read from several traces, NULL for one */
	char **paths;                   /* owned: the traces read, a folder's files in its place */
	size_t npaths;
	char *label;                    /* owned: trace_path when made here */
	findings_t **world_findings;    /* owned: [result->nworlds] the rules over each world's result (a
	                                   restart), NULL for the headline world (its findings are findings) */
};

/*
 * diagnosis_check - whether the options in f can apply to the analysis a
 * (a --rank the trace holds with an analysed step, a --warmup-steps that
 * leaves every rank a step, a --layers within the gathers, a --fsdp-comm
 * naming one communicator): 0, or -EINVAL with why and what would fit in
 * err. diagnosis_run applies it; a session applies it to its streamed
 * analysis.
 */
int diagnosis_check(const struct diagnosis_flags *f, const struct analysis_result *a, char *err, size_t errlen);

/*
 * diagnosis_run - analyse the trace at path with f, then run the rules.
 * On success (0) *d holds the result and the findings (diagnosis_free);
 * a trace damaged part way is analysed up to the damage and d->damage says
 * where. On failure returns a negative errno / FSS_E_* and writes the
 * reason (what and where) into err; -EINVAL when an option cannot apply to
 * this trace (--fsdp-comm naming no communicator, --rank a rank it does not
 * hold or one without a step, --warmup-steps as many as a rank has,
 * --layers beyond diagnosis_layers_max): err then gives the valid range.
 */
int diagnosis_run(const char *path, const struct diagnosis_flags *f, struct diagnosis *d, char *err,
		  size_t errlen);

/*
 * diagnosis_run_traces - diagnosis_run over the n traces at paths, one job
 * (collector/merge.h: each trace a node's, sources renumbered, clocks
 * aligned on the first trace's); n == 1 is diagnosis_run. The paths are
 * borrowed. A process found in two traces is refused (-EEXIST, err names
 * it), and so are traces of more than one job (FSS_E_USAGE, err lists each
 * job's files: collector/trace_jobs.h); damage of any trace is in d->damage, prefixed with its path.
 */
int diagnosis_run_traces(const char *const *paths, size_t n, const struct diagnosis_flags *f, struct diagnosis *d,
			 char *err, size_t errlen);

/*
 * diagnosis_run_args - what lint and report do once their options are
 * parsed: the TRACEs that remain in argv[first..argc) (at least one; a
 * folder stands for its *.fss files, in name order, and which were read is
 * said on stderr), run the diagnosis on them as one job, and on failure say
 * why on stderr as "fsdpscope CMD: ...". A trace that holds only some of
 * its job's ranks is said on stderr to be a partial job. Returns 0, or
 * EXIT_USAGE (bad arguments, unreadable or damaged trace, a process in two
 * traces, traces of more than one job).
 */
int diagnosis_run_args(int argc, char **argv, int first, const char *cmd, const struct diagnosis_flags *f,
		       struct diagnosis *d);

/*
 * diagnosis_trace_args - the traces argv[first..argc) names (at least one;
 * a folder stands for its *.fss files, in name order, said on stderr as
 * "fsdpscope CMD: DIR: reading ..."), into *paths (the caller's:
 * diagnosis_trace_args_free) and *n. Returns 0, or EXIT_USAGE with why on
 * stderr (none given, a folder without a trace or that cannot be read).
 */
int diagnosis_trace_args(int argc, char **argv, int first, const char *cmd, char ***paths, size_t *n);
void diagnosis_trace_args_free(char **paths, size_t n);

/*
 * diagnosis_layers_max - the largest --layers that can describe the trace a
 * was analysed from: its forward gathers per micro-batch F (a model of F
 * layers wrapped per layer, or fewer, wrapped finer), or more layers than F
 * when units hold several, up to DIAG_LAYERS_COARSE_MAX; 0 when the trace
 * shows no forward gather (no verdict: nothing to check against).
 */
uint32_t diagnosis_layers_max(const struct analysis_result *a);

/*
 * diagnosis_run_worlds - the rules over each world of a restarted job but
 * the headline one (whose findings are d->findings), into
 * d->world_findings; nothing for one world. diagnosis_run does it; a
 * session that builds its diagnosis itself calls it. Returns 0 or -ENOMEM.
 */
int diagnosis_run_worlds(struct diagnosis *d, const struct rule_config *rules);

/* diagnosis_free - release what diagnosis_run made (idempotent). */
void diagnosis_free(struct diagnosis *d);

/* diagnosis_print_json - the whole report as one JSON document
 * ("fsdpscope.report/2"), followed by a newline. */
void diagnosis_print_json(FILE *out, const struct diagnosis *d, const struct rule_config *rules);

/* diagnosis_print_ledger_json - the planning calculator's result as one
 * JSON document: {"schema": "fsdpscope.ledger/1", "ledger": {...}} with the
 * ledger object of the report schema. */
void diagnosis_print_ledger_json(FILE *out, const struct analysis_ledger *l);

/* diagnosis_print_report - the whole report as text, findings last. */
void diagnosis_print_report(FILE *out, const struct diagnosis *d);

/*
 * diagnosis_print_findings - one block per finding: severity, id, title,
 * message, evidence, explanation (when explain), fixes (all frameworks, or
 * FSDP2 only when fsdp2_only), then a one-line tally.
 */
void diagnosis_print_findings(FILE *out, const findings_t *list, int explain, int fsdp2_only);

/*
 * diagnosis_print_partial_job - when a holds only some of its job's ranks
 * (fewer than its largest communicator's), one line on out saying so and
 * how to read the rest with it: "fsdpscope CMD: TRACE: a partial job: ...".
 * Nothing for a whole job.
 */
void diagnosis_print_partial_job(FILE *out, const char *cmd, const char *trace_path, const struct analysis_result *a);

/* diagnosis_print_tally - "1 error, 2 warnings, 1 info" (no newline). */
void diagnosis_print_tally(FILE *out, const findings_t *list);

#endif
