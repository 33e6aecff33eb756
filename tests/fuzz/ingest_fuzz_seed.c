/*
 * ingest_fuzz_seed.c - seeds for ingest_fuzz: a control byte and agent
 * streams laid end to end (see ingest_fuzz.c): a process's first socket
 * sink, the sink that continues it with repeats, a failover file's sink
 * resent whole inside a third one, and a stream without sink records.
 *
 * usage: fss_ingest_fuzz_seed DIR
 */
#include "common/record.h"
#include "common/trace_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 512

struct sink {
	unsigned char r[SLOTS][FSS_RECORD_MAX_BYTES];
	size_t n;
};

static void add(struct sink *s, const void *rec)
{
	if (s->n < SLOTS)
		memcpy(s->r[s->n++], rec, ((const struct fss_record_head *)rec)->size);
}

/* hello, sink record (unless serial is 0), a string, a communicator, the
 * repeats, `colls` collectives from seq `first`. */
static void make(struct sink *s, uint32_t serial, uint16_t kind, const struct sink *prev, uint32_t prev_serial,
		 uint64_t rf, uint64_t rc, uint64_t first, uint64_t colls)
{
	struct fss_rec_process_hello h;
	struct fss_rec_sink k;
	struct fss_rec_string str;
	struct fss_rec_comm c;

	s->n = 0;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.pid = 77;
	h.rank = h.local_rank = h.world_size = h.slurm_procid = h.ompi_rank = -1;
	h.host = 1;
	add(s, &h);
	if (serial) {
		record_init(&k, FSS_REC_SINK, sizeof(k), 0);
		k.process_id = 0x1234;
		k.serial = serial;
		k.kind = kind;
		k.preamble = 2;
		k.prev_serial = prev_serial;
		k.prev_kind = prev_serial ? FSS_SINK_SOCKET : 0;
		k.repeat_first = rf;
		k.repeat_count = rc;
		add(s, &k);
	}
	record_init(&str, FSS_REC_STRING, sizeof(str), 0);
	str.id = 1;
	str.total_len = 4;
	memcpy(str.text, "node", 4);
	add(s, &str);
	record_init(&c, FSS_REC_COMM, sizeof(c), 0);
	c.comm = 0xc0;
	c.id_hash = 0xab;
	c.nranks = 1;
	c.device = c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	add(s, &c);
	for (uint64_t i = 0; prev && i < rc && rf + i < prev->n; i++)
		add(s, prev->r[rf + i]);
	for (uint64_t i = 0; i < colls; i++) {
		struct fss_rec_collective x;

		record_init(&x, FSS_REC_COLLECTIVE, sizeof(x), 0);
		x.seq = first + i;
		x.comm = 0xc0;
		x.op = FSS_OP_ALLGATHER;
		x.peer = -1;
		add(s, &x);
	}
}

static int put(FILE *f, const struct sink *s)
{
	struct trace_writer_options opts = {.chunk_payload = 512};
	trace_writer_t *w;
	int err;

	fflush(f);
	err = trace_writer_open_fd(&w, fileno(f), &opts);
	for (size_t i = 0; !err && i < s->n; i++)
		err = trace_writer_append(w, s->r[i]);
	if (!err)
		err = trace_writer_close(w);
	else
		trace_writer_close(w);
	return err;
}

static int seed(const char *dir, const char *name, unsigned char control, const struct sink *const *sinks, size_t n)
{
	char path[512];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	fputc(control, f);
	for (size_t i = 0; i < n && !err; i++)
		err = put(f, sinks[i]);
	if (fclose(f) != 0 || err)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct sink s1, s2, f2, s3, plain;
	const struct sink *cont[] = {&s1, &s2, &plain};
	const struct sink *nest[] = {&s1, &s3};

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	make(&s1, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 1, 30);
	make(&s2, 2, FSS_SINK_SOCKET, &s1, 1, 12, s1.n - 12, 31, 10);
	make(&f2, 2, FSS_SINK_FILE, &s1, 1, 20, s1.n - 20, 31, 10);
	make(&s3, 3, FSS_SINK_SOCKET, &f2, 2, 0, f2.n, 41, 10);
	make(&plain, 0, 0, NULL, 0, 0, 0, 1, 10);
	if (seed(argv[1], "continue", 0x00, cont, 3) || seed(argv[1], "continue.x", 0x3f, cont, 3) ||
	    seed(argv[1], "nested", 0x04, nest, 2) || seed(argv[1], "nested.x", 0xfb, nest, 2)) {
		fprintf(stderr, "%s: cannot write the seeds in %s\n", argv[0], argv[1]);
		return 1;
	}
	return 0;
}
