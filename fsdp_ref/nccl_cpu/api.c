/* fsdp_ref/nccl_cpu/api.c: the exported NCCL entry points.
 *
 * Like libnccl, every function is exported twice: the strong pncclX (the
 * "profiling" name an interposer forwards to) and ncclX, a weak alias of
 * it. Each entry point checks its arguments here, so that nothing below
 * ever sees a NULL communicator, a bad datatype or an overflowing count;
 * the version script (exports.map) keeps everything else hidden. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "fsdp_ref/nccl_cpu/comm.h"
#include "fsdp_ref/nccl_cpu/error.h"
#include "fsdp_ref/nccl_cpu/group.h"
#include "fsdp_ref/nccl_cpu/op.h"
#include "fsdp_ref/nccl_cpu/reduce.h"
#include "fsdp_ref/nccl_cpu/unique_id.h"

#define API __attribute__((visibility("default")))
#define API_ALIAS(name) extern __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")));

#define NCCL_CONFIG_MAGIC 0xcafebeefu

static ncclResult_t api_invalid(ncclResult_t res, const char *fn, const char *what)
{
	error_set("nccl_cpu: %s: %s", fn, what);
	return res;
}

/* A usable communicator, or the reason why not. */
static ncclResult_t api_check_comm(const struct ncclComm *c, const char *fn)
{
	if (!c)
		return api_invalid(ncclInvalidArgument, fn, "comm is NULL");
	if (c->async_error != ncclSuccess)
		return c->async_error; /* the message of the original failure stands */
	if (c->finalized)
		return api_invalid(ncclInvalidUsage, fn, "comm was finalized");
	return ncclSuccess;
}

static int op_reduces(enum op_kind kind)
{
	return kind == OP_REDUCE_SCATTER || kind == OP_ALLREDUCE || kind == OP_REDUCE;
}

static ncclResult_t api_check_op(const struct op *op)
{
	const char *fn = op_name(op->kind);
	ncclResult_t res = api_check_comm(op->comm, fn);
	if (res != ncclSuccess)
		return res;
	const struct ncclComm *c = op->comm;
	size_t es = reduce_dtype_size((int)op->dtype);
	if (es == 0)
		return api_invalid(ncclInvalidArgument, fn,
				   "datatype not supported (a value outside ncclDataType_t)");
	if (op_reduces(op->kind) && !reduce_op_valid((int)op->redop))
		return api_invalid(ncclInvalidArgument, fn,
				   "op must be ncclSum, ncclProd, ncclMax, ncclMin or ncclAvg");
	int has_root = op->kind == OP_BROADCAST || op->kind == OP_REDUCE;
	int has_peer = op->kind == OP_SEND || op->kind == OP_RECV;
	if ((has_root || has_peer) && (op->root < 0 || op->root >= c->nranks))
		return api_invalid(ncclInvalidArgument, fn,
				   has_root ? "root is not a rank of comm" : "peer is not a rank of comm");
	/* The largest buffer involved must fit in a ptrdiff_t. */
	size_t factor = op->kind == OP_ALLGATHER || op->kind == OP_REDUCE_SCATTER ? (size_t)c->nranks : 1;
	if (op->count > (size_t)PTRDIFF_MAX / es / factor)
		return api_invalid(ncclInvalidArgument, fn, "count overflows the buffer size");
	if (op->count == 0)
		return ncclSuccess;
	int is_root = c->rank == op->root;
	int need_send = op->kind != OP_RECV && !(op->kind == OP_BROADCAST && !is_root);
	int need_recv = op->kind != OP_SEND && !(op->kind == OP_REDUCE && !is_root);
	if (need_send && !op->send)
		return api_invalid(ncclInvalidArgument, fn, "sendbuff is NULL");
	if (need_recv && !op->recv)
		return api_invalid(ncclInvalidArgument, fn, "recvbuff is NULL");
	return ncclSuccess;
}

static ncclResult_t api_submit(const struct op *op)
{
	ncclResult_t res = api_check_op(op);
	if (res != ncclSuccess)
		return group_note_error(res);
	return group_submit(op);
}

/* ---- version, ids, errors ------------------------------------------------ */

