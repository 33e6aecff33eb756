/*
 * options_fuzz_fsdp_ref.c - fsdp_ref's option parser for options_fuzz.c,
 * under a name of its own: fsdpscope's table-driven parser is also called
 * options_parse, and the fuzzer links both.
 */
#define options_parse options_parse_fsdp
#define options_usage options_usage_fsdp
#include "fsdp_ref/options.c"
