/*
 * kineto_parse.c - the traceEvents of a Kineto trace read into a
 * kineto_file (kineto_file.h), one event object at a time over the
 * tokenizer of kineto_scan.c, and the helpers that walk objects and arrays
 * (kineto_parse.h; the top level is kineto_read.c's).
 *
 * Each element of traceEvents is read once into a struct event_state:
 * ph, cat, name, pid, tid, ts, dur and, in args, only these keys:
 *   from Kineto (libkineto/src/output_json.cpp writes "External id", and
 *     the CUPTI activity's metadata "stream" and "correlation"; it copies
 *     record_param_comms' NCCL args onto the NCCL kernels it launched);
 *   from PyTorch's torch/csrc/profiler/util.h (saveNcclMeta, the
 *     record_param_comms op and, in PyTorch 2.x, the NCCL kernels):
 *     "Collective name", "In msg nelems", "Out msg nelems", "dtype",
 *     "Group size", "Process Group Name", "Process Group Description",
 *     "Process Group Ranks" (a string "[0, 1]" there; an array of integers
 *     is accepted and kept as the same text), "Seq" (kSeqNum), "Rank".
 * Other args ("grid", "Input Dims", ...) are skipped. Kineto's "device"
 * arg is not read: a GPU event's pid is its device already.
 *
 * Strictness: duplicate keys in the objects read here (the top level, an
 * event, its args, distributedInfo and its pg_config entries,
 * deviceProperties[0]: every object kparse_object_next walks) are an error at the key's offset; inside skipped
 * values only the JSON grammar is checked. A value of the wrong type in an
 * event (ts a string, stream an object) leaves that event out, counted in
 * counts.skipped with the first offset and reason in the read info. pid
 * and tid may be strings (Kineto writes "Spans"): they are then
 * KINETO_NONE.
 */
#include "collector/kineto_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The string fields of an event's NCCL arguments, in event_state.text[]. */
enum { TEXT_COLLECTIVE, TEXT_DTYPE, TEXT_PG_NAME, TEXT_PG_DESC, TEXT_PG_RANKS, TEXT_COUNT };

/* A cat the reader tells apart (enum kineto_cat, plus these two). */
#define CAT_NONE 0
#define CAT_UNKNOWN 100

struct event_state {
	int ph;			/* the ph character, '?' for a longer ph, 0 none */
	int cat;		/* enum kineto_cat, CAT_NONE, CAT_UNKNOWN */
	int have_ts, have_dur, fractional;
	int64_t ts, dur;
	int32_t pid, tid;
	int64_t stream, correlation, external_id;
	int have_stream, have_correlation, have_external_id;
	struct text_ref name;
	struct text_ref text[TEXT_COUNT];
	struct kineto_comm_args comm; /* numbers only; the strings in text[] */
	int have_comm;
	const char *bad_key;	/* the first value of the wrong type: its key, */
	const char *bad;	/* what is wrong with it, */
	uint64_t bad_at;	/* and where it starts */
};

int kparse_nomem(struct kparse *p)
{
	p->nomem = 1;
	return kscan_fail(&p->s, KINETO_READ_IO, kscan_offset(&p->s), "out of memory");
}

int kparse_scratch_add(struct kparse *p, const char *text, size_t len, struct text_ref *ref)
{
	if (p->slen + len > p->scap || !p->scratch) {
		size_t cap = p->scap ? p->scap : 1024;
		while (cap < p->slen + len)
			cap *= 2;
		char *q = realloc(p->scratch, cap);
		if (!q)
			return kparse_nomem(p);
		p->scratch = q;
		p->scap = cap;
	}
	memcpy(p->scratch + p->slen, text, len);
	ref->off = p->slen;
	ref->len = len;
	ref->have = 1;
	p->slen += len;
	return 0;
}

void kparse_keyset_free(struct keyset *k)
{
	free(k->slot_gen);
	free(k->slot_entry);
	free(k->hash);
	free(k->off);
	free(k->text);
}

