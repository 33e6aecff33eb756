/* fsdp_ref/cuda/adam.cu: AdamW on one shard, the CPU backend's update term
 * for term; the hyperparameters travel by value in the launch. */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

static __global__ void adam_update_kernel(void *param, enum fsdp_dtype pdt, float *master,
                                   const void *grad, enum fsdp_dtype gdt, float *m, float *v,
                                   size_t n, struct fsdp_adam_params hp)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float g = fsdp_load_param(grad, gdt, i) * hp.grad_scale;
    float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * g;
    float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / hp.bias_correction1, vhat = vi / hp.bias_correction2;
    float w = master[i];
    w -= hp.lr * (mhat / (sqrtf(vhat) + hp.eps) + hp.weight_decay * w);
    master[i] = w;
    /* param may alias master when fp32: written last, from the register. */
    if (pdt == FSDP_DTYPE_BF16)
      ((uint16_t *)param)[i] = fsdp_bf16_from_float(w);
    else
      ((float *)param)[i] = w;
  }
}

void fsdp_cuda_adam_update(void *param, enum fsdp_dtype pdt, float *master, const void *grad,
                           enum fsdp_dtype gdt, float *m, float *v, size_t n,
                           const struct fsdp_adam_params *hp)
{
  if (!n)
    return;
  adam_update_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      param, pdt, master, grad, gdt, m, v, n, *hp);
  fsdp_cuda_check_launch("adam_update");
}
