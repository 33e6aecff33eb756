/* fsdp_ref/train.h: the trainer's entry point, shared by every backend.
 *
 * Each executable is a few lines: fsdp_ref (main_cpu.c) passes the CPU
 * backend, fsdp_ref_cuda (cuda/) passes the CUDA backend. Everything else
 * (flags, launching ranks, the model, the FSDP runtime, the log) lives in
 * the core library fsdp_ref_core.
 */
#ifndef FSDP_REF_TRAIN_H
#define FSDP_REF_TRAIN_H

#include "fsdp_ref/backend.h"

/* Run the trainer with argv's flags on backend `be` (its name must match
 * --backend when that flag is given). Launches the ranks (--nranks forks
 * them; RANK / WORLD_SIZE with --unique-id-file joins an external launcher),
 * trains, writes the log. Returns the process exit status: 0 on success,
 * 2 on a usage error, 1 on any other failure (a forking parent returns the
 * first failing rank's status). */
int fsdp_main(int argc, char **argv, const struct fsdp_backend *be);

#endif /* FSDP_REF_TRAIN_H */