static int keyset_slots(struct keyset *k, size_t slots)
{
	uint32_t *gen = calloc(slots, sizeof(*gen)), *entry = malloc(slots * sizeof(*entry));
	if (!gen || !entry) {
		free(gen);
		free(entry);
		return -1;
	}
	free(k->slot_gen);
	free(k->slot_entry);
	k->slot_gen = gen;
	k->slot_entry = entry;
	k->mask = slots - 1;
	k->gen = 1;
	for (size_t e = 0; e < k->n; e++) {
		size_t i = k->hash[e] & k->mask;
		while (gen[i] == k->gen)
			i = (i + 1) & k->mask;
		gen[i] = k->gen;
		entry[i] = (uint32_t)e;
	}
	return 0;
}

static void keyset_reset(struct keyset *k)
{
	k->n = 0;
	k->tlen = 0;
	if (++k->gen == 0) { /* the generations wrapped: empty every slot */
		if (k->slot_gen)
			memset(k->slot_gen, 0, (k->mask + 1) * sizeof(*k->slot_gen));
		k->gen = 1;
	}
}

/* Add a key; 1 when the object had it already, 0, -1 out of memory. *copy: the kept text. */
static int keyset_add(struct keyset *k, const struct kscan_slice *key, struct kscan_slice *copy)
{
	if (!k->slot_gen || (k->n + 1) * 2 > k->mask + 1) {
		if (keyset_slots(k, k->slot_gen ? (k->mask + 1) * 2 : 64) < 0)
			return -1;
	}
	uint64_t h = kscan_hash(key->text, key->len);
	size_t i = h & k->mask;
	while (k->slot_gen[i] == k->gen) {
		size_t e = k->slot_entry[i];
		size_t len = k->off[e + 1] - k->off[e];
		if (k->hash[e] == h && len == key->len && memcmp(k->text + k->off[e], key->text, len) == 0)
			return 1;
		i = (i + 1) & k->mask;
	}
	if (k->n + 2 > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 32;
		uint64_t *hash = realloc(k->hash, cap * sizeof(*hash));
		if (!hash)
			return -1;
		k->hash = hash;
		size_t *off = realloc(k->off, cap * sizeof(*off));
		if (!off)
			return -1;
		k->off = off;
		k->cap = cap;
	}
	if (k->tlen + key->len > k->tcap || !k->text) {
		size_t cap = k->tcap ? k->tcap : 512;
		while (cap < k->tlen + key->len)
			cap *= 2;
		char *t = realloc(k->text, cap);
		if (!t)
			return -1;
		k->text = t;
		k->tcap = cap;
	}
	if (k->n == 0)
		k->off[0] = 0;
	memcpy(k->text + k->tlen, key->text, key->len);
	k->slot_gen[i] = k->gen;
	k->slot_entry[i] = (uint32_t)k->n;
	k->hash[k->n] = h;
	k->tlen += key->len;
	k->off[++k->n] = k->tlen;
	copy->text = k->text + k->off[k->n - 1];
	copy->len = key->len;
	return 0;
}

/* Enter an object or array at its opening byte (peeked). 0 or -1. */
int kparse_enter(struct kparse *p)
{
	if (p->s.depth >= KSCAN_MAX_DEPTH)
		return kscan_fail(&p->s, KINETO_READ_BAD_JSON, kscan_offset(&p->s), "nested deeper than %d", KSCAN_MAX_DEPTH);
	p->s.depth++;
	p->s.pos++;
	return 0;
}

/*
 * The next key of an object entered with kparse_enter(): 1 with the key in *key
 * (valid until the next key of the same keyset) and the value's first byte
 * peeked; 0 at its end ('}' taken); -1.
 */
