/* fsdp_ref/launch.h: starting the ranks.
 *
 * Two ways, as with real jobs:
 *  - standalone: `fsdp_ref --nranks N` forks N rank processes. Rank 0 creates
 *    the NCCL unique id and hands it to the others through shared memory;
 *    the parent only supervises: it waits for all ranks, and when one fails
 *    it gives the others a grace to end by themselves, kills the rest and
 *    exits with the first failure's status. N = 1
 *    runs in the calling process.
 *  - under a launcher (torchrun-, srun-like): RANK and WORLD_SIZE (and
 *    optionally LOCAL_RANK) in the environment and --unique-id-file PATH:
 *    rank 0 writes the id to PATH atomically (temporary file + rename), the
 *    others wait for the file to appear (LAUNCH_ID_TIMEOUT_S). PATH must not
 *    exist before the job starts.
 * The parent never calls NCCL: only rank processes do. */
#ifndef FSDP_REF_LAUNCH_H
#define FSDP_REF_LAUNCH_H

#include <nccl.h>

#define LAUNCH_ID_TIMEOUT_S 120

struct launch_info {
	int rank, world_size, local_rank;
	int external;	 /* started by a launcher */
	ncclUniqueId id; /* the world communicator's id */
};

/* The world size this process will be part of: WORLD_SIZE under a launcher,
 * else `nranks`. 0, or -EINVAL with a message in err (bad environment). */
int launch_world_size(int nranks, const char *unique_id_file, int *world_size, char *err, size_t errlen);

/* Become a rank. Returns 0 in a rank process with *info filled. In the
 * supervising parent of a fork it returns 1 once all ranks have exited, with
 * the job's exit status in *exit_status. Negative errno on failure (message
 * in err). */
int launch_ranks(int nranks, const char *unique_id_file, struct launch_info *info, int *exit_status, char *err,
		 size_t errlen);

#endif /* FSDP_REF_LAUNCH_H */
