/* fsdp_ref/cuda/ops.cuh: the CUDA backend's model ops, one file per op
 * family (internal). Each function has the signature and the contract of
 * the backend member of the same name in fsdp_ref/backend.h: it enqueues
 * its kernels on the compute stream and returns; failures are noted with
 * fsdp_cuda_note and surface at the next synchronize(). */
#ifndef FSDP_REF_CUDA_OPS_CUH
#define FSDP_REF_CUDA_OPS_CUH

#include <stddef.h>
#include <stdint.h>

#include "fsdp_ref/backend.h"

/* embedding.cu */
void fsdp_cuda_embedding_forward(float *out, const int32_t *tokens, const void *wte,
                                 enum fsdp_dtype wdt, int M, int C);
void fsdp_cuda_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int M,
                                  int C, int V);

/* rmsnorm.cu */
void fsdp_cuda_rmsnorm_forward(float *out, float *rstd, const float *in, const void *w,
                               enum fsdp_dtype wdt, int M, int C, float eps);
void fsdp_cuda_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                const void *w, enum fsdp_dtype wdt, const float *rstd, int M,
                                int C);

/* matmul.cu (cuBLASLt; bf16 weights are widened to an fp32 scratch first) */
void fsdp_cuda_matmul_forward(float *out, const float *in, const void *w, enum fsdp_dtype wdt,
                              int M, int K, int N);
void fsdp_cuda_matmul_backward(float *din, float *dw, const float *dout, const float *in,
                               const void *w, enum fsdp_dtype wdt, int M, int K, int N,
                               int accumulate_din);
/* Release matmul.cu's scratch and algorithm cache (shutdown). */
void fsdp_cuda_matmul_release(void);

/* rope.cu */
void fsdp_cuda_rope_forward(float *x, int B, int T, int nh, int hd, float theta);
void fsdp_cuda_rope_backward(float *dx, int B, int T, int nh, int hd, float theta);

/* attention.cu */
void fsdp_cuda_attention_forward(float *out, float *probs, const float *q, const float *k,
                                 const float *v, int B, int T, int H, int KH, int hd);
void fsdp_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                  const float *q, const float *k, const float *v,
                                  const float *probs, int B, int T, int H, int KH, int hd);
/* Release attention.cu's scratch (shutdown). */
void fsdp_cuda_attention_release(void);

/* elementwise.cu: SwiGLU and the residual add */
void fsdp_cuda_swiglu_forward(float *out, const float *gate, const float *up, size_t n);
void fsdp_cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n);
void fsdp_cuda_residual_add(float *x, const float *y, size_t n);

/* crossentropy.cu */
void fsdp_cuda_crossentropy(float *losses, float *dlogits, const float *logits,
                            const int32_t *targets, int M, int V, float dscale);

/* cast.cu */
void fsdp_cuda_cast(void *dst, enum fsdp_dtype dst_dtype, const void *src,
                    enum fsdp_dtype src_dtype, size_t n);

/* adam.cu */
void fsdp_cuda_adam_update(void *param, enum fsdp_dtype pdt, float *master, const void *grad,
                           enum fsdp_dtype gdt, float *m, float *v, size_t n,
                           const struct fsdp_adam_params *hp);

#endif /* FSDP_REF_CUDA_OPS_CUH */