int kparse_object_next(struct kparse *p, struct keyset *ks, struct kscan_slice *key)
{
	struct kscan *s = &p->s;
	int c = kscan_ws(s);
	if (c == '}') {
		s->pos++;
		s->depth--;
		return 0;
	}
	if (ks->n > 0) {
		if (c != ',')
			return c < 0 ? kscan_expect_end(s, "an object")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ',' or '}' in an object");
		s->pos++;
		c = kscan_ws(s);
	}
	if (c != '"')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a key (a string) in an object");
	uint64_t at = kscan_offset(s);
	struct kscan_slice raw;
	if (kscan_string(s, &raw, 1) < 0)
		return -1;
	int dup = keyset_add(ks, &raw, key);
	if (dup < 0)
		return kparse_nomem(p);
	if (dup)
		return kscan_fail(s, KINETO_READ_BAD_JSON, at, "a duplicate key \"%.*s\" in an object",
				  (int)(raw.len > 48 ? 48 : raw.len), raw.text);
	c = kscan_ws(s);
	if (c != ':')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, at, "expected ':' after an object key");
	s->pos++;
	if (kscan_ws(s) < 0)
		return kscan_expect_end(s, "an object");
	return 1;
}

int kparse_object_begin(struct kparse *p, struct keyset *ks)
{
	keyset_reset(ks);
	return kparse_enter(p);
}

/* The next element of an array entered with kparse_enter(): 1 (its first byte peeked), 0 at ']', -1. */
int kparse_array_next(struct kparse *p, int *count)
{
	struct kscan *s = &p->s;
	int c = kscan_ws(s);
	if (c == ']') {
		s->pos++;
		s->depth--;
		return 0;
	}
	if (*count > 0) {
		if (c != ',')
			return c < 0 ? kscan_expect_end(s, "an array")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ',' or ']' in an array");
		s->pos++;
		c = kscan_ws(s);
	}
	if (c < 0)
		return kscan_expect_end(s, "an array");
	(*count)++;
	return 1;
}

/* ---- values of the fields read ---- */

static int mark_bad(struct kparse *p, struct event_state *ev, uint64_t at, const char *key, const char *why)
{
	(void)p;
	if (!ev->bad) {
		ev->bad_key = key;
		ev->bad = why;
		ev->bad_at = at;
	}
	return 0;
}

/* An integer field of an event: the value, or the event marked bad. */
static int event_int(struct kparse *p, struct event_state *ev, const char *key, int64_t *out, int *have)
{
	uint64_t at = kscan_offset(&p->s);
	if (!kparse_number_start(kparse_peek(p))) {
		mark_bad(p, ev, at, key, "not an integer");
		return kscan_skip(&p->s);
	}
	struct kscan_number n;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	const char *why;
	if (kscan_number_int(&n, out, &why) < 0)
		return mark_bad(p, ev, at, key, why);
	*have = 1;
	return 0;
}

static int event_time(struct kparse *p, struct event_state *ev, const char *key, int64_t *out, int *have)
{
	uint64_t at = kscan_offset(&p->s);
	if (!kparse_number_start(kparse_peek(p))) {
		mark_bad(p, ev, at, key, "not a number");
		return kscan_skip(&p->s);
	}
	struct kscan_number n;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	const char *why;
	if (kscan_number_us_to_ns(&n, out, &why) < 0)
		return mark_bad(p, ev, at, key, why);
	if (n.fraction)
		ev->fractional = 1;
	*have = 1;
	return 0;
}

/* pid or tid: an int32, or a string (KINETO_NONE). */
static int event_id32(struct kparse *p, struct event_state *ev, const char *key, int32_t *out)
{
	if (kparse_peek(p) == '"')
		return kscan_string(&p->s, NULL, 0);
	int64_t v;
	int have = 0;
	uint64_t at = kscan_offset(&p->s);
	if (!kparse_number_start(kparse_peek(p))) {
		mark_bad(p, ev, at, key, "neither an integer nor a string");
		return kscan_skip(&p->s);
	}
	if (event_int(p, ev, key, &v, &have) < 0)
		return -1;
	if (have && (v < INT32_MIN || v > INT32_MAX))
		return mark_bad(p, ev, at, key, "out of 32-bit range");
	if (have)
		*out = (int32_t)v;
	return 0;
}

