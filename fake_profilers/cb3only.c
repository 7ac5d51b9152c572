/* A recorder that implements only up to ICorProfilerCallback3. */
#define FAKE_MAX_VERSION 3
#include "fake_common.h"
