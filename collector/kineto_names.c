/*
 * kineto_names.c - what the names of a PyTorch profiler trace say: which
 * kernels are NCCL's, the op of a "Collective name" arg, a c10d:: / nccl:
 * op or a kernel's name, and the dtype of a "dtype" arg or a kernel's name
 * (kineto_map.h).
 */
#include "collector/kineto_map.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

int kineto_is_nccl_kernel(const char *name)
{
	return strncmp(name, "ncclDevKernel_", 14) == 0 || strncmp(name, "ncclKernel_", 11) == 0;
}

/* name with its letters lowered and '_' left out, into buf (cut to len - 1). */
static void squeeze(const char *name, char *buf, size_t len)
{
	size_t o = 0;

	for (; *name && o + 1 < len; name++)
		if (*name != '_' && *name != ' ')
			buf[o++] = (char)tolower((unsigned char)*name);
	buf[o] = 0;
}

uint8_t kineto_op_of_name(const char *name)
{
	/* the longer words first: "reducescatter" holds "reduce", "allgather" "gather" */
	static const struct {
		const char *word;
		uint8_t op;
	} words[] = {
	    {"reducescatter", FSS_OP_REDUCESCATTER},
	    {"allgather", FSS_OP_ALLGATHER},
	    {"allreduce", FSS_OP_ALLREDUCE},
	    {"alltoall", FSS_OP_ALLTOALL},
	    {"broadcast", FSS_OP_BROADCAST},
	    {"barrier", FSS_OP_ALLREDUCE}, /* c10d's barrier is a one-element all-reduce */
	    {"reduce", FSS_OP_REDUCE},
	    {"gather", FSS_OP_GATHER},
	    {"scatter", FSS_OP_SCATTER},
	    {"recv", FSS_OP_RECV},
	    {"send", FSS_OP_SEND},
	};
	char buf[96];

	if (strncmp(name, "c10d::", 6) == 0)
		name += 6;
	else if (strncmp(name, "nccl:", 5) == 0)
		name += 5;
	squeeze(name, buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(buf, words[i].word))
			return words[i].op;
	return 0;
}

/* The word after the kernel's prefix: "AllReduce" of ncclKernel_AllReduce_RING_LL_Sum_float(...). */
static const char *kernel_word(const char *name)
{
	if (strncmp(name, "ncclDevKernel_", 14) == 0)
		return name + 14;
	if (strncmp(name, "ncclKernel_", 11) == 0)
		return name + 11;
	return NULL;
}

uint8_t kineto_op_of_kernel(const char *name)
{
	static const struct {
		const char *word;
		uint8_t op;
	} words[] = {
	    {"AllGather", FSS_OP_ALLGATHER}, {"ReduceScatter", FSS_OP_REDUCESCATTER},
	    {"AllReduce", FSS_OP_ALLREDUCE}, {"Broadcast", FSS_OP_BROADCAST},
	    {"Reduce", FSS_OP_REDUCE},	     {"SendRecv", FSS_OP_SEND},
	    {"Send", FSS_OP_SEND},	     {"Recv", FSS_OP_RECV},
	    {"AllToAll", FSS_OP_ALLTOALL},
	};
	const char *w = kernel_word(name);

	if (!w)
		return 0;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t len = strlen(words[i].word);

		if (strncmp(w, words[i].word, len) == 0 && (w[len] == '_' || w[len] == '(' || w[len] == 0))
			return words[i].op;
	}
	return 0;
}

uint8_t kineto_dtype_of_arg(const char *name)
{
	/* c10::ScalarType's names, as the profiler writes them */
	static const struct {
		const char *word;
		uint8_t dtype;
	} types[] = {
	    {"Float", FSS_DTYPE_FLOAT32},
	    {"BFloat16", FSS_DTYPE_BFLOAT16},
	    {"Half", FSS_DTYPE_FLOAT16},
	    {"Double", FSS_DTYPE_FLOAT64},
	    {"Int", FSS_DTYPE_INT32},
	    {"Long", FSS_DTYPE_INT64},
	    {"Char", FSS_DTYPE_INT8},
	    {"Byte", FSS_DTYPE_UINT8},
	    {"Bool", FSS_DTYPE_UINT8},
	    {"UInt32", FSS_DTYPE_UINT32},
	    {"UInt64", FSS_DTYPE_UINT64},
	    {"Float8_e4m3fn", FSS_DTYPE_FLOAT8E4M3},
	    {"Float8_e5m2", FSS_DTYPE_FLOAT8E5M2},
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(name, types[i].word) == 0)
			return types[i].dtype;
	return FSS_DTYPE_UNKNOWN;
}

uint8_t kineto_dtype_of_kernel(const char *name)
{
	/* NCCL names its typed kernels ..._<redop>_<type>: the last '_' word before '(' */
	static const struct {
		const char *word;
		uint8_t dtype;
	} types[] = {
	    {"float", FSS_DTYPE_FLOAT32},     {"half", FSS_DTYPE_FLOAT16},    {"bf16", FSS_DTYPE_BFLOAT16},
	    {"bfloat16", FSS_DTYPE_BFLOAT16}, {"double", FSS_DTYPE_FLOAT64},  {"int8_t", FSS_DTYPE_INT8},
	    {"uint8_t", FSS_DTYPE_UINT8},     {"int32_t", FSS_DTYPE_INT32},   {"uint32_t", FSS_DTYPE_UINT32},
	    {"int64_t", FSS_DTYPE_INT64},     {"uint64_t", FSS_DTYPE_UINT64}, {"f8e4m3", FSS_DTYPE_FLOAT8E4M3},
	    {"f8e5m2", FSS_DTYPE_FLOAT8E5M2},
	};
	const char *w = kernel_word(name);
	const char *end;

	if (!w)
		return FSS_DTYPE_UNKNOWN;
	end = strchr(w, '(');
	if (!end)
		end = w + strlen(w);
	/* the name ends in "_<type>" (int8_t has a '_' of its own) */
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t len = strlen(types[i].word);

		if ((size_t)(end - w) > len && end[-(ptrdiff_t)len - 1] == '_' &&
		    strncmp(end - len, types[i].word, len) == 0)
			return types[i].dtype;
	}
	return FSS_DTYPE_UNKNOWN;
}