static int event_text(struct kparse *p, struct event_state *ev, const char *key, struct text_ref *ref)
{
	uint64_t at = kscan_offset(&p->s);
	if (kparse_peek(p) != '"') {
		mark_bad(p, ev, at, key, "not a string");
		return kscan_skip(&p->s);
	}
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	return kparse_scratch_add(p, v.text, v.len, ref);
}

/* Ranks as an array of integers, written into the scratch as "[0, 1]": 0, 1 not all integers, -1. */
static int ranks_array(struct kparse *p, struct text_ref *ref)
{
	int count = 0, r, bad = 0;
	size_t start = p->slen;
	struct text_ref piece;
	if (kparse_enter(p) < 0 || kparse_scratch_add(p, "[", 1, &piece) < 0)
		return -1;
	while ((r = kparse_array_next(p, &count)) > 0) {
		struct kscan_number n;
		int64_t v;
		const char *why;
		if (!kparse_number_start(kparse_peek(p))) {
			bad = 1;
			if (kscan_skip(&p->s) < 0)
				return -1;
			continue;
		}
		if (kscan_number(&p->s, &n) < 0)
			return -1;
		if (kscan_number_int(&n, &v, &why) < 0) {
			bad = 1;
			continue;
		}
		char digits[32];
		int len = snprintf(digits, sizeof(digits), "%s%lld", count > 1 ? ", " : "", (long long)v);
		if (kparse_scratch_add(p, digits, (size_t)len, &piece) < 0)
			return -1;
	}
	if (r < 0 || kparse_scratch_add(p, "]", 1, &piece) < 0)
		return -1;
	ref->off = start;
	ref->len = p->slen - start;
	ref->have = !bad;
	return bad;
}

/* "Process Group Ranks" or pg_config's ranks: a string, or an array of
 * integers; *bad says why when it is neither (the value skipped). */
int kparse_ranks(struct kparse *p, struct text_ref *ref, const char **bad)
{
	*bad = NULL;
	if (kparse_peek(p) == '[') {
		int r = ranks_array(p, ref);
		if (r > 0)
			*bad = "holds a value that is not an integer";
		return r < 0 ? -1 : 0;
	}
	if (kparse_peek(p) != '"') {
		*bad = "neither a string nor an array";
		return kscan_skip(&p->s);
	}
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	return kparse_scratch_add(p, v.text, v.len, ref);
}

static int event_ranks(struct kparse *p, struct event_state *ev, struct text_ref *ref)
{
	const char *bad;
	uint64_t at = kscan_offset(&p->s);
	if (kparse_ranks(p, ref, &bad) < 0)
		return -1;
	return bad ? mark_bad(p, ev, at, "Process Group Ranks", bad) : 0;
}

