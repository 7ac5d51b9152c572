/* A recorder that changes its event mask after Initialize (first ModuleLoadFinished):
 * once with an immutable flag (must be refused) and once with a mutable one (must work). */
#define FAKE_LATE_MASK 1
#include "fake_common.h"
