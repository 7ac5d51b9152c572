/* A child whose class factory's CreateInstance fails (E_OUTOFMEMORY). */
#define FAKE_CREATE_HR E_OUTOFMEMORY
#include "fake_common.h"