static int args_value(struct kparse *p, struct event_state *ev, struct kscan_slice key)
{
	int have = 0;
	int64_t v;
	if (KEY_IS(key, "stream"))
		return event_int(p, ev, "stream", &ev->stream, &ev->have_stream);
	if (KEY_IS(key, "correlation"))
		return event_int(p, ev, "correlation", &ev->correlation, &ev->have_correlation);
	if (KEY_IS(key, "External id"))
		return event_int(p, ev, "External id", &ev->external_id, &ev->have_external_id);
	if (KEY_IS(key, "Collective name"))
		return ev->have_comm = 1, event_text(p, ev, "Collective name", &ev->text[TEXT_COLLECTIVE]);
	if (KEY_IS(key, "dtype"))
		return ev->have_comm = 1, event_text(p, ev, "dtype", &ev->text[TEXT_DTYPE]);
	if (KEY_IS(key, "Process Group Name"))
		return ev->have_comm = 1, event_text(p, ev, "Process Group Name", &ev->text[TEXT_PG_NAME]);
	if (KEY_IS(key, "Process Group Description"))
		return ev->have_comm = 1,
		       event_text(p, ev, "Process Group Description", &ev->text[TEXT_PG_DESC]);
	if (KEY_IS(key, "Process Group Ranks"))
		return ev->have_comm = 1, event_ranks(p, ev, &ev->text[TEXT_PG_RANKS]);
	int64_t *field = NULL;
	const char *why = NULL;
	if (KEY_IS(key, "In msg nelems"))
		field = &ev->comm.in_nelems, why = "In msg nelems";
	else if (KEY_IS(key, "Out msg nelems"))
		field = &ev->comm.out_nelems, why = "Out msg nelems";
	else if (KEY_IS(key, "Seq"))
		field = &ev->comm.seq, why = "Seq";
	else if (KEY_IS(key, "Rank"))
		field = &ev->comm.rank, why = "Rank";
	if (field) {
		ev->have_comm = 1;
		return event_int(p, ev, why, field, &have);
	}
	if (KEY_IS(key, "Group size")) {
		uint64_t at = kscan_offset(&p->s);
		ev->have_comm = 1;
		if (event_int(p, ev, "Group size", &v, &have) < 0)
			return -1;
		if (have && (v < 0 || v > INT32_MAX))
			return mark_bad(p, ev, at, "Group size", "out of range");
		if (have)
			ev->comm.group_size = (int32_t)v;
		return 0;
	}
	return kscan_skip(&p->s);
}

static int event_args(struct kparse *p, struct event_state *ev)
{
	if (kparse_peek(p) != '{') {
		mark_bad(p, ev, kscan_offset(&p->s), "args", "not an object");
		return kscan_skip(&p->s);
	}
	struct keyset *ks = &p->keys[2];
	struct kscan_slice key;
	int r;
	if (kparse_object_begin(p, ks) < 0)
		return -1;
	while ((r = kparse_object_next(p, ks, &key)) > 0)
		if (args_value(p, ev, key) < 0)
			return -1;
	return r;
}

static int cat_of(const struct kscan_slice *v)
{
	switch (v->len) {
	case 6:
		return KEY_IS(*v, "kernel") ? KINETO_CAT_KERNEL : KEY_IS(*v, "cpu_op") ? KINETO_CAT_CPU_OP : CAT_UNKNOWN;
	case 10:
		return KEY_IS(*v, "gpu_memcpy") ? KINETO_CAT_GPU_MEMCPY : KEY_IS(*v, "gpu_memset") ? KINETO_CAT_GPU_MEMSET : CAT_UNKNOWN;
	case 11:
		return KEY_IS(*v, "cuda_driver") ? KINETO_CAT_CUDA_DRIVER : CAT_UNKNOWN;
	case 12:
		return KEY_IS(*v, "cuda_runtime") ? KINETO_CAT_CUDA_RUNTIME : CAT_UNKNOWN;
	case 15:
		return KEY_IS(*v, "user_annotation") ? KINETO_CAT_USER_ANNOTATION : CAT_UNKNOWN;
	case 19:
		return KEY_IS(*v, "gpu_user_annotation") ? KINETO_CAT_GPU_USER_ANNOTATION : CAT_UNKNOWN;
	default:
		return CAT_UNKNOWN;
	}
}

