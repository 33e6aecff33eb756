/*
 * cupti_none.c - the CUPTI entry points of cupti.h for an agent built
 * without the CUPTI headers: the agent records NCCL calls and NVTX ranges,
 * no GPU activity. (agent/cupti.c is the real one; CMake picks one.)
 */
#include <stddef.h>
#include <stdint.h>

#include "agent/cupti.h"

void cupti_start(void) {}

void cupti_flush(void) {}

void cupti_push_correlation(uint64_t seq)
{
	(void)seq;
}

void cupti_pop_correlation(void) {}

int cupti_status(void)
{
	return AGENT_CUPTI_ABSENT;
}

void cupti_after_fork_child(void) {}

void cupti_handle_buffer(uint8_t *buffer, size_t valid_size)
{
	(void)buffer;
	(void)valid_size;
}
