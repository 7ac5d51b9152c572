/* A child that counts nothing: the benchmarks' no-op child. */
#define FAKE_NOOP 1
#include "fake_common.h"