API ncclResult_t pncclGetVersion(int *version)
{
	if (!version)
		return api_invalid(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
API_ALIAS(ncclGetVersion)

API ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
	if (!uniqueId)
		return api_invalid(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
	struct unique_id id;
	int rc = unique_id_generate(&id);
	if (rc == -EINVAL)
		return api_invalid(ncclInvalidArgument, "ncclGetUniqueId",
				   "FSDP_REF_NCCL_CHUNK_BYTES must be a byte count in [1024, 67108864]");
	if (rc < 0)
		return api_invalid(ncclSystemError, "ncclGetUniqueId", "getrandom failed");
	unique_id_encode(&id, uniqueId);
	return ncclSuccess;
}
API_ALIAS(ncclGetUniqueId)

API const char *pncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError:
		return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError:
		return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument:
		return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage:
		return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}
API_ALIAS(ncclGetErrorString)

API const char *pncclGetLastError(ncclComm_t comm)
{
	(void)comm; /* unused, as in NCCL: the last error is process-wide */
	return error_last();
}
API_ALIAS(ncclGetLastError)

/* ---- communicators --------------------------------------------------------- */

static ncclResult_t api_check_config(const ncclConfig_t *config, const char *fn)
{
	if (config && config->magic != NCCL_CONFIG_MAGIC)
		return api_invalid(ncclInvalidArgument, fn, "config was not initialised with NCCL_CONFIG_INITIALIZER");
	return ncclSuccess;
}

API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
					 ncclConfig_t *config)
{
	const char *fn = "ncclCommInitRank";
	if (!comm)
		return api_invalid(ncclInvalidArgument, fn, "comm is NULL");
	*comm = NULL;
	if (nranks < 1 || nranks > SEGMENT_MAX_RANKS)
		return api_invalid(ncclInvalidArgument, fn, "nranks must be in [1, 64]");
	if (rank < 0 || rank >= nranks)
		return api_invalid(ncclInvalidArgument, fn, "rank must be in [0, nranks)");
	ncclResult_t res = api_check_config(config, fn);
	if (res != ncclSuccess)
		return res;
	struct unique_id id;
	if (unique_id_decode(&commId, &id) < 0)
		return api_invalid(ncclInvalidArgument, fn, "commId was not made by ncclGetUniqueId");
	/* config->blocking == 0 is honoured trivially: every call completes
	 * before it returns, so ncclInProgress is never returned. */
	return comm_init(comm, nranks, &id, rank);
}
API_ALIAS(ncclCommInitRankConfig)

API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
API_ALIAS(ncclCommInitRank)

API ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	(void)devlist; /* there are no devices */
	if (!comm)
		return api_invalid(ncclInvalidArgument, "ncclCommInitAll", "comm is NULL");
	if (ndev < 1)
		return api_invalid(ncclInvalidArgument, "ncclCommInitAll", "ndev must be >= 1");
	if (ndev > 1) /* n ranks in one thread would need non-blocking collectives */
		return api_invalid(ncclInvalidUsage, "ncclCommInitAll",
				   "the CPU stand-in supports ndev == 1 only (use one process or "
				   "thread per rank with ncclCommInitRank)");
	ncclUniqueId id;
	ncclResult_t res = pncclGetUniqueId(&id);
	if (res != ncclSuccess)
		return res;
	return pncclCommInitRank(comm, 1, id, 0);
}
API_ALIAS(ncclCommInitAll)

API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	const char *fn = "ncclCommSplit";
	if (!newcomm)
		return api_invalid(ncclInvalidArgument, fn, "newcomm is NULL");
	*newcomm = NULL;
	ncclResult_t res = api_check_comm(comm, fn);
	if (res == ncclSuccess)
		res = api_check_config(config, fn);
	if (res != ncclSuccess)
		return res;
	return comm_split(comm, color, key, newcomm);
}
API_ALIAS(ncclCommSplit)

API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
	if (!comm)
		return api_invalid(ncclInvalidArgument, "ncclCommFinalize", "comm is NULL");
	/* Nothing is ever in flight: every call completed before returning. */
	comm->finalized = 1;
	return ncclSuccess;
}
API_ALIAS(ncclCommFinalize)

