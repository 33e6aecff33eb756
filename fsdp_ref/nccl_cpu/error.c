/* fsdp_ref/nccl_cpu/error.c: process-wide last error message. */
#include "fsdp_ref/nccl_cpu/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERROR_MESSAGE_MAX 512

static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char error_message[ERROR_MESSAGE_MAX];

void error_set(const char *fmt, ...)
{
	char buf[ERROR_MESSAGE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&error_lock);
	memcpy(error_message, buf, sizeof(buf));
	pthread_mutex_unlock(&error_lock);
}

const char *error_last(void)
{
	static __thread char copy[ERROR_MESSAGE_MAX];
	pthread_mutex_lock(&error_lock);
	memcpy(copy, error_message, sizeof(copy));
	pthread_mutex_unlock(&error_lock);
	return copy;
}
