/* A chaining loader: loads another profiler (CHAIN_PATH, often clrmux) from its Initialize. */
#define FAKE_CHAIN 1
#include "fake_common.h"
