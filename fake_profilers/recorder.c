/* The recorder: counts every callback it receives and writes the counts at Shutdown. */
#include "fake_common.h"
