/* A child whose Initialize fails (E_FAIL), after setting its event mask. */
#define FAKE_INIT_HR E_FAIL
#include "fake_common.h"
