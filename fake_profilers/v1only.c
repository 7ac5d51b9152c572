/* A child that answers only ICorProfilerCallback (version 1): the runtime would refuse it. */
#define FAKE_MAX_VERSION 1
#include "fake_common.h"
