/* fsdp_ref_gradcheck_test: the model's backward against finite differences.
 *
 * A tiny decoder (two blocks, grouped kv heads, fp32 parameters in one
 * buffer, no FSDP) on the CPU backend: for every tensor, a spread of
 * elements, the analytic gradient must match the central difference of the
 * loss. Also checks that the loss of an untrained model is near ln V and
 * that the model and data are deterministic. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/data.h"
#include "fsdp_ref/model.h"

/* One fp32 buffer for all parameters and one for their gradients. */
struct flat_provider {
	float *params, *grads;
	size_t *offset;
};

static const void *fp_param(void *ctx, int id)
{
	struct flat_provider *f = ctx;
	return f->params + f->offset[id];
}
static float *fp_grad(void *ctx, int id)
{
	struct flat_provider *f = ctx;
	return f->grads + f->offset[id];
}
static int fp_hook(void *ctx, struct model_module m)
{
	return 0;
}

static const struct model_config tiny = {
    .vocab = 11,
    .layers = 2,
    .d_model = 8,
    .ffn = 12,
    .heads = 4,
    .kv_heads = 2,
    .seq = 6,
    .rope_theta = 10000.0f,
    .norm_eps = 1e-5f,
};

struct fixture {
	struct model_config cfg;
	int batch, ntensors;
	struct model_tensor *tensors;
	struct flat_provider fp;
	struct model_params params;
	struct model *model;
	int32_t *inputs, *targets;
	size_t total;
};

static void fixture_init(struct fixture *f, const struct model_config *cfg, int batch)
{
	const struct fsdp_backend *be = &fsdp_backend_cpu;
	memset(f, 0, sizeof *f);
	f->cfg = *cfg;
	f->batch = batch;
	f->ntensors = model_tensor_count(cfg);
	f->tensors = calloc((size_t)f->ntensors, sizeof *f->tensors);
	f->fp.offset = calloc((size_t)f->ntensors, sizeof *f->fp.offset);
	model_tensors(cfg, f->tensors);
	for (int i = 0; i < f->ntensors; i++) {
		f->fp.offset[i] = f->total;
		f->total += f->tensors[i].numel;
	}
	assert_int_equal(f->total, model_param_count(cfg));
	f->fp.params = calloc(f->total, sizeof(float));
	f->fp.grads = calloc(f->total, sizeof(float));
	for (int i = 0; i < f->ntensors; i++)
		for (size_t j = 0; j < f->tensors[i].numel; j++) {
			float v = model_init_value(cfg, &f->tensors[i], i, j, 1234);
			/* norms start at 1: perturb them so their gradient is not special */
			if (f->tensors[i].fan_in == 0 && f->tensors[i].part != MODEL_TOK_EMBEDDINGS)
				v += 0.1f * (float)((j * 7) % 5) - 0.2f;
			f->fp.params[f->fp.offset[i] + j] = v;
		}
	f->params = (struct model_params){
	    .ctx = &f->fp,
	    .dtype = FSDP_DTYPE_FP32,
	    .param = fp_param,
	    .grad = fp_grad,
	    .pre_forward = fp_hook,
	    .post_forward = fp_hook,
	    .pre_backward = fp_hook,
	    .post_backward = fp_hook,
	};
	f->model = model_new(cfg, be, batch, NULL, NULL);
	assert_non_null(f->model);
	size_t n = (size_t)batch * cfg->seq;
	f->inputs = calloc(n, sizeof(int32_t));
	f->targets = calloc(n, sizeof(int32_t));
	data_batch(99, 0, 0, batch, cfg->seq, cfg->vocab, f->inputs, f->targets);
}

static void fixture_fini(struct fixture *f)
{
	model_free(f->model);
	fsdp_backend_cpu.shutdown();
	free(f->tensors);
	free(f->fp.offset);
	free(f->fp.params);
	free(f->fp.grads);
	free(f->inputs);
	free(f->targets);
}

static double fixture_loss(struct fixture *f)
{
	double s = 0.0;
	int M = f->batch * f->cfg.seq;
	assert_int_equal(model_forward(f->model, &f->params, f->inputs, f->targets, 1.0f / (float)M, &s), 0);
	return s / M;
}

static void test_gradients_match_finite_differences(void **state)
{
	struct fixture f;
	fixture_init(&f, &tiny, 3);
	fixture_loss(&f);
	assert_int_equal(model_backward(f.model, &f.params), 0);
	float *analytic = malloc(f.total * sizeof(float));
	memcpy(analytic, f.fp.grads, f.total * sizeof(float));

	const float eps = 1e-2f;
	int checked = 0;
	double worst = 0.0;
	for (int t = 0; t < f.ntensors; t++) {
		size_t n = f.tensors[t].numel;
		size_t stride = n / 7 + 1; /* about eight elements per tensor */
		for (size_t j = (size_t)t % stride; j < n; j += stride) {
			float *p = &f.fp.params[f.fp.offset[t] + j];
			float saved = *p;
			*p = saved + eps;
			double up = fixture_loss(&f);
			*p = saved - eps;
			double down = fixture_loss(&f);
			*p = saved;
			double numeric = (up - down) / (2.0 * eps);
			double a = analytic[f.fp.offset[t] + j];
			double err = fabs(a - numeric) / (fabs(numeric) + fabs(a) + 1e-3);
			if (err > worst)
				worst = err;
			if (err > 0.02)
				fail_msg("%s[%zu]: analytic %.6g numeric %.6g (rel err %.3g)", f.tensors[t].name, j, a,
					 numeric, err);
			checked++;
		}
	}
	printf("gradcheck: %d elements of %d tensors, worst relative error %.3g\n", checked, f.ntensors, worst);
	assert_true(checked > 100);
	free(analytic);
	fixture_fini(&f);
}

/* An untrained model predicts roughly uniformly: loss near ln V. */
static void test_initial_loss_near_log_vocab(void **state)
{
	struct fixture f;
	struct model_config cfg = tiny;
	cfg.vocab = 64;
	cfg.d_model = 16;
	fixture_init(&f, &cfg, 2);
	double loss = fixture_loss(&f);
	assert_true(fabs(loss - log(64.0)) < 0.5);
	fixture_fini(&f);
}

/* Same inputs, same bits; a different slice of the batch is the same data. */
static void test_deterministic(void **state)
{
	struct fixture f;
	fixture_init(&f, &tiny, 2);
	double a = fixture_loss(&f), b = fixture_loss(&f);
	assert_memory_equal(&a, &b, sizeof a);
	int32_t in4[4 * 6], tg4[4 * 6], in2[2 * 6], tg2[2 * 6];
	data_batch(5, 3, 0, 4, 6, 11, in4, tg4);
	data_batch(5, 3, 2, 2, 6, 11, in2, tg2);
	assert_memory_equal(in4 + 12, in2, sizeof in2);
	assert_memory_equal(tg4 + 12, tg2, sizeof tg2);
	for (int t = 0; t + 1 < 6; t++)
		assert_int_equal(in2[t + 1], tg2[t]);
	fixture_fini(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gradients_match_finite_differences),
	    cmocka_unit_test(test_initial_loss_near_log_vocab),
	    cmocka_unit_test(test_deterministic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
