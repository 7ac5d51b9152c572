/* A child that answers ICorProfilerCallback2 at most: loads at start-up, cannot attach. */
#define FAKE_MAX_VERSION 2
#include "fake_common.h"