API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
	comm_free(comm); /* NULL is a no-op, as in NCCL */
	return ncclSuccess;
}
API_ALIAS(ncclCommDestroy)

API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
	/* Local, as in NCCL: peers notice through their own waits (a dead
	 * process within 100 ms, a live silent one at the timeout). */
	comm_free(comm);
	return ncclSuccess;
}
API_ALIAS(ncclCommAbort)

API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return api_invalid(ncclInvalidArgument, "ncclCommCount", "comm or count is NULL");
	*count = comm->nranks;
	return ncclSuccess;
}
API_ALIAS(ncclCommCount)

API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return api_invalid(ncclInvalidArgument, "ncclCommUserRank", "comm or rank is NULL");
	*rank = comm->rank;
	return ncclSuccess;
}
API_ALIAS(ncclCommUserRank)

API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!comm || !device)
		return api_invalid(ncclInvalidArgument, "ncclCommCuDevice", "comm or device is NULL");
	*device = -1; /* no CUDA device: buffers are host memory */
	return ncclSuccess;
}
API_ALIAS(ncclCommCuDevice)

API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm || !asyncError)
		return api_invalid(ncclInvalidArgument, "ncclCommGetAsyncError", "comm or asyncError is NULL");
	*asyncError = comm->async_error;
	return ncclSuccess;
}
API_ALIAS(ncclCommGetAsyncError)

/* ---- collectives and point-to-point ---------------------------------------- */
/* The stream argument is ignored: calls complete on the host before they
 * return, so there is nothing to order on a stream. */

API ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
				ncclComm_t comm, cudaStream_t stream)
{
	(void)stream;
	struct op op = {.kind = OP_ALLGATHER,
			.comm = comm,
			.send = sendbuff,
			.recv = recvbuff,
			.count = sendcount,
			.dtype = datatype};
	return api_submit(&op);
}
API_ALIAS(ncclAllGather)

API ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
				    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)stream;
	struct op o = {.kind = OP_REDUCE_SCATTER,
		       .comm = comm,
		       .send = sendbuff,
		       .recv = recvbuff,
		       .count = recvcount,
		       .dtype = datatype,
		       .redop = op};
	return api_submit(&o);
}
API_ALIAS(ncclReduceScatter)

API ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)stream;
	struct op o = {.kind = OP_ALLREDUCE,
		       .comm = comm,
		       .send = sendbuff,
		       .recv = recvbuff,
		       .count = count,
		       .dtype = datatype,
		       .redop = op};
	return api_submit(&o);
}
API_ALIAS(ncclAllReduce)

API ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
				ncclComm_t comm, cudaStream_t stream)
{
	(void)stream;
	struct op op = {.kind = OP_BROADCAST,
			.comm = comm,
			.send = sendbuff,
			.recv = recvbuff,
			.count = count,
			.dtype = datatype,
			.root = root};
	return api_submit(&op);
}
API_ALIAS(ncclBroadcast)

API ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
			    cudaStream_t stream)
{
	return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
API_ALIAS(ncclBcast)

API ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			     ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)stream;
	struct op o = {.kind = OP_REDUCE,
		       .comm = comm,
		       .send = sendbuff,
		       .recv = recvbuff,
		       .count = count,
		       .dtype = datatype,
		       .redop = op,
		       .root = root};
	return api_submit(&o);
}
API_ALIAS(ncclReduce)

API ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			   cudaStream_t stream)
{
	(void)stream;
	struct op op = {
	    .kind = OP_SEND, .comm = comm, .send = sendbuff, .count = count, .dtype = datatype, .root = peer};
	return api_submit(&op);
}
API_ALIAS(ncclSend)

API ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			   cudaStream_t stream)
{
	(void)stream;
	struct op op = {
	    .kind = OP_RECV, .comm = comm, .recv = recvbuff, .count = count, .dtype = datatype, .root = peer};
	return api_submit(&op);
}
API_ALIAS(ncclRecv)

API ncclResult_t pncclGroupStart(void)
{
	return group_start();
}
API_ALIAS(ncclGroupStart)

API ncclResult_t pncclGroupEnd(void)
{
	return group_end();
}
API_ALIAS(ncclGroupEnd)
