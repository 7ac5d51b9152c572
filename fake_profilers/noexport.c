/* A shared library without DllGetClassObject. */
#define FAKE_NO_EXPORT 1
#include "fake_common.h"