static int event_value(struct kparse *p, struct event_state *ev, struct kscan_slice key)
{
	struct kscan_slice v;
	uint64_t at = kscan_offset(&p->s);
	switch (key.len) {
	case 2:
		if (KEY_IS(key, "ph")) {
			if (kparse_peek(p) != '"') {
				mark_bad(p, ev, at, "ph", "not a string");
				return kscan_skip(&p->s);
			}
			if (kscan_string(&p->s, &v, 1) < 0)
				return -1;
			ev->ph = v.len == 1 ? (unsigned char)v.text[0] : '?';
			return 0;
		}
		if (KEY_IS(key, "ts"))
			return event_time(p, ev, "ts", &ev->ts, &ev->have_ts);
		break;
	case 3:
		if (KEY_IS(key, "cat")) {
			if (kparse_peek(p) != '"') {
				mark_bad(p, ev, at, "cat", "not a string");
				return kscan_skip(&p->s);
			}
			if (kscan_string(&p->s, &v, 1) < 0)
				return -1;
			ev->cat = cat_of(&v);
			return 0;
		}
		if (KEY_IS(key, "pid"))
			return event_id32(p, ev, "pid", &ev->pid);
		if (KEY_IS(key, "tid"))
			return event_id32(p, ev, "tid", &ev->tid);
		if (KEY_IS(key, "dur"))
			return event_time(p, ev, "dur", &ev->dur, &ev->have_dur);
		break;
	case 4:
		if (KEY_IS(key, "name"))
			return event_text(p, ev, "name", &ev->name);
		if (KEY_IS(key, "args"))
			return event_args(p, ev);
		break;
	}
	return kscan_skip(&p->s);
}

static void event_reset(struct kparse *p, struct event_state *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->pid = ev->tid = KINETO_NONE;
	ev->stream = ev->correlation = ev->external_id = KINETO_NONE;
	ev->comm.group_size = KINETO_NONE;
	ev->comm.in_nelems = ev->comm.out_nelems = ev->comm.seq = ev->comm.rank = KINETO_NONE;
	p->slen = 0;
}

/* Count an element left out; the first one's key (NULL: none), reason and offset are kept. */
static void skip_note(struct kparse *p, uint64_t at, const char *key, const char *why)
{
	struct kineto_counts *c = kineto_file_counts_mut(p->f);
	if (c->skipped++ == 0) {
		p->info->skip_offset = at;
		snprintf(p->info->skip_message, sizeof(p->info->skip_message), "%s%s%s", key ? key : "", key ? ": " : "", why);
	}
}

static int text_starts(struct kparse *p, const struct text_ref *t, const char *prefix, size_t n)
{
	return t->have && t->len >= n && memcmp(p->scratch + t->off, prefix, n) == 0;
}

/* The kept category of a complete event, 0 when it is only counted. */
static int kept_cat(struct kparse *p, const struct event_state *ev)
{
	switch (ev->cat) {
	case KINETO_CAT_KERNEL:
	case KINETO_CAT_GPU_MEMCPY:
	case KINETO_CAT_GPU_MEMSET:
	case KINETO_CAT_USER_ANNOTATION:
	case KINETO_CAT_GPU_USER_ANNOTATION:
		return ev->cat;
	case KINETO_CAT_CUDA_RUNTIME:
	case KINETO_CAT_CUDA_DRIVER:
		if (ev->have_correlation)
			return ev->cat;
		break;
	case KINETO_CAT_CPU_OP:
		if (ev->text[TEXT_COLLECTIVE].have || text_starts(p, &ev->name, "c10d::", 6) ||
		    text_starts(p, &ev->name, "nccl:", 5) ||
		    (ev->name.len == 18 && text_starts(p, &ev->name, "record_param_comms", 18)))
			return ev->cat;
		break;
	}
	if (ev->have_stream && ev->stream >= 0 && ev->have_dur)
		return KINETO_CAT_GPU_OTHER;
	return 0;
}

int kparse_intern(struct kparse *p, const struct text_ref *t, uint32_t *id)
{
	*id = 0;
	if (!t->have)
		return 0;
	if (kineto_file_intern(p->f, p->scratch + t->off, t->len, id) < 0)
		return kparse_nomem(p);
	return 0;
}

