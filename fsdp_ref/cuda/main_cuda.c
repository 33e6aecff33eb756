/* fsdp_ref/cuda/main_cuda.c: the fsdp_ref_cuda executable: the trainer core
 * on the CUDA backend, linked to the real NCCL (fsdp_ref/train.h). */
#include "fsdp_ref/cuda/backend_cuda.h"
#include "fsdp_ref/train.h"

int main(int argc, char **argv) { return fsdp_main(argc, argv, &fsdp_backend_cuda); }