static int event_keep(struct kparse *p, struct event_state *ev, int cat)
{
	struct kineto_event out = {
		.ts_ns = ev->ts,
		.dur_ns = ev->dur,
		.correlation = ev->correlation,
		.external_id = ev->external_id,
		.tid = ev->tid,
		.stream = ev->have_stream && ev->stream >= INT32_MIN && ev->stream <= INT32_MAX ? (int32_t)ev->stream : KINETO_NONE,
		.cat = (uint16_t)cat,
		.pid = ev->pid,
	};
	out.flags = (uint16_t)((ev->fractional ? KINETO_EV_FRACTIONAL : 0) | (ev->have_stream ? KINETO_EV_HAS_STREAM : 0) |
			       (ev->have_correlation ? KINETO_EV_HAS_CORRELATION : 0) |
			       (ev->have_external_id ? KINETO_EV_HAS_EXTERNAL_ID : 0));
	if (kparse_intern(p, &ev->name, &out.name) < 0)
		return -1;
	if (ev->have_comm) {
		struct kineto_comm_args a = ev->comm;
		if (kparse_intern(p, &ev->text[TEXT_COLLECTIVE], &a.collective_name) < 0 ||
		    kparse_intern(p, &ev->text[TEXT_DTYPE], &a.dtype) < 0 || kparse_intern(p, &ev->text[TEXT_PG_NAME], &a.pg_name) < 0 ||
		    kparse_intern(p, &ev->text[TEXT_PG_DESC], &a.pg_desc) < 0 ||
		    kparse_intern(p, &ev->text[TEXT_PG_RANKS], &a.pg_ranks) < 0)
			return -1;
		if (kineto_file_add_comm_args(p->f, &a, &out.comm_args) < 0)
			return kparse_nomem(p);
	}
	if (kineto_file_add(p->f, &out) < 0)
		return kparse_nomem(p);
	kineto_file_counts_mut(p->f)->kept++;
	return 0;
}

/* Count an event read whole, and keep it when it is one of the kept kinds. */
static int event_finish(struct kparse *p, struct event_state *ev, uint64_t at)
{
	struct kineto_counts *c = kineto_file_counts_mut(p->f);
	if (ev->bad) {
		skip_note(p, ev->bad_at, ev->bad_key, ev->bad);
		return 0;
	}
	if (!ev->ph) {
		skip_note(p, at, NULL, "an event without ph");
		return 0;
	}
	int cat = ev->ph == 'X' ? kept_cat(p, ev) : 0;
	if (cat && (!ev->have_ts || !ev->have_dur)) {
		skip_note(p, at, NULL, ev->have_ts ? "a complete event without dur" : "a complete event without ts");
		return 0;
	}
	if (ev->have_dur && ev->dur < 0 && cat) {
		skip_note(p, at, NULL, "a complete event with a negative dur");
		return 0;
	}
	switch (ev->ph) {
	case 'X':
		c->complete++;
		if (ev->cat == KINETO_CAT_CPU_OP)
			c->cpu_ops++;
		break;
	case 's':
	case 'f':
	case 't':
		c->flows++;
		break;
	case 'i':
	case 'I':
		c->instants++;
		break;
	case 'M':
		c->metadata++;
		break;
	default:
		c->other++;
	}
	return cat ? event_keep(p, ev, cat) : 0;
}

int kparse_trace_events(struct kparse *p)
{
	struct event_state ev;
	int count = 0, r;
	p->saw_events = 1;
	if (kparse_enter(p) < 0)
		return -1;
	while ((r = kparse_array_next(p, &count)) > 0) {
		struct kineto_counts *c = kineto_file_counts_mut(p->f);
		uint64_t at = kscan_offset(&p->s);
		/* an element is counted once it is read whole: a cut one is in no count */
		if (kparse_peek(p) != '{') {
			if (kscan_skip(&p->s) < 0)
				return -1;
			c->events++;
			skip_note(p, at, NULL, "an element of traceEvents that is not an object");
			continue;
		}
		event_reset(p, &ev);
		struct keyset *ks = &p->keys[1];
		struct kscan_slice key;
		if (kparse_object_begin(p, ks) < 0)
			return -1;
		while ((r = kparse_object_next(p, ks, &key)) > 0)
			if (event_value(p, &ev, key) < 0)
				return -1;
		if (r < 0)
			return -1;
		c->events++;
		if (event_finish(p, &ev, at) < 0)
			return -1;
	}
	return r;
}
